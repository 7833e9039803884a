#!/bin/bash
# session 7 run 5: main c0dba28 (kernel of 71bc2f1): other tiles as candidates where the default
# trails most (4096^3, the two K<=2048 shapes, TN), two processes.
cd "$(dirname "$0")"
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
for i in 1 2; do
  now=$(date +%s)
  timeout 100 stdbuf -oL $B/bin/gpu_gemm_bench --samples=5 --only=nt_4096^3,nt_8192x7168x2048,nt_4096x24576x1536 \
    --candidates=m128+n128+s6+c2,m128+n128+s6+c1,m128+n128+s5+c2,m128+n192+c2,m192+n128+c2 > $R/cand_$i.json 2> $R/cand_$i.err
  echo "cand $i rc=$? took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt
  now=$(date +%s)
  timeout 60 stdbuf -oL $B/bin/gpu_gemm_bench --samples=5 --only=tn_ --candidates=c2,m192+n128,m128+n128+s6 > $R/tn_$i.json 2> $R/tn_$i.err
  echo "tn $i rc=$? took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt
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
        print(os.path.basename(f), r["name"], r["config"].replace('.r8.p0',''), f"{r.get('ours_tflops', 0):.0f}/{r.get('cublaslt_tflops', 0):.0f}", c)
P
tar -C $OUT -czf $OUT/s7_run5.tgz r && rm -rf $R
