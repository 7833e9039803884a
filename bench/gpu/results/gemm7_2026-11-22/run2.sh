#!/bin/bash
# gemm7 run 2: v2 (early full check + issue before release) vs v0, same process, vs cuBLASLt.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
B=./bin/gpu_gemm_bench
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
$B --only=nt_4096^3,nt_8192^3,nt_16384,nt_8192x7168,nt_4096x2112,nt_4096x24576,nt_4096x7168,m_grouped --samples=5 --candidates=v2,v2+c1 > $OUT/run2.json 2> $OUT/run2.err
python3 - $OUT/run2.json <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
for r in d['results']:
    line=f"{r['name']:28s} {r['config']:24s} ours {r.get('ours_tflops',0):7.1f} lt {r.get('cublaslt_tflops',0):7.1f} ratio {r.get('ratio',0):.3f}"
    for c in r.get('candidates',[]):
        line+=f" | {c['variant']} {c['config'][:14]} {c['tflops']:7.1f} r={c.get('ratio',0):.3f} vs={c['vs_default']:.3f} d={c.get('max_rel_diff',-1)}"
    print(line)
PY
