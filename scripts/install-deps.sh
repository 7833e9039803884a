#!/usr/bin/env bash
# Installs what kerneld builds and tests with, skipping what is present, and says what it
# installed:
#   1. Debian 12 packages (as root, or through sudo when it exists);
#   2. the Python test environment .venv/: Debian's python3 with PyTorch 2.13 (CPU), numpy,
#      pytest, torchtitan and triton from PyPI (tests/python, run by ctest python_torch_test);
#   3. cuBLAS headers and libcublasLt, where nvcc is here but its toolkit has no cuBLAS (a toolkit
#      assembled from NVIDIA's pip wheels): the nvidia-cublas wheel, with pip, into
#      .deps/nvidia-cublas/ (CMake looks there: cmake/cublas.cmake).
# Nothing outside the repository is touched but the Debian packages.
#   scripts/install-deps.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

packages=(
  cmake ninja-build g++ make pkg-config curl
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libcivetweb-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format
  # The numpy client's tests run on Debian's python3; the torch layer's in .venv (step 3).
  python3 python3-numpy python3-pytest python3-venv python3-setuptools
  # The HIP backend (KD_HIP: hipcc and libamdhip64 of ROCm 5.2) and the AMD code objects of the
  # portable GPU kernels with their disassembly tests: hipcc (clang 15, llvm-objdump-15,
  # clang-offload-bundler-15) for gfx90a/gfx940, clang-19 with lld-19 for gfx942. About
  # 140 MB to download and 700 MB installed on a fresh Debian 12.
  hipcc libamdhip64-dev rocm-device-libs clang-19 lld-19
  # make sanitize / make fuzz: Debian's clang with libFuzzer and the ASan/UBSan runtimes
  clang-14 libclang-rt-14-dev
  # make package: CPack's DEB generator takes the runtime dependencies from dpkg-shlibdeps
  dpkg-dev
)

# The Python test environment's packages, pinned: torch 2.13.0 is the CPU build (on the
# development and CI machines pip takes it from local disk; elsewhere it is PyPI's).
KD_TORCH_VERSION=2.13.0
# torchtitan (and triton, which its quantization components import) for kerneld.torchtitan's
# tests; kerneld.torchtitan names the torchtitan release it was written against.
python_packages=("torch==${KD_TORCH_VERSION}" "numpy==2.4.6" "pytest==9.1.1"
                 "torchtitan==0.3.0" "triton==3.8.0")
# cuBLAS 13 for a CUDA 13 toolkit without it (headers for the build; the library for the tile
# GEMM's test and benchmark, which link it as their peer).
KD_CUBLAS_WHEEL="nvidia-cublas==13.1.1.3"

installed=()
# pip's output goes to a log, shown when it fails.
pip_quiet() {
  local log
  log=$(mktemp /tmp/kd_install_deps.XXXXXX)
  if ! "$@" --disable-pip-version-check >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "install-deps: failed: $*" >&2
    return 1
  fi
  rm -f "$log"
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || {
      echo "install-deps: need root or sudo to install: ${missing[*]}" >&2
      exit 1
    }
    sudo="sudo"
  fi
  echo "install-deps: installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
  installed+=("Debian packages (${#missing[@]})")
fi

# 2. The Python test environment.
venv=$root/.venv
want="torch ${KD_TORCH_VERSION}"
have=""
[ -x "$venv/bin/python" ] &&
  have=$("$venv/bin/python" -c 'import torch, numpy, pytest, torchtitan, triton; print("torch", torch.__version__.split("+")[0])' 2>/dev/null || true)
if [ "$have" != "$want" ]; then
  echo "install-deps: making .venv (Debian's python3) with ${python_packages[*]}"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  pip_quiet "$venv/bin/python" -m pip install "${python_packages[@]}"
  installed+=(".venv: ${python_packages[*]}")
fi

# 3. cuBLAS where the CUDA toolkit lacks it: nvcc's own include path decides.
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
dest=$root/.deps/nvidia-cublas
if [ -n "$nvcc" ] && ! echo '#include <cublasLt.h>' | "$nvcc" -E -x cu - -o /dev/null 2>/dev/null &&
   [ ! -e "$dest/nvidia/cu13/include/cublasLt.h" ]; then
  echo "install-deps: the CUDA toolkit of $nvcc has no cuBLAS; $KD_CUBLAS_WHEEL into $dest"
  rm -rf "$dest"
  pip_quiet "$venv/bin/python" -m pip install --no-deps --target "$dest" "$KD_CUBLAS_WHEEL"
  installed+=("$KD_CUBLAS_WHEEL in .deps/nvidia-cublas")
fi

if [ ${#installed[@]} -gt 0 ]; then
  printf 'install-deps: installed %s\n' "${installed[@]}"
else
  echo "install-deps: everything was already installed"
fi
