#!/bin/bash
# session 9 run 1: KD_GEMM_TRACE build of branch epitrace (main 666e38a + marks inside the
# TMA-store epilogue, 16 marks per block): where the ~3500 cycles of a tile's epilogue go.
cd "$(dirname "$0")"
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf t1.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv > $R/env.txt 2>&1; date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
for s in 4096x6336x1024 4096x6336x4096 4096x4096x4096; do
  timeout 60 $B/bin/gpu_gemm_bench_trace --samples=3 --shape=$s --config=bm128.bn192.s4.c2.r8.p0 --trace=$R/tr > $R/bench_$s.json 2> $R/bench_$s.err
  echo "$s rc=$?"
done
for s in 8192x7168x2048 4096x24576x1536; do
  timeout 60 $B/bin/gpu_gemm_bench_trace --samples=3 --shape=$s --trace=$R/tr > $R/bench_$s.json 2> $R/bench_$s.err
  echo "$s rc=$?"
done
ls $R
python3 $B/bin/trace_summary.py $R/tr*.bin | tee $R/summary.txt
tar -C $OUT -czf $OUT/s9_run1.tgz r && rm -rf $R
