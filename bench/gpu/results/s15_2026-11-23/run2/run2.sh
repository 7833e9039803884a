#!/bin/bash
# Session 15 run 2: the 64x32 tile (branch s15n32): GEMM tests, then the small-M shapes with the
# old and new tiles as candidates in one loop, two processes.
set -u
C=$(pwd)/.carry-s15b
R=/tmp/r2; rm -rf $R /tmp/b; mkdir -p $R /tmp/b
tar -C /tmp/b -xJf $C/b.tar.xz
export LD_LIBRARY_PATH=/tmp/b/lib KD_GOLDEN_DIR=/tmp/b/golden
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
t0=$(date +%s)
timeout 240 /tmp/b/bin/kernels_gemm_cuda_test --gtest_brief=1 > $R/test.log 2>&1
echo "test rc=$? $(( $(date +%s) - t0 )) s"; tail -3 $R/test.log; grep -E "FAILED|Failure" $R/test.log | head
timeout 200 /tmp/b/bin/cuda_gemm_tune_test --gtest_brief=1 > $R/tune_test.log 2>&1
echo "tune test rc=$? $(( $(date +%s) - t0 )) s"; tail -2 $R/tune_test.log
CAND=--candidates=m64+n64+s8,m64+n32+s16
for i in 1 2; do
  timeout 100 /tmp/b/bin/gpu_gemm_bench --samples=5 --only=nt_64x,nt_128x $CAND > $R/small_$i.json 2> $R/small_$i.err
  echo "small $i rc=$?"
  for s in 64x7168x2048 64x8192x4096 64x2048x7168 32x4096x7168 64x4096x2048 64x4224x7168; do
    timeout 60 /tmp/b/bin/gpu_gemm_bench --samples=5 --shape=$s $CAND > $R/shape_${s}_$i.json 2> $R/shape_${s}_$i.err
    echo "shape $s $i rc=$?"
  done
done
echo "total $(( $(date +%s) - t0 )) s"
tar -C /tmp -czf $OUT/run2.tar.gz r2
