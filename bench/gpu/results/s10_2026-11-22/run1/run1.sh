#!/bin/bash
# session 10 run 1: per-warp TMA stores (ws) and + stmatrix writes (sm) against main 238d7bb.
cd "$(dirname "$0")"
B=/tmp/b1; rm -rf $B; mkdir -p $B && tar -C $B --strip-components=1 -xJf b1.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
timeout 150 $B/bin/kernels_gemm_cuda_test_sm > $R/test_sm.log 2>&1; echo "test_sm rc=$?" | tee -a $R/rc.txt
tail -1 $R/test_sm.log; grep -E "FAILED|Failure" $R/test_sm.log | head -10
cuobjdump -sass $B/bin/gpu_gemm_bench_sm > /tmp/gemm.sass 2>&1
awk '/Function :/ {name=$3} /QGMMA/ {q[name]++} /LDL|STL/ {l[name]++} /STSM/ {m[name]++}
     END {for (f in q) print "gemm", f, "QGMMA", q[f], "LDL/STL", l[f] + 0, "STSM", m[f] + 0}' /tmp/gemm.sass | sed 's/_ZN2kd9cuda_gemm[^G]*GemmFp8Kernel//' | sort > $R/sass.txt
cat $R/sass.txt
i=0
for b in main sm ws ws sm main; do
  i=$((i+1)); s=$(date +%s)
  timeout 100 $B/bin/gpu_gemm_bench_$b --samples=5 > $R/all_${i}_$b.json 2> $R/all_${i}_$b.err
  echo "all $i $b rc=$? $(( $(date +%s) - s ))s" | tee -a $R/rc.txt
done
date -u >> $R/env.txt
