#!/bin/bash
# gemm7 run 3 (final): tests, full benchmark (GEMM_SAMPLES=5), SASS, clean ncu, 128x128 trace.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
O=$OUT/r3; mkdir -p $O
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv; } > $O/env.txt 2>&1
for t in kernels_gemm_cuda_test cuda_gemm_tune_test; do
  echo "=== $t" >> $O/tests.log
  timeout 150 ./bin/$t --gtest_brief=1 >> $O/tests.log 2>&1
  echo "=== $t rc=$?" >> $O/tests.log
done
grep -E "===|PASSED|FAILED" $O/tests.log
timeout 200 ./bin/gpu_gemm_bench --samples=${GEMM_SAMPLES:-5} > $O/gemm.json 2>> $O/tests.log
echo "=== gpu_gemm_bench rc=$?" | tee -a $O/tests.log
cuobjdump -sass bin/gpu_gemm_bench > /tmp/gemm.sass 2>&1
awk '/Function :/ {name=$3} /QGMMA/ {q[name]++} /LDL|STL/ {l[name]++} /WARPGROUP.DEPBAR/ {d[name]++}
     END {for (f in q) print "gemm", f, "QGMMA", q[f], "LDL/STL", l[f] + 0, "DEPBAR", d[f] + 0}' /tmp/gemm.sass > $O/gemm_sass.txt
cuobjdump --dump-resource-usage bin/gpu_gemm_bench 2>&1 | grep -A1 GemmFp8 > $O/gemm_resources.txt
M=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum.per_second,gpu__time_duration.sum,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active
timeout 90 ncu --clock-control none -k regex:"GemmFp8Kernel|nvjet" -c 2 --section WarpStateStats --metrics $M \
  -o /tmp/ncu3 -f ./bin/gpu_gemm_bench --only=nt_8192^3 --samples=1 > $O/ncu_log.txt 2>&1
ncu -i /tmp/ncu3.ncu-rep --page raw --csv > $O/ncu_8192_raw.csv 2>&1
timeout 60 ./bin/gpu_gemm_bench_traced --only=nt_8192^3 --samples=1 --config=bm128.bn128.s6.c1.r8.p0 --candidates=s4 --trace=$O/tr128 > $O/traced128.json 2>&1
cd $OUT && tar czf r3.tgz r3 && cp r3/gemm.json gemm.json && cp r3/tests.log tests.log && rm -rf r3
python3 - $OUT/gemm.json <<'PY'
import json,sys,math
d=json.load(open(sys.argv[1])); rs=[]
for r in d['results']:
    print(f"{r['name']:28s} {r['config']:24s} ours {r.get('ours_tflops',0):7.1f} lt {r.get('cublaslt_tflops',0):7.1f} ratio {r.get('ratio',0):.3f} d={r.get('max_rel_diff')}")
    if r['name'].startswith('nt_'): rs.append(r['ratio'])
print("geomean NT", math.exp(sum(map(math.log,rs))/len(rs)), len(rs))
PY
