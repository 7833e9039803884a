#!/bin/bash
# gemm9 run 1: yield hints on the promotion FFMAs (bench/gpu_gemm/sass_patch.py), patched on the
# device, checked against cuobjdump, timed against main's kernel, each process against its own
# cuBLASLt; then kernels_gemm_cuda_test on two patched test binaries.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
O=$OUT/r1; mkdir -p $O
T0=$(date +%s)
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv; python3 --version; which cuobjdump; } > $O/env.txt 2>&1
cat $O/env.txt
P="python3 sass_patch.py"
B=bin/gpu_gemm_bench
VARIANTS="alt1 all every:4 alt0"
for v in $VARIANTS; do
  $P patch $B bin/bench.$v --pattern=$v --report=$O/report_$v.json >> $O/patch.log 2>&1 || echo "patch $v failed" >> $O/patch.log
done
for v in all alt1; do
  $P patch bin/kernels_gemm_cuda_test bin/test.$v --pattern=$v --report=$O/treport_$v.json >> $O/patch.log 2>&1
done
chmod +x bin/bench.* bin/test.*
cat $O/patch.log
$P scan $B > $O/scan_orig.txt 2>&1
$P scan bin/bench.alt1 > $O/scan_alt1.txt 2>&1
# SASS of the original and of each patched bench, compared (in parallel, before any timing).
cuobjdump -sass $B > /tmp/orig.sass 2>&1
for v in $VARIANTS; do
  ( cuobjdump -sass bin/bench.$v > /tmp/$v.sass 2>&1; $P verify /tmp/orig.sass /tmp/$v.sass --report=$O/report_$v.json > $O/verify_$v.txt 2>&1 ) &
done
wait
grep -h "" $O/verify_*.txt | head -30
grep -m3 -B2 -A8 "FFMA" /tmp/orig.sass | head -0
awk '/Function :/ {f=$3} /WARPGROUP.DEPBAR|FFMA/ && f ~ /ILi128ELi192ELi4ELi2E/ {print}' /tmp/orig.sass | head -60 > $O/sass_128x192c2_orig_head.txt
awk '/Function :/ {f=$3} /WARPGROUP.DEPBAR|FFMA/ && f ~ /ILi128ELi192ELi4ELi2E/ {print}' /tmp/alt1.sass | head -60 > $O/sass_128x192c2_alt1_head.txt
echo "verify done at +$(( $(date +%s) - T0 ))s"
ONLY="nt_4096^3,nt_8192^3,nt_16384,nt_8192x7168,nt_4096x2112,nt_4096x24576,nt_4096x7168,nt_64x4096"
i=0
for v in orig alt1 all every:4 alt0 orig alt1; do
  i=$((i+1))
  if [ $(( $(date +%s) - T0 )) -gt 160 ]; then echo "skip $i $v (time)"; continue; fi
  bin=$B; [ $v != orig ] && bin=bin/bench.$v
  timeout 80 ./$bin --only=$ONLY --samples=5 > $O/bench_${i}_$v.json 2> $O/bench_${i}_$v.err
  echo "bench $i $v rc=$? at +$(( $(date +%s) - T0 ))s"
done
# Correctness of patched kernels against the CPU backend (both at once: CPU-bound references).
( timeout 90 bin/test.all --gtest_brief=1 > $O/test_all.log 2>&1; echo "rc=$?" >> $O/test_all.log ) &
( timeout 90 bin/test.alt1 --gtest_brief=1 > $O/test_alt1.log 2>&1; echo "rc=$?" >> $O/test_alt1.log ) &
wait
grep -h -E "tests ran|PASSED|FAILED|rc=" $O/test_*.log
echo "tests done at +$(( $(date +%s) - T0 ))s"
python3 - $O <<'PY'
import json,sys,glob,math,os
rows={}
for f in sorted(glob.glob(sys.argv[1]+'/bench_*.json')):
    tag=os.path.basename(f)[6:-5]
    try: d=json.load(open(f))
    except Exception as e: print(tag,'unreadable',e); continue
    rs=[]
    for r in d['results']:
        rows.setdefault(r['name'],{})[tag]=(r.get('ours_tflops',0),r.get('cublaslt_tflops',0),r.get('ratio',0),r.get('max_rel_diff'))
        if r['name']!='nt_64x4096x7168': rs.append(r['ratio'])
    print(f"{tag:12s} geomean(7 large NT) {math.exp(sum(map(math.log,rs))/len(rs)):.4f}")
for n,v in rows.items():
    print(n, ' '.join(f"{t}:{x[0]:.0f}/{x[1]:.0f}={x[2]:.3f}(d{x[3]})" for t,x in v.items()))
PY
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
