#!/usr/bin/env bash
# One GPU-machine run that decides the TN and dgrad defaults: the GPU tests of both (the cuBLASLt
# TN family, the 128x128 dual quantize, the tuning harness), then gpu_gemm_bench's TN and NN rows
# at the Llama-3 Linear shapes with every candidate in one loop (ours; ours retiled, among them
# the 128x128 tile whose two partials let block kb+1's wgmmas run while block kb is promoted;
# cuBLASLt's ranked algorithms through kerneld's family; cuBLASLt's own orientation as the peer;
# NN against NT on a ready Wᵀ), then linear_bench.py under MPS with both dgrad forms and both
# scale layouts, once with TN on kerneld's kernel and once with the TN keys pinned to cuBLASLt
# (kctl cache pin).
# Prints summary.txt last: the tables and the defaults the numbers call for.
#   measure_tn_dgrad.sh BUNDLE OUT_DIR
# BUNDLE: b.tar.xz made by bench/gpu/bundle.sh with KD_BUNDLE_PROGRAMS (see bench/README.md), or
# the folder it unpacks to. Runs from the repository root (the Python package is client/python).
# OUT_DIR gets tests.log, gemm.json, linear_tn_kernel.json, linear_tn_cublaslt.json, linear.log,
# kerneld.log, summary.txt. Budget: about 8 minutes on an H100 (MEASURE_BUDGET seconds, default
# 510); the optional GPU module test runs only where time is left.
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
src=$1; out=$(mkdir -p "$2" && cd "$2" && pwd)
budget=${MEASURE_BUDGET:-510}
t0=$(date +%s)
left() { echo $((budget - ($(date +%s) - t0))); }
if [ -f "$src" ]; then
  bundle=$(mktemp -d /tmp/kd_measure.XXXXXX)
  tar -C "$bundle" -xJf "$src" || exit 1
else
  bundle=$(cd "$src" && pwd)
fi
export LD_LIBRARY_PATH=$bundle/lib KD_GOLDEN_DIR=$bundle/golden
py=${PYTHON:-python3}
tokens=${MEASURE_TOKENS:-8192}
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv,noheader
  "$py" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)'
  echo "commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} > "$out/summary.txt" 2>&1

# 1. Tests (no MPS): every GEMM test, the tiled quantize conformance (the 128x128 dual pass),
# the harness and backend config tests, the golden vectors.
run_test() {  # name timeout [gtest args]
  local name=$1 limit=$2; shift 2
  echo "=== $name" >> "$out/tests.log"
  (cd "$bundle/bin" && timeout "$limit" ./"$name" --gtest_brief=1 "$@") >> "$out/tests.log" 2>&1
  echo "=== $name rc=$?" >> "$out/tests.log"
}
run_test kernels_gemm_cuda_test 170
run_test cuda_backend_test 90 --gtest_filter='CudaConformance.Tiled*:CudaConformance.Quantize*'
run_test cuda_gemm_tune_test 60
run_test cuda_golden_test 30

# 2. The GEMMs alone: TN (M = out, N = in, K = tokens) and NN (M = tokens, N = in, K = out) of
# the four Linear shapes, and the wgrad row of bench/README.md.
shapes=""
for kn in 4096:14336 14336:4096 8192:28672 28672:8192; do
  k=${kn%:*}; n=${kn#*:}
  shapes="$shapes,tn:${n}x${k}x${tokens},nn:${tokens}x${k}x${n}"
done
timeout 240 "$bundle/bin/gpu_gemm_bench" --samples=5 --shapes="${shapes#,}" --only=tn_wgrad \
  --candidates=lt0,lt1,lt2,lt3,n128,n128+s6,m192+n128,c2,wt > "$out/gemm.json" 2>> "$out/tests.log"
echo "=== gpu_gemm_bench rc=$?" >> "$out/tests.log"

# 3. The Linear under MPS: both passes share one daemon; the TN keys of the four shapes are
# pinned to the kernel's tile for the first pass and to cuBLASLt's first algorithm for the second.
nvidia-cuda-mps-control -d > /dev/null 2>&1 && mps=1 || mps=0
sleep 1
sock=$(mktemp -d /tmp/kd_measure_sock.XXXXXX)
port=19473
"$bundle/bin/kerneld" --socket="$sock/data.sock" --admin_socket="$sock/admin.sock" \
  --metrics_address=127.0.0.1:$port --backend=cuda > "$out/kerneld.log" 2>&1 &
daemon=$!
for _ in $(seq 200); do [ -S "$sock/data.sock" ] && break; sleep 0.1; done
export KERNELD_LIB=$bundle/bin/libkerneld_c.so PYTHONPATH=$repo/client/python
kctl() { "$bundle/bin/kctl" --admin_socket="$sock/admin.sock" "$@"; }
linear() {  # tag timeout [args]
  local tag=$1 limit=$2; shift 2
  echo "=== pass $tag (mps=$mps)" >> "$out/linear.log"
  KD_MPS=$([ $mps = 1 ] && echo mps || echo nomps) timeout "$limit" "$py" \
    "$repo/bench/torch/linear_bench.py" --socket "$sock/data.sock" \
    --metrics "http://127.0.0.1:$port/metrics" --only linear --tokens $tokens --tag "$tag" \
    --variants nn/rm,nt/rm,nn/kbm,nt/kbm "$@" > "$out/linear_$tag.json" 2>> "$out/linear.log"
  echo "=== pass $tag rc=$?" >> "$out/linear.log"
}
hits() {
  "$py" -c "import re,urllib.request as u
t=u.urlopen('http://127.0.0.1:$port/metrics',timeout=5).read().decode()
m=re.search(r'kerneld_autotune_lookups_total\{[^}]*result=\"hit\"[^}]*\} (\S+)',t)
print(m.group(1) if m else 0)" 2> /dev/null || echo "?"
}
if [ -S "$sock/data.sock" ]; then
  # The TN keys as the daemon builds them (gemm:tn:...:m<out>:n<in>:k<tokens>:...): device name
  # as CUDA gives it, kernel version of this build's sm_90 space. Each pass pins them.
  device=$("$py" -c 'import torch; print(torch.cuda.get_device_name())')
  version=$(sed -n 's/^constexpr int32_t kSm90GemmVersion = \([0-9]*\);/\1/p' \
    "$repo/kernels/autotune/space.cc")
  pin_tn() {  # config
    for kn in 4096:14336 14336:4096 8192:28672 28672:8192; do
      k=${kn%:*}; n=${kn#*:}
      kctl cache pin "gemm:tn:e4m3fn.e4m3fn>bf16:m$n:n$k:k$tokens:g1:sm_90:v$version:$device" "$1" \
        >> "$out/linear.log" 2>&1
    done
  }
  a=$(( $(left) - 140 )); [ $a -gt 240 ] && a=240; [ $a -lt 60 ] && a=60
  # The kernel's heuristic tile for TN at all four shapes.
  pin_tn bm128.bn192.s4.c1.r8.p0
  linear tn_kernel $a
  pin_tn lt0
  before=$(hits)
  b=$(( $(left) - 25 )); [ $b -gt 150 ] && b=150
  [ $b -gt 30 ] && linear tn_cublaslt $b --skip_peers
  echo "=== autotune hits during tn_cublaslt: $before -> $(hits)" >> "$out/linear.log"
  kctl cache list >> "$out/linear.log" 2>&1
  # Optional: the GPU module test (both dgrad forms against fp32, bf16 and the in-process path).
  if [ "$(left)" -gt 60 ]; then
    (cd "$repo/tests/python/gpu" && KD_SOCKET=$sock/data.sock timeout $(( $(left) - 15 )) \
       "$py" -m pytest -p no:cacheprovider --confcutdir=. -q -rfEs test_gpu_module.py \
       -k "against_fp32") >> "$out/tests.log" 2>&1
    echo "=== pytest test_gpu_module rc=$?" >> "$out/tests.log"
  fi
else
  echo "=== kerneld did not start" >> "$out/linear.log"
fi
kill "$daemon" 2> /dev/null
wait "$daemon" 2> /dev/null
rm -rf "$sock"
[ $mps = 1 ] && echo quit | nvidia-cuda-mps-control

"$py" "$repo/bench/gpu_gemm/measure_summary.py" "$out" >> "$out/summary.txt" 2>&1
echo "elapsed $(( $(date +%s) - t0 )) s" >> "$out/summary.txt"
cat "$out/summary.txt"
