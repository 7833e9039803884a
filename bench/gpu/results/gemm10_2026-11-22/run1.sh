#!/usr/bin/env bash
# gemm10 run 1: tests, SASS counts, then the M-grouped bench with candidates (one process).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt
t0=$(date +%s)
timeout 120 ./bin/kernels_gemm_cuda_test --gtest_brief=1 > $R/kernels_gemm_cuda_test.log 2>&1; echo "kernels_gemm_cuda_test rc=$?" | tee -a $R/rc.txt
timeout 30 ./bin/cuda_gemm_tune_test --gtest_brief=1 > $R/cuda_gemm_tune_test.log 2>&1; echo "cuda_gemm_tune_test rc=$?" | tee -a $R/rc.txt
t1=$(date +%s); echo "tests took $((t1-t0)) s" | tee -a $R/rc.txt
cuobjdump -sass bin/kernels_gemm_cuda_test 2>/dev/null | awk '/Function :/{f=$3} /QGMMA/{q[f]++} /LDL|STL/{l[f]++} END{for(k in q) print q[k], l[k]+0, k}' | sort > $R/sass.txt
timeout 140 ./bin/gpu_gemm_bench --samples=5 --only=m_grouped,nt_8192^3 \
  --candidates=c2,c1,m192+n128+c1,m192+n128+c2,m128+n128+s6+c1,m128+n128+s6+c2 > $R/gemm.json 2> $R/gemm.err
echo "bench rc=$? took $(( $(date +%s)-t1 )) s" | tee -a $R/rc.txt
tail -5 $R/kernels_gemm_cuda_test.log; tail -3 $R/cuda_gemm_tune_test.log
cat $R/gemm.json | python3 -c '
import json,sys
d=json.load(sys.stdin)
for r in d["results"]:
  print(r.get("name"), r.get("config"), r.get("ours_tflops"), r.get("cublaslt_tflops"), r.get("ratio"))
  for c in r.get("candidates",[]): print("   ", c)
' 2>&1 | cut -c1-300
tar -C $OUT -czf $OUT/gemm10_run1.tgz r && rm -rf $R
