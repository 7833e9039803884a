#!/bin/bash
# qsmall run 2: bench sweeps (base, hoisted tiled encode, L2 prefetch, pad grids, ablations), traces,
# tests of every candidate, ncu of the dual pass base vs hoisted. Everything into one tar.
cd "$(dirname "$0")"
tar xJf b.tar.xz && export LD_LIBRARY_PATH=$PWD/lib
R=/tmp/r2; mkdir -p $R
T0=$SECONDS
log() { echo "$* t=$((SECONDS-T0))" | tee -a $R/summary.txt; }
date -u > $R/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
O=quantize/1x128,quantize/128x,pad/
KD_BENCH_SWEEP=0,11,1,2,3,4,5,6,7,8,9,10,0,11 ./bin/quant_pad_bench $R/sweep_a.json --only=$O > /dev/null 2> $R/sweep_a.err
log "sweep a rc=$?"
KD_BENCH_SWEEP=11,0,2,1,9,7,8,11,0 ./bin/quant_pad_bench $R/sweep_b.json --only=$O > /dev/null 2> $R/sweep_b.err
log "sweep b rc=$?"
KD_QS_TRACE=1 KD_BENCH_SWEEP=0,1,7,9,11 ./bin/quant_pad_bench $R/trace.json --quick --only=$O > /dev/null 2> $R/trace.txt
log "trace rc=$?"
KD_QS=11 ./bin/cuda_backend_test > $R/backend_v11.txt 2>&1
log "backend all v11 rc=$?"
for v in 0 1 7 9; do
  KD_QS=$v ./bin/cuda_backend_test --gtest_filter='CudaConformance.*' > $R/backend_v$v.txt 2>&1
  log "backend conformance v$v rc=$?"
done
for v in 0 11 1 7; do
  KD_QS=$v KD_GOLDEN_DIR=$PWD/golden ./bin/cuda_golden_test > $R/golden_v$v.txt 2>&1
  log "golden v$v rc=$?"
done
M=gpu__time_duration.sum,smsp__inst_executed.sum,gcc__cache_requests_type_instruction.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum
for v in 0 11; do
  KD_QS=$v timeout 40 ncu --metrics $M -k regex:QuantizeTiledKernel -s 3 -c 1 --csv ./bin/quant_pad_bench --quick --only=quantize/dual > $R/ncu_dual_v$v.csv 2>&1
  log "ncu dual v$v rc=$?"
done
KD_QS=11 timeout 40 ncu --metrics $M -k regex:QuantizeTiledKernel -c 24 --csv ./bin/quant_pad_bench --quick --only=quantize/1x128_transposed,quantize/128x1 > $R/ncu_tiled_v11.csv 2>&1
log "ncu tiled v11 rc=$?"
timeout 40 ncu --metrics $M -k regex:QuantizeTiledKernel -c 24 --csv ./bin/quant_pad_bench --quick --only=quantize/1x128_transposed,quantize/128x1 > $R/ncu_tiled_v0.csv 2>&1
log "ncu tiled v0 rc=$?"
cp $R/summary.txt $OUT/summary.txt
cp $R/sweep_a.json $R/sweep_b.json $R/trace.txt $OUT/
tar czf $OUT/all.tgz -C $R .
