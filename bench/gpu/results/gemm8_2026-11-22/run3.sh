#!/bin/bash
# gemm8 run 3 (final): SASS/resources, every kernels_gemm_cuda_test and cuda_gemm_tune_test, then
# gpu_gemm_bench --samples=5 on every case with the 192x128 tile (clusters of 2 and 1) as candidates.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
R=$OUT/r; mkdir -p $R
{ date -u; nvidia-smi -L; } > $R/device.txt 2>&1
cuobjdump --dump-resource-usage bin/gpu_gemm_bench 2>&1 | grep -i "function\|REG" | grep -B1 REG > $R/resources.txt
cuobjdump -sass bin/gpu_gemm_bench > /tmp/all.sass 2>&1
echo "function QGMMA LDL STL SETMAXREG" > $R/sass_summary.txt
awk '/Function :/{if(n)print n, q, l, s, m; n=$3; q=0; l=0; s=0; m=0} /QGMMA/{q++} /LDL/{l++} /STL/{s++} /SETMAXREG|USETMAXREG/{m++} END{print n, q, l, s, m}' /tmp/all.sass | sed 's/_ZN2kd9cuda_gemm[^G]*GemmFp8Kernel/GemmFp8Kernel/' >> $R/sass_summary.txt
cat $R/sass_summary.txt
timeout 150 bin/kernels_gemm_cuda_test > $R/kernels_gemm_cuda_test.txt 2>&1; echo "rc=$?" >> $R/kernels_gemm_cuda_test.txt
tail -4 $R/kernels_gemm_cuda_test.txt
timeout 60 bin/cuda_gemm_tune_test > $R/cuda_gemm_tune_test.txt 2>&1; echo "rc=$?" >> $R/cuda_gemm_tune_test.txt
tail -4 $R/cuda_gemm_tune_test.txt
timeout 170 bin/gpu_gemm_bench --samples=5 --candidates=m192+n128+s4+c2,m192+n128+s4+c1 > $R/bench.json 2> $R/bench.err; echo "bench rc=$?" >> $R/bench.err
python3 -c "
import json,sys
d=json.load(open('$R/bench.json'))
for r in d['results']:
    print(r['name'], r['config'], round(r.get('ours_tflops',0)), round(r.get('cublaslt_tflops',0)), round(r.get('ratio',0),3), r.get('max_rel_diff'))
    for c in r.get('candidates',[]):
        print('   ', c['config'], round(c['tflops']), 'ratio', round(c.get('ratio',0),3), 'vs_def', round(c['vs_default'],3), c.get('max_rel_diff'))
" > $R/bench_summary.txt 2>&1
cat $R/bench_summary.txt
cd $OUT && tar czf gemm8_run3.tgz r && rm -rf r
