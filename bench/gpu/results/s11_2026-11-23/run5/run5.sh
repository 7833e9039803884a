#!/bin/bash
# session 11 run 5: DeepGEMM's SM90 1D2D kernel (commit 54e22612, its heuristic's configs, a
# harness outside this repo timing the way gpu_gemm_bench does: rotating input sets of >= 4x the
# L2, ~2 ms batches of back-to-back launches, median of 5) next to main d88efd0's gpu_gemm_bench
# (ours and cuBLASLt), alternating: dg, ours, dg, ours.
B=/tmp/b11; rm -rf $B; mkdir -p $B && tar -C $B --strip-components=1 -xJf .carry-s11/b1.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r5; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt
for i in 1 2; do
  s=$(date +%s); bash .carry-dg/run_dg.sh $R/dg_$i.jsonl --samples=5; echo "dg $i rc=$? $(( $(date +%s) - s ))s" | tee -a $R/rc.txt
  s=$(date +%s); timeout 120 $B/bin/gpu_gemm_bench --samples=5 > $R/ours_$i.json 2> $R/ours_$i.err; echo "ours $i rc=$? $(( $(date +%s) - s ))s" | tee -a $R/rc.txt
done
date -u >> $R/env.txt
cat $R/dg_1.jsonl | cut -c1-200
tar -C $OUT -czf $OUT/r5.tgz r5 && rm -rf $R
