#!/usr/bin/env bash
# One GPU-machine run of the CUDA backend's tests and benchmarks, from a bundle made by
# bench/gpu/bundle.sh (bin/, lib/, golden/: unpack its b.tar.xz on the GPU machine first).
#   run_gpu_suite.sh BUNDLE_DIR OUT_DIR
# Writes tests.log, quant_pad.json, e2e_*.json (run_e2e.sh), kerneld_*.log, gemm.json,
# gemm_power.json (with GEMM_POWER), tile_gemm.json, tile_gemm_ptx89.json, sass.txt,
# gemm_sass.txt, tile_gemm_sass.txt, env.txt under OUT_DIR. Programs missing from the bundle are
# skipped.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "$1" && pwd); out=$2
export LD_LIBRARY_PATH=$bundle/lib KD_GOLDEN_DIR=$bundle/golden
cd "$bundle"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > "$out/env.txt" 2>&1
for t in cuda_backend_test executor_gpu_test cuda_golden_test daemon_gpu_test \
         kernels_gemm_cuda_test cuda_gemm_tune_test kernel_timer_test autotune_gpu_test \
         warm_load_test; do
  [ -x ./bin/$t ] || continue
  echo "=== $t" >> "$out/tests.log"
  timeout 240 ./bin/$t --gtest_brief=1 >> "$out/tests.log" 2>&1
  echo "=== $t rc=$?" >> "$out/tests.log"
done
timeout 150 ./bin/quant_pad_bench "$out/quant_pad.json" > /dev/null 2>> "$out/tests.log"
echo "=== quant_pad_bench rc=$?" >> "$out/tests.log"
if [ -x ./bin/cuda_call_bench ]; then
  timeout 60 ./bin/cuda_call_bench 1000 > "$out/cuda_calls.json" 2>> "$out/tests.log"
  echo "=== cuda_call_bench rc=$?" >> "$out/tests.log"
fi
if [ -x ./bin/ipc_order_bench ]; then
  timeout 60 ./bin/ipc_order_bench 200 > "$out/ipc_order.json" 2>> "$out/tests.log"
  echo "=== ipc_order_bench rc=$?" >> "$out/tests.log"
fi
"$here/run_e2e.sh" "$bundle" "$out" 300 >> "$out/tests.log" 2>&1
echo "=== run_e2e rc=$?" >> "$out/tests.log"
if [ -x ./bin/gpu_gemm_bench ]; then
  # GEMM_CANDIDATES (optional): --candidates of gpu_gemm_bench, timed in the same process.
  timeout 300 ./bin/gpu_gemm_bench --samples=${GEMM_SAMPLES:-7} \
    ${GEMM_CANDIDATES:+--candidates=$GEMM_CANDIDATES} > "$out/gemm.json" 2>> "$out/tests.log"
  echo "=== gpu_gemm_bench rc=$?" >> "$out/tests.log"
  # GEMM_POWER=SECONDS (optional): the nine dense NT shapes again under sustained load at the
  # power cap, ours and cuBLASLt each soaking SECONDS twice in turn (--power; NVML energy).
  if [ -n "${GEMM_POWER:-}" ]; then
    timeout 400 ./bin/gpu_gemm_bench --samples=3 --power="$GEMM_POWER" --only=nt_ \
      > "$out/gemm_power.json" 2>> "$out/tests.log"
    echo "=== gpu_gemm_bench --power rc=$?" >> "$out/tests.log"
  fi
fi
if [ -x ./bin/tile_gemm_test ]; then
  # The portable tile GEMM: its sm_90a SASS, then the compute_89 PTX compiled by the driver (what
  # an sm_89 part runs; cuBLASLt is left out there, its kernels may have no PTX to compile).
  timeout 600 ./bin/tile_gemm_test --gtest_brief=1 >> "$out/tests.log" 2>&1
  echo "=== tile_gemm_test rc=$?" >> "$out/tests.log"
  CUDA_FORCE_PTX_JIT=1 KD_EXPECT_TILE_GEMM_PTX=89 timeout 600 ./bin/tile_gemm_test \
    --gtest_brief=1 --gtest_filter=-*Cublas* >> "$out/tests.log" 2>&1
  echo "=== tile_gemm_test (compute_89 PTX) rc=$?" >> "$out/tests.log"
fi
if [ -x ./bin/tile_gemm_bench ]; then
  timeout 400 ./bin/tile_gemm_bench --samples=${GEMM_SAMPLES:-7} > "$out/tile_gemm.json" \
    2>> "$out/tests.log"
  echo "=== tile_gemm_bench rc=$?" >> "$out/tests.log"
  CUDA_FORCE_PTX_JIT=1 timeout 400 ./bin/tile_gemm_bench --samples=${GEMM_SAMPLES:-7} --tile_only \
    > "$out/tile_gemm_ptx89.json" 2>> "$out/tests.log"
  echo "=== tile_gemm_bench (compute_89 PTX) rc=$?" >> "$out/tests.log"
fi
if command -v cuobjdump > /dev/null; then
  # The tile GEMM kernels' matrix instructions (mma.sync FP8) and local-memory traffic.
  if [ -x ./bin/tile_gemm_bench ]; then
    cuobjdump -sass -arch sm_90a bin/tile_gemm_bench > /tmp/tile.sass 2>&1
    awk '/Function :/ {name=$3; t=(name ~ /TileGemmKernel/)} t && /MMA/ {match($0, /[A-Z]*MMA[A-Z0-9.]*/); m[name " " substr($0, RSTART, RLENGTH)]++}
         t && /LDL|STL/ {l[name]++} END {for (k in m) print "tile", k, m[k]; for (f in l) print "tile", f, "LDL/STL", l[f]}' \
      /tmp/tile.sass | sort > "$out/tile_gemm_sass.txt"
  fi
  # Per-kernel instruction counts; QGMMA and LDL/STL counts of the GEMM kernels.
  cuobjdump -sass bin/gpu_gemm_bench > /tmp/gemm.sass 2>&1
  awk '/Function :/ {name=$3} /QGMMA/ {q[name]++} /LDL|STL/ {l[name]++}
       END {for (f in q) print "gemm", f, "QGMMA", q[f], "LDL/STL", l[f] + 0}' /tmp/gemm.sass \
    > "$out/gemm_sass.txt"
  cuobjdump -sass bin/quant_pad_bench > /tmp/all.sass 2>&1
  awk '/Function :/ {name=$3} /^ *\/\*[0-9a-f]+\*\// {n[name]++} END {for (f in n) print n[f], f}' \
    /tmp/all.sass | sort -k2 > "$out/sass.txt"
  # The bf16 -> e4m3fn 1x128 kernel's body, for reading.
  awk '/Function : .*QuantizeBlockwiseKernelILNS0_9InputTypeE1ENS_3fp86E4M3FNELb0E/ {p=1} p && /Function :/ && !/E1ENS_3fp86E4M3FNELb0E/ {p=0} p' \
    /tmp/all.sass >> "$out/sass.txt"
fi
grep -E "^=== |FAILED|PASSED|golden cases" "$out/tests.log"
grep -E "^(inline|queued|ring|ring_spin250) " "$out/tests.log"
python3 -c "
import json,sys
d=json.load(open('$out/quant_pad.json'))
print(d['device'], 'copy', round(d['copy_1gib_gbps']))
for r in d['results']: print(r['op'], r['variant'], r['m'], r['k'], r['gbps'], r['ratio_to_copy_1gib'], r['ratio_to_copy_same_size'])
"
