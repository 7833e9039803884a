#!/bin/bash
# session 8 run 8: a KD_GEMM_TRACE build of main 886d71b's gpu_gemm_bench (the marks cost speed):
# clock traces of 128x192 c2 at 4096x6336x1024 (whole waves, 8 blocks per tile) and 4096^3, to
# see what a tile boundary costs with the TMA-store epilogue.
cd "$(dirname "$0")"
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/env.txt 2>&1; date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
for s in 4096x6336x1024 4096x6336x4096 4096x4096x4096; do
  timeout 60 $B/bin/gpu_gemm_bench_trace --samples=3 --shape=$s --config=bm128.bn192.s4.c2.r8.p0 --trace=$R/tr > $R/bench_$s.json 2> $R/bench_$s.err
  echo "$s rc=$?"
done
ls $R
python3 $B/bin/trace_summary.py $R/tr*.bin | tee $R/summary.txt
python3 ./bounds.py $R/tr*.bin | tee $R/bounds.txt
tar -C $OUT -czf $OUT/s8_run8.tgz r && rm -rf $R
