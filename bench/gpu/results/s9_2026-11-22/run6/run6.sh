#!/bin/bash
# session 9 run 6: kernels_gemm_cuda_test at a6efac3+ (raster_group's range as one constant).
cd "$(dirname "$0")"
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b6.tar.xz
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
timeout 200 $B/bin/kernels_gemm_cuda_test --gtest_brief=1 2>&1 | tail -3
