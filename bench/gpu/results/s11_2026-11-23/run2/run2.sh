#!/bin/bash
# session 11 run 2: where TN's (wgrad, per-row B scales) time goes, by PC sampling: ncu
# SourceCounters + WarpStateStats of one launch of main d88efd0's kernel (run 1's bundle,
# unpatched gpu_gemm_bench) at tn_wgrad_16640x5120x8192 (128x192 c1), and the SASS of that
# instantiation.
B=/tmp/b11; rm -rf $B; mkdir -p $B && tar -C $B --strip-components=1 -xJf .carry-s11/b1.tar.xz
export LD_LIBRARY_PATH=$B/lib
O=$OUT/r2; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/env.txt 2>&1
date -u >> $O/env.txt
timeout 200 ncu --clock-control none -k regex:GemmFp8Kernel --launch-skip 3 -c 1 \
  --section SourceCounters --section WarpStateStats --section SpeedOfLight --section ComputeWorkloadAnalysis -f -o /tmp/pc_tn \
  $B/bin/gpu_gemm_bench --only=tn_wgrad --samples=1 > $O/bench_tn.json 2> $O/ncu_tn.log
echo "ncu tn rc=$?"
ncu -i /tmp/pc_tn.ncu-rep --page source --print-source sass --csv > $O/src_tn.csv 2>> $O/ncu_tn.log
ncu -i /tmp/pc_tn.ncu-rep --page details --csv > $O/details_tn.csv 2>> $O/ncu_tn.log
cuobjdump -sass -fun '_ZN2kd9cuda_gemm51_GLOBAL__N__425ee6e6_18_gemm_fp8_kernel_cu_c5474db113GemmFp8KernelILi128ELi192ELi4ELi1ELi1EEEvNS0_12KernelParamsE14CUtensorMap_stS4_S4_S4_S4_' $B/bin/gpu_gemm_bench > $O/tn_kernel.sass 2>&1
wc -l $O/*.csv $O/tn_kernel.sass
timeout 60 $B/bin/gpu_gemm_bench --only=tn_wgrad --samples=5 --candidates=m128+n128+s6+c1,m128+n192+s4+c2 > $O/tn_cand.json 2> $O/tn_cand.err
date -u >> $O/env.txt
gzip $O/*.csv
tar -C $OUT -czf $OUT/r2.tgz r2 && rm -rf $O
