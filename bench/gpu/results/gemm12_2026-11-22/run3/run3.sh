#!/bin/bash
# gemm12 run 3: kernels_gemm_cuda_test, cuda_gemm_tune_test, then gpu_gemm_bench --samples=5 on
# every case, main 228b1b1 (base) and gemm12 78b9320 (new) alternating A B A B, one process
# each; the second pair is cut at the run's deadline (device budget).
cd "$(dirname "$0")"
T0=$(date +%s)
tar -xJf gemm12-bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt
sha256sum bin/* >> $R/env.txt
t0=$(date +%s)
timeout 120 ./bin/kernels_gemm_cuda_test --gtest_brief=1 > $R/kernels_gemm_cuda_test.log 2>&1; echo "kernels_gemm_cuda_test rc=$?" | tee -a $R/rc.txt
timeout 30 ./bin/cuda_gemm_tune_test --gtest_brief=1 > $R/cuda_gemm_tune_test.log 2>&1; echo "cuda_gemm_tune_test rc=$?" | tee -a $R/rc.txt
echo "tests took $(( $(date +%s)-t0 )) s" | tee -a $R/rc.txt
tail -2 $R/kernels_gemm_cuda_test.log; tail -2 $R/cuda_gemm_tune_test.log
grep -E "^\[  FAILED" $R/kernels_gemm_cuda_test.log | head -10 | cut -c1-160
left=4
if grep -qE "illegal|: 715|cudaError" $R/kernels_gemm_cuda_test.log; then echo "CUDA fault: no bench" | tee -a $R/rc.txt; left=0; fi
for i in $( [ $left -gt 0 ] && echo 1 2 ); do
  for who in base new; do
    bin=gpu_gemm_bench; [ $who = base ] && bin=gpu_gemm_bench_base
    now=$(date +%s); lim=$(( (T0 + 262 - now) / left )); [ $lim -gt 80 ] && lim=80
    if [ $lim -gt 5 ]; then
      timeout $lim stdbuf -oL ./bin/$bin --samples=5 > $R/bench_${who}_$i.json 2> $R/bench_${who}_$i.err
      echo "bench $who $i rc=$? limit $lim took $(( $(date +%s)-now )) s" | tee -a $R/rc.txt
    fi
    left=$((left-1))
  done
done
python3 - $R <<'P' | tee $R/summary.txt
import json, sys, glob, os, re
R = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(R, "bench_*.json"))):
    who, i = re.match(r".*bench_(\w+)_(\d)\.json", f).groups()
    for line in open(f):
        line = line.strip().lstrip(",")
        if line.endswith("]}"): line = line[:-2]
        if not line.startswith('{"name"'): continue
        try: r = json.loads(line)
        except Exception: continue
        rows.setdefault(r["name"], {})[(who, i)] = (r.get("ours_tflops"), r.get("cublaslt_tflops"), r.get("config"), r.get("max_rel_diff"))
for name, d in rows.items():
    print(name, d.get(("new","1"), (0,0,""))[2], " ".join(f"{w}{i}:{v[0]}/{v[1]}/{v[3]}" for (w, i), v in sorted(d.items())))
P
tar -C $OUT -czf $OUT/gemm12_run3.tgz r && rm -rf $R
echo "total $(( $(date +%s)-T0 )) s"
