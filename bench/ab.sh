#!/usr/bin/env bash
# bench/ab.sh OLD_SRC OUT_DIR ROUNDS -- DASH_BENCH_ARGS...
#
# Before/after on one machine in one session: builds dash-bench from OLD_SRC (an
# earlier commit, e.g. `git archive <commit> | tar -x -C OLD_SRC`) and from this
# tree, against the same LibTorch, then runs `dash-bench DASH_BENCH_ARGS` with the
# two builds in turn, ROUNDS times (old, new, old, new, ...). Each run's output
# and JSON land in OUT_DIR/{old,new}-ROUND.{txt,json}; compare the ratios of runs
# next to each other, not numbers from different sessions.
#
# LibTorch: PyTorch's (torch.utils.cmake_prefix_path) when the interpreter in
# $PYTHON (default python3) imports torch, else whatever CMake finds. Builds go to
# build/ab-old and build/ab-new; DASH_AB_NEW_BUILD reuses another build folder of
# this tree (bench/gpu.sh's build/gpu, say). On a machine without GoogleTest or
# nlohmann/json, carry build/gpu-deps (scripts/gpu-deps.sh) as for bench/gpu.sh.
set -euo pipefail
[ $# -ge 4 ] && [ "$4" = "--" ] || { echo "usage: $0 OLD_SRC OUT_DIR ROUNDS -- DASH_BENCH_ARGS..." >&2; exit 2; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
old_src=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
rounds=$3
shift 4
python=${PYTHON:-python3}
deps=${DASH_GPU_DEPS:-$root/build/gpu-deps}

args=(-DCMAKE_BUILD_TYPE=Release -DDASH_BUILD_APPS=OFF -DDASH_BUILD_EXAMPLES=OFF -DDASH_BUILD_PYTHON=OFF)
if prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2> /dev/null); then
  args+=("-DCMAKE_PREFIX_PATH=$prefix")
fi
[ -d "$deps/googletest" ] && args+=("-DDASH_GTEST_SOURCE_DIR=$deps/googletest")
[ -d "$deps/json-include" ] && args+=("-DDASH_JSON_INCLUDE_DIR=$deps/json-include")

# build SOURCE BUILD_DIR: configures once, then builds dash-bench.
build() {
  [ -f "$2/CMakeCache.txt" ] || cmake -S "$1" -B "$2" "${args[@]}" > "$out/configure-$(basename "$2").txt" 2>&1
  cmake --build "$2" -j "$(nproc)" --target dash-bench > "$out/build-$(basename "$2").txt" 2>&1
}
old_build=$root/build/ab-old
new_build=${DASH_AB_NEW_BUILD:-$root/build/ab-new}
build "$old_src" "$old_build" || { echo "ab.sh: the old build failed (see $out)" >&2; exit 1; }
build "$root" "$new_build" || { echo "ab.sh: the new build failed (see $out)" >&2; exit 1; }

for round in $(seq 1 "$rounds"); do
  for side in old new; do
    binary=$old_build/bench/dash-bench
    [ "$side" = new ] && binary=$new_build/bench/dash-bench
    echo "== $side, round $round: dash-bench $*"
    "$binary" "$@" --json "$out/$side-$round.json" 2>&1 | tee "$out/$side-$round.txt"
  done
done
