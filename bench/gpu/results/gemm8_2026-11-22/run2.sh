#!/bin/bash
# gemm8 run 2 (eedefe6 plus the scheduler built after setmaxnreg; gpu_gemm_bench_trace: the same
# with -DKD_GEMM_TRACE=ON). Called as:
#   run2.sh '*bm192*:*FreeIssue*' 'm192+n128+s4+c2,m192+n128+s4+c2+free,m192+n128+s4+c1' \
#           'nt_8192^3,nt_16384,m_grouped,tn_' 'm192+n128+s4+c2,m192+n128+s4+c1'
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
R=$OUT/r; mkdir -p $R
{ date -u; nvidia-smi -L; } > $R/device.txt 2>&1
cuobjdump --dump-resource-usage bin/gpu_gemm_bench 2>&1 | grep -i "function\|REG" | grep -B1 REG > $R/resources.txt
cuobjdump -sass bin/gpu_gemm_bench > /tmp/all.sass 2>&1
awk '/Function :/{if(n)print n, q, l, s, m; n=$3; q=0; l=0; s=0; m=0} /QGMMA/{q++} /LDL/{l++} /STL/{s++} /SETMAXREG|USETMAXREG/{m++} END{print n, q, l, s, m}' /tmp/all.sass | sed 's/_ZN2kd9cuda_gemm[^G]*GemmFp8Kernel/GemmFp8Kernel/' > $R/sass_summary.txt
timeout 60 bin/kernels_gemm_cuda_test --gtest_filter="$1" > $R/test.txt 2>&1; echo "test rc=$?" >> $R/test.txt
timeout 60 bin/gpu_gemm_bench_trace --samples=1 --only=nt_8192^3,nt_16384x8192x5120 --candidates="$2" --trace=$R/tr > $R/trace_bench.json 2>&1
python3 trace_summary.py $R/tr_*.bin > $R/trace_summary.txt 2>&1
timeout 150 bin/gpu_gemm_bench --samples=5 --only="$3" --candidates="$4" > $R/bench.json 2> $R/bench.err
cd $OUT && tar czf gemm8_run2.tgz r && rm -rf r
