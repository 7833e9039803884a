#!/bin/bash
# session 7 run 7: the review mends (LaunchGemmFp8 takes its TMA-scale decision from
# GemmFp8LoadsScalesByTma; gpu_gemm_bench's soak clock by std::chrono): GEMM tests, and 8192^3 and
# 4096x7168x16384 timed with a 1 s power soak.
cd "$(dirname "$0")"
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b.tar.xz
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/env.txt 2>&1
date -u >> $R/env.txt; sha256sum $B/bin/* >> $R/env.txt
timeout 150 $B/bin/kernels_gemm_cuda_test --gtest_brief=1 > $R/kernels_gemm_cuda_test.log 2>&1
echo "kernels_gemm_cuda_test rc=$?" | tee -a $R/rc.txt; tail -2 $R/kernels_gemm_cuda_test.log
grep -E "^\[  FAILED" $R/kernels_gemm_cuda_test.log | head -5
timeout 90 $B/bin/gpu_gemm_bench --samples=5 --power=1 --only=nt_8192^3,nt_4096x7168x16384 > $R/gemm.json 2> $R/gemm.err
echo "gemm rc=$?" | tee -a $R/rc.txt
python3 -c "
import json
for l in open('$R/gemm.json'):
    l=l.strip().lstrip(',')
    if not l.startswith('{\"name\"'): continue
    try: r=json.loads(l)
    except Exception: r=json.loads(l[:-2])
    p=r['power']['rounds']
    print(r['name'], r['config'], round(r['ours_tflops']), round(r['cublaslt_tflops']), round(r['ratio'],3), 'sustained', [round(x['ours']['tflops']) for x in p], [round(x['cublaslt']['tflops']) for x in p])
" | tee $R/summary.txt
gzip -9 $R/kernels_gemm_cuda_test.log
tar -C $OUT -czf $OUT/s7_run7.tgz r
