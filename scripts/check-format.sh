#!/usr/bin/env bash
# Fails (exit 1, listing the files) when a C++ or CUDA source of the repository is not formatted as
# the repo's .clang-format says (clang-format 14, Debian 12's). Run by ctest as format_check.
#   scripts/check-format.sh [ROOT]   checks the repository (default: this script's), its tracked
#                                    .cc/.h/.cu/.cuh files (every such file when ROOT is not a
#                                    git checkout), after checking that the check itself reports
#                                    a misformatted file
#   scripts/check-format.sh --check-only ROOT   the check alone
set -euo pipefail

if ! command -v clang-format >/dev/null; then
  echo "check-format: clang-format is not installed (scripts/install-deps.sh installs it)" >&2
  exit 1
fi

if [ "${1:-}" = "--check-only" ]; then
  shift
else
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  cp "$(dirname "$0")/../.clang-format" "$dir/"
  printf 'int  main( ) {return 0;}\n' > "$dir/bad.cc"
  if "$0" --check-only "$dir" >/dev/null 2>&1; then
    echo "check-format: the check passed a misformatted file" >&2
    exit 1
  fi
fi

root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  list() { git ls-files -z --cached --others --exclude-standard -- '*.cc' '*.h' '*.cu' '*.cuh'; }
else
  list() { find . \( -name build -o -name 'build-*' -o -name .git \) -prune -o -type f \
             \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0; }
fi

bad=$(list | xargs -0 -r -n 16 -P 2 sh -c '
  for f; do
    [ -f "$f" ] || continue  # deleted in the working tree
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || echo "$f"
  done' sh)
if [ -n "$bad" ]; then
  echo "check-format: not clang-format clean (run clang-format -i on them):" >&2
  echo "$bad" | sort >&2
  exit 1
fi
echo "check-format: $(list | tr -cd '\0' | wc -c) files clean"
