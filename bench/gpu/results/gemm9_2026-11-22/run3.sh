#!/bin/bash
# gemm9 run 3: every:4 on the M-grouped and TN (per-row B scales) cases against main's kernel,
# then kernels_gemm_cuda_test with every:4.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
O=$OUT/r3; mkdir -p $O
T0=$(date +%s)
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv; } > $O/env.txt 2>&1
P="python3 sass_patch.py"
$P patch bin/gpu_gemm_bench bin/bench.e4 --pattern=every:4 --report=$O/report_e4.json > $O/patch.log 2>&1
$P patch bin/kernels_gemm_cuda_test bin/test.e4 --pattern=every:4 --report=$O/treport_e4.json >> $O/patch.log 2>&1
chmod +x bin/bench.e4 bin/test.e4; cat $O/patch.log
ONLY="m_grouped,tn_"
i=0
for b in gpu_gemm_bench bench.e4 gpu_gemm_bench bench.e4; do
  i=$((i+1))
  if [ $(( $(date +%s) - T0 )) -gt 80 ]; then echo "skip $i $b (time)"; continue; fi
  timeout 40 ./bin/$b --only=$ONLY --samples=5 > $O/bench_${i}_$b.json 2> $O/bench_${i}_$b.err
  echo "bench $i $b rc=$? at +$(( $(date +%s) - T0 ))s"
done
timeout 60 bin/test.e4 --gtest_brief=1 > $O/test_e4.log 2>&1; echo "rc=$?" >> $O/test_e4.log
grep -E "tests ran|PASSED|FAILED|rc=" $O/test_e4.log
echo "tests done at +$(( $(date +%s) - T0 ))s"
python3 - $O <<'PY'
import json,sys,glob,os
for f in sorted(glob.glob(sys.argv[1]+'/bench_*.json')):
    tag=os.path.basename(f)[6:-5]
    try: d=json.load(open(f))
    except Exception as e: print(tag,'unreadable',e); continue
    print(tag, ' '.join(f"{r['name']}:{r['ours_tflops']:.0f}/{r['cublaslt_tflops']:.0f}={r['ratio']:.3f}(d{r['max_rel_diff']})" for r in d['results']))
PY
cd $OUT && tar czf r3.tgz r3 && rm -rf r3
