#!/usr/bin/env bash
# The PyTorch runbook on a GPU node (root, python3 with PyTorch 2.9+ and CUDA, no gRPC): the
# package's GPU tests (tests/python/gpu), the Linear/MoE benchmark (linear_bench.py) and the
# Llama training benchmark (train_llama.py) against a kerneld on the CUDA backend, without MPS
# and then under MPS, everything under OUT_DIR.
#   run_gpu.sh BUNDLE OUT_DIR [nomps|mps|both] [STEPS...]
# STEPS: any of tests, linear, llama, moe (all by default). TRAIN_ARGS adds arguments to every
# train_llama.py run (e.g. TRAIN_ARGS="--steps 300"), LINEAR_ARGS to linear_bench.py's.
# BUNDLE is torch.tar.xz from bench/torch/bundle.sh (or the folder it unpacks to): kerneld,
# kctl, libkerneld_c.so and their libraries. The Python package is this checkout's
# client/python (PYTHONPATH; nothing is installed).
# Writes, per mode M: M/pytest.log, M/pytest.xml, M/loss_curves.json, M/bench.json,
# M/bench.log, M/llama.json, M/moe.json (and their .log), M/status.json, kerneld_M.log; and
# env.txt.
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
src=$1; out=$(mkdir -p "$2" && cd "$2" && pwd); modes=${3:-both}
shift 3 2>/dev/null || shift $#
steps=${*:-tests linear llama moe}
[ "$modes" = both ] && modes="nomps mps"
has() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }
if [ -f "$src" ]; then
  bundle=$(mktemp -d /tmp/kd_torch_bundle.XXXXXX)
  tar -C "$bundle" -xJf "$src" || exit 1
else
  bundle=$(cd "$src" && pwd)
fi
py=${PYTHON:-python3}
export KERNELD_LIB=$bundle/bin/libkerneld_c.so
export PYTHONPATH=$repo/client/python${PYTHONPATH:+:$PYTHONPATH}
commit=${KD_COMMIT:-$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)}
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  "$py" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)'
  "$py" -c 'import kerneld; print(kerneld.library_path(), hex(kerneld.api_version()))'
  echo "commit $commit"
} > "$out/env.txt" 2>&1
port=19471

start_daemon() {
  sock=$(mktemp -d /tmp/kd_torch.XXXXXX)
  LD_LIBRARY_PATH=$bundle/lib "$bundle/bin/kerneld" --socket="$sock/data.sock" \
    --admin_socket="$sock/admin.sock" --metrics_address=127.0.0.1:$port --backend=${KD_BACKEND:-cuda} \
    > "$out/kerneld_$1.log" 2>&1 &
  daemon=$!
  for _ in $(seq 200); do [ -S "$sock/data.sock" ] && return 0; sleep 0.1; done
  echo "run_gpu: kerneld did not start ($out/kerneld_$1.log)"
  return 1
}

stop_daemon() {
  kill "$daemon" 2> /dev/null
  wait "$daemon" 2> /dev/null
  rm -rf "$sock"
}

for mode in $modes; do
  mkdir -p "$out/$mode"
  if [ "$mode" = mps ]; then
    # One control daemon for the node; the kerneld and python processes started below are
    # its clients (same user, same CUDA_MPS_PIPE_DIRECTORY). deploy/README.md has the details.
    nvidia-cuda-mps-control -d || { echo "run_gpu: MPS did not start"; continue; }
    sleep 1
  fi
  if start_daemon "$mode"; then
    if has tests; then
      (cd "$repo/tests/python/gpu" && KD_SOCKET=$sock/data.sock KD_GPU_OUT=$out/$mode \
         timeout 420 "$py" -m pytest -p no:cacheprovider --confcutdir=. -q -rfEs \
         --junitxml="$out/$mode/pytest.xml" . > "$out/$mode/pytest.log" 2>&1)
      echo "=== $mode pytest rc=$? $(tail -n 1 "$out/$mode/pytest.log")"
    fi
    if has linear; then
      KD_MPS=$mode KD_COMMIT=$commit timeout 420 "$py" "$repo/bench/torch/linear_bench.py" \
        --socket "$sock/data.sock" --metrics "http://127.0.0.1:$port/metrics" ${LINEAR_ARGS:-} \
        > "$out/$mode/bench.json" 2> "$out/$mode/bench.log"
      echo "=== $mode bench rc=$?"
    fi
    if has llama; then
      # The 8B shape, 4 layers, 8192 tokens a step; bf16 and kerneld, eager and compiled.
      timeout 540 "$py" "$repo/bench/torch/train_llama.py" --config 8B-shape --layers 4 \
        --tokens 8192 --seq_len 2048 --socket "$sock/data.sock" \
        --metrics "http://127.0.0.1:$port/metrics" ${TRAIN_ARGS:-} \
        > "$out/$mode/llama.json" 2> "$out/$mode/llama.log"
      echo "=== $mode llama rc=$?"
    fi
    if has moe; then
      timeout 420 "$py" "$repo/bench/torch/train_llama.py" --config 8B-shape --layers 2 \
        --experts 8 --moe_ffn_dim 4096 --top_k 1 --tokens 8192 --seq_len 2048 \
        --compile compiled --filter all --socket "$sock/data.sock" \
        --metrics "http://127.0.0.1:$port/metrics" ${TRAIN_ARGS:-} \
        > "$out/$mode/moe.json" 2> "$out/$mode/moe.log"
      echo "=== $mode moe rc=$?"
    fi
    LD_LIBRARY_PATH=$bundle/lib "$bundle/bin/kctl" --admin_socket="$sock/admin.sock" status \
      --json > "$out/$mode/status.json" 2>&1
    stop_daemon
  fi
  if [ "$mode" = mps ]; then
    echo quit | nvidia-cuda-mps-control
  fi
  for f in llama moe; do
    "$py" - "$out/$mode/$f.json" <<'PY' 2> /dev/null
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["runs"]:
    print(r["path"], "tokens/s", r.get("tokens_per_s"), "peak GiB", r.get("peak_memory_gib"),
          "breaks", r.get("graph_breaks"), "kerneld ms", r.get("kerneld_kernel_ms"),
          "trainer gpu ms", r.get("trainer_gpu_ms"), "step ms", r.get("step_ms"))
print({k: v for k, v in d.items() if k.startswith(("speedup", "loss_gap"))})
PY
  done
  "$py" - "$out/$mode/bench.json" <<'PY' 2> /dev/null
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["linear"] + d["moe"]:
    p = r["paths"]
    ms = {k: v.get("ms", v.get("error", "?")) for k, v in p.items()}
    b = r.get("kerneld_breakdown", {})
    shape = f'{r.get("k")}->{r.get("n")} x{r.get("tokens", r.get("experts"))}'
    print(shape, ms, "vs bf16", r.get("kerneld_speedup_vs_bf16"), "vs in-process",
          r.get("kerneld_speedup_vs_inprocess_fp8"), "daemon share (sync pass)",
          b.get("daemon_share"), "(same run)", p.get("kerneld", {}).get("same_run_daemon_share"))
PY
done
