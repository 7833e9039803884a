#!/usr/bin/env bash
# Same-run A/B of two kerneld builds on the end-to-end quantize (branch e2e6, 2026-11-22):
# kerneld_base (main c8d4388) and kerneld (e2e6), alternately A B A B (a third round when time
# is left), each with the same quant_e2e_bench client:
#   ab_<build>_<round>.json     the full bench through the ring, 8192x4096 and 32768x7168, 300 calls
#                               (daemon with --metrics_address=, as run_e2e.sh's default rows)
#   phases_<build>_<round>.txt  KD_E2E_ONLY sync / async runs of 1000 calls per shape against a
#                               daemon with metrics on; means of kerneld_request_phase_seconds,
#                               kerneld_rpc_duration_seconds and the kernel, scraped around each
#   ab.sh OUT_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd); out=$1
c=/tmp/e2e6; mkdir -p $c && tar -C $c -xJf "$here/b.tar.xz"
export LD_LIBRARY_PATH=$c/lib
sock=$(mktemp -d /tmp/kd_e2e6.XXXXXX)
port=19474
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/env.txt" 2>&1
nproc >> "$out/env.txt"; lscpu | grep -E "Model name|MHz" >> "$out/env.txt"
start() { "$c/bin/$1" --socket=$sock/data.sock --admin_socket=$sock/admin.sock --backend=cuda "${@:3}" > "$out/$2.log" 2>&1 & daemon=$!; for i in $(seq 100); do [ -S $sock/data.sock ] && break; sleep 0.1; done; }
stop() { kill -TERM $daemon; wait $daemon; rm -f $sock/*.sock; }
scrape() { python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())"; }
t0=$(date +%s)
for round in 1 2 3; do
  if [ $round = 3 ] && [ $(( $(date +%s) - t0 )) -gt 150 ]; then echo "round 3 skipped at $(( $(date +%s) - t0 )) s"; break; fi
  for d in kerneld_base kerneld; do
    start $d ab_${d}_$round --metrics_address=
    { echo "["; timeout 120 "$c/bin/quant_e2e_bench" $sock/data.sock 300 8192 4096 ring; echo ","; timeout 120 "$c/bin/quant_e2e_bench" $sock/data.sock 300 32768 7168 ring; echo "]"; } > "$out/ab_${d}_$round.json"
    stop
    start $d phases_${d}_$round --metrics_address=127.0.0.1:$port
    for shape in "8192 4096" "32768 7168"; do
      for mode in sync async; do
        before=$(scrape)
        res=$(KD_E2E_ONLY=$mode timeout 60 "$c/bin/quant_e2e_bench" $sock/data.sock 1000 $shape ring)
        after=$(scrape)
        python3 - "$res" "$before" "$after" <<'PY'
import json, re, sys
res = json.loads(sys.argv[1])
def read(text):
    d = {}
    for m in re.finditer(r'^(kerneld_(?:request_phase|rpc_duration|kernel_duration)_seconds_(?:sum|count))\{([^}]*)\} (\S+)$', text, re.M):
        d[(m.group(1), m.group(2))] = float(m.group(3))
    return d
b, a = read(sys.argv[2]), read(sys.argv[3])
out = [res["op"].split()[-1], res["only"], "e2e_us", res["us_median"], "kernel_us", res["kernel_us_median"]]
for (name, labels), v in sorted(a.items()):
    if not name.endswith("_sum"): continue
    n = a.get((name[:-4] + "_count", labels), 0) - b.get((name[:-4] + "_count", labels), 0)
    if n > 0 and ("phase" in labels or "ring.Quantize" in labels or "quantize" in labels):
        label = re.sub(r'.*(phase|method)="([^"]*)".*', r'\2', labels) if "op=" not in labels else "kernel"
        out += [label + "_mean_us", round((v - b.get((name, labels), 0)) / n * 1e6, 2)]
print(*out)
PY
      done
    done > "$out/phases_${d}_$round.txt"
    stop
    echo "$d round $round done at $(( $(date +%s) - t0 )) s"
  done
done
python3 - "$out" <<'PY'
import json, sys, glob
o = sys.argv[1]
for f in sorted(glob.glob(f"{o}/ab_*.json")):
    try: rows = json.load(open(f))
    except Exception as e: print(f, "unreadable", e); continue
    for r in rows:
        print(f.split('/')[-1], r["op"].split()[-1], "kernel", r["kernel_us_median"], "sync", r["sync_us_median"], r["sync_ratio"],
              "async", r["async_us_median"], r["async_ratio"], "floor", r["rpc_floor_empty_submit_us_median"],
              "tiny", r["tiny_128x128_kernel_us_median"], r["tiny_sync_us_median"], r["tiny_async_us_median"])
for f in sorted(glob.glob(f"{o}/phases_*.txt")):
    for line in open(f): print(f.split('/')[-1], line.strip())
PY
