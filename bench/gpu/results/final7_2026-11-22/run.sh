#!/bin/bash
# Final suite of session 7: run_gpu_suite.sh with GEMM_SAMPLES=5 GEMM_POWER=2, an nvidia-smi log beside it.
cd "$(dirname "$0")/.."
mkdir -p /tmp/b /tmp/o && tar -C /tmp/b -xJf .carry-final/b.tar.xz
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 500 > /tmp/o/smi.csv 2>&1 &
SMI=$!
GEMM_SAMPLES=5 GEMM_POWER=2 bash bench/gpu/run_gpu_suite.sh /tmp/b /tmp/o > /tmp/o/summary.txt 2>&1
kill $SMI
grep "^===" /tmp/o/tests.log; tail -5 /tmp/o/summary.txt
gzip -9 /tmp/o/smi.csv
tar -C /tmp/o -czf $OUT/final.tar.gz .
