bash bench/gpu_gemm/ab_run.sh .carry-s12/ab5.tar.xz ab5 head ord --samples=5
