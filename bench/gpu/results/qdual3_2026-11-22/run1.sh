#!/bin/bash
# qdual3 run 1 (as it ran, from the carry folder): tests of builds A (staged row-major scales)
# and B (A + 16-byte Y = X stores of the dual pass), then quant_pad_bench of main's build, A and
# B alternating, then the whole table with B. The summary's table was printed by an inline
# python3 script (same as run2.sh's).
cd "$(dirname "$0")"
tar xzf bundle.tgz
export LD_LIBRARY_PATH=$PWD/lib
R=/tmp/r; rm -rf $R; mkdir -p $R
T0=$SECONDS
log() { echo "$* t=$((SECONDS-T0))" | tee -a $R/summary.txt; }
date -u > $R/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader >> $R/summary.txt
for v in B A; do
  timeout 100 ./bin/cuda_backend_test_$v > $R/backend_$v.txt 2>&1
  log "backend $v rc=$?"; grep -E "^\[  (PASSED|FAILED) |tests ran" $R/backend_$v.txt | tail -5 >> $R/summary.txt
  KD_GOLDEN_DIR=$PWD/golden timeout 40 ./bin/cuda_golden_test_$v > $R/golden_$v.txt 2>&1
  log "golden $v rc=$?"; grep -E "^\[  (PASSED|FAILED) |tests ran|SKIP" $R/golden_$v.txt | tail -4 >> $R/summary.txt
done
i=0
for v in main A B A B main; do
  i=$((i+1))
  timeout 60 ./bin/quant_pad_bench_$v $R/bench_${i}_$v.json --only=dual,transposed > /dev/null 2> $R/bench_${i}_$v.err
  log "bench $i $v rc=$?"
done
timeout 90 ./bin/quant_pad_bench_B $R/full_B.json > /dev/null 2> $R/full_B.err
log "full B rc=$?"
