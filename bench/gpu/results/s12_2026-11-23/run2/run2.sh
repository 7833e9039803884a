set -u
B=/tmp/ab2; rm -rf $B; mkdir -p $B && tar -C $B --strip-components=1 -xJf .carry-s12/ab2.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/ab2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
timeout 200 $B/bin/kernels_gemm_cuda_test_rel2 > $R/test_rel2.log 2>&1; echo "test rel2 rc=$?"; tail -1 $R/test_rel2.log
ONLY=--only=nt_4096^3,nt_8192^3,nt_16384x8192x5120,nt_8192x7168x2048,nt_4096x2112x7168,nt_4096x7168x16384
i=0
for b in main rel1 rel2 rel2 rel1 main; do
  i=$((i+1)); timeout 120 $B/bin/gpu_gemm_bench_$b --samples=5 $ONLY > $R/all_${i}_$b.json 2> $R/all_${i}_$b.err; echo "all $i $b rc=$?"
done
date -u >> $R/env.txt
python3 bench/gpu_gemm/gemm_summary.py --ab _main _rel1 $R/all_*.json
python3 bench/gpu_gemm/gemm_summary.py --ab _main _rel2 $R/all_*.json
gzip $R/test_rel2.log; tar -C $OUT -czf $OUT/ab2.tgz ab2 && rm -rf $R
