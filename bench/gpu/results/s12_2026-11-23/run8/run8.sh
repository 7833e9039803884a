set -u
bash bench/gpu_gemm/ab_run.sh .carry-s12/ab8.tar.xz ab8 head wp --samples=5
for b in head wp; do cuobjdump -sass /tmp/ab_ab8/bin/gpu_gemm_bench_$b 2>/dev/null | awk '/Function :/{p=($0 ~ /Li128ELi192ELi4ELi2ELi4E/)} p' | gzip > $OUT/${b}_tma_sass.txt.gz; done
for b in head wp; do echo "$b R2UR: $(zcat $OUT/${b}_tma_sass.txt.gz | grep -c R2UR) UTMALDG: $(zcat $OUT/${b}_tma_sass.txt.gz | grep -c UTMALDG) BRA.U.ANY: $(zcat $OUT/${b}_tma_sass.txt.gz | grep -c 'BRA.U.ANY')"; done
