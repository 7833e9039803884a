#!/bin/bash
# session 7 run 3: main f48753e (TMA scale loads for dense 128x192): the short-K shapes whose
# heuristic tile is 192x128 c2, against 128x192 (c2, c1) as candidates in the same loop, two
# processes; then power soaks of 128x192 c2 against the default on three of them.
cd "$(dirname "$0")"
T0=$(date +%s)
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
SHORT=nt_4096^3,nt_16384x8192x5120,nt_8192x7168x2048,nt_4096x2112x7168,nt_4096x24576x1536
for i in 1 2; do
  now=$(date +%s)
  timeout 90 stdbuf -oL $B/bin/gpu_gemm_bench --samples=7 --only=$SHORT --candidates=m128+n192,m128+n192+c1 > $R/cand_$i.json 2> $R/cand_$i.err
  echo "cand $i rc=$? took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt
done
for cfg in default bm128.bn192.s4.c2.r8.p0; do
  now=$(date +%s)
  arg=""; [ $cfg != default ] && arg="--config=$cfg"
  timeout 60 stdbuf -oL $B/bin/gpu_gemm_bench --samples=3 --power=2 $arg --only=nt_16384x8192x5120,nt_4096x2112x7168,nt_4096x24576x1536 > $R/power_$cfg.json 2> $R/power_$cfg.err
  echo "power $cfg rc=$? took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt
done
python3 - $R <<'P' | tee $R/summary.txt
import json, sys, glob, os
R = sys.argv[1]
def rows(f):
    out = {}
    if not os.path.exists(f): return out
    for line in open(f):
        line = line.strip().lstrip(",")
        if line.endswith("]}"): line = line[:-2]
        if not line.startswith('{"name"'): continue
        try: r = json.loads(line)
        except Exception: continue
        out[r["name"]] = r
    return out
for i in (1, 2):
    for n, r in rows(os.path.join(R, f"cand_{i}.json")).items():
        c = " ".join(f"{x['config']}:{x['tflops']:.0f}({x['vs_default']:.3f})" for x in r.get("candidates", []))
        print(f"CAND{i}", n, r.get("config"), f"{r.get('ours_tflops', 0):.0f}/{r.get('cublaslt_tflops', 0):.0f}", c)
for tag in ("default", "bm128.bn192.s4.c2.r8.p0"):
    for n, r in rows(os.path.join(R, f"power_{tag}.json")).items():
        p = r.get("power", {})
        print("POWER", n, r.get("config"), p.get("error", ""))
        for rd in p.get("rounds", []):
            print("   " + "  |  ".join(f"{who} {rd[who]['tflops']:.0f} TF {rd[who]['watts']:.0f} W {rd[who]['gflop_per_joule']:.0f} GF/J {rd[who]['sm_mhz_median']:.0f} MHz {rd[who]['clock_event_reasons']}" for who in ("ours", "cublaslt")))
P
tar -C $OUT -czf $OUT/s7_run3.tgz r && rm -rf $R
echo "total $(( $(date +%s)-T0 )) s"
