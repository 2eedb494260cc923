#!/usr/bin/env bash
# bench/gpu.sh OUT_DIR — on a CUDA machine with PyTorch: build dash against that
# PyTorch's LibTorch (torch.utils.cmake_prefix_path), run the test suite (the CUDA
# tests included) and the GPU benchmarks, and write logs and JSON to OUT_DIR.
# Budget: under 5 minutes on one H200.
#
# Such machines may have no GoogleTest or nlohmann/json and no network: run
# `bash scripts/gpu-deps.sh` on a machine with the Debian packages first; it puts
# both into build/gpu-deps, which travels with the tree (carry it).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 OUT_DIR" >&2; exit 2; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
build=${DASH_GPU_BUILD:-$root/build/gpu}
deps=${DASH_GPU_DEPS:-$root/build/gpu-deps}
start=$(date +%s)
stamp() { echo "[gpu.sh $(( $(date +%s) - start ))s] $*" | tee -a "$out/timeline.txt"; }

args=(-DCMAKE_BUILD_TYPE=Release)
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
[ -n "$torch_prefix" ] && args+=("-DCMAKE_PREFIX_PATH=$torch_prefix")
[ -d "$deps/googletest" ] && args+=("-DDASH_GTEST_SOURCE_DIR=$deps/googletest")
[ -d "$deps/json-include" ] && args+=("-DDASH_JSON_INCLUDE_DIR=$deps/json-include")
device=$(python3 -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")' 2>/dev/null || echo cpu)
stamp "torch prefix: ${torch_prefix:-system}; device: $device"
{ nvidia-smi || true; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' || true; } \
  > "$out/machine.txt" 2>&1

cmake -S "$root" -B "$build" "${args[@]}" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" > "$out/build.log" 2>&1 || { grep -m 20 error "$out/build.log"; exit 1; }
stamp "built"
ctest --test-dir "$build" -j "$(nproc)" --timeout 300 --output-on-failure > "$out/ctest.log" 2>&1 \
  || stamp "ctest reported failures (see ctest.log)"
grep -E "tests passed|tests failed" "$out/ctest.log" | tee -a "$out/timeline.txt" || true
"$build/tests/test_cuda" > "$out/test_cuda.log" 2>&1 || stamp "test_cuda failed"
stamp "tests done"

bench="$build/bench/dash-bench"
"$bench" solvers --device "$device" --preset full --json "$out/solvers.json" > "$out/solvers.txt" 2>&1
stamp "solver benchmark done"
# Warm-started EVD one root period later, next to every method from scratch: where
# eigh is slow against matmuls (cuSOLVER), keeping bases should pay most.
"$bench" solvers --device "$device" --preset full --methods evd,cn,ndb --warm-start 1 \
  --json "$out/solvers-warm-start.json" > "$out/solvers-warm-start.txt" 2>&1
stamp "warm-start solver benchmark done"
"$bench" step --device "$device" --preset llama-953m --layers 2 --block 1024 --frequencies 1,10 \
  --scalings fro,multi-pi --json "$out/step-953m-2layers-1024.json" > "$out/step-953m-2layers-1024.txt" 2>&1
stamp "step benchmark done"
"$bench" step --device "$device" --preset llama-953m --layers 2 --block 1024 --frequencies 10 --methods ndb,cn \
  --scalings multi-pi --precisions fp32,fp16 --profile 1 --json "$out/step-profile.json" > "$out/step-profile.txt" 2>&1
stamp "profile done"
