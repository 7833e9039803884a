#!/bin/bash
# session 11 run 1: the promotion FFMAs' yield hints set after compilation (bench/gpu_gemm/
# sass_patch.py, every 4th / every 8th FFMA of each unyielded promotion run) on main d88efd0's
# kernel, built with -compress-mode=none. kernels_gemm_cuda_test of the every:4 build, the SASS
# verify, then gpu_gemm_bench --samples=5 in alternating processes: main, e4, e8, e4, main.
B=/tmp/b11; rm -rf $B; mkdir -p $B && tar -C $B --strip-components=1 -xJf .carry-s11/b1.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
s=$(date +%s)
timeout 150 $B/bin/kernels_gemm_cuda_test_e4 > $R/test_e4.log 2>&1; echo "test_e4 rc=$? $(( $(date +%s) - s ))s" | tee -a $R/rc.txt
tail -1 $R/test_e4.log; grep -E "FAILED|Failure" $R/test_e4.log | head -10
cuobjdump -sass $B/bin/gpu_gemm_bench > /tmp/orig.sass 2>&1
cuobjdump -sass $B/bin/gpu_gemm_bench_e4 > /tmp/e4.sass 2>&1
python3 bench/gpu_gemm/sass_patch.py verify /tmp/orig.sass /tmp/e4.sass --report=$B/e4.json > $R/verify_e4.txt 2>&1; echo "verify rc=$?" | tee -a $R/rc.txt
head -5 $R/verify_e4.txt
awk '/Function :/ {name=$3} /QGMMA/ {q[name]++} /LDL|STL/ {l[name]++}
     END {for (f in q) print "gemm", f, "QGMMA", q[f], "LDL/STL", l[f] + 0}' /tmp/e4.sass | sed 's/_ZN2kd9cuda_gemm[^G]*GemmFp8Kernel//' | sort > $R/sass.txt
awk '{print $NF}' $R/sass.txt | sort | uniq -c
i=0
for b in main e4 e8 e4 main; do
  i=$((i+1)); s=$(date +%s)
  bin=$B/bin/gpu_gemm_bench; [ $b = main ] || bin=${bin}_$b
  timeout 100 $bin --samples=5 > $R/all_${i}_$b.json 2> $R/all_${i}_$b.err
  echo "all $i $b rc=$? $(( $(date +%s) - s ))s" | tee -a $R/rc.txt
done
date -u >> $R/env.txt
python3 bench/gpu_gemm/gemm_summary.py --ab _main _e4 $R/all_*.json > $R/ab_e4.txt 2>&1; cat $R/ab_e4.txt
python3 bench/gpu_gemm/gemm_summary.py --ab _main _e8 $R/all_*.json > $R/ab_e8.txt 2>&1; cat $R/ab_e8.txt
tar -C $OUT -czf $OUT/r1.tgz r1 && rm -rf $R
