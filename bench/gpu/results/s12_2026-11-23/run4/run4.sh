set -u
bash bench/gpu_gemm/ab_run.sh .carry-s12/ab4.tar.xz ab4 head swap --samples=5
cuobjdump -sass /tmp/ab_ab4/bin/gpu_gemm_bench_swap 2>/dev/null | awk '/Function :/{p=($0 ~ /Li128ELi192ELi4ELi2ELi4E/)} p' | gzip > $OUT/swap_tma_sass.txt.gz
