#!/bin/bash
# session 11 run 8: where DeepGEMM's kernel and ours differ, by ncu (SpeedOfLight, compute and
# memory workload, warp states, launch stats; one launch each, clocks not locked): 8192^3 on
# 128x192 c2 (ours: main d88efd0's default; DeepGEMM: its "alt" config 9), 64x4096x7168 (ours
# 64x64 s8; DeepGEMM config 8, 64x32 s16) and 128x7168x2048 (ours 128x64 s8; DeepGEMM config 10,
# 64x128 s8). Then our small-M candidates and the unsplit kernel.
B=/tmp/b11; rm -rf $B; mkdir -p $B && tar -C $B --strip-components=1 -xJf .carry-s11/b1.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r8; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt
bash .carry-dg/run_dg.sh $R/dg_warm.jsonl --samples=1 9 > /dev/null 2>&1  # unpack the bundle
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy"
prof() {  # name, kernel regex, command...
  local n=$1 k=$2; shift 2
  timeout 120 ncu --clock-control none -k regex:$k --launch-skip 3 -c 1 $S -f -o /tmp/ncu_$n "$@" > $R/out_$n.txt 2> $R/ncu_$n.log
  echo "ncu $n rc=$?"
  ncu -i /tmp/ncu_$n.ncu-rep --page details --csv > $R/details_$n.csv 2>> $R/ncu_$n.log
}
export LD_LIBRARY_PATH=/tmp/dgb/lib
prof dg_8192 sm90_fp8_gemm_1d2d /tmp/dgb/bin/dg_bench --samples=1 9
prof dg_64x4096x7168 sm90_fp8_gemm_1d2d /tmp/dgb/bin/dg_bench --samples=1 8
prof dg_128x7168x2048 sm90_fp8_gemm_1d2d /tmp/dgb/bin/dg_bench --samples=1 10
export LD_LIBRARY_PATH=$B/lib
prof ours_8192 GemmFp8Kernel $B/bin/gpu_gemm_bench --shape=8192x8192x8192 --samples=1
prof ours_64x4096x7168 GemmFp8Kernel $B/bin/gpu_gemm_bench --only=nt_64x4096x7168 --samples=1
prof ours_128x7168x2048 GemmFp8Kernel $B/bin/gpu_gemm_bench --only=nt_128x7168x2048 --samples=1
for i in 1 2; do
  timeout 60 $B/bin/gpu_gemm_bench --only=nt_64x4096x7168,nt_128x7168x2048 --samples=5 \
    --candidates=m128+n64+s6+c1,m128+n64+s8+c1,m128+n128+s6+c1,m128+n64+s8+c2 > $R/small_cand_$i.json 2> $R/small_cand_$i.err
  timeout 60 $B/bin/gpu_gemm_bench --only=nt_64x4096x7168,nt_128x7168x2048 --samples=5 --unsplit > $R/small_unsplit_$i.json 2> $R/small_unsplit_$i.err
done
date -u >> $R/env.txt
gzip $R/details_*.csv
tar -C $OUT -czf $OUT/r8.tgz r8 && rm -rf $R
