#!/bin/bash
# session 8 run 5: the tuner over the whole sm_90 space on the issue's shapes (gpu_autotune_bench,
# main b1c1de9: the TMA-store epilogue, kernel version 9), to check the heuristic default untuned.
cd "$(dirname "$0")"
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
now=$(date +%s)
timeout 400 $B/bin/gpu_autotune_bench nt:4096x4096x4096 nt:8192x8192x8192 nt:16384x8192x5120 \
  nt:8192x7168x2048 nt:4096x2112x7168 nt:4096x24576x1536 nt:4096x7168x16384 nt:128x7168x2048 \
  nt:64x4096x7168 m_grouped_nt:32768x4096x7168:g8 m_grouped_nt:32768x7168x2048:g8 \
  tn:16640x5120x8192 > $R/autotune.json 2> $R/autotune.err
echo "autotune rc=$? took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt
tail -c 3000 $R/autotune.err
tar -C $OUT -czf $OUT/s8_run5.tgz r && rm -rf $R
