#!/usr/bin/env bash
# build.sh BUILD_DIR [cmake args...]: set up packages, configure (Release) and build
# everything, the Python extension included, then install the Python package `dash`
# for the interpreter scripts/python.sh picks (reusing this build; nothing compiles twice).
# DASH_BUILD_TARGETS (space-separated): build only those (and what they need), e.g. the
# main job's "dash-train dash_python"; a later full build of the same folder adds the rest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$1; shift
bash "$root/scripts/setup.sh"
python=$(bash "$root/scripts/python.sh")
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DDASH_BUILD_PYTHON=ON -DPython3_EXECUTABLE="$python" "$@"
targets=()
for target in ${DASH_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
DASH_CMAKE_BUILD_DIR=$build_dir bash "$root/scripts/install-python.sh"
