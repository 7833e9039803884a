#!/bin/bash
# session 7 run 1: branch gemm12 (TMA scale loads, rebased on main a64e85e) verified and timed
# against main; then ours against cuBLASLt under NVML power soaks (main's binary, --power).
#   bin/gpu_gemm_bench_base: main + --power (uncommitted at the time, same kernel as a64e85e)
#   bin/gpu_gemm_bench, kernels_gemm_cuda_test, cuda_gemm_tune_test: branch gemm12 (bab22ff)
cd "$(dirname "$0")"
T0=$(date +%s)
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
t0=$(date +%s)
timeout 120 $B/bin/kernels_gemm_cuda_test --gtest_brief=1 > $R/kernels_gemm_cuda_test.log 2>&1; echo "kernels_gemm_cuda_test rc=$?" | tee -a $R/rc.txt
timeout 30 $B/bin/cuda_gemm_tune_test --gtest_brief=1 > $R/cuda_gemm_tune_test.log 2>&1; echo "cuda_gemm_tune_test rc=$?" | tee -a $R/rc.txt
echo "tests took $(( $(date +%s)-t0 )) s" | tee -a $R/rc.txt
tail -3 $R/kernels_gemm_cuda_test.log; tail -2 $R/cuda_gemm_tune_test.log
grep -E "^\[  FAILED" $R/kernels_gemm_cuda_test.log | head -10 | cut -c1-160
fault=0; grep -qE "illegal|: 715|cudaError" $R/kernels_gemm_cuda_test.log && fault=1
if [ $fault = 0 ]; then
  # A B A B: every case once per process, then the 128x192 cases again.
  for pass in 1 2; do
    for who in base new; do
      bin=gpu_gemm_bench; [ $who = base ] && bin=gpu_gemm_bench_base
      only=""; [ $pass = 2 ] && only="--only=nt_8192^3,nt_4096x7168x16384,m_grouped,tn_"
      now=$(date +%s)
      timeout 75 stdbuf -oL $B/bin/$bin --samples=5 $only > $R/ab_${who}_$pass.json 2> $R/ab_${who}_$pass.err
      echo "ab $who $pass rc=$? took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt
    done
  done
fi
# Power: ours (main) and cuBLASLt, 2 s soaks, twice in turn.
now=$(date +%s)
timeout 120 stdbuf -oL $B/bin/gpu_gemm_bench_base --samples=5 --power=2 --only=nt_8192^3,nt_4096^3,nt_4096x7168x16384,nt_8192x7168x2048 > $R/power.json 2> $R/power.err
echo "power rc=$? took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt
kill $SMI
python3 - $R <<'P' | tee $R/summary.txt
import json, sys, glob, os, re
R = sys.argv[1]
def rows(f):
    out = {}
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
for n, r in rows(os.path.join(R, "power.json")).items():
    p = r.get("power", {})
    print("POWER", n, r.get("config"), "limit", p.get("limit_watts"), p.get("error", ""))
    for rd in p.get("rounds", []):
        for who in ("ours", "cublaslt"):
            s = rd[who]
            print(f"   {who:9s} {s['tflops']:.0f} TFLOP/s {s['watts']:.0f} W {s['gflop_per_joule']:.0f} GFLOP/J {s['sm_mhz_median']:.0f} MHz reasons {s['clock_event_reasons']}")
P
tar -C $OUT -czf $OUT/s7_run1.tgz r && rm -rf $R
echo "total $(( $(date +%s)-T0 )) s"
