#!/bin/bash
# session 11 run 3: TN (wgrad) on the other tiles: main d88efd0's gpu_gemm_bench (run 1's bundle)
# with candidates 192x128 (three consumer warpgroups of 64x128) in clusters of 1 and 2, and
# 128x192 c2, against the heuristic's 128x192 c1, in two processes.
B=/tmp/b11; rm -rf $B; mkdir -p $B && tar -C $B --strip-components=1 -xJf .carry-s11/b1.tar.xz
export LD_LIBRARY_PATH=$B/lib
O=$OUT/r3; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/env.txt 2>&1
date -u >> $O/env.txt
for i in 1 2; do
  timeout 120 $B/bin/gpu_gemm_bench --only=tn_wgrad,m_grouped --samples=5 \
    --candidates=m192+n128+s4+c1,m192+n128+s4+c2,m128+n192+s4+c2,m128+n192+s4+c1 > $O/cand_$i.json 2> $O/cand_$i.err
  echo "cand $i rc=$?"
done
date -u >> $O/env.txt
python3 bench/gpu_gemm/gemm_summary.py $O/cand_1.json $O/cand_2.json > $O/summary.txt 2>&1; cat $O/summary.txt
tar -C $OUT -czf $OUT/r3.tgz r3 && rm -rf $O
