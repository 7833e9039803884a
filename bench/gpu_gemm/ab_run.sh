#!/usr/bin/env bash
# A/B of two gpu_gemm_bench builds on the lent GPU machine, the way sessions 10-11 measured
# kernel changes: the new build's kernels_gemm_cuda_test, then gpu_gemm_bench in alternating
# processes (old, new, new, old by default), then gemm_summary.py --ab. Everything lands in
# $OUT/TAG.tgz (the device tool returns few files).
#   bash bench/gpu_gemm/ab_run.sh BUNDLE.tar.xz TAG OLD NEW [gpu_gemm_bench args...]
# BUNDLE holds bin/gpu_gemm_bench_OLD, bin/gpu_gemm_bench_NEW, bin/kernels_gemm_cuda_test_NEW
# and lib/ (gpu-bundle's layout, packed with one top folder); e.g. args --samples=5 --only=...
# ORDER (environment) overrides the process order, e.g. ORDER="old new old new old new".
set -u
bundle=$1; tag=$2; old=$3; new=$4; shift 4
cd "$(dirname "$0")/../.."
B=/tmp/ab_$tag; rm -rf "$B"; mkdir -p "$B" && tar -C "$B" --strip-components=1 -xJf "$bundle"
export LD_LIBRARY_PATH=$B/lib
R=$OUT/$tag; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$R/env.txt" 2>&1
date -u >> "$R/env.txt"; sha256sum "$B"/bin/* >> "$R/env.txt"
timeout 200 "$B/bin/kernels_gemm_cuda_test_$new" > "$R/test_$new.log" 2>&1
echo "test_$new rc=$?" | tee -a "$R/rc.txt"
tail -1 "$R/test_$new.log"; grep -E "FAILED|Failure" "$R/test_$new.log" | head -10
i=0
for b in ${ORDER:-old new new old}; do
  i=$((i + 1)); name=$old; [ "$b" = new ] && name=$new
  timeout 120 "$B/bin/gpu_gemm_bench_$name" "$@" > "$R/all_${i}_$name.json" 2> "$R/all_${i}_$name.err"
  echo "all $i $name rc=$?" | tee -a "$R/rc.txt"
done
date -u >> "$R/env.txt"
python3 bench/gpu_gemm/gemm_summary.py --ab "_$old" "_$new" "$R"/all_*.json > "$R/ab.txt" 2>&1
cat "$R/ab.txt"
gzip "$R/test_$new.log"
tar -C "$OUT" -czf "$OUT/$tag.tgz" "$tag" && rm -rf "$R"
