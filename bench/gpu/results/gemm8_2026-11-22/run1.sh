#!/bin/bash
# gemm8 run 1 (binary of commit 3241c1f, rebased as eedefe6): SASS/resources, tests (new cases +
# sample), bench with 192x128 candidates. Called as:
#   run1.sh '*bm192*:*FreeIssue*:GemmCudaConfigTest*:GemmCudaTest.MGrouped*:GemmCudaTest.KGrouped*:*nt_256x256x512_bm128*:*bm128_c2_bn192*' \
#           'nt_' 'm192+n128+s4+c1,m192+n128+s4+c2,m192+n128+s4+c1+free,m192+n128+s4+c2+free'
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
R=$OUT/r; mkdir -p $R
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv; } > $R/device.txt 2>&1
cuobjdump --dump-resource-usage bin/gpu_gemm_bench 2>&1 | grep -i "function\|REG" | grep -B1 REG > $R/resources.txt
cuobjdump -sass bin/gpu_gemm_bench > /tmp/all.sass 2>&1
awk '/Function :/{if(n)print n, q, l, s, m; n=$3; q=0; l=0; s=0; m=0} /QGMMA/{q++} /LDL/{l++} /STL/{s++} /SETMAXREG|USETMAXREG/{m++} END{print n, q, l, s, m}' /tmp/all.sass | sed 's/_ZN2kd9cuda_gemm[^G]*GemmFp8Kernel/GemmFp8Kernel/' > $R/sass_summary.txt
awk '/Function :/{p = ($3 ~ /ILi192E/)} p' /tmp/all.sass > $R/sass_192.txt
grep -n "Function :\|SETMAXREG\|LDL\|STL\|QGMMA\|EXIT\|BAR.SYNC\|BAR.ARV\|WARPGROUP" $R/sass_192.txt > $R/sass_192_marks.txt
gzip $R/sass_192.txt
timeout 150 bin/kernels_gemm_cuda_test --gtest_filter="$1" > $R/test.txt 2>&1; echo "test rc=$?" >> $R/test.txt
timeout 200 bin/gpu_gemm_bench --samples=5 --only="$2" --candidates="$3" > $R/bench.json 2> $R/bench.err
cd $OUT && tar czf gemm8_run.tgz r && rm -rf r
