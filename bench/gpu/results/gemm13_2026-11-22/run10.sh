#!/bin/bash
# gemm13 run 10: elect.sync in the stage release and the scale products settled before the wgmma
# wait; A/B against main's kernel, alternating processes; then the GEMM tests of the change.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
O=$OUT/r10; mkdir -p $O
for i in 1 2; do
  for v in base new; do
    ./bin/gpu_gemm_bench_$v --shape=8448x384x32768 --config=bm128.bn192.s4.c1.r8.p0 --samples=5 > $O/probe128x192_${v}_$i.json 2>/dev/null
    ./bin/gpu_gemm_bench_$v --shape=12672x256x32768 --config=bm192.bn128.s4.c1.r8.p0 --samples=5 > $O/probe192x128_${v}_$i.json 2>/dev/null
  done
done
for v in base new; do ./bin/gpu_gemm_bench_$v --samples=5 > $O/all_${v}.json 2>$O/all_${v}.err; done
[ -x ./bin/kernels_gemm_cuda_test ] && ./bin/kernels_gemm_cuda_test > $O/test.txt 2>&1; tail -3 $O/test.txt 2>/dev/null
for f in $O/probe*.json; do echo "$(basename $f) $(grep -o '"ours_tflops":[0-9.]*' $f)"; done
for v in base new; do echo "== $v"; grep -o '"name":"[^"]*"\|"ours_tflops":[0-9.]*\|"ratio":[0-9.]*' $O/all_${v}.json | paste - - - ; done
cd $OUT && tar czf r10.tgz r10 && rm -rf r10
