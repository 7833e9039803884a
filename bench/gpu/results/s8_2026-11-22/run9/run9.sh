#!/bin/bash
# session 8 run 9: branch epi3: 128x192 with 3 stages in clusters of 2 (TMA scales) and an
# epilogue buffer per 64-column slice (one barrier pair and one fence per tile), as a candidate
# (s3) beside the default (4 stages, two buffers); main 75cb642's binary (bench_base) as well.
cd "$(dirname "$0")"
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/env.txt 2>&1; date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
O=nt_4096^3,nt_8192^3,nt_16384x8192x5120,nt_8192x7168x2048,nt_4096x2112x7168,nt_4096x24576x1536,nt_4096x7168x16384
for i in 1 2; do
  timeout 100 $B/bin/bench_new --samples=5 --only=$O --candidates=m128+n192+c2+s3 > $R/new_$i.json 2> $R/new_$i.err
  echo "new $i rc=$?"
  timeout 100 $B/bin/bench_base --samples=5 --only=$O > $R/base_$i.json 2> $R/base_$i.err
  echo "base $i rc=$?"
done
for K in 1024 2048; do
  timeout 60 $B/bin/bench_new --samples=7 --shape=4096x6336x$K --config=bm128.bn192.s4.c2.r8.p0 --candidates=s3 > $R/k${K}.json 2> $R/k${K}.err
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
        c = " ".join(f"{x['config'].replace('.r8.p0','')}:{x['tflops']:.0f}({x['vs_default']:.3f},rel={x.get('max_rel_diff')})" for x in r.get("candidates", []))
        print(os.path.basename(f), r["name"], r["config"].replace('.r8.p0',''), f"{r.get('ours_tflops', 0):.0f}/{r.get('cublaslt_tflops', 0):.0f} {r.get('ratio',0):.3f}", c)
P
tar -C $OUT -czf $OUT/s8_run9.tgz r && rm -rf $R
