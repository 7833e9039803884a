#!/bin/bash
# gemm14 run 11: 192x128 tiles without the ring of turns (three consumer warpgroups issue as their
# own chains allow) against main's ring (both with gemm13's chain fix); alternating processes.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
O=$OUT/r11; mkdir -p $O
for i in 1 2; do
  for v in new noturn; do
    ./bin/gpu_gemm_bench_$v --shape=12672x256x32768 --config=bm192.bn128.s4.c1.r8.p0 --candidates=c2 --samples=5 > $O/probe192_${v}_$i.json 2>/dev/null
  done
done
for v in new noturn; do ./bin/gpu_gemm_bench_$v --samples=5 --only=nt_4096^3,nt_16384x8192x5120,nt_8192x7168x2048,nt_4096x2112x7168,nt_4096x24576x1536 > $O/short_${v}.json 2>/dev/null; done
for f in $O/*.json; do echo "$(basename $f) $(grep -o '"name":"[^"]*"\|"ours_tflops":[0-9.]*\|"cublaslt_tflops":[0-9.]*\|"tflops":[0-9.]*' $f | tr '\n' ' ')"; done
cd $OUT && tar czf r11.tgz r11 && rm -rf r11
