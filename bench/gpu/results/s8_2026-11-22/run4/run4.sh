#!/bin/bash
# session 8 run 4: split tail with the non-owner slices first and the owners last (bench_new,
# on top of the TMA-store epilogue), against run 3's TMA-store binary (bench_epi) and main
# 6cfc69b (bench_base); tests of the new binary; the whole benchmark once with the new binary.
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
  for v in base epi new; do
    timeout 60 $B/bin/bench_$v --samples=7 --only=nt_4096^3,nt_4096x7168x16384 > $R/split_${v}_$i.json 2> $R/split_${v}_$i.err
    echo "split $v $i rc=$?" | tee -a $R/rc.txt
  done
done
now=$(date +%s)
timeout 100 $B/bin/bench_new --samples=5 > $R/all_new.json 2> $R/all_new.err
echo "all new rc=$? took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt
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
        print(os.path.basename(f), r["name"], r["config"].replace('.r8.p0',''), f"{r.get('ours_tflops', 0):.0f}/{r.get('cublaslt_tflops', 0):.0f} {r.get('ratio',0):.3f} rel={r.get('max_rel_diff')}")
P
tar -C $OUT -czf $OUT/s8_run4.tgz r && rm -rf $R
