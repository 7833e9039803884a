#!/bin/bash
# session 8 run 3: branch epi-tma with two epilogue buffers where they fit and M-grouped bulk stores, against main 6cfc69b.
cd "$(dirname "$0")"
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
now=$(date +%s)
timeout 200 $B/bin/kernels_gemm_cuda_test > $R/test.log 2>&1
echo "test rc=$? took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt
tail -3 $R/test.log; grep -E "FAILED|Failure" $R/test.log | head -20
for i in 1 2; do
  for v in base new; do
    now=$(date +%s)
    timeout 100 $B/bin/bench_$v --samples=5 > $R/all_${v}_$i.json 2> $R/all_${v}_$i.err
    echo "all $v $i rc=$? took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt
  done
done
timeout 100 $B/bin/bench_new --samples=5 --only=nt_8192x7168x2048,nt_4096x24576x1536,nt_4096^3 --candidates=m128+n192,m192+n128 > $R/cand_new.json 2> $R/cand_new.err
for K in 1024 2048; do
  for v in base new; do
    timeout 60 $B/bin/bench_$v --samples=7 --shape=4096x6336x$K --config=bm128.bn192.s4.c2.r8.p0 \
      --candidates=m192+n128 > $R/k${K}_$v.json 2> $R/k${K}_$v.err
  done
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
        c = " ".join(f"{x['config'].replace('.r8.p0','')}:{x['tflops']:.0f}" for x in r.get("candidates", []))
        print(os.path.basename(f), r["name"], r["config"].replace('.r8.p0',''), f"{r.get('ours_tflops', 0):.0f}/{r.get('cublaslt_tflops', 0):.0f} {r.get('ratio',0):.3f} rel={r.get('max_rel_diff')}", c)
P
tar -C $OUT -czf $OUT/s8_run3.tgz r && rm -rf $R
