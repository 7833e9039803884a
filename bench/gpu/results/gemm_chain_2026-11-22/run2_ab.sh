#!/usr/bin/env bash
# A/B of the consumer-chain trim (pinned per-thread addresses, one middle scale select) against
# main's binary (2a31f01): tests, then alternating bench processes, SASS S2R counts, ncu PC samples.
set -u
cd "$(dirname "$0")"; export LD_LIBRARY_PATH=$PWD/lib
O=${OUT:-/tmp/out}; mkdir -p $O
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $O/env.txt
timeout 200 ./bin/kernels_gemm_cuda_test --gtest_brief=1 > $O/test.log 2>&1; echo "rc=$?" >> $O/test.log
tail -3 $O/test.log
ONLY=nt_4096^3,nt_8192^3,nt_16384,nt_8192x7168,nt_4096x2112,nt_4096x24576,nt_4096x7168,m_grouped,tn_
for i in 1 2; do
  timeout 150 ./bin/gpu_gemm_bench_main --samples=5 --only=$ONLY > $O/main_$i.json 2>> $O/bench.err
  timeout 150 ./bin/gpu_gemm_bench --samples=5 --only=$ONLY > $O/new_$i.json 2>> $O/bench.err
done
for b in gpu_gemm_bench gpu_gemm_bench_main; do
  cuobjdump -sass bin/$b | awk '/Function :/ {name=$3} /S2R/ {s[name]++} /QGMMA/ {q[name]++} /LDL|STL/ {l[name]++}
    END {for (f in q) print f, "S2R", s[f]+0, "QGMMA", q[f], "LDL/STL", l[f]+0}' > $O/sass_$b.txt
done
timeout 90 ncu --clock-control none -k regex:GemmFp8Kernel -c 1 --section SourceCounters --section WarpStateStats \
  -o /tmp/p_new -f ./bin/gpu_gemm_bench --only=nt_8192^3 --samples=1 > $O/ncu_log.txt 2>&1
ncu -i /tmp/p_new.ncu-rep --page source --print-source sass --csv > $O/src_new.csv 2>> $O/ncu_log.txt
cd $O && tar czf ab.tar.gz *.json *.txt *.log *.csv && ls
