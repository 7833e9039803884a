#!/bin/bash
# qdual2: tests of the clustered dual pass (KD_QD2=4: 8x1 clusters, 5: 4x2), then one bench
# process sweeping the dual pass's kernels (0 main, 4, 5, 1-3 ablations) in the same process.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
R=/tmp/r; mkdir -p $R
T0=$SECONDS
log() { echo "$* t=$((SECONDS-T0))" | tee -a $R/summary.txt; }
date -u > $R/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
KD_QD2=4 timeout 80 ./bin/cuda_backend_test > $R/backend_v4.txt 2>&1
log "backend all v4 rc=$?"; grep -E "PASSED|FAILED|tests ran" $R/backend_v4.txt | tail -4 >> $R/summary.txt
KD_QD2=5 timeout 40 ./bin/cuda_backend_test --gtest_filter='CudaConformance.Tiled*:CudaConformance.EveryOther*' > $R/backend_v5.txt 2>&1
log "conformance tiled v5 rc=$?"; grep -E "PASSED|FAILED|tests ran" $R/backend_v5.txt | tail -4 >> $R/summary.txt
for v in 4 5; do
  KD_QD2=$v KD_GOLDEN_DIR=$PWD/golden timeout 25 ./bin/cuda_golden_test > $R/golden_v$v.txt 2>&1
  log "golden v$v rc=$?"; grep -E "PASSED|FAILED|tests ran" $R/golden_v$v.txt | tail -3 >> $R/summary.txt
done
KD_BENCH_SWEEP=0,4,5,1,2,3,0,4,5 timeout 60 ./bin/quant_pad_bench $R/sweep.json --only=dual,1x128_transposed,1x128 > /dev/null 2> $R/sweep.err
log "sweep rc=$?"
cp $R/summary.txt $R/sweep.json $OUT/ 2>/dev/null
tar czf $OUT/all.tgz -C $R .
