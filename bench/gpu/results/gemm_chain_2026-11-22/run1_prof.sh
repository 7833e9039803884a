#!/usr/bin/env bash
# PC-sampling profile (ncu SourceCounters) of the GEMM at 8192^3: ours (default 128x192 c2) and
# cuBLASLt's kernel, one launch each; per-SASS-instruction stall samples as CSV.
set -u
cd "$(dirname "$0")"; export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}; mkdir -p $O
ncu --version > $O/ncu_version.txt 2>&1
for k in GemmFp8Kernel nvjet; do
  timeout 120 ncu --clock-control none -k regex:$k -c 1 --section SourceCounters --section WarpStateStats \
    -o /tmp/p_$k -f ./bin/gpu_gemm_bench --only=nt_8192^3 --samples=1 > $O/log_$k.txt 2>&1
  ncu -i /tmp/p_$k.ncu-rep --page source --print-source sass --csv > $O/src_$k.csv 2>> $O/log_$k.txt
  ncu -i /tmp/p_$k.ncu-rep --page details --csv > $O/details_$k.csv 2>> $O/log_$k.txt
done
# 192x128 c2 at 8192x7168x2048 (the new default there).
timeout 120 ncu --clock-control none -k regex:GemmFp8Kernel -c 1 --section SourceCounters --section WarpStateStats \
  -o /tmp/p_192 -f ./bin/gpu_gemm_bench --only=nt_8192x7168x2048 --samples=1 > $O/log_192.txt 2>&1
ncu -i /tmp/p_192.ncu-rep --page source --print-source sass --csv > $O/src_192.csv 2>> $O/log_192.txt
ncu -i /tmp/p_192.ncu-rep --page details --csv > $O/details_192.csv 2>> $O/log_192.txt
ls -la $O; wc -l $O/*.csv
