#!/usr/bin/env bash
# Installs the Python package (client/python) with pip, offline, and runs tests/python with
# pytest against the built daemon and libkerneld_c.so. Fails when pytest fails, collects
# nothing, or skips anything (every test here must run on a CPU-only machine).
#   run_pytest.sh PYTHON SOURCE_DIR BUILD_DIR KERNELD KCTL LIBKERNELD_C NAME [PYTEST_ARGS...]
# NAME "client": PYTHON is Debian's python3; the package goes into a virtual environment that
# sees its python3-numpy and python3-pytest, and the numpy client's tests run (test_client.py,
# test_session_death.py).
# NAME "torch": PYTHON is the Python of the test environment scripts/install-deps.sh makes
# (.venv: PyTorch 2.13 CPU, numpy, pytest); the package goes into a folder of the build put on
# its path, and every test runs, the torch layer's included.
set -u
python=$1
src=$(realpath "$2") build=$(realpath "$3") kerneld=$(realpath "$4") kctl=$(realpath "$5")
lib=$(realpath "$6") name=$7
shift 7
stage=$build/python/src-$name
rm -rf "$stage" && mkdir -p "$stage"
tar -C "$src/client/python" --exclude=build --exclude='*.egg-info' --exclude=__pycache__ \
  --exclude='libkerneld_c.so*' -cf - . | tar -C "$stage" -xf - || exit 1
case "$name" in
  client)
    venv=$build/python/venv
    if [ ! -x "$venv/bin/python" ]; then
      "$python" -m venv --system-site-packages "$venv" || exit 1
    fi
    "$venv/bin/pip" install --quiet --no-build-isolation --no-index --force-reinstall \
      --no-deps "$stage" || exit 1
    run=("$venv/bin/python")
    tests=(test_client.py test_session_death.py)
    "$venv/bin/python" -c 'import numpy, pytest' || {
      echo "run_pytest: $python lacks numpy or pytest (scripts/install-deps.sh)"; exit 1; }
    ;;
  torch)
    if [ ! -x "$python" ]; then
      echo "run_pytest: no test environment at $python (scripts/install-deps.sh makes it)"
      exit 1
    fi
    site=$build/python/site-torch
    rm -rf "$site"
    "$python" -m pip install --quiet --disable-pip-version-check --no-build-isolation \
      --no-index --no-deps --target "$site" "$stage" || exit 1
    export PYTHONPATH=$site
    run=("$python")
    tests=(.)
    "$python" -c 'import numpy, torch, pytest' || {
      echo "run_pytest: $python lacks numpy, torch or pytest (scripts/install-deps.sh)"; exit 1; }
    ;;
  *) echo "run_pytest: NAME must be client or torch, not $name"; exit 2 ;;
esac
log=$build/python/pytest-$name.log
cd "$src/tests/python" || exit 1
KERNELD_LIB=$lib KD_KERNELD=$kerneld KD_KCTL=$kctl PYTHONDONTWRITEBYTECODE=1 \
  "${run[@]}" -m pytest -p no:cacheprovider -q -rfEs --ignore=gpu "$@" "${tests[@]}" 2>&1 |
  tee "$log"
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
