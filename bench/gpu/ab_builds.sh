#!/usr/bin/env bash
# Same-run A/B of two builds' GEMM and quantize/pad kernels on the lent GPU machine: the GPU's
# clocks move by a few percent between processes, so the builds run in alternating processes
# (old, new, new, old) and compare by the mean of each build's two processes.
#   ab_builds.sh BUNDLE.tar.xz OUT_DIR
# BUNDLE holds one top folder with bin/gpu_gemm_bench_{old,new}, bin/quant_pad_bench_{old,new}
# and lib/ (bench/gpu/bundle.sh's layout; pack each build's two programs with the bundling tool
# and rename them). Writes OUT_DIR/ab.tgz: gemm_{1..4}_*.json, quant_{1..4}_*.json, gemm_ab.txt
# (gemm_summary.py --ab) and quant_ab.txt (new / old GB/s per cell, their median and range).
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd); r=$(mktemp -d); B=$(mktemp -d)
tar -C "$B" --strip-components=1 -xJf "$1"
# cuBLASLt (gpu_gemm_bench's peer) from the machine's CUDA installation.
cl=$(find /usr/local -name "libcublasLt.so.1[23]*" 2> /dev/null | head -1)
export LD_LIBRARY_PATH=$B/lib${cl:+:$(dirname "$cl")}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv > "$r/env.txt" 2>&1
i=0
for n in old new new old; do
  i=$((i + 1))
  timeout 100 "$B/bin/gpu_gemm_bench_$n" --samples=${AB_SAMPLES:-3} > "$r/gemm_${i}_$n.json" \
    2>> "$r/err.txt"
  echo "gemm $i $n rc=$?"
done
python3 "$here/../gpu_gemm/gemm_summary.py" --ab _old _new "$r"/gemm_*.json > "$r/gemm_ab.txt" 2>&1
i=0
for n in old new new old; do
  i=$((i + 1))
  timeout 90 "$B/bin/quant_pad_bench_$n" "$r/quant_${i}_$n.json" > /dev/null 2>> "$r/err.txt"
  echo "quant $i $n rc=$?"
done
python3 - "$r" > "$r/quant_ab.txt" << 'PY'
import glob, json, statistics, sys
cells = {}
for f in sorted(glob.glob(sys.argv[1] + "/quant_*.json")):
    build = f.rsplit("_", 1)[1].split(".")[0]
    d = json.load(open(f))
    rows = [((r["op"], r["variant"], r["m"], r["k"]), r["gbps"]) for r in d["results"]]
    rows.append((("copy_1gib",), d["copy_1gib_gbps"]))
    for key, gbps in rows:
        cells.setdefault(key, {}).setdefault(build, []).append(gbps)
ratios = []
for key, v in cells.items():
    if "old" in v and "new" in v:
        ratio = statistics.mean(v["new"]) / statistics.mean(v["old"])
        ratios.append(ratio)
        print(" ".join(map(str, key)), round(statistics.mean(v["old"])),
              round(statistics.mean(v["new"])), round(ratio, 3))
print("cells", len(ratios), "median", round(statistics.median(ratios), 4), "range",
      round(min(ratios), 3), round(max(ratios), 3))
PY
cat "$r/gemm_ab.txt"; tail -1 "$r/quant_ab.txt"
tar -C "$r" -czf "$out/ab.tgz" . && rm -rf "$r" "$B"
