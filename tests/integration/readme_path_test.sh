#!/usr/bin/env bash
# The README's second-terminal path: a daemon as `make run` starts it (CPU backend), then
# kerneld_example, kctl status and a scrape of /metrics against it. Fails on any failed check.
#   readme_path_test.sh KERNELD KERNELD_EXAMPLE KCTL
set -u
kerneld=$1; example=$2; kctl=$3
dir=$(mktemp -d /tmp/kd_readme.XXXXXX)
port=$((20000 + RANDOM % 20000))
"$kerneld" --socket="$dir/kerneld.sock" --admin_socket="$dir/admin.sock" \
  --metrics_address=127.0.0.1:$port --backend=cpu > "$dir/kerneld.log" 2>&1 &
daemon=$!
cleanup() { kill $daemon 2> /dev/null; wait $daemon 2> /dev/null; rm -rf "$dir"; }
trap cleanup EXIT
# 60 s: a hang guard, far beyond what a loaded machine takes to start the daemon.
for _ in $(seq 600); do
  [ -S "$dir/admin.sock" ] && break
  kill -0 $daemon 2> /dev/null || break
  sleep 0.1
done
fail=0
"$example" --socket="$dir/kerneld.sock" > "$dir/example.out" 2>&1 || fail=1
cat "$dir/example.out"
grep -q "all checks passed" "$dir/example.out" || fail=1
"$kctl" --admin_socket="$dir/admin.sock" status > "$dir/status.out" 2>&1 || fail=1
grep -q "cpu" "$dir/status.out" || fail=1
# /metrics over real HTTP (bash's /dev/tcp: no curl needed)
exec 3<> "/dev/tcp/127.0.0.1/$port" || fail=1
printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
metrics=$(cat <&3)
exec 3>&-
echo "$metrics" | grep -q 'kerneld_rpc_requests_total{.*method="ring.Submit"' || { echo "no ring.Submit in /metrics"; fail=1; }
echo "$metrics" | grep -q 'kerneld_kernel_duration_seconds_count{.*op="gemm"' || { echo "no gemm kernel histogram"; fail=1; }
[ $fail = 0 ] || { echo "--- kerneld.log"; cat "$dir/kerneld.log"; }
exit $fail
