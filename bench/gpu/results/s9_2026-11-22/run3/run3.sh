#!/bin/bash
# session 9 run 3 (part $1): branch epitrace 3111567 ("new": FastDiv scheduler, params' band
# divisors) and the working tree after it ("cache": 128x192 keeps the done tile's Tile for its
# epilogue) against main 666e38a. Part a: both kernels_gemm_cuda_test builds, clock traces of
# "cache" (trace build), full benchmark main, new, cache. Part b: cache, new, main, whole waves.
cd "$(dirname "$0")"
B=/tmp/b; if [ ! -d $B/bin ]; then rm -rf $B; mkdir -p $B && tar -C $B -xJf b3.tar.xz; fi
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
if [ "$1" = a ]; then
  for t in kernels_gemm_cuda_test kernels_gemm_cuda_test_cache; do
    timeout 200 $B/bin/$t > $R/$t.log 2>&1
    echo "$t rc=$?" | tee -a $R/rc.txt
    tail -1 $R/$t.log; grep -E "FAILED|Failure" $R/$t.log | head -10
  done
  for s in 4096x6336x1024 4096x4096x4096; do
    timeout 60 $B/bin/gpu_gemm_bench_trace --samples=3 --shape=$s --config=bm128.bn192.s4.c2.r8.p0 --trace=$R/tr > $R/trace_$s.json 2> $R/trace_$s.err
  done
  timeout 60 $B/bin/gpu_gemm_bench_trace --samples=3 --shape=8192x7168x2048 --trace=$R/tr > $R/trace_8192x7168x2048.json 2> $R/trace_8192x7168x2048.err
  python3 $B/bin/trace_summary.py $R/tr*.bin > $R/trace_summary.txt 2>&1
  grep "epilogue slices" $R/trace_summary.txt | head -12
  i=0; LIST="main new cache"
else
  i=3; LIST="cache new main"
fi
for b in $LIST; do
  i=$((i+1))
  timeout 110 $B/bin/gpu_gemm_bench_$b --samples=5 > $R/all_${i}_$b.json 2> $R/all_${i}_$b.err
  echo "all $i $b rc=$?" | tee -a $R/rc.txt
done
if [ "$1" = b ]; then
  for s in 4096x6336x1024 4096x6336x2048; do
    for b in main new cache; do
      timeout 60 $B/bin/gpu_gemm_bench_$b --samples=5 --shape=$s --config=bm128.bn192.s4.c2.r8.p0 > $R/ww_${s}_$b.json 2> $R/ww_${s}_$b.err
    done
  done
fi
python3 ./summ.py $R | tee $R/summary.txt
tar -C $OUT -czf $OUT/s9_run3$1.tgz r && rm -rf $R
