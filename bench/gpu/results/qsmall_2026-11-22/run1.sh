#!/bin/bash
# qsmall run 1: tests of the prefetch variants, bench sweep, CTA traces, ncu.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
T0=$SECONDS
log() { echo "$* t=$((SECONDS-T0))" | tee -a $OUT/summary.txt; }
date -u > $OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader >> $OUT/summary.txt
which ncu >> $OUT/summary.txt 2>&1
# 1. bench sweep (all shapes): base, prefetch 1 and 2 waves, dual ablations, empty kernels, pad multi-block
KD_BENCH_SWEEP=0,1,2,3,4,5,6,7,8,9,10,0 ./bin/quant_pad_bench $OUT/sweep.json --only=quantize/1x128,quantize/128x,pad/ > /dev/null 2> $OUT/sweep.err
log "sweep rc=$?"
# 2. traces at 8192x4096
KD_QS_TRACE=1 KD_BENCH_SWEEP=0,1,7 ./bin/quant_pad_bench $OUT/trace.json --quick --only=quantize/1x128,quantize/128x,pad/ > /dev/null 2> $OUT/trace.txt
log "trace rc=$?"
# 3. tests with the candidates on
KD_QS=1 KD_GOLDEN_DIR=$PWD/golden ./bin/cuda_golden_test > $OUT/golden_v1.txt 2>&1
log "golden v1 rc=$?"
KD_QS=1 ./bin/cuda_backend_test --gtest_filter='CudaConformance.*' > $OUT/backend_v1.txt 2>&1
log "backend v1 rc=$?"
KD_QS=7 ./bin/cuda_backend_test --gtest_filter='CudaConformance.*Pad*:CudaConformance.Bad*:CudaConformance.Device*' > $OUT/backend_v7.txt 2>&1
log "backend v7 rc=$?"
# 4. ncu: metrics over several kernels, then the full set on the dual pass
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_requests_srcunit_tex_op_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct
timeout 60 ncu --metrics $M -k regex:'Quantize|CopyGroup' -c 40 --csv ./bin/quant_pad_bench --quick --only=quantize/1x128_transposed,quantize/dual,quantize/128x128,quantize/128x1,pad/bf16_g8 > $OUT/ncu_metrics.csv 2> $OUT/ncu_metrics.err
log "ncu metrics rc=$?"
timeout 70 ncu --set full -k regex:QuantizeTiledKernel -s 3 -c 1 -o $OUT/dual_full ./bin/quant_pad_bench --quick --only=quantize/dual > $OUT/ncu_full.out 2>&1
log "ncu full rc=$?"
ncu --import $OUT/dual_full.ncu-rep --page details --print-details all > $OUT/dual_full_details.txt 2>&1
log "done"
