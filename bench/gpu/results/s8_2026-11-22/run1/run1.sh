#!/bin/bash
# session 8 run 1: main 6cfc69b. Per-tile cost: whole-wave shapes 4096x6336xK (16 pair rows x 33
# column tiles of 128x192 = 528 work items = 8 waves of 66 clusters, no split tail) for K from
# 1024 to 16384, ours (128x192 c2, TMA scales) and cuBLASLt; 4096^3 with and without the split tail.
cd "$(dirname "$0")"
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
for K in 1024 2048 4096 8192 16384; do
  now=$(date +%s)
  timeout 60 $B/bin/gpu_gemm_bench --samples=7 --shape=4096x6336x$K --config=bm128.bn192.s4.c2.r8.p0 \
    --candidates=m192+n128 > $R/k$K.json 2> $R/k$K.err
  echo "k$K rc=$? took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt
done
for i in 1 2; do
  timeout 60 $B/bin/gpu_gemm_bench --samples=7 --only=nt_4096^3 > $R/n4096_split_$i.json 2> $R/n4096_split_$i.err
  timeout 60 $B/bin/gpu_gemm_bench --samples=7 --only=nt_4096^3 --unsplit > $R/n4096_unsplit_$i.json 2> $R/n4096_unsplit_$i.err
  echo "4096 $i rc=$?" | tee -a $R/rc.txt
done
python3 - $R <<'P' | tee $R/summary.txt
import json, sys, glob, os
R = sys.argv[1]
for f in sorted(glob.glob(os.path.join(R, "*.json"))):
    for line in open(f):
        line = line.strip().lstrip(",")
        if not line.startswith('{"name"'): continue
        try: r = json.loads(line)
        except Exception:
            try: r = json.loads(line[:-2])
            except Exception: continue
        c = " ".join(f"{x['config'].replace('.r8.p0','')}:{x['tflops']:.0f}({x['vs_default']:.3f})" for x in r.get("candidates", []))
        print(os.path.basename(f), r["name"], r["config"].replace('.r8.p0',''), f"{r.get('ours_tflops', 0):.0f}/{r.get('cublaslt_tflops', 0):.0f}", {k: v for k, v in r.items() if k.endswith('_ms')}, c)
P
tar -C $OUT -czf $OUT/s8_run1.tgz r && rm -rf $R
