#!/usr/bin/env bash
# qcol3 run 3: ColBandKernel (jagged_colwise / per_row of Xt by column bands, L2 re-read) against
# main's kernels (KD_QBAND=0, temporary switch), full tests, golden, full quant_pad_bench table.
set -u
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib KD_GOLDEN_DIR=$PWD/golden
O=$OUT/r; mkdir -p $O
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
T=./bin/cuda_backend_test
echo "=== rows tests (band)" >> $O/tests.log
timeout 40 $T --gtest_brief=1 --gtest_filter='CudaRowQuantize.*' >> $O/tests.log 2>&1; rc1=$?
echo "=== rc=$rc1" >> $O/tests.log
if [ $rc1 -eq 0 ]; then MODE=KD_QBAND=1; else MODE=KD_QBAND=0; fi
echo "MODE=$MODE" >> $O/tests.log
echo "=== rest of cuda_backend_test ($MODE)" >> $O/tests.log
env $MODE timeout 120 $T --gtest_brief=1 --gtest_filter='-CudaRowQuantize.*' >> $O/tests.log 2>&1; echo "=== rc=$?" >> $O/tests.log
echo "=== rows tests (main path, KD_QBAND=0)" >> $O/tests.log
KD_QBAND=0 timeout 40 $T --gtest_brief=1 --gtest_filter='CudaRowQuantize.*' >> $O/tests.log 2>&1; echo "=== rc=$?" >> $O/tests.log
echo "=== cuda_golden_test ($MODE)" >> $O/tests.log
env $MODE timeout 60 ./bin/cuda_golden_test --gtest_brief=1 >> $O/tests.log 2>&1; echo "=== rc=$?" >> $O/tests.log
env $MODE timeout 120 ./bin/quant_pad_bench $O/full.json > /dev/null 2>> $O/bench.err; echo "full rc=$?" >> $O/bench.err
Q="--only=per_row_transposed,jagged_colwise"
KD_QBAND=0 timeout 40 ./bin/quant_pad_bench $O/main.json $Q > /dev/null 2>> $O/bench.err; echo "main rc=$?" >> $O/bench.err
if [ $rc1 -eq 0 ]; then
  KD_QBAND_MB=16 timeout 40 ./bin/quant_pad_bench $O/mb16.json $Q > /dev/null 2>> $O/bench.err; echo "mb16 rc=$?" >> $O/bench.err
fi
tar -C $OUT -czf $OUT/r3.tgz r && rm -rf $O
tar -xzf $OUT/r3.tgz -C /tmp && O=/tmp/r
grep -E "^=== |^MODE|FAILED|PASSED|golden cases" $O/tests.log | head -40
cat $O/bench.err | tail -6
python3 - <<'PY'
import json,os
O='/tmp/r'
data={}
for n in ['full','main','mb16']:
    try: data[n]=json.load(open(f'{O}/{n}.json'))
    except Exception as e: print(n,'missing')
for n,d in data.items(): print(n,d['device'],'copy',round(d['copy_1gib_gbps']))
if 'full' in data:
    for r in data['full']['results']:
        key=(r['op'],r['variant'],r['m'],r['k'])
        extra=[]
        for n in ['main','mb16']:
            v=[x for x in data.get(n,{'results':[]})['results'] if (x['op'],x['variant'],x['m'],x['k'])==key]
            extra.append('%s=%.3f'%(n,v[0]['ratio_to_copy_1gib']) if v else '')
        print(r['op'],r['variant'],r['m'],r['k'],r['gbps'],'%.3f'%r['ratio_to_copy_1gib'],*extra)
PY
