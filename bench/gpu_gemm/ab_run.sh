#!/usr/bin/env bash
# A/B of gpu_gemm_bench builds on the lent GPU machine. The GPU's clocks move by a few percent
# between processes, more than most kernel changes, so builds compare only when timed in
# alternating processes of one run: each new build's kernels_gemm_cuda_test, then gpu_gemm_bench
# in alternating processes (old, the new builds, the new builds reversed, old: old new new old for
# one new build, old n1 n2 n2 n1 old for two), then gemm_summary.py --ab of old against each new
# build. Everything lands in $OUT/TAG.tgz (the device tool returns few files).
#   bash bench/gpu_gemm/ab_run.sh BUNDLE.tar.xz TAG OLD NEW[,NEW2...] [gpu_gemm_bench args...]
# BUNDLE holds bin/gpu_gemm_bench_OLD, bin/gpu_gemm_bench_NEW and bin/kernels_gemm_cuda_test_NEW
# for each new build, and lib/ (gpu-bundle's layout, packed with one top folder); e.g. args
# --samples=5 --only=... ORDER (environment) overrides the process order with build names, e.g.
# ORDER="old new old new" (one new build: the words old and new also work).
# Tags must not end with one another (gemm_summary --ab matches a file by the end of its name).
set -u
bundle=$1; tag=$2; old=$3; news=$4; shift 4
IFS=, read -r -a new <<< "$news"
cd "$(dirname "$0")/../.."
B=/tmp/ab_$tag; rm -rf "$B"; mkdir -p "$B" && tar -C "$B" --strip-components=1 -xJf "$bundle"
export LD_LIBRARY_PATH=$B/lib
R=$OUT/$tag; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$R/env.txt" 2>&1
date -u >> "$R/env.txt"; sha256sum "$B"/bin/* >> "$R/env.txt"
for n in "${new[@]}"; do
  timeout 200 "$B/bin/kernels_gemm_cuda_test_$n" > "$R/test_$n.log" 2>&1
  echo "test_$n rc=$?" | tee -a "$R/rc.txt"
  tail -1 "$R/test_$n.log"; grep -E "FAILED|Failure" "$R/test_$n.log" | head -10
  gzip "$R/test_$n.log"
done
reversed=(); for ((k = ${#new[@]} - 1; k >= 0; k--)); do reversed+=("${new[k]}"); done
order=${ORDER:-$old ${new[*]} ${reversed[*]} $old}
i=0
for name in $order; do
  i=$((i + 1))
  [ "$name" = old ] && name=$old
  [ "$name" = new ] && name=${new[0]}
  timeout 120 "$B/bin/gpu_gemm_bench_$name" "$@" > "$R/all_${i}_$name.json" \
    2> "$R/all_${i}_$name.err"
  echo "all $i $name rc=$?" | tee -a "$R/rc.txt"
done
date -u >> "$R/env.txt"
for n in "${new[@]}"; do
  python3 bench/gpu_gemm/gemm_summary.py --ab "_$old" "_$n" "$R"/all_*.json >> "$R/ab.txt" 2>&1
done
cat "$R/ab.txt"
tar -C "$OUT" -czf "$OUT/$tag.tgz" "$tag" && rm -rf "$R"
