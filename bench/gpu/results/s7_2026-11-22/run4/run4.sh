#!/bin/bash
# session 7 run 4: 128x192 in clusters of 1 (c1) with TMA scale loads (main f48753e, "new") and
# without (main 5c49fbd, "base"), A B A B, same cases and config; c2 as a control.
cd "$(dirname "$0")"
T0=$(date +%s)
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
for i in 1 2; do
  for who in base new; do
    bin=gpu_gemm_bench; [ $who = base ] && bin=gpu_gemm_bench_base
    now=$(date +%s)
    timeout 60 stdbuf -oL $B/bin/$bin --samples=5 --config=bm128.bn192.s4.c1.r8.p0 --candidates=c2 --only=nt_4096^3,nt_16384x8192x5120,nt_8192^3 > $R/c1_${who}_$i.json 2> $R/c1_${who}_$i.err
    echo "c1 $who $i rc=$? took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt
  done
done
python3 - $R <<'P' | tee $R/summary.txt
import json, sys, glob, os, re
R = sys.argv[1]
for f in sorted(glob.glob(os.path.join(R, "c1_*.json"))):
    tag = re.match(r".*c1_(\w+_\d)\.json", f).group(1)
    for line in open(f):
        line = line.strip().lstrip(",")
        if not line.startswith('{"name"'): continue
        if line.endswith("]}") and line.count("{") < 2: line = line[:-2]
        try: r = json.loads(line)
        except Exception:
            try: r = json.loads(line[:-2])
            except Exception: continue
        c = " ".join(f"{x['config']}:{x['tflops']:.0f}" for x in r.get("candidates", []))
        print(tag, r["name"], r["config"], f"{r.get('ours_tflops', 0):.0f}/{r.get('cublaslt_tflops', 0):.0f}", c)
P
tar -C $OUT -czf $OUT/s7_run4.tgz r && rm -rf $R
echo "total $(( $(date +%s)-T0 )) s"
