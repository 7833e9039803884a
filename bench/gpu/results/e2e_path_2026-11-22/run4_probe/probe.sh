#!/usr/bin/env bash
set -u
here=$(cd "$(dirname "$0")" && pwd); out=$1
export LD_LIBRARY_PATH=$here/lib
sock=$(mktemp -d /tmp/kd_p.XXXXXX)
for mode in sync async; do
  "$here/bin/kerneld_probe" --socket=$sock/data.sock --admin_socket=$sock/admin.sock --metrics_address= --backend=cuda > "$out/probe_$mode.log" 2>&1 &
  d=$!
  for i in $(seq 100); do [ -S $sock/data.sock ] && break; sleep 0.1; done
  KD_E2E_ONLY=$mode "$here/bin/quant_e2e_bench" $sock/data.sock 2000 8192 4096 ring > "$out/probe_$mode.json"
  kill -TERM $d; wait $d
  rm -f $sock/*.sock
  echo "== $mode"; cat "$out/probe_$mode.json"; grep PROBE "$out/probe_$mode.log"
done
