#!/usr/bin/env bash
# Fails (exit 1, naming file, line and rule) when an #include crosses the layering of
# docs/ARCHITECTURE.md. Run by ctest as layering_check.
#   scripts/check-layering.sh [ROOT]   checks the repository (default: this script's), after
#                                      checking that the check itself reports a violation
#   scripts/check-layering.sh --check-only ROOT   the check alone
#
# Libraries, lowest first; each may include its own internal headers, the public headers of the
# layers below it and nothing above:
#   core      kernels/*.{cc,h} (but registry.cc), kernels/ops/; public:
#             dtype, tensor, ops, backend, fp8, status_macros, shm_guard, client_string,
#             autotune_key, tune_harness, gemm_config and gemm_fp8_config (config types)
#   backends  kernels/cpu/ and the GPU backend, never each other; public: cpu_backend, and
#             cuda_backend and hip_backend (the GPU backend's two builds). The GPU backend is
#             kernels/gpu/ (its one source and the portable kernels, which include no
#             kernels/cuda/) and kernels/cuda/ (NVIDIA-only: may include kernels/gpu/)
#   registry  kernels/registry.cc; public: registry
#   autotune  kernels/autotune/; public: autotune*.h
#   server/   the daemon; client/ knows only proto/ and include/kerneld/client/
set -euo pipefail

if [ "${1:-}" = "--check-only" ]; then
  shift
else
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  mkdir -p "$dir/kernels/cpu"
  printf '#include "server/daemon.h"\n' > "$dir/kernels/cpu/bad.cc"
  if "$0" --check-only "$dir" >/dev/null 2>&1; then
    echo "check-layering: the check passed kernels/cpu including server/" >&2
    exit 1
  fi
fi

root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files --cached --others --exclude-standard -- '*.cc' '*.h' '*.cu' '*.cuh')
else
  files=$(find . \( -name build -o -name 'build-*' -o -name .git \) -prune -o -type f \
            \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print |
          sed 's|^\./||')
fi

# "file:line:included path" for every quoted or angled include.
includes=$(for f in $files; do
  [ -f "$f" ] || continue
  grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$f" |
    sed -E "s|^([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]([^>\"]+)[>\"].*|$f:\1:\2|"
done)

failed=0
# forbid RULE FILES_REGEX INCLUDE_REGEX [EXCEPT_FILES_REGEX [EXCEPT_INCLUDES_REGEX]]
forbid() {
  local rule=$1 where=$2 what=$3 except=${4:-^$} allowed=${5:-^$}
  local hits
  hits=$(echo "$includes" | awk -F: -v w="$where" -v x="$what" -v e="$except" -v a="$allowed" \
    '$1 ~ w && $1 !~ e && $3 ~ x && $3 !~ a { print }')
  if [ -n "$hits" ]; then
    echo "$hits" | sed "s|\$|   <- $rule|" >&2
    failed=1
  fi
}

network='^(grpc|grpcpp|google/protobuf|prometheus|kerneld/v1/|proto/|server/|client/|kerneld/server/|kerneld/client/)'
upper_public='^kerneld/kernels/(registry|autotune|autotune_cache|autotune_runner|autotune_space|autotune_tuner|cpu_backend|cuda_backend|hip_backend)\.h$'
core='^(kernels/[^/]+\.(cc|h)|kernels/ops/|include/kerneld/kernels/(dtype|tensor|ops|backend|fp8|status_macros|shm_guard|autotune_key|tune_harness)\.h)'
core_except='^kernels/registry\.cc$'

forbid "kernels/ knows no gRPC, protobuf, Prometheus, server or client" \
  '^(kernels/|include/kerneld/kernels/)' "$network"
forbid "public headers include only public headers" '^include/' '^(kernels|server|client|proto|tests|bench)/'
forbid "the kernels API does not include the client API" '^include/kerneld/kernels/' '^kerneld/client/'
forbid "the client API does not include the kernels API" '^include/kerneld/client/' '^kerneld/kernels/'
forbid "client/ knows only proto/ and the client API" '^client/' '^(kernels/|server/|kerneld/kernels/)'
forbid "server/ uses the kernels through their public headers" '^server/' '^(kernels/|client/|kerneld/client/)'
forbid "proto/ is the wire contract alone" '^proto/' '^(kernels/|server/|client/|kerneld/)'
forbid "the core includes no backend, registry or autotune" "$core" \
  "^kernels/(cpu|cuda|autotune)/|$upper_public" "$core_except"
forbid "the CPU backend does not include CUDA, autotune or the registry" '^kernels/cpu/' \
  '^kernels/(cuda|gpu|autotune)/|^kerneld/kernels/(registry|autotune|autotune_cache|autotune_runner|autotune_space|autotune_tuner|cuda_backend|hip_backend)\.h$'
forbid "the CUDA backend does not include the CPU backend, autotune or the registry" \
  '^kernels/cuda/' \
  '^kernels/(cpu|autotune)/|^kerneld/kernels/(registry|autotune|autotune_cache|autotune_runner|autotune_space|autotune_tuner|cpu_backend)\.h$'
# The vendor-neutral GPU backend reaches NVIDIA-only code (kernels/cuda) only through the
# declarations of kernels/gpu/gpu_gemm.h, which each vendor's build implements.
forbid "the GPU backend and portable kernels know only the core and their own factories" \
  '^kernels/gpu/' \
  "^kernels/(cpu|cuda|autotune)/|^kerneld/kernels/(registry|autotune|autotune_cache|autotune_runner|autotune_space|autotune_tuner|cpu_backend)\.h$"
# kerneld_gemm_config (host-only) keeps its heuristic's header beside the kernel it configures.
forbid "autotune does not include backend internals or the registry" '^kernels/autotune/' \
  '^kernels/(cpu|cuda)/|^kerneld/kernels/(registry|cuda_backend|hip_backend)\.h$' '^$' \
  '^kernels/cuda/gemm/gemm_fp8_heuristic\.h$'

if [ "$failed" -ne 0 ]; then
  echo "check-layering: includes above cross the layering (docs/ARCHITECTURE.md)" >&2
  exit 1
fi
echo "check-layering: $(echo "$files" | wc -l) files respect the layering"
