#!/bin/bash
# gemm7 run 1: clock traces + ncu of ours and cuBLASLt, SASS summary.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
B=./bin/gpu_gemm_bench
mkdir -p $OUT/tr
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
date -u >> $OUT/smi.txt
# 1. timings + traces (default config, c1 candidate)
$B --only=nt_8192^3,nt_4096x7168x16384 --samples=5 --candidates=c1,v1,v1+c1 --trace=$OUT/tr/t > $OUT/bench_trace.json 2> $OUT/bench_trace.err
cat $OUT/bench_trace.json
# 2. SASS summary
cuobjdump --dump-sass $B > /tmp/sass.txt 2>/dev/null
awk '/Function :/ {f=$3} /QGMMA/ {q[f]++} /LDL|STL/ {l[f]++} /WARPGROUP.DEPBAR/ {d[f]++} END {for (k in q) print k, "QGMMA", q[k], "LDLSTL", l[k]+0, "DEPBAR", d[k]+0}' /tmp/sass.txt > $OUT/sass_summary.txt
grep -A400000 "Function : .*GemmFp8KernelILi128ELi192ELi4ELi2E" /tmp/sass.txt | awk 'NR>1 && /Function :/ {exit} {print}' > $OUT/tr/sass_192c2.txt
# 3. ncu
M=sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,lts__t_bytes.sum.per_second,lts__t_sectors_srcunit_tex.sum,dram__bytes_read.sum.per_second,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum,sm__inst_executed_pipe_tensor_op_gmma.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum
for s in nt_8192^3 nt_4096x7168x16384; do
  n=$(echo $s | tr -d '^')
  timeout 150 ncu --clock-control none -k regex:"GemmFp8Kernel|nvjet" -c 2 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section SchedulerStats --section WarpStateStats --section SourceCounters --section LaunchStats \
    --metrics $M -o /tmp/ncu_$n -f $B --only=$s --samples=1 > $OUT/tr/ncu_${n}_log.txt 2>&1
  ncu -i /tmp/ncu_$n.ncu-rep --page details --csv > $OUT/tr/ncu_${n}_details.csv 2>&1
  ncu -i /tmp/ncu_$n.ncu-rep --page raw --csv > $OUT/tr/ncu_${n}_raw.csv 2>&1
  ncu -i /tmp/ncu_$n.ncu-rep --page source --csv --print-source sass -k regex:GemmFp8 > $OUT/tr/ncu_${n}_src_ours.csv 2>&1
  cp /tmp/ncu_$n.ncu-rep $OUT/tr/ 2>/dev/null
done
cd $OUT && tar czf tr.tgz tr && rm -rf tr
ls -la $OUT
grep -E "gmma_cycles_active|sm__cycles_elapsed.avg.per_second|Duration|lts__t_bytes.sum.per_second" $OUT/../ 2>/dev/null | head -0
