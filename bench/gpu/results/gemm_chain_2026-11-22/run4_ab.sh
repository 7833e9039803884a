#!/usr/bin/env bash
# A/B: the two-partial loop (128x128, 128x64, 64x64 tiles) with its A scale address pinned (and
# lane / B scale address for 64-column tiles), against a55f165; tests first.
set -u
cd "$(dirname "$0")"; export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}; mkdir -p $O
date -u > $O/env.txt
timeout 150 ./bin/kernels_gemm_cuda_test --gtest_brief=1 > $O/test.log 2>&1; echo "rc=$?" >> $O/test.log
for i in 1 2; do
  for b in gpu_gemm_bench_prev gpu_gemm_bench; do
    timeout 60 ./bin/$b --samples=5 --only=nt_128x,nt_64x > $O/${b}_small_$i.json 2>> $O/bench.err
    timeout 90 ./bin/$b --samples=5 --config=bm128.bn128.s6.c1.r8.p0 --only=nt_8192^3,nt_4096x2112,m_grouped_8x4096_7168,tn_ > $O/${b}_128_$i.json 2>> $O/bench.err
  done
done
cd $O && tar czf ab4.tar.gz *.json *.txt *.log && find . -type f ! -name ab4.tar.gz -delete
