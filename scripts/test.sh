#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs the whole suite.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${DASH_BUILD_DIR:-$root/build/release}
bash "$root/scripts/build.sh" "$build_dir"
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
