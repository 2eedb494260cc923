#!/usr/bin/env bash
# Copies GoogleTest's sources and nlohmann/json's headers (from this machine's
# Debian packages) into build/gpu-deps, for bench/gpu.sh on machines that cannot
# install packages.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh"
[ -d /usr/src/googletest ] || { echo "gpu-deps: /usr/src/googletest missing (package googletest)" >&2; exit 1; }
deps=$root/build/gpu-deps
rm -rf "$deps"
mkdir -p "$deps/json-include"
cp -r /usr/src/googletest "$deps/googletest"
cp -r /usr/include/nlohmann "$deps/json-include/nlohmann"
du -sh "$deps"
