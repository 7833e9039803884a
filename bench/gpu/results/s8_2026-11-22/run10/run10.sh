#!/bin/bash
# session 8 run 10: kernels_gemm_cuda_test after the test builders' shared fill-and-bind helper.
cd "$(dirname "$0")"
B=/tmp/b; rm -rf $B; mkdir -p $B && tar -C $B -xJf b.tar.xz
export LD_LIBRARY_PATH=$B/lib
timeout 200 $B/bin/kernels_gemm_cuda_test --gtest_brief=1 2>&1 | tail -5
