#!/bin/bash
# session 9 run 5: branch tileslot (the one-partial loop keeps its done tile in a shared-memory
# slot per warpgroup, read back by the epilogue) against main 9eb303c ("final"):
# kernels_gemm_cuda_test of slot; final, slot, slot, final; whole waves.
cd "$(dirname "$0")"
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b5.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
timeout 200 $B/bin/kernels_gemm_cuda_test_slot > $R/test.log 2>&1
echo "test rc=$?" | tee -a $R/rc.txt
tail -1 $R/test.log; grep -E "FAILED|Failure" $R/test.log | head -10
i=0
for b in final slot slot final; do
  i=$((i+1))
  timeout 110 $B/bin/gpu_gemm_bench_$b --samples=5 > $R/all_${i}_$b.json 2> $R/all_${i}_$b.err
  echo "all $i $b rc=$?" | tee -a $R/rc.txt
done
for s in 4096x6336x1024 4096x6336x2048; do
  for b in final slot; do
    timeout 60 $B/bin/gpu_gemm_bench_$b --samples=5 --shape=$s --config=bm128.bn192.s4.c2.r8.p0 > $R/ww_${s}_$b.json 2> $R/ww_${s}_$b.err
  done
done
python3 ./summ.py $R | tee $R/summary.txt
tar -C $OUT -czf $OUT/s9_run5.tgz r && rm -rf $R
