#!/usr/bin/env bash
# Installs the Python package (client/python) with pip, offline, into a virtual environment that
# sees the system's packages (Debian's python3-numpy, python3-torch, python3-pytest), and runs
# tests/python with pytest against the built daemon and libkerneld_c.so. Fails when pytest
# fails, collects nothing, or skips anything (every test here must run on a CPU-only machine).
#   run_pytest.sh PYTHON SOURCE_DIR BUILD_DIR KERNELD KCTL LIBKERNELD_C [PYTEST_ARGS...]
set -u
python=$1
src=$(realpath "$2") build=$(realpath "$3") kerneld=$(realpath "$4") kctl=$(realpath "$5")
lib=$(realpath "$6")
shift 6
venv=$build/python/venv
stage=$build/python/src
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv --system-site-packages "$venv" || exit 1
fi
rm -rf "$stage" && mkdir -p "$stage"
tar -C "$src/client/python" --exclude=build --exclude='*.egg-info' --exclude=__pycache__ \
  --exclude='libkerneld_c.so*' -cf - . | tar -C "$stage" -xf - || exit 1
"$venv/bin/pip" install --quiet --no-build-isolation --no-index --force-reinstall --no-deps \
  "$stage" || exit 1
"$venv/bin/python" -c 'import numpy, torch, pytest' || {
  echo "run_pytest: the environment lacks numpy, torch or pytest (scripts/install-deps.sh)"
  exit 1
}
log=$build/python/pytest.log
cd "$src/tests/python" || exit 1
KERNELD_LIB=$lib KD_KERNELD=$kerneld KD_KCTL=$kctl PYTHONDONTWRITEBYTECODE=1 \
  "$venv/bin/python" -m pytest -p no:cacheprovider -q -rfEs --ignore=gpu "$@" . 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 5 ]; then
  echo "run_pytest: pytest collected no tests"
  exit 1
fi
summary=$(tail -n 1 "$log")
case "$summary" in
  *skipped*) echo "run_pytest: tests were skipped on a machine that must run them all"; exit 1 ;;
  *passed*) ;;
  *) [ "$rc" -eq 0 ] && { echo "run_pytest: no test passed"; exit 1; } ;;
esac
exit "$rc"
