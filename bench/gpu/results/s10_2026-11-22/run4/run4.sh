#!/bin/bash
# session 10 run 4: the look-ahead of the next work item's K blocks (branch ahead) against main
# 876b041's gpu_gemm_bench: its kernels_gemm_cuda_test, then main, ahead, ahead, main, and the
# whole-wave shapes (K = 1024, 2048) for both.
cd "$(dirname "$0")"
B=/tmp/b4; rm -rf $B; mkdir -p $B && tar -C $B --strip-components=1 -xJf b4.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r4; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
timeout 150 $B/bin/kernels_gemm_cuda_test_ahead > $R/test_ahead.log 2>&1; echo "test_ahead rc=$?" | tee -a $R/rc.txt
tail -1 $R/test_ahead.log; grep -E "FAILED|Failure" $R/test_ahead.log | head -10
cuobjdump -sass $B/bin/gpu_gemm_bench_ahead > /tmp/gemm.sass 2>&1
awk '/Function :/ {name=$3} /QGMMA/ {q[name]++} /LDL|STL/ {l[name]++}
     END {for (f in q) print "gemm", f, "QGMMA", q[f], "LDL/STL", l[f] + 0}' /tmp/gemm.sass | sed 's/_ZN2kd9cuda_gemm[^G]*GemmFp8Kernel//' | sort > $R/sass.txt
awk '{print $NF}' $R/sass.txt | sort | uniq -c
i=0
for b in main ahead ahead main; do
  i=$((i+1)); s=$(date +%s)
  timeout 100 $B/bin/gpu_gemm_bench_$b --samples=5 > $R/all_${i}_$b.json 2> $R/all_${i}_$b.err
  echo "all $i $b rc=$? $(( $(date +%s) - s ))s" | tee -a $R/rc.txt
done
for s in 4096x6336x1024 4096x6336x2048; do
  for b in main ahead; do
    timeout 60 $B/bin/gpu_gemm_bench_$b --samples=5 --shape=$s --config=bm128.bn192.s4.c2.r8.p0 > $R/ww_${s}_$b.json 2> $R/ww_${s}_$b.err
  done
done
date -u >> $R/env.txt
tar -C $OUT -czf $OUT/r4.tgz r4 && rm -rf $R
