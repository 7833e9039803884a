#!/usr/bin/env bash
# One device run of autotune through the whole daemon path (bench/README.md, "Autotune"): the GPU
# tests of the GEMM through the backend and the harness, then the real daemon on the cuda backend
# and `kctl tune` on the GEMM shapes of issue 5, one kctl call per shape (cold tune time = the
# wall time of that call), then the cache as JSON. Run from the bundle folder (bin/, lib/).
# Usage: run_gpu.sh OUT_DIR [SHAPE...]
set -u
out=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$here/lib
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv \
  > "$out/gpu.txt" 2>&1
date -u +%FT%TZ >> "$out/gpu.txt"

# Tests first (each bounded), so a daemon problem cannot hide them.
timeout 90 "$here/bin/cuda_gemm_tune_test" > "$out/tests.log" 2>&1; echo "cuda_gemm_tune_test rc=$?" >> "$out/summary.txt"
timeout 60 "$here/bin/kernels_gemm_cuda_test" --gtest_brief=1 >> "$out/tests.log" 2>&1; echo "kernels_gemm_cuda_test rc=$?" >> "$out/summary.txt"

dir=$(mktemp -d)
"$here/bin/kerneld" --backend=cuda --socket="$dir/data.sock" --admin_socket="$dir/admin.sock" \
  --metrics_address=127.0.0.1:19464 --autotune_cache_dir="$dir/cache" > "$out/kerneld.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$dir/admin.sock" ] && break; sleep 0.1; done
kctl() { "$here/bin/kctl" --admin_socket="$dir/admin.sock" "$@"; }
for shape in "$@"; do
  t0=$(date +%s.%N)
  timeout 60 "$here/bin/kctl" --admin_socket="$dir/admin.sock" tune "$shape" --budget=10 > "$out/tune_one.txt" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  cat "$out/tune_one.txt" >> "$out/tune.txt"
  echo "$shape rc=$rc cold_tune_seconds=$(awk "BEGIN{printf \"%.2f\", $t1 - $t0}")" | tee -a "$out/summary.txt"
done
rm -f "$out/tune_one.txt"
kctl cache list --json > "$out/cache.json" 2>&1
kctl cache list >> "$out/summary.txt" 2>&1
kill "$daemon"; wait "$daemon"
echo "kerneld rc=$?" >> "$out/summary.txt"
cat "$out/summary.txt"
