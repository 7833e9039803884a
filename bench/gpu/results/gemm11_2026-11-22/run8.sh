#!/bin/bash
# gemm11 run 8: ncu sections of the floor loop (tensor-map tiles, producer 5) and of the real
# kernel's one-wave probe (128x192, c1), for a metric-by-metric comparison.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
B=./bin/gpu_gemm_bench
F=./bin/gemm_floor_bench
O=$OUT/r8; mkdir -p $O
SEC="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats --section InstructionStats --section LaunchStats --section Occupancy"
timeout 150 ncu --clock-control none --kernel-name-base mangled -k regex:FloorKernelILi2ELi192ELi3ELi5E -c 1 $SEC \
  -o /tmp/n_floor -f $F --blocks=8192 --reps=1 --random > $O/log_floor.txt 2>&1
ncu -i /tmp/n_floor.ncu-rep --page raw --csv > $O/raw_floor.csv 2>> $O/log_floor.txt
timeout 150 ncu --clock-control none -k regex:GemmFp8Kernel -c 1 $SEC \
  -o /tmp/n_probe -f $B --shape=8448x384x32768 --config=bm128.bn192.s4.c1.r8.p0 --samples=1 > $O/log_probe.txt 2>&1
ncu -i /tmp/n_probe.ncu-rep --page raw --csv > $O/raw_probe.csv 2>> $O/log_probe.txt
wc -c $O/*
cd $OUT && tar czf r8.tgz r8 && rm -rf r8
