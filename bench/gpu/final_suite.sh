#!/usr/bin/env bash
# The end-of-session run of main on the lent GPU machine: the whole GPU suite
# (run_gpu_suite.sh with GEMM_SAMPLES=5 GEMM_POWER=2) on a bundle made by bundle.sh, with an
# nvidia-smi log every 500 ms, packed into $OUT/TAG.tar.gz (the device tool returns few files).
# Here:   bench/gpu/bundle.sh build .carry-X && (device, carry .carry-X)
# There:  bash bench/gpu/final_suite.sh .carry-X/b.tar.xz final12
# Then:   mkdir bench/gpu/results/final12_DATE && tar -C it -xzf .../final12.tar.gz
set -u
bundle=$1; tag=$2
cd "$(dirname "$0")/../.."
start=$(date +%s)
rm -rf /tmp/b /tmp/o; mkdir -p /tmp/b /tmp/o && tar -C /tmp/b -xJf "$bundle"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv -lms 500 > /tmp/o/smi.csv 2>&1 &
smi=$!
GEMM_SAMPLES=5 GEMM_POWER=2 bash bench/gpu/run_gpu_suite.sh /tmp/b /tmp/o > /tmp/o/summary.txt 2>&1
kill $smi
echo "suite took $(( $(date +%s) - start )) s"
grep "^===" /tmp/o/tests.log; grep -E "PASSED|FAILED|golden" /tmp/o/tests.log | head -30
tail -5 /tmp/o/summary.txt
gzip -9 /tmp/o/smi.csv
tar -C /tmp/o -czf "$OUT/$tag.tar.gz" .
