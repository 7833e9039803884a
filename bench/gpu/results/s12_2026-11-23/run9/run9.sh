set -u
rm -rf /tmp/b && mkdir -p /tmp/b && tar -C /tmp/b -xJf .carry-s12/b.tar.xz
R=$OUT/run9; mkdir -p $R
export LD_LIBRARY_PATH=/tmp/b/lib KD_GOLDEN_DIR=/tmp/b/golden
date -u > $R/env.txt; nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv >> $R/env.txt
cd /tmp/b
for t in cuda_backend_test executor_gpu_test cuda_golden_test daemon_gpu_test kernels_gemm_cuda_test cuda_gemm_tune_test kernel_timer_test; do
  echo "=== $t" >> $R/tests.log; timeout 240 ./bin/$t --gtest_brief=1 >> $R/tests.log 2>&1; echo "=== $t rc=$?" >> $R/tests.log
done
timeout 150 ./bin/gpu_gemm_bench --samples=5 > $R/gemm.json 2> $R/gemm.err; echo "gemm rc=$?"
date -u >> $R/env.txt
grep -E "^=== .*rc=|PASSED|FAILED|golden cases" $R/tests.log
cd - > /dev/null; python3 bench/gpu_gemm/gemm_summary.py $R/gemm.json
tar -C $OUT -czf $OUT/run9.tgz run9 && rm -rf $R
