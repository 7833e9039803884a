set -u
B=/tmp/ab7; rm -rf $B; mkdir -p $B && tar -C $B --strip-components=1 -xJf .carry-s12/ab7.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/ab7; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
for v in pre1 pre2; do timeout 200 $B/bin/kernels_gemm_cuda_test_$v > $R/test_$v.log 2>&1; echo "test $v rc=$?"; tail -1 $R/test_$v.log; gzip $R/test_$v.log; done
ONLY=--only=nt_4096^3,nt_8192^3,nt_16384x8192x5120,nt_8192x7168x2048,nt_4096x2112x7168,nt_4096x7168x16384
i=0
for b in head pre1 pre2 pre2 pre1 head; do
  i=$((i+1)); timeout 120 $B/bin/gpu_gemm_bench_$b --samples=5 $ONLY > $R/all_${i}_$b.json 2> $R/all_${i}_$b.err; echo "all $i $b rc=$?"
done
date -u >> $R/env.txt
python3 bench/gpu_gemm/gemm_summary.py --ab _head _pre1 $R/all_*.json | tee $R/ab.txt
python3 bench/gpu_gemm/gemm_summary.py --ab _head _pre2 $R/all_*.json | tee -a $R/ab.txt
tar -C $OUT -czf $OUT/ab7.tgz ab7 && rm -rf $R
