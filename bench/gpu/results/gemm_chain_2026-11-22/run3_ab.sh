#!/usr/bin/env bash
set -u
cd "$(dirname "$0")"; export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}; mkdir -p $O
date -u > $O/env.txt
timeout 120 ./bin/kernels_gemm_cuda_test --gtest_brief=1 --gtest_filter='*192*:*Grouped*' > $O/test.log 2>&1; echo "rc=$?" >> $O/test.log
ONLY=nt_4096^3,nt_8192^3,nt_16384,nt_8192x7168,nt_4096x2112,nt_4096x24576
for i in 1 2; do
  timeout 100 ./bin/gpu_gemm_bench_prev --samples=5 --only=$ONLY > $O/prev_$i.json 2>> $O/bench.err
  timeout 100 ./bin/gpu_gemm_bench --samples=5 --only=$ONLY > $O/new_$i.json 2>> $O/bench.err
done
cd $O && tar czf ab3.tar.gz *.json *.txt *.log && find . -type f ! -name ab3.tar.gz -delete
