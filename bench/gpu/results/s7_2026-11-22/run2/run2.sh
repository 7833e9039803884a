#!/bin/bash
# session 7 run 2: gemm12 as narrowed (f48753e: TMA scale loads for dense NT/NN 128x192 only, own
# instantiations) against main 5c49fbd: SASS resources, tests, A B A B timing, power soaks.
cd "$(dirname "$0")"
T0=$(date +%s)
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 200 > $R/smi.csv 2>&1 &
SMI=$!
CO=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null)
$CO -res-usage $B/bin/kernels_gemm_cuda_test 2>&1 | grep -A1 "GemmFp8Kernel" | grep -v "^--" > $R/res_usage.txt
$CO -sass $B/bin/kernels_gemm_cuda_test 2>/dev/null | awk '/Function :/{f=$3} /QGMMA/{q[f]++} /[^A-Z](LDL|STL)[. ]/{l[f]++} END{for (k in q) if (k ~ /GemmFp8Kernel/) print q[k], l[k]+0, k}' > $R/sass_counts.txt
echo "instantiations: $(wc -l < $R/sass_counts.txt); with LDL/STL: $(awk '$2>0' $R/sass_counts.txt | wc -l)" | tee -a $R/rc.txt
grep -c "STACK:0 LOCAL:0" $R/res_usage.txt | sed 's/^/res-usage lines with STACK:0 LOCAL:0: /' | tee -a $R/rc.txt
t0=$(date +%s)
timeout 120 $B/bin/kernels_gemm_cuda_test --gtest_brief=1 > $R/kernels_gemm_cuda_test.log 2>&1; echo "kernels_gemm_cuda_test rc=$?" | tee -a $R/rc.txt
timeout 30 $B/bin/cuda_gemm_tune_test --gtest_brief=1 > $R/cuda_gemm_tune_test.log 2>&1; echo "cuda_gemm_tune_test rc=$?" | tee -a $R/rc.txt
echo "tests took $(( $(date +%s)-t0 )) s" | tee -a $R/rc.txt
tail -2 $R/kernels_gemm_cuda_test.log; tail -2 $R/cuda_gemm_tune_test.log
grep -E "^\[  FAILED" $R/kernels_gemm_cuda_test.log | head -10 | cut -c1-160
if ! grep -qE "illegal|: 715|cudaError" $R/kernels_gemm_cuda_test.log; then
  for pass in 1 2; do
    for who in base new; do
      bin=gpu_gemm_bench; [ $who = base ] && bin=gpu_gemm_bench_base
      only=""; [ $pass = 2 ] && only="--only=nt_8192^3,nt_4096x7168x16384,m_grouped,tn_"
      now=$(date +%s)
      timeout 75 stdbuf -oL $B/bin/$bin --samples=5 $only > $R/ab_${who}_$pass.json 2> $R/ab_${who}_$pass.err
      echo "ab $who $pass rc=$? took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt
    done
  done
  now=$(date +%s)
  timeout 70 stdbuf -oL $B/bin/gpu_gemm_bench --samples=3 --power=2 --only=nt_8192^3,nt_4096x7168x16384,nt_4096^3,nt_8192x7168x2048 > $R/power_new.json 2> $R/power_new.err
  echo "power new rc=$? took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt; now=$(date +%s)
  timeout 40 stdbuf -oL $B/bin/gpu_gemm_bench_base --samples=3 --power=2 --only=nt_8192^3,nt_4096x7168x16384 > $R/power_base.json 2> $R/power_base.err
  echo "power base rc=$? took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt; now=$(date +%s)
  timeout 40 stdbuf -oL $B/bin/gpu_gemm_bench --samples=3 --power=2 --config=bm128.bn192.s4.c2.r8.p0 --only=nt_4096^3,nt_8192x7168x2048 > $R/power_new_128x192.json 2> $R/power_new_128x192.err
  echo "power new 128x192 rc=$? took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt
fi
kill $SMI
python3 - $R <<'P' | tee $R/summary.txt
import json, sys, glob, os, re
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
ab = {}
for f in sorted(glob.glob(os.path.join(R, "ab_*.json"))):
    who, p = re.match(r".*ab_(\w+)_(\d)\.json", f).groups()
    for n, r in rows(f).items():
        ab.setdefault(n, []).append((who + p, r.get("ours_tflops"), r.get("cublaslt_tflops"), r.get("config"), r.get("max_rel_diff")))
for n, v in ab.items():
    print("AB", n, v[0][3], " ".join(f"{w}:{o:.0f}/{c:.0f}/{d}" for w, o, c, _, d in v if o))
for tag in ("new", "base", "new_128x192"):
    for n, r in rows(os.path.join(R, f"power_{tag}.json")).items():
        p = r.get("power", {})
        print("POWER", tag, n, r.get("config"), p.get("error", ""))
        for rd in p.get("rounds", []):
            print("   " + "  |  ".join(f"{who} {rd[who]['tflops']:.0f} TF {rd[who]['watts']:.0f} W {rd[who]['gflop_per_joule']:.0f} GF/J {rd[who]['sm_mhz_median']:.0f} MHz {rd[who]['clock_event_reasons']}" for who in ("ours", "cublaslt")))
P
gzip -9 $R/kernels_gemm_cuda_test.log $R/smi.csv
tar -C $OUT -czf $OUT/s7_run2.tgz r && rm -rf $R
echo "total $(( $(date +%s)-T0 )) s"
