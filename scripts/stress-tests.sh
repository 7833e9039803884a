#!/usr/bin/env bash
# Runs the whole ctest suite of built trees RUNS times each under `ctest -j 2`, with CPU hogs
# (busy loops at normal priority) beside it, and reports every test that failed even once: its
# name, in how many of the runs, and where each failed run's log is. Exit 1 when any test failed
# (or a run could not start), 0 otherwise. It builds nothing: `make stress` builds first.
#   scripts/stress-tests.sh [--runs N] [--hogs N] [--out DIR]
#                           [--build DIR [--exclude LABELS]]
#                           [--sanitize-build DIR [--sanitize-exclude LABELS] [--sanitize-env ENV]]
#   --runs N              suite runs per build (default 5)
#   --hogs N              busy-loop processes for the whole time (default 2: one per core of
#                         the 2-core CI machine)
#   --out DIR             where the logs go (default: a new /tmp/kd-stress.XXXXXX)
#   --build DIR           a regular build, run with --label-exclude LABELS (default "gpu", as
#                         make check)
#   --sanitize-build DIR  the ASan + UBSan build, run with --label-exclude LABELS (default
#                         "gpu|python") and the environment ENV (default the ASAN_OPTIONS and
#                         UBSAN_OPTIONS of make sanitize)
# At least one build. Logs: OUT/<build>/run-<i>/ctest.out (ctest's output), LastTest.log (every
# test's output) and <test>.log (a failed test's own part of it).
set -uo pipefail

runs=5
hogs=2
out=""
build="" exclude="gpu"
san_build="" san_exclude="gpu|python"
san_env="ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:handle_sigbus=0"
san_env+=" UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"

usage() {
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --hogs) hogs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --exclude) exclude=$2; shift 2 ;;
    --sanitize-build) san_build=$2; shift 2 ;;
    --sanitize-exclude) san_exclude=$2; shift 2 ;;
    --sanitize-env) san_env=$2; shift 2 ;;
    -h | --help) usage ;;
    *)
      echo "stress-tests: unknown argument $1" >&2
      usage
      ;;
  esac
done
fail() {
  echo "stress-tests: $*" >&2
  exit 2
}
case "$runs$hogs" in *[!0-9]*) fail "--runs and --hogs take numbers" ;; esac
[ "$runs" -ge 1 ] || fail "--runs must be at least 1"
[ -n "$build$san_build" ] || fail "give --build and/or --sanitize-build"
for dir in $build $san_build; do
  [ -f "$dir/CTestTestfile.cmake" ] || fail "$dir is not a built tree"
done
[ -n "$out" ] || out=$(mktemp -d /tmp/kd-stress.XXXXXX)
mkdir -p "$out" && out=$(cd "$out" && pwd)

hog_pids=()
stop_hogs() {
  for pid in "${hog_pids[@]}"; do kill "$pid" 2> /dev/null; done
  for pid in "${hog_pids[@]}"; do wait "$pid" 2> /dev/null; done
  hog_pids=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$hogs"); do
  bash -c 'while :; do :; done' &
  hog_pids+=($!)
done

declare -A fails logs
order=()
status=0

# The part of LastTest.log that is test $2's output, into $3.
extract_log() {
  awk -v name="$2" '
    $0 ~ "^[0-9]+/[0-9]+ Testing: " name "$" { on = 1 }
    on { print }
    on && $0 ~ "^\"" name "\" end time" { exit }' "$1" > "$3"
}

# run_suite LABEL DIR EXCLUDE ENV
run_suite() {
  local label=$1 dir=$2 excl=$3 env=$4
  echo "stress: $label ($dir): $runs runs of ctest -j 2 --label-exclude \"$excl\"" \
    "${env:+with $env }beside $hogs CPU hogs"
  for i in $(seq "$runs"); do
    local run_dir="$out/$label/run-$i"
    mkdir -p "$run_dir"
    local start=$SECONDS
    # shellcheck disable=SC2086  # ENV is a list of NAME=VALUE words
    (cd "$dir" && env $env ctest -j 2 --label-exclude "$excl" --output-on-failure) \
      > "$run_dir/ctest.out" 2>&1
    local rc=$? took=$((SECONDS - start))
    cp "$dir/Testing/Temporary/LastTest.log" "$run_dir/" 2> /dev/null
    local summary
    summary=$(grep -E "tests passed(, [0-9]+ tests? failed)? out of [0-9]+" "$run_dir/ctest.out" |
      tail -n 1)
    if [ -z "$summary" ]; then
      echo "  run $i: ctest did not report (exit $rc, ${took} s): $run_dir/ctest.out"
      status=1
      continue
    fi
    echo "  run $i: $summary, ${took} s"
    # "	  2 - format_check (Failed)" lines after "The following tests FAILED:".
    local name
    while read -r name; do
      [ -n "$name" ] || continue
      local key="$label $name"
      [ -n "${fails[$key]:-}" ] || order+=("$key")
      fails[$key]=$((${fails[$key]:-0} + 1))
      extract_log "$run_dir/LastTest.log" "$name" "$run_dir/$name.log"
      logs[$key]="${logs[$key]:-} $run_dir/$name.log"
      status=1
    done < <(sed -n '/^The following tests FAILED:/,/^Errors while running CTest/p' \
      "$run_dir/ctest.out" | sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (.*)$/\1/p')
  done
}

[ -z "$build" ] || run_suite "$(basename "$build")" "$build" "$exclude" ""
[ -z "$san_build" ] || run_suite "$(basename "$san_build")" "$san_build" "$san_exclude" "$san_env"
stop_hogs

echo
if [ ${#order[@]} -eq 0 ]; then
  [ $status -eq 0 ] && echo "stress: no test failed in $runs runs of each build; logs in $out"
  [ $status -ne 0 ] && echo "stress: a run did not complete; logs in $out"
  exit $status
fi
echo "stress: tests that failed at least once (of $runs runs each):"
for key in "${order[@]}"; do
  echo "  $key: ${fails[$key]} of $runs runs"
  for log in ${logs[$key]}; do echo "    $log"; done
done
exit 1
