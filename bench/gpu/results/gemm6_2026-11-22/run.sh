#!/bin/bash
# gemm6 device run: SASS/resources, tests, then the bench with candidates.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $O/device.txt 2>&1
date -u >> $O/device.txt
cuobjdump --dump-resource-usage bin/gpu_gemm_bench 2>&1 | grep -A1 GemmFp8Kernel > $O/gemm_resources.txt
cuobjdump -sass bin/gpu_gemm_bench 2>/dev/null | awk '/Function :/ {f=$3} /QGMMA/ {q[f]++} /[^A-Z](LDL|STL)[ .]/ {l[f]++} /DEPBAR/ {d[f]++} END {for (k in q) print "QGMMA", q[k], "LDL/STL", l[k]+0, "DEPBAR", d[k]+0, k}' | grep Gemm > $O/sass_summary.txt
timeout 90 ./bin/kernels_gemm_cuda_test > $O/kernels_gemm_cuda_test.log 2>&1; echo "kernels_gemm_cuda_test rc $?" | tee -a $O/rc.txt
timeout 30 ./bin/cuda_gemm_tune_test > $O/cuda_gemm_tune_test.log 2>&1; echo "cuda_gemm_tune_test rc $?" | tee -a $O/rc.txt
timeout 130 ./bin/gpu_gemm_bench --samples=5 --only=nt_,tn_ --candidates=s5,c2a,s5+c2a > $O/bench.json 2> $O/bench.err; echo "bench rc $?" | tee -a $O/rc.txt
tail -3 $O/kernels_gemm_cuda_test.log; grep -c "FAILED\b" $O/kernels_gemm_cuda_test.log; grep "FAILED" $O/*.log | head
cat $O/sass_summary.txt | cut -c1-150
python3 -c "
import json,sys
d=json.load(open('$O/bench.json'))
for r in d['results']:
    print(r['name'], r['config'], round(r.get('ratio',0),3), ' '.join('%s %.3f(%.3f)'%(c['config'].split('.')[2]+'.'+c['config'].split('.')[3], c.get('ratio',0), c['vs_default']) for c in r.get('candidates',[])), r.get('max_rel_diff'), [c.get('max_rel_diff') for c in r.get('candidates',[])])
"
