#!/bin/bash
# Final suite of session 11 (main dab3cb8: the turn-free loop for the non-TMA one-partial instantiations, kernel c83274a): run_gpu_suite.sh with GEMM_SAMPLES=5
# GEMM_POWER=2 and an nvidia-smi log.
cd "$(dirname "$0")/.."
start=$(date +%s)
rm -rf /tmp/b /tmp/o; mkdir -p /tmp/b /tmp/o && tar -C /tmp/b -xJf .carry-s11f/b.tar.xz
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 500 > /tmp/o/smi.csv 2>&1 &
SMI=$!
GEMM_SAMPLES=5 GEMM_POWER=2 bash bench/gpu/run_gpu_suite.sh /tmp/b /tmp/o > /tmp/o/summary.txt 2>&1
kill $SMI
echo "suite took $(( $(date +%s)-start )) s"
grep "^===" /tmp/o/tests.log; grep -E "PASSED|FAILED|golden" /tmp/o/tests.log | head -30; tail -5 /tmp/o/summary.txt
gzip -9 /tmp/o/smi.csv
tar -C /tmp/o -czf $OUT/final11.tar.gz .
