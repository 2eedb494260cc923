#!/usr/bin/env bash
# The README's test command: installs what is missing, builds (which also installs
# the Python package), runs the CTest suite, then the pytest suite.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${DASH_BUILD_DIR:-$root/build/release}
bash "$root/scripts/build.sh" "$build_dir"
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
# The installed package, not the source tree, is what the tests import.
cd "$root" && DASH_BUILD_DIR=$build_dir "$(bash scripts/python.sh)" -m pytest -ra
