#!/bin/bash
# qdual3 run 2: tests of builds D (main + 16-byte Y = X stores of the dual pass), C (D + staged
# row-major scales of 1x128 of Xᵀ and the dual pass, register-light tickets) and E (C staging the
# dual pass only); SASS resource usage; quant_pad_bench --only=dual,transposed alternating
# main/D/C/E twice; the whole table once per build.
cd "$(dirname "$0")"
tar xzf bundle.tgz
export LD_LIBRARY_PATH=$PWD/lib
R=/tmp/r; rm -rf $R; mkdir -p $R
T0=$SECONDS
log() { echo "$* t=$((SECONDS-T0))" | tee -a $R/summary.txt; }
date -u > $R/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
for v in D C E; do
  timeout 100 ./bin/cuda_backend_test_$v > $R/backend_$v.txt 2>&1
  log "backend $v rc=$?"; grep -E "^\[  (PASSED|FAILED) |tests ran" $R/backend_$v.txt | tail -5 >> $R/summary.txt
  KD_GOLDEN_DIR=$PWD/golden timeout 40 ./bin/cuda_golden_test_$v > $R/golden_$v.txt 2>&1
  log "golden $v rc=$?"; grep -E "^\[  (PASSED|FAILED) |tests ran|SKIP" $R/golden_$v.txt | tail -4 >> $R/summary.txt
done
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
for v in main D C E; do
  timeout 30 $CO --dump-resource-usage ./bin/quant_pad_bench_$v 2>&1 | grep -A1 QuantizeTiledKernel > $R/res_$v.txt
  timeout 60 $CO -sass ./bin/quant_pad_bench_$v 2>/dev/null | awk '/Function : .*QuantizeTiledKernel/{f=$3} f{print f"\t"$0}' | gzip > $R/sass_$v.txt.gz
done
log "sass"
i=0
for v in main D C E D C E main; do
  i=$((i+1))
  timeout 60 ./bin/quant_pad_bench_$v $R/bench_${i}_$v.json --only=dual,transposed > /dev/null 2> $R/bench_${i}_$v.err
  log "bench $i $v rc=$?"
done
for v in main D C E; do
  timeout 90 ./bin/quant_pad_bench_$v $R/full_$v.json > /dev/null 2> $R/full_$v.err
  log "full $v rc=$?"
done
python3 - $R >> $R/summary.txt <<'PY'
import json, sys, glob, re, statistics
R = sys.argv[1]
rows = {}
copies = []
for f in sorted(glob.glob(R + '/bench_*.json')) + sorted(glob.glob(R + '/full_*.json')):
    m = re.search(r'(bench_\d+|full)_(\w+)\.json', f); tag = m.group(2)
    d = json.load(open(f)); copies.append('%s:%.0f' % (tag, d['copy_1gib_gbps']))
    for r in d['results']:
        key = (r['op'] + '/' + r['variant'], '%dx%d' % (r['m'], r['k']))
        rows.setdefault(key, {}).setdefault(tag, []).append(r['ratio_to_copy_1gib'])
print('copies', ' '.join(copies))
for key in sorted(rows):
    print(key[0], key[1], ' '.join('%s=%s' % (t, '/'.join('%.3f' % x for x in v)) for t, v in sorted(rows[key].items())))
PY
log "done"
cp $R/summary.txt $OUT/
tar czf $OUT/all.tgz -C $R .
grep -E "rc=|PASSED|FAILED" $R/summary.txt
grep -E "dual|transposed" $R/summary.txt | grep -v -E "per_row|per_tensor|mx1x32"
