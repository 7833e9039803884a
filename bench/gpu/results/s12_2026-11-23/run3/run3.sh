set -u
B=/tmp/ab3; rm -rf $B; mkdir -p $B && tar -C $B --strip-components=1 -xJf .carry-s12/ab3.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/ab3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
timeout 200 $B/bin/kernels_gemm_cuda_test_v3s > $R/test_v3s.log 2>&1; echo "test v3s rc=$?"; tail -1 $R/test_v3s.log
ONLY=--only=nt_4096^3,nt_8192^3,nt_16384x8192x5120,nt_8192x7168x2048,nt_4096x2112x7168,nt_4096x24576x1536,nt_4096x7168x16384
i=0
for b in head v3 v3s v3s v3 head; do
  i=$((i+1)); timeout 120 $B/bin/gpu_gemm_bench_$b --samples=5 $ONLY > $R/all_${i}_$b.json 2> $R/all_${i}_$b.err; echo "all $i $b rc=$?"
done
date -u >> $R/env.txt
python3 bench/gpu_gemm/gemm_summary.py --ab _head _v3 $R/all_*.json
python3 bench/gpu_gemm/gemm_summary.py --ab _v3 _v3s $R/all_*.json
gzip $R/test_v3s.log; tar -C $OUT -czf $OUT/ab3.tgz ab3 && rm -rf $R
