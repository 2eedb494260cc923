#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and runs the main
# job on its embedded default — for now the solver benchmark (dash-bench solvers).
# Extra arguments go to dash-bench, e.g. `scripts/run.sh --preset full`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${DASH_BUILD_DIR:-$root/build/release}
bash "$root/scripts/build.sh" "$build_dir"
mkdir -p "$root/results"
"$build_dir/bench/dash-bench" solvers --json "$root/results/solvers.json" "$@"
