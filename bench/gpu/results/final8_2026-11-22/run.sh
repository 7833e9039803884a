#!/bin/bash
# Final suite of session 8 (branch epi-tma): run_gpu_suite.sh with GEMM_SAMPLES=5 GEMM_POWER=2
# and an nvidia-smi log; then, time permitting, main 6cfc69b's gpu_gemm_bench (bench_base) and
# this build's, alternating, for a same-machine A/B.
cd "$(dirname "$0")/.."
start=$(date +%s)
rm -rf /tmp/b /tmp/o; mkdir -p /tmp/b /tmp/o && tar -C /tmp/b -xJf .carry-final8/b.tar.xz && tar -C /tmp/b -xJf .carry-final8/base.tar.xz
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 500 > /tmp/o/smi.csv 2>&1 &
SMI=$!
GEMM_SAMPLES=5 GEMM_POWER=2 bash bench/gpu/run_gpu_suite.sh /tmp/b /tmp/o > /tmp/o/summary.txt 2>&1
kill $SMI
echo "suite took $(( $(date +%s)-start )) s"
grep "^===" /tmp/o/tests.log; grep -E "PASSED|FAILED|golden" /tmp/o/tests.log | head -30; tail -5 /tmp/o/summary.txt
export LD_LIBRARY_PATH=/tmp/b/lib
for i in 1 2; do
  for v in base new; do
    [ $(( $(date +%s)-start )) -gt 480 ] && break 2
    b=/tmp/b/bin/bench_base; [ $v = new ] && b=/tmp/b/bin/gpu_gemm_bench
    timeout 90 $b --samples=5 > /tmp/o/ab_${v}_$i.json 2> /tmp/o/ab_${v}_$i.err
    echo "ab $v $i rc=$? at $(( $(date +%s)-start )) s"
  done
done
gzip -9 /tmp/o/smi.csv
tar -C /tmp/o -czf $OUT/final8.tar.gz .
