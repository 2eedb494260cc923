#!/usr/bin/env bash
# Formats the C++ tree with the repository's .clang-format (in place), or with
# --check lists the files that differ from it and exits 1 if any does.
#   bash scripts/format.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format > /dev/null || { echo "format.sh: clang-format not found (Debian: apt-get install clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files 'src/*.cpp' 'src/*.h' 'include/*.h' 'tests/*.cpp' 'tests/*.h' 'bench/*.cpp' 'bench/*.h' \
  'apps/*.cpp' 'apps/*.h' 'examples/*.cpp')
if [[ "${1:-}" == "--check" ]]; then
  status=0
  for file in "${files[@]}"; do
    if ! clang-format "$file" | cmp -s - "$file"; then echo "$file"; status=1; fi
  done
  exit $status
fi
clang-format -i "${files[@]}"
