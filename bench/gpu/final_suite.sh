#!/usr/bin/env bash
# A whole run of main on the lent GPU machine: the GPU suite (run_gpu_suite.sh with
# GEMM_SAMPLES=5 GEMM_POWER=2) on a bundle made by bundle.sh, with an nvidia-smi log every 500 ms,
# packed into OUT_DIR/TAG.tar.gz (OUT_DIR: $OUT, the device tool's output folder, else /tmp).
# Nothing is written into the source tree.
#   Here:   bench/gpu/bundle.sh build .carry && (device tool, carrying .carry)
#   There:  bash bench/gpu/final_suite.sh .carry/b.tar.xz TAG
#   Then:   tar -C DIR -xzf TAG.tar.gz, and copy the files bench/README.md's tables read
#           (bench/data/gpu/: env.txt tests.log gemm.json gemm_power.json quant_pad.json
#           e2e_*.json e2e_phases.txt cuda_calls.json ipc_order.json) from DIR into bench/data/gpu.
#   final_suite.sh BUNDLE.tar.xz TAG
set -u
bundle=$(realpath "$1"); tag=$2; out=${OUT:-/tmp}
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
tar -C /tmp/o -czf "$out/$tag.tar.gz" .
echo "wrote $out/$tag.tar.gz"
