#!/usr/bin/env bash
# Runs every libFuzzer target of BUILD (a KD_FUZZ=ON build) for FUZZ_SECONDS each (25 by
# default), starting from its seed corpus in tests/fuzz/corpus/<target>/ (copied: the run's
# new inputs do not land in the repo). A crash, a leak, a sanitizer report or a run over 10 s
# fails, and the input that did it is kept as BUILD/fuzz-artifacts/<target>-crash-<sha1>.
#   scripts/fuzz.sh [BUILD]    e.g. FUZZ_SECONDS=600 scripts/fuzz.sh build-asan
set -euo pipefail
build=${1:-build-asan}
seconds=${FUZZ_SECONDS:-25}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$build/fuzz-artifacts"
status=0
passed=0
failed=0
for target in ring_request cache_file register_buffer; do
  work=$(mktemp -d /tmp/kd_fuzz_corpus.XXXXXX)
  cp "$root/tests/fuzz/corpus/$target/"* "$work/"
  log="$build/fuzz-artifacts/$target.log"
  if "$build/tests/fuzz/${target}_fuzzer" -max_total_time="$seconds" -timeout=10 \
       -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 \
       -artifact_prefix="$build/fuzz-artifacts/$target-" "$work" > "$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    echo "fuzz: $target: ${runs} inputs in ${seconds} s, no finding"
    passed=$((passed + 1))
  else
    echo "fuzz: $target FAILED; the end of $log:"
    tail -40 "$log"
    status=1
    failed=$((failed + 1))
  fi
  rm -rf "$work"
done
echo "fuzz: $passed passed, $failed failed"
exit $status
