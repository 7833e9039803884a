#!/usr/bin/env bash
# Packs what the PyTorch GPU runbook (bench/torch/run_gpu.sh) needs from a CUDA build: kerneld,
# kctl and libkerneld_c.so with their shared libraries (the workplace's gpu-bundle tool), into
# OUT_DIR/torch.tar.xz (the carry limit is 64 MiB; xz brings ~90 MB to ~20 MB).
#   bundle.sh BUILD_DIR OUT_DIR [GPU_BUNDLE_TOOL]
# The Python package itself travels with the working tree (client/python).
set -eu
build=$1; out=$2; tool=${3:-../shared/tools/gpu-bundle}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for p in server/kerneld client/kctl/kctl client/c/libkerneld_c.so; do
  "$tool" "$stage" "$build/$p" > /dev/null 2>&1 || true
  [ -e "$stage/bin/$(basename "$p")" ] || { echo "bundle.sh: $p was not bundled" >&2; exit 1; }
done
strip --strip-unneeded "$stage"/bin/*
mkdir -p "$out"
tar -C "$stage" -cf - . | xz -T2 -6 > "$out/torch.tar.xz"
du -h "$out/torch.tar.xz"
