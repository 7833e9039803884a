#!/usr/bin/env bash
# Packs every GPU program of a build (tests, benchmarks, the daemon, kctl) with their shared
# libraries and the golden vectors into OUT_DIR/b.tar.xz, for the lent GPU machine: the bundle
# made by the workplace's gpu-bundle tool is ~96 MB, over the 64 MiB a run may carry, and packs
# to 18-30 MB (30 for a RelWithDebInfo build). On the GPU machine:
#   mkdir -p /tmp/b && tar -C /tmp/b -xJf OUT_DIR/b.tar.xz && bench/gpu/run_gpu_suite.sh /tmp/b $OUT
#   bundle.sh BUILD_DIR OUT_DIR [GPU_BUNDLE_TOOL]
# KD_BUNDLE_PROGRAMS (optional): the build-relative programs (and shared libraries) to pack
# instead of the suite's list, for a run that needs fewer (bench/gpu_gemm/measure_tn_dgrad.sh).
set -eu
build=$1; out=$2; tool=${3:-../shared/tools/gpu-bundle}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
progs="tests/gpu/cuda_backend_test tests/gpu/executor_gpu_test tests/gpu/cuda_golden_test
tests/gpu/autotune_gpu_test tests/gpu/warm_load_test
tests/gpu/daemon_gpu_test tests/gpu/cuda_gemm_tune_test tests/kernels/gemm/kernels_gemm_cuda_test
tests/gpu/kernel_timer_test bench/gpu/cuda_call_bench bench/gpu/ipc_order_bench
tests/gpu/kd_ipc_peer tests/gpu/kd_gpu_client bench/gpu/quant_pad_bench bench/gpu/quant_e2e_bench
bench/gpu_gemm/gpu_gemm_bench tests/gpu/tile_gemm/tile_gemm_test bench/tile_gemm/tile_gemm_bench
server/kerneld client/kctl/kctl"
progs=${KD_BUNDLE_PROGRAMS:-$progs}
for p in $progs; do
  # One call per program: the tool stops (and fails) after a program that has no library to
  # bundle, such as the statically linked kd_ipc_peer; the program is copied all the same.
  "$tool" "$stage" "$build/$p" > /dev/null 2>&1 || true
  [ -x "$stage/bin/$(basename "$p")" ] || { echo "bundle.sh: $p was not bundled" >&2; exit 1; }
done
strip --strip-all "$stage"/bin/*
cp "$build/tests/gpu/torch_peer.py" "$stage/bin/"
mkdir -p "$stage/golden" && cp -r tests/data/golden/. "$stage/golden/"
mkdir -p "$out"
tar -C "$stage" -cf - . | xz -T2 -6 > "$out/b.tar.xz"
du -h "$out/b.tar.xz"
