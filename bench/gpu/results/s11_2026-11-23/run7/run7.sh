#!/bin/bash
# session 11 run 7: branch simple 2: the loop without turns or issue-ahead (branch simple,
# (DeepGEMM-like) for every instantiation but the TMA-scale 128x192 one (dense NT), which keeps main's loop; against main d88efd0.
# kernels_gemm_cuda_test of s2, then gpu_gemm_bench --samples=5: main, s2, s2, main.
B=/tmp/b14; rm -rf $B; mkdir -p $B && tar -C $B --strip-components=1 -xJf .carry-s11/b4.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r7; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
timeout 150 $B/bin/kernels_gemm_cuda_test_s2 > $R/test_s2.log 2>&1; echo "test_s2 rc=$?" | tee -a $R/rc.txt
tail -1 $R/test_s2.log; grep -E "FAILED|Failure" $R/test_s2.log | head -10
i=0
for b in main s2 s2 main; do
  i=$((i+1))
  bin=$B/bin/gpu_gemm_bench; [ $b = main ] || bin=${bin}_$b
  timeout 110 $bin --samples=5 > $R/all_${i}_$b.json 2> $R/tn_${i}_$b.err
  echo "all $i $b rc=$?" | tee -a $R/rc.txt
done
date -u >> $R/env.txt
python3 bench/gpu_gemm/gemm_summary.py --ab _main _s2 $R/all_*.json > $R/ab.txt 2>&1; cat $R/ab.txt
tar -C $OUT -czf $OUT/r7.tgz r7 && rm -rf $R
