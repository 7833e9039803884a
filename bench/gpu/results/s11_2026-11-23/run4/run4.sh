#!/bin/bash
# session 11 run 4: per-row B (TN) promotion with its first four column-scale pairs read before
# the wgmma wait (branch tnpre) against main d88efd0: kernels_gemm_cuda_test of tnpre, then
# gpu_gemm_bench --only=tn_wgrad --samples=5, main / tnpre alternating, three each.
B=/tmp/b12; rm -rf $B; mkdir -p $B && tar -C $B --strip-components=1 -xJf .carry-s11/b2.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r4; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
timeout 150 $B/bin/kernels_gemm_cuda_test_tnpre > $R/test_tnpre.log 2>&1; echo "test_tnpre rc=$?" | tee -a $R/rc.txt
tail -1 $R/test_tnpre.log; grep -E "FAILED|Failure" $R/test_tnpre.log | head -10
i=0
for b in main tnpre main tnpre main tnpre; do
  i=$((i+1))
  bin=$B/bin/gpu_gemm_bench; [ $b = main ] || bin=${bin}_$b
  timeout 60 $bin --only=tn_wgrad --samples=5 > $R/tn_${i}_$b.json 2> $R/tn_${i}_$b.err
  echo "tn $i $b rc=$?" | tee -a $R/rc.txt
done
date -u >> $R/env.txt
python3 bench/gpu_gemm/gemm_summary.py --ab _main _tnpre $R/tn_*.json > $R/ab.txt 2>&1; cat $R/ab.txt
tar -C $OUT -czf $OUT/r4.tgz r4 && rm -rf $R
