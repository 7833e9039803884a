#!/bin/bash
# session 9 run 2: branch epitrace with the scheduler's divisions replaced (FastDiv, band table,
# one lookup per tile on the done side). kernels_gemm_cuda_test; clock traces with the epilogue
# marks (trace build); A/B of main 666e38a's gpu_gemm_bench against the change, alternating
# processes (main, new, new, main), whole benchmark at --samples=5, then whole-wave shapes.
cd "$(dirname "$0")"
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b2.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
timeout 200 $B/bin/kernels_gemm_cuda_test > $R/test.log 2>&1
echo "test rc=$?" | tee -a $R/rc.txt
tail -3 $R/test.log; grep -E "FAILED|Failure" $R/test.log | head -20
for s in 4096x6336x1024 4096x6336x4096 4096x4096x4096; do
  timeout 60 $B/bin/gpu_gemm_bench_trace --samples=3 --shape=$s --config=bm128.bn192.s4.c2.r8.p0 --trace=$R/tr > $R/trace_$s.json 2> $R/trace_$s.err
done
for s in 8192x7168x2048; do
  timeout 60 $B/bin/gpu_gemm_bench_trace --samples=3 --shape=$s --trace=$R/tr > $R/trace_$s.json 2> $R/trace_$s.err
done
python3 $B/bin/trace_summary.py $R/tr*.bin > $R/trace_summary.txt 2>&1
grep "epilogue slices" $R/trace_summary.txt | head -12
i=0
for b in main new new main; do
  i=$((i+1))
  timeout 110 $B/bin/gpu_gemm_bench_$b --samples=5 > $R/all_${i}_$b.json 2> $R/all_${i}_$b.err
  echo "all $i $b rc=$?" | tee -a $R/rc.txt
done
for s in 4096x6336x1024 4096x6336x2048; do
  for b in main new; do
    timeout 60 $B/bin/gpu_gemm_bench_$b --samples=5 --shape=$s --config=bm128.bn192.s4.c2.r8.p0 > $R/ww_${s}_$b.json 2> $R/ww_${s}_$b.err
  done
done
python3 - $R <<'P' | tee $R/summary.txt
import json, sys, glob, os
R = sys.argv[1]
for f in sorted(glob.glob(os.path.join(R, "*.json"))):
    if 'trace_' in f: continue
    for line in open(f):
        line = line.strip().lstrip(",")
        if not line.startswith('{"name"'): continue
        try: r = json.loads(line)
        except Exception:
            try: r = json.loads(line[:-2])
            except Exception: continue
        print(os.path.basename(f), r["name"], r["config"].replace('.r8.p0',''), f"{r.get('ours_tflops', 0):.0f}/{r.get('cublaslt_tflops', 0):.0f} {r.get('ratio',0):.3f} rel={r.get('max_rel_diff')}")
P
tar -C $OUT -czf $OUT/s9_run2.tgz r && rm -rf $R
