#!/usr/bin/env bash
# End-to-end Quantize latency through a real kerneld on the CUDA backend, from a bundle made by
# /work/shared/tools/gpu-bundle (bin/kerneld, bin/quant_e2e_bench, lib/). The daemon runs once
# with --inline_async (the default) and once without, in the same run, and each time the bench
# measures 8192x4096 and 32768x7168 over gRPC; against the default daemon it also measures both
# through a submit ring (client spin: the library's default, then 1 ms). A third daemon runs with
# --ring_spin_us=250 (its ring thread still polls when an ASYNC client's next call comes, ~50 µs
# after the last) and is measured through the ring only.
#   run_e2e.sh BUNDLE_DIR OUT_DIR [REPS]
# Last, a default daemon with its metrics on serves SYNC-only and ASYNC-only runs through the
# ring (KD_E2E_ONLY), and the means of kerneld_request_phase_seconds over each run say where
# the daemon's share of a call goes.
# Writes e2e_inline.json, e2e_queued.json, e2e_ring.json, e2e_ring_spin250.json, e2e_phases.txt
# and kerneld_*.log under OUT_DIR.
set -u
bundle=$(cd "$1" && pwd); out=$2; reps=${3:-300}
export LD_LIBRARY_PATH=$bundle/lib
sock=$(mktemp -d /tmp/kd_e2e.XXXXXX)
port=19464
# start_daemon LOG_NAME [FLAGS...]: a kerneld on $sock, waited for until its socket exists.
start_daemon() {
  local name=$1; shift
  "$bundle/bin/kerneld" --socket=$sock/data.sock --admin_socket=$sock/admin.sock \
    --backend=cuda "$@" > "$out/kerneld_$name.log" 2>&1 &
  daemon=$!
  for i in $(seq 100); do [ -S $sock/data.sock ] && break; sleep 0.1; done
}
stop_daemon() { kill $daemon; wait $daemon; rm -f $sock/*.sock; }
# bench_runs [TRANSPORT]: a JSON array of the bench at each listed "SPIN M K" (SPIN: the client's
# ring spin in µs, "-" for its default).
bench_runs() {
  local transport=$1; shift
  local sep=""
  echo "["
  for run in "$@"; do
    set -- $run
    echo -n "$sep"
    if [ "$1" = - ]; then
      timeout 120 "$bundle/bin/quant_e2e_bench" $sock/data.sock $reps $2 $3 $transport
    else
      KD_E2E_RING_SPIN_US=$1 timeout 120 "$bundle/bin/quant_e2e_bench" $sock/data.sock $reps $2 $3 $transport
    fi
    sep=","
  done
  echo "]"
}
shapes=("- 8192 4096" "- 32768 7168")

start_daemon inline --metrics_address= --inline_async
bench_runs grpc "${shapes[@]}" > "$out/e2e_inline.json"
bench_runs ring "${shapes[@]}" "1000 8192 4096" "1000 32768 7168" > "$out/e2e_ring.json"
stop_daemon
start_daemon queued --metrics_address= --noinline_async
bench_runs grpc "${shapes[@]}" > "$out/e2e_queued.json"
stop_daemon
start_daemon spin250 --metrics_address= --ring_spin_us=250
bench_runs ring "${shapes[@]}" > "$out/e2e_ring_spin250.json"
stop_daemon

start_daemon phases --metrics_address=127.0.0.1:$port
scrape() { python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())"; }
for shape in "8192 4096" "32768 7168"; do
  for mode in sync async; do
    before=$(scrape)
    res=$(KD_E2E_ONLY=$mode timeout 60 "$bundle/bin/quant_e2e_bench" $sock/data.sock 1000 $shape ring)
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
done > "$out/e2e_phases.txt"
stop_daemon
cat "$out/e2e_phases.txt"
python3 - "$out" <<'PY'
import json, sys
for mode in ("inline", "queued", "ring", "ring_spin250"):
    for r in json.load(open(f"{sys.argv[1]}/e2e_{mode}.json")):
        print(mode, r["transport"], "spin", r["client_spin_us"], r["op"], "kernel", r["kernel_us_median"], "sync", r["sync_us_median"],
              r["sync_ratio"], "async", r["async_us_median"], r["async_ratio"],
              "pipe4", r["async_pipelined_4threads_us_per_op"], "floor",
              r["rpc_floor_empty_submit_us_median"], "tiny sync/async",
              r["tiny_sync_us_median"], r["tiny_async_us_median"], "tiny kernel",
              r["tiny_128x128_kernel_us_median"], "async reply", r.get("async_reply_us_median"),
              "async with wait_event", r.get("async_with_wait_event_us_median"),
              "client stream wait on signal (host, after reply / already complete)",
              r.get("stream_wait_host_after_reply_us_median"),
              r.get("stream_wait_on_completed_signal_host_us_median"))
PY
