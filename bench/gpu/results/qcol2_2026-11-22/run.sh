#!/usr/bin/env bash
# qcol2 device run: tests first, then same-process A/B of main's and the new kernels.
set -u
B=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$B/lib KD_GOLDEN_DIR=$B/golden
cd "$B"
T0=$(date +%s)
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > "$OUT/env.txt" 2>&1
L=$OUT/tests.log
t() { echo "=== $* (t=$(( $(date +%s) - T0 ))s)" >> "$L"; }
t cuda_backend_test default
timeout 100 ./bin/cuda_backend_test --gtest_brief=1 >> "$L" 2>&1; t "cuda_backend_test rc=$?"
timeout 30 ./bin/cuda_golden_test --gtest_brief=1 >> "$L" 2>&1; t "cuda_golden_test rc=$?"
KD_QCOL2_CAP=1024 timeout 40 ./bin/cuda_backend_test --gtest_brief=1 --gtest_filter='CudaRowQuantize.Col*:CudaRowQuantize.Every*' >> "$L" 2>&1; t "rows cap1024 rc=$?"
KD_QCOL2_CAP=3072 timeout 40 ./bin/cuda_backend_test --gtest_brief=1 --gtest_filter='CudaRowQuantize.Col*' >> "$L" 2>&1; t "rows cap3072 rc=$?"
ALL=quantize/mx1x32,quantize/jagged_colwise,quantize/per_row_transposed,quantize/1x128
COL=quantize/jagged_colwise,quantize/per_row_transposed
b() { local name=$1; shift; env "$@" timeout 40 ./bin/quant_pad_bench "$OUT/$name.json" --only=$ONLY > /dev/null 2>> "$L"; t "bench $name rc=$?"; }
ONLY=$ALL b main_a KD_QCOL2=0
ONLY=$ALL b new_cap1536 KD_QCOL2=1
ONLY=$COL b new_cap1024 KD_QCOL2_CAP=1024
ONLY=$COL b new_cap3072 KD_QCOL2_CAP=3072
ONLY=quantize/mx1x32_transposed b new_mx_rowmajor KD_QCOL2_MXGROUP=0
ONLY=$ALL b main_b KD_QCOL2=0
python3 - "$OUT" <<'PY' > "$OUT/summary.txt" 2>&1
import json, sys, os, glob
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(out + '/*.json')):
    d = json.load(open(f)); n = os.path.basename(f)[:-5]
    print(n, d['device'], 'copy', round(d['copy_1gib_gbps']))
    for r in d['results']:
        rows.setdefault(r['variant'], {}).setdefault(n, []).append('%d (%.3f)' % (r['gbps'], r['ratio_to_copy_1gib']))
for v, byrun in rows.items():
    for n, cells in byrun.items():
        print('%-28s %-18s %s' % (v, n, ' | '.join(cells)))
PY
cat "$OUT/summary.txt"
grep -E "^=== |FAILED|PASSED|golden cases" "$L"
