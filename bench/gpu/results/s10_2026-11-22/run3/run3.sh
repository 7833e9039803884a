#!/bin/bash
# session 10 run 3: where a tile boundary's cycles go, by PC sampling: ncu SourceCounters +
# WarpStateStats of one launch of main 876b041's kernel on whole waves with K = 1024
# (4096x6336x1024, 128x192 c2: 8 blocks a tile, so the boundary weighs most) and on 8192^3.
cd "$(dirname "$0")"
rm -rf /tmp/b && mkdir -p /tmp/b && tar -C /tmp/b -xJf b.tar.xz
export LD_LIBRARY_PATH=/tmp/b/lib
O=$OUT/r3; mkdir -p $O
for s in 4096x6336x1024 8192x8192x8192; do
  timeout 200 ncu --clock-control none -k regex:GemmFp8Kernel --launch-skip 3 -c 1 \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight -f -o /tmp/pc_$s \
    /tmp/b/bin/gpu_gemm_bench --shape=$s --config=bm128.bn192.s4.c2.r8.p0 --samples=1 > $O/bench_$s.json 2> $O/ncu_$s.log
  echo "ncu $s rc=$?"
  ncu -i /tmp/pc_$s.ncu-rep --page source --print-source sass --csv > $O/src_$s.csv 2>> $O/ncu_$s.log
  ncu -i /tmp/pc_$s.ncu-rep --page details --csv > $O/details_$s.csv 2>> $O/ncu_$s.log
  ls -la $O/src_$s.csv
done
tar -C $OUT -czf $OUT/r3.tgz r3 && rm -rf $O
