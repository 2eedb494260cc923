#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and runs the main
# job on its embedded default: `dash-train compare`, a small Llama trained on the
# Python manual with AdamW, DASH-EVD, DASH-NDB (Frobenius and power-iteration
# scaling) and DASH-CN (≈ 7 minutes on 2 cores after the build). Output: results/compare/.
# It also installs the Python package `dash` (scripts/install-python.sh).
# Extra arguments go to dash-train compare, e.g. `scripts/run.sh --seeds 1,2,3`.
# It replaces the runs of an earlier invocation (--overwrite) unless given --resume.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${DASH_BUILD_DIR:-$root/build/release}
# Only what the job runs: the library, dash-train and the Python extension (the tests,
# benchmarks and examples are built by scripts/test.sh, in the same folder).
DASH_BUILD_TARGETS="dash-train dash_python" bash "$root/scripts/build.sh" "$build_dir"   # also installs `import dash`
cd "$root"
replace=(--overwrite)
for argument in "$@"; do
  case $argument in --resume | --resume=* | --overwrite | --overwrite=*) replace=() ;; esac
done
"$build_dir/apps/dash_train/dash-train" compare "${replace[@]}" "$@"
