#!/bin/bash
# Session 15 run 1: DeepGEMM's SM90 1D2D kernel at each of the nine dense NT shapes (its own
# heuristic's config, and the other of 128x192 c2 / 256x128 c2), on gpu_gemm_bench's bytes
# (--fill=table), between two processes of main's gpu_gemm_bench (ours + cuBLASLt).
set -u
C=$(pwd)/.carry-s15
R=/tmp/r1; rm -rf $R /tmp/b /tmp/dgb; mkdir -p $R /tmp/b /tmp/dgb
tar -C /tmp/b -xJf $C/b.tar.xz
tar -C /tmp/dgb -xJf $C/dg.tar.xz
export LD_LIBRARY_PATH=/tmp/b/lib
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv -lms 500 > $R/smi.csv 2>&1 &
smi=$!
t0=$(date +%s)
timeout 150 /tmp/b/bin/gpu_gemm_bench --samples=5 --only=nt_ > $R/ours_1.json 2> $R/ours_1.err
echo "ours_1 rc=$? $(( $(date +%s) - t0 )) s"
cd /tmp/dgb/dgb
for f in $(cat order.txt); do
  IFS=: read -r cub m n k tag sets <<< "$f"
  timeout 40 ./dg_bench --cubin=$cub.cubin --m=$m --n=$n --k=$k --fill=table --samples=5 --sets=$sets --tag=$tag \
    >> $R/dg.jsonl 2> $R/dg_$tag.log
  echo "$tag rc=$? $(tail -1 $R/dg_$tag.log) $(( $(date +%s) - t0 )) s"
done
cd - > /dev/null
timeout 150 /tmp/b/bin/gpu_gemm_bench --samples=5 --only=nt_ > $R/ours_2.json 2> $R/ours_2.err
echo "ours_2 rc=$? $(( $(date +%s) - t0 )) s"
kill $smi; gzip -9 $R/smi.csv
date -u >> $R/env.txt
tar -C /tmp -czf $OUT/run1.tar.gz r1
