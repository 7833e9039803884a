#!/bin/bash
# session 11 run 9: the TMA-scale 128x192 loop (ConsumerLoopSingle) without its ring of turns (branch
# noturn, -DKD_NO_TURNS; issue-ahead kept) against main c83274a (gpu_gemm_bench = run 7's s2 build).
# kernels_gemm_cuda_test of nt, then gpu_gemm_bench --samples=5 on the six TMA-scale shapes: main, nt, nt, main.
B=/tmp/b15; rm -rf $B; mkdir -p $B && tar -C $B --strip-components=1 -xJf .carry-s11/b5.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r9; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
timeout 150 $B/bin/kernels_gemm_cuda_test_nt > $R/test_nt.log 2>&1; echo "test_nt rc=$?" | tee -a $R/rc.txt
tail -1 $R/test_nt.log; grep -E "FAILED|Failure" $R/test_nt.log | head -10
i=0
for b in main nt nt main; do
  i=$((i+1))
  bin=$B/bin/gpu_gemm_bench; [ $b = main ] || bin=${bin}_$b
  timeout 110 $bin --samples=5 --only=4096^3,8192^3,16384x8192,8192x7168,4096x2112,4096x7168x16384 > $R/all_${i}_$b.json 2> $R/tn_${i}_$b.err
  echo "all $i $b rc=$?" | tee -a $R/rc.txt
done
date -u >> $R/env.txt
python3 bench/gpu_gemm/gemm_summary.py --ab _main _nt $R/all_*.json > $R/ab.txt 2>&1; cat $R/ab.txt
tar -C $OUT -czf $OUT/r9.tgz r9 && rm -rf $R
