#!/usr/bin/env bash
set -u
here=$(cd "$(dirname "$0")" && pwd); out=$1
mkdir -p /tmp/c && tar -C /tmp/c -xJf "$here/b.tar.xz"
c=/tmp/c
export LD_LIBRARY_PATH=$c/lib
sock=$(mktemp -d /tmp/kd_x.XXXXXX)
start() { "$c/bin/$1" --socket=$sock/data.sock --admin_socket=$sock/admin.sock --metrics_address= --backend=cuda > "$out/$2.log" 2>&1 & daemon=$!; for i in $(seq 100); do [ -S $sock/data.sock ] && break; sleep 0.1; done; }
stop() { kill -TERM $daemon; wait $daemon; rm -f $sock/*.sock; }
for round in 1 2; do
  for d in kerneld_base kerneld; do
    start $d ab_${d}_$round
    { echo "["; "$c/bin/quant_e2e_bench" $sock/data.sock 300 8192 4096 ring; echo ","; "$c/bin/quant_e2e_bench" $sock/data.sock 300 32768 7168 ring; echo "]"; } > "$out/ab_${d}_$round.json"
    stop
  done
done
for round in 1 2; do
  for d in kerneld_probe kerneld_probe_spin; do
    for mode in sync async; do
      start $d probe_${d}_${mode}_$round
      KD_E2E_ONLY=$mode "$c/bin/quant_e2e_bench" $sock/data.sock 2000 8192 4096 ring > "$out/probe_${d}_${mode}_$round.json"
      stop
    done
  done
done
python3 - "$out" <<'PY'
import json, sys, glob, re
o = sys.argv[1]
for f in sorted(glob.glob(f"{o}/ab_*.json")):
    for r in json.load(open(f)):
        print(f.split('/')[-1], r["op"].split()[-1], "kernel", r["kernel_us_median"], "sync", r["sync_us_median"], r["sync_ratio"],
              "async", r["async_us_median"], r["async_ratio"], "reply", r["async_reply_us_median"],
              "query", r["async_query_wait_us_median"], "floor", r["rpc_floor_empty_submit_us_median"],
              "tiny", r["tiny_128x128_kernel_us_median"], r["tiny_sync_us_median"], r["tiny_async_us_median"], "pipe1", r["async_pipelined_1thread_us_per_op"])
for f in sorted(glob.glob(f"{o}/probe_*.json")):
    r = json.load(open(f)); tag = f.split('/')[-1][:-5]
    probes = {}
    for line in open(f"{o}/{tag}.log"):
        m = re.match(r"PROBE (\d+) mean_us (\S+) n (\d+)", line)
        if m and int(m.group(3)) > 100: probes[int(m.group(1))] = float(m.group(2))
    print(tag, "e2e", r["us_median"], "kernel", r["kernel_us_median"], " ".join(f"{k}:{v}" for k, v in sorted(probes.items())))
PY
grep SPINFLAG "$out"/*.log | head -2
