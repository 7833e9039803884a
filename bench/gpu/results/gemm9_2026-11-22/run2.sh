#!/bin/bash
# gemm9 run 2: sparser yield patterns (every 4th/6th/8th/16th promotion FFMA) against main's
# kernel, each process against its own cuBLASLt; main's kernel first and last for the spread.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
O=$OUT/r2; mkdir -p $O
T0=$(date +%s)
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv; } > $O/env.txt 2>&1
P="python3 sass_patch.py"
B=bin/gpu_gemm_bench
VARIANTS="every:4 every:6 every:8 every:16"
for v in $VARIANTS; do
  $P patch $B bin/bench.$v --pattern=$v --report=$O/report_$v.json >> $O/patch.log 2>&1 || echo "patch $v failed" >> $O/patch.log
done
chmod +x bin/bench.*
cat $O/patch.log
cuobjdump -sass $B > /tmp/orig.sass 2>&1
for v in $VARIANTS; do
  ( cuobjdump -sass bin/bench.$v > /tmp/$v.sass 2>&1; $P verify /tmp/orig.sass /tmp/$v.sass --report=$O/report_$v.json > $O/verify_$v.txt 2>&1 ) &
done
wait
cat $O/verify_*.txt
echo "verify done at +$(( $(date +%s) - T0 ))s"
ONLY="nt_4096^3,nt_8192^3,nt_16384,nt_8192x7168,nt_4096x2112,nt_4096x24576,nt_4096x7168"
i=0
for v in orig every:8 every:4 every:16 every:6 orig; do
  i=$((i+1))
  if [ $(( $(date +%s) - T0 )) -gt 215 ]; then echo "skip $i $v (time)"; continue; fi
  bin=$B; [ $v != orig ] && bin=bin/bench.$v
  timeout 70 ./$bin --only=$ONLY --samples=5 > $O/bench_${i}_$v.json 2> $O/bench_${i}_$v.err
  echo "bench $i $v rc=$? at +$(( $(date +%s) - T0 ))s"
done
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $O/env.txt 2>&1
python3 - $O <<'PY'
import json,sys,glob,math,os
rows={}
for f in sorted(glob.glob(sys.argv[1]+'/bench_*.json')):
    tag=os.path.basename(f)[6:-5]
    try: d=json.load(open(f))
    except Exception as e: print(tag,'unreadable',e); continue
    rs=[];ts=[]
    for r in d['results']:
        rows.setdefault(r['name'],{})[tag]=(r.get('ours_tflops',0),r.get('cublaslt_tflops',0),r.get('ratio',0),r.get('max_rel_diff'))
        rs.append(r['ratio']); ts.append(r['ours_tflops'])
    g=lambda v: math.exp(sum(map(math.log,v))/len(v))
    print(f"{tag:12s} geomean ratio {g(rs):.4f} ours {g(ts):.1f} TFLOP/s ({len(rs)} shapes)")
for n,v in rows.items():
    print(n, ' '.join(f"{t}:{x[0]:.0f}/{x[1]:.0f}={x[2]:.3f}(d{x[3]})" for t,x in v.items()))
PY
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
