#!/bin/bash
# session 11 run 10: small-M tiles (branch smallm on c83274a+d5f684f): new instantiations 64x64
# with 12 stages and 64x128 with 8 (one consumer warpgroup). kernels_gemm_cuda_test (with their
# cases), then gpu_gemm_bench --samples=5 on the two small-M shapes with them as candidates, two
# processes, and --unsplit once each.
B=/tmp/b16; rm -rf $B; mkdir -p $B && tar -C $B --strip-components=1 -xJf .carry-s11/b6.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r10; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
timeout 200 $B/bin/kernels_gemm_cuda_test_sm > $R/test_sm.log 2>&1; echo "test_sm rc=$?" | tee -a $R/rc.txt
tail -1 $R/test_sm.log; grep -E "FAILED|Failure" $R/test_sm.log | head -10
for i in 1 2; do
  timeout 60 $B/bin/gpu_gemm_bench_sm --only=nt_64x4096x7168,nt_128x7168x2048 --samples=5 \
    --candidates=m64+n64+s12+c1,m64+n128+s8+c1,m128+n64+s6+c1 > $R/cand_$i.json 2> $R/cand_$i.err
  echo "cand $i rc=$?" | tee -a $R/rc.txt
done
timeout 60 $B/bin/gpu_gemm_bench_sm --only=nt_64x4096x7168,nt_128x7168x2048 --samples=5 --unsplit \
  --candidates=m64+n64+s12+c1,m64+n128+s8+c1 > $R/cand_unsplit.json 2> $R/cand_unsplit.err
echo "unsplit rc=$?" | tee -a $R/rc.txt
date -u >> $R/env.txt
python3 bench/gpu_gemm/gemm_summary.py $R/cand_*.json > $R/summary.txt 2>&1; cat $R/summary.txt
gzip $R/test_sm.log
tar -C $OUT -czf $OUT/r10.tgz r10 && rm -rf $R
