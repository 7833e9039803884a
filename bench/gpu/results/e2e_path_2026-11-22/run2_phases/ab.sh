#!/usr/bin/env bash
# A/B of two kerneld builds through a submit ring (A B A B), then the new build's request
# phases for SYNC-only and ASYNC-only runs (kerneld_request_phase_seconds sum/count deltas).
set -u
here=$(cd "$(dirname "$0")" && pwd); out=$1; reps=${2:-300}
export LD_LIBRARY_PATH=$here/lib
sock=$(mktemp -d /tmp/kd_ab.XXXXXX)
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/env.txt"
port=19464
start() {
  "$here/bin/$1" --socket=$sock/data.sock --admin_socket=$sock/admin.sock \
    --metrics_address=127.0.0.1:$port --backend=cuda > "$out/$2.log" 2>&1 &
  daemon=$!
  for i in $(seq 100); do [ -S $sock/data.sock ] && break; sleep 0.1; done
}
stop() { kill $daemon; wait $daemon; rm -f $sock/*.sock; }
scrape() { python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())" > "$1"; }
for round in 1 2; do
  for d in kerneld_base kerneld; do
    start $d ${d}_$round
    {
      echo "["
      timeout 120 "$here/bin/quant_e2e_bench" $sock/data.sock $reps 8192 4096 ring
      echo ","
      timeout 120 "$here/bin/quant_e2e_bench" $sock/data.sock $reps 32768 7168 ring
      echo "]"
    } > "$out/ab_${d}_$round.json"
    stop
  done
done
start kerneld phases
for shape in "8192 4096" "32768 7168"; do
  for mode in sync async; do
    tag=${mode}_${shape// /x}
    scrape "$out/m_before_$tag.txt"
    KD_E2E_ONLY=$mode timeout 60 "$here/bin/quant_e2e_bench" $sock/data.sock 1000 $shape ring > "$out/only_$tag.json"
    scrape "$out/m_after_$tag.txt"
  done
done
stop
python3 - "$out" <<'PY'
import json, sys, glob, re
o = sys.argv[1]
for f in sorted(glob.glob(f"{o}/ab_*.json")):
    for r in json.load(open(f)):
        print(f.split('/')[-1], r["op"].split()[-1], "kernel", r["kernel_us_median"], "sync", r["sync_us_median"], r["sync_ratio"],
              "async", r["async_us_median"], r["async_ratio"], "reply", r["async_reply_us_median"],
              "query", r["async_query_wait_us_median"], r["async_query_wait_ratio"], "streamwait gpu", r["stream_wait_gpu_us_median"],
              "host", r["stream_wait_host_after_reply_us_median"], "floor", r["rpc_floor_empty_submit_us_median"],
              "tiny", r["tiny_128x128_kernel_us_median"], r["tiny_sync_us_median"], r["tiny_async_us_median"])
def read(p):
    d = {}
    for line in open(p):
        m = re.match(r'(kerneld_request_phase_seconds_(sum|count)|kerneld_rpc_duration_seconds_(sum|count)|kerneld_kernel_duration_seconds_(sum|count))\{([^}]*)\} (\S+)', line)
        if m: d[(m.group(1), m.group(5))] = float(m.group(6))
    return d
for f in sorted(glob.glob(f"{o}/only_*.json")):
    tag = f.split('only_')[1][:-5]
    b, a = read(f"{o}/m_before_{tag}.txt"), read(f"{o}/m_after_{tag}.txt")
    res = json.load(open(f))
    line = [tag, "e2e", res["us_median"], "kernel", res["kernel_us_median"]]
    for key in sorted(a):
        if key[0].endswith("_sum"):
            ck = (key[0][:-4] + "_count", key[1])
            n = a.get(ck, 0) - b.get(ck, 0)
            if n > 0: line += [key[0].replace("kerneld_","").replace("_seconds_sum",""), key[1], "mean_us", round((a[key] - b.get(key, 0)) / n * 1e6, 2), "n", int(n)]
    print(*line)
PY
