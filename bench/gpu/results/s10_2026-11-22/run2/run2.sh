#!/bin/bash
# session 10 run 2: main 238d7bb's gpu_gemm_bench with candidates: is the heuristic's tile still
# the best after session 9's scheduler change?
cd "$(dirname "$0")"
B=/tmp/b1; rm -rf $B; mkdir -p $B && tar -C $B --strip-components=1 -xJf b1.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt
C=m128+n128+s6+c1,m128+n128+s6+c2,m128+n128+s5+c2,m192+n128+s4+c2,m128+n192+s4+c2,m128+n192+s4+c1
for i in 1 2; do
  s=$(date +%s)
  timeout 250 $B/bin/gpu_gemm_bench_main --samples=5 --candidates=$C > $R/cand_$i.json 2> $R/cand_$i.err
  echo "cand $i rc=$? $(( $(date +%s) - s ))s" | tee -a $R/rc.txt
done
date -u >> $R/env.txt
tar -C $OUT -czf $OUT/r2.tgz r2 && rm -rf $R
