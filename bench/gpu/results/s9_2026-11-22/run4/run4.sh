#!/bin/bash
# session 9 run 4: the change as it will land (FastDiv scheduler; 128-wide tiles keep the done
# tile's Tile; autotune kernel version 10): kernels_gemm_cuda_test, cuda_gemm_tune_test, SASS
# counts, then main 666e38a's gpu_gemm_bench against it, alternating (main, final, final, main),
# and the whole-wave shapes.
cd "$(dirname "$0")"
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b4.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
for t in kernels_gemm_cuda_test_final cuda_gemm_tune_test; do
  timeout 200 $B/bin/$t > $R/$t.log 2>&1
  echo "$t rc=$?" | tee -a $R/rc.txt
  tail -1 $R/$t.log; grep -E "FAILED|Failure" $R/$t.log | head -10
done
cuobjdump -sass $B/bin/gpu_gemm_bench_final > /tmp/gemm.sass 2>&1
awk '/Function :/ {name=$3} /QGMMA/ {q[name]++} /LDL|STL/ {l[name]++}
     END {for (f in q) print "gemm", f, "QGMMA", q[f], "LDL/STL", l[f] + 0}' /tmp/gemm.sass | sed 's/_ZN2kd9cuda_gemm[^G]*GemmFp8Kernel//' | sort > $R/sass.txt
cat $R/sass.txt
i=0
for b in main final final main; do
  i=$((i+1))
  timeout 110 $B/bin/gpu_gemm_bench_$b --samples=5 > $R/all_${i}_$b.json 2> $R/all_${i}_$b.err
  echo "all $i $b rc=$?" | tee -a $R/rc.txt
done
for s in 4096x6336x1024 4096x6336x2048; do
  for b in main final; do
    timeout 60 $B/bin/gpu_gemm_bench_$b --samples=5 --shape=$s --config=bm128.bn192.s4.c2.r8.p0 > $R/ww_${s}_$b.json 2> $R/ww_${s}_$b.err
  done
done
python3 ./summ.py $R | tee $R/summary.txt
tar -C $OUT -czf $OUT/s9_run4.tgz r && rm -rf $R
