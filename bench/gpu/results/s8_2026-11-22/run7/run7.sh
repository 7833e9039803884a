#!/bin/bash
# session 8 run 7: main with the bf16 fragment write as one helper (after run 6's review mends):
# kernels_gemm_cuda_test, the whole benchmark once.
cd "$(dirname "$0")"
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
timeout 200 $B/bin/kernels_gemm_cuda_test > $R/test.log 2>&1
echo "test rc=$?" | tee -a $R/rc.txt
tail -3 $R/test.log; grep -E "FAILED|Failure" $R/test.log | head -20
timeout 100 $B/bin/gpu_gemm_bench --samples=5 > $R/all.json 2> $R/all.err
echo "all rc=$?" | tee -a $R/rc.txt
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
tar -C $OUT -czf $OUT/s8_run7.tgz r && rm -rf $R
