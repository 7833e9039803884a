#!/usr/bin/env bash
# Installs the Debian 12 packages kerneld builds and tests with, skipping what is present.
# Runs as root, or through sudo when it exists.
set -euo pipefail

packages=(
  cmake ninja-build g++ make pkg-config curl
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libcivetweb-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format
  python3 python3-numpy python3-pytest python3-venv python3-setuptools python3-torch
  # The HIP backend (KD_HIP: hipcc and libamdhip64 of ROCm 5.2) and the AMD code objects of the
  # portable GPU kernels with their disassembly tests: hipcc (clang 15, llvm-objdump-15,
  # clang-offload-bundler-15) for gfx90a/gfx940, clang-19 with lld-19 for gfx942. About
  # 140 MB to download and 700 MB installed on a fresh Debian 12; 8 s to download and 52 s to
  # install on the development machine.
  hipcc libamdhip64-dev rocm-device-libs clang-19 lld-19
  # make sanitize / make fuzz: Debian's clang with libFuzzer and the ASan/UBSan runtimes
  clang-14 libclang-rt-14-dev
  # make package: CPack's DEB generator takes the runtime dependencies from dpkg-shlibdeps
  dpkg-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
