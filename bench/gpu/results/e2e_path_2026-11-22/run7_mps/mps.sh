#!/usr/bin/env bash
# ipc_order_bench and the e2e bench without MPS, then under an MPS control daemon of our own.
set -u
here=$(cd "$(dirname "$0")" && pwd); out=$1
export LD_LIBRARY_PATH=$here/lib
e2e() {
  s=$(mktemp -d); "$here/bin/kerneld" --socket=$s/d.sock --admin_socket=$s/a.sock --metrics_address= --backend=cuda > "$out/kd_$1.log" 2>&1 & d=$!
  for i in $(seq 100); do [ -S $s/d.sock ] && break; sleep 0.1; done
  timeout 60 "$here/bin/quant_e2e_bench" $s/d.sock 300 8192 4096 ring > "$out/e2e_$1.json"; kill $d; wait $d
}
timeout 60 "$here/bin/ipc_order_bench" 200 > "$out/order_plain.json"; cat "$out/order_plain.json"
e2e plain
which nvidia-cuda-mps-control || { echo "no mps control"; exit 0; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/kd_mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/kd_mps_log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d; echo "mps start rc=$?"
sleep 1
timeout 60 "$here/bin/ipc_order_bench" 200 > "$out/order_mps.json"; echo "order rc=$?"; cat "$out/order_mps.json"
e2e mps
echo quit | nvidia-cuda-mps-control; echo "mps quit rc=$?"
cp -r $CUDA_MPS_LOG_DIRECTORY "$out/mps_log" 2>/dev/null
python3 - "$out" <<'PY'
import json, sys
for m in ("plain", "mps"):
    try: r = json.load(open(f"{sys.argv[1]}/e2e_{m}.json"))
    except Exception as e: print(m, "no e2e", e); continue
    print(m, {k: r[k] for k in ("kernel_us_median", "sync_us_median", "sync_ratio", "async_us_median", "async_ratio", "async_with_wait_event_us_median", "stream_wait_host_after_reply_us_median", "stream_wait_on_completed_signal_host_us_median", "rpc_floor_empty_submit_us_median")})
PY
