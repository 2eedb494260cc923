#!/usr/bin/env bash
# bench/gpu.sh OUT_DIR [BUDGET_SECONDS] — on a CUDA machine with PyTorch: build dash
# against that PyTorch's LibTorch (torch.utils.cmake_prefix_path), run the CUDA
# tests, and measure the optimizer step on the paper's per-GPU shapes. Logs and
# JSON go to OUT_DIR/gpu-results.tgz (and OUT_DIR/summary.txt).
#
# Stages run in priority order, each under `timeout`, and the script stops
# starting stages when BUDGET_SECONDS (default 480) would be exceeded, so a
# short device lease still returns the build, the tests and the first benchmarks.
#
# DASH_GPU_STAGES="test_cuda cuda_step_profile ..." runs only the named stages
# (configure and build always run); unset, all of them. DASH_GPU_PROFILE_CONFIGS
# names cuda_step_profile's configurations (default ndb-multi-pi-fp32,evd; the
# names are ROOT_CONFIGS in bench/cuda_step_probe.py).
#
# DASH_DS_PATH names a checkout of Meta's Distributed Shampoo (github.com/
# facebookresearch/optimizers; default build/peers/optimizers where it exists; carry it,
# it is ignored by git). The peer_step stages run it next to dash in the same process
# (bench/peer_step.py); without it they run dash alone. DASH_PEER_ARGS is appended to
# their arguments (a rehearsal on a CPU: "--preset llama-tiny --layers 1 --block 256").
#
# Such machines may have no GoogleTest or nlohmann/json and no network: run
# `bash scripts/gpu-deps.sh` on a machine with the Debian packages first; it puts
# both into build/gpu-deps, which travels with the tree (carry it).
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 OUT_DIR [BUDGET_SECONDS]" >&2; exit 2; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
budget=${2:-480}
logs=$(mktemp -d)
build=${DASH_GPU_BUILD:-$root/build/gpu}
deps=${DASH_GPU_DEPS:-$root/build/gpu-deps}
python=${PYTHON:-python3}
ds_path=${DASH_DS_PATH:-$root/build/peers/optimizers}
ds_args=()
[ -d "$ds_path" ] && ds_args=(--ds-path "$ds_path")
start=$(date +%s)
failed=()
elapsed() { echo $(( $(date +%s) - start )); }
stamp() { echo "[gpu.sh $(elapsed)s] $*" | tee -a "$logs/timeline.txt"; }
pack() {
  cp "$logs/timeline.txt" "$out/summary.txt" 2>/dev/null
  tar -czf "$out/gpu-results.tgz" -C "$logs" . 2>/dev/null
}
trap pack EXIT
show() { [ -f "$logs/$1.txt" ] && cat "$logs/$1.txt"; }

# stage NAME LIMIT COMMAND...: runs COMMAND with its output in NAME.txt, under
# LIMIT seconds or what is left of the budget less 10 s; skipped when that is
# under 20 s. A failed stage is remembered for the exit status.
stage() {
  local name=$1 limit=$2
  shift 2
  if [ -n "${DASH_GPU_STAGES:-}" ] && [[ "$name" != configure* && "$name" != build ]] &&
    [[ " ${DASH_GPU_STAGES//,/ } " != *" $name "* ]]; then
    return 0
  fi
  local left=$(( budget - $(elapsed) - 10 ))
  if [ "$left" -lt 20 ]; then
    stamp "$name: skipped (budget spent)"
    failed+=("$name")
    return 1
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  timeout --kill-after=5 "$limit" "$@" > "$logs/$name.txt" 2>&1
  local rc=$?
  stamp "$name: exit $rc$( { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && echo ' (timed out)')"
  [ $rc -eq 0 ] || failed+=("$name")
  pack
  return $rc
}

{ nvidia-smi || true; "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' || true
  nproc; } > "$logs/machine.txt" 2>&1
torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
device=$("$python" -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')
stamp "torch prefix: $torch_prefix; device: $device; $(grep -m1 torch "$logs/machine.txt")"

args=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$torch_prefix" -DDASH_BUILD_APPS=OFF -DDASH_BUILD_EXAMPLES=OFF)
# Ninja for a new build folder (an existing one keeps its generator).
command -v ninja > /dev/null && [ ! -f "$build/CMakeCache.txt" ] && args+=(-G Ninja)
[ -d "$deps/googletest" ] && args+=("-DDASH_GTEST_SOURCE_DIR=$deps/googletest")
[ -d "$deps/json-include" ] && args+=("-DDASH_JSON_INCLUDE_DIR=$deps/json-include")
targets=(dash-bench test_cuda test_dash_allocations test_block_update)
python_args=(-DDASH_BUILD_PYTHON=ON "-DPython3_EXECUTABLE=$(command -v "$python")")
pybind_dir=$("$python" -m pybind11 --cmakedir 2>/dev/null) && python_args+=("-Dpybind11_DIR=$pybind_dir")
if stage configure 120 cmake -S "$root" -B "$build" "${args[@]}" "${python_args[@]}"; then
  targets+=(dash_python)
else
  stage configure-without-python 120 cmake -S "$root" -B "$build" "${args[@]}" -DDASH_BUILD_PYTHON=OFF || exit 1
  failed=()  # the fallback configured: the Python stages are left out, not failed
fi
# Keeps going past a failing file (ninja -k 0): whatever did build is still run.
keep_going=(--)
grep -q "CMAKE_GENERATOR:INTERNAL=Ninja" "$build/CMakeCache.txt" && keep_going+=(-k 0)
if ! stage build 300 cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" "${keep_going[@]}"; then
  show build | grep -m 20 -B2 -A6 "error"
fi

stage test_cuda 120 "$build/tests/test_cuda"
show test_cuda | grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran"
stage test_fused_cuda 60 "$build/tests/test_block_update" --gtest_filter='*Cuda*'
show test_fused_cuda | grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|actual"
stage test_allocations_cuda 90 "$build/tests/test_dash_allocations" --gtest_filter='*cuda*:NonRootStep.*'
show test_allocations_cuda | grep -E "^\[  (PASSED|FAILED|SKIPPED) "
if [[ " ${targets[*]} " == *" dash_python "* ]]; then
  stage pytest_cuda 120 env PYTHONPATH="$build/python" PYTHONDONTWRITEBYTECODE=1 DASH_BUILD_DIR="$build" \
    "$python" -m pytest -q -p no:cacheprovider -k cuda "$root/tests/python/test_inverse_root.py" \
    "$root/tests/python/test_optimizer_api.py"
  show pytest_cuda | tail -3
  # The paper's comparison: Distributed Shampoo (eigh, coupled Newton; fp32 as TF32)
  # and dash's root methods, llama-953m with 2 layers (about one GPU's share of 8),
  # B = 1024, f = 10 and f = 1, each configuration with its ratio to DS in this run.
  peer=(env PYTHONPATH="$build/python" PYTHONUNBUFFERED=1 "$python" "$root/bench/peer_step.py" --device "$device"
    --preset llama-953m --block 1024 --tf32 1 "${ds_args[@]}")
  stage peer_step 240 "${peer[@]}" --layers 2 --frequencies 10,1 ${DASH_PEER_ARGS:-} --json "$logs/peer_step.json"
  show peer_step
  stage cuda_step_probe 150 env PYTHONPATH="$build/python" PYTHONUNBUFFERED=1 \
    "$python" "$root/bench/cuda_step_probe.py" --layers 2 --block 1024 --tf32 1 --json "$logs/cuda_step_probe.json"
  show cuda_step_probe
  # Device time per phase and per kernel (the bench's --profile sees host time only).
  mkdir -p "$logs/traces"
  stage cuda_step_profile 120 env PYTHONPATH="$build/python:$root/bench" PYTHONUNBUFFERED=1 \
    "$python" "$root/bench/cuda_step_profile.py" --layers 2 --block 1024 --tf32 1 --trace "$logs/traces" \
    --configs "${DASH_GPU_PROFILE_CONFIGS:-ndb-multi-pi-fp32,evd}" --json "$logs/cuda_step_profile.json"
  show cuda_step_profile
fi

# The paper's rows (dash-algorithm.md §7): llama-953m on 8 GPUs is about two of its
# 16 layers per GPU; "fp32" there ran as TF32. Sequential execution is the
# per-block loop of Distributed Shampoo, in the same binary and the same run.
# One configuration at a time (--interleave 0): all optimizers alive at once need
# ~6 GB of state and 8–14 GB of solver workspace each here, and 25 of them ran
# out of the H200's 140 GB. GPU timings are steady enough to compare in sequence.
bench=("$build/bench/dash-bench" step --device "$device" --preset llama-953m --layers 2 --block 1024 --tf32 1
  --interleave 0 --baseline 0)
# Memory (docs/benchmarks.md, "Optimizer memory"): the default workspace limit (0.1 of
# the state) against none, with the state, the workspace kept and each step's
# measured peak (the caching allocator's reports) beside the time.
stage step_memory 120 "${bench[@]}" --frequencies 10 --methods ndb,cn --scalings multi-pi --precisions fp32 \
  --executions batched --workspace-limits 0.1,0 --warmup 11 --steps 10 --json "$logs/step_memory.json"
show step_memory
stage step_f1_matmul 120 "${bench[@]}" --frequencies 1 --methods cn,ndb --scalings fro,pi \
  --precisions fp32,fp16 --executions batched,sequential --warmup 2 --steps 3 --json "$logs/step_f1_matmul.json"
show step_f1_matmul
# f = 10, the matmul solvers in 32 and 16 bits, each against its own per-block run
# (x seq), next to the per-block EVD baseline.
stage step_f10_matmul 120 "${bench[@]}" --baseline 1 --frequencies 10 --methods ndb,cn --scalings multi-pi \
  --precisions fp32,bf16 --executions batched,sequential --warmup 11 --steps 10 --json "$logs/step_f10_matmul.json"
show step_f10_matmul
# EVD batched against per-block, the warm-started eigenbases and NDB evaluated by eigh
# (warm eigenbases: docs/benchmarks.md), f = 10.
stage step_f10_evd 120 "${bench[@]}" --baseline 1 --frequencies 10 --methods evd,ndb --ndb-evaluations eigh \
  --scalings multi-pi --precisions fp32 --executions batched --eigen-tolerances 0,0.05 --warmup 11 --steps 10 \
  --json "$logs/step_f10_evd.json"
show step_f10_evd
stage step_profile 90 "${bench[@]}" --frequencies 10 --methods ndb,cn --scalings multi-pi --precisions fp32,bf16 \
  --executions batched --profile 1 --warmup 11 --steps 10 --json "$logs/step_profile.json"
show step_profile
# The preconditioning products L̄ Ĝ R̄ in bf16 against TF32 (preconditioning_precision).
stage step_preconditioning 60 "${bench[@]}" --frequencies 10 --methods ndb --scalings multi-pi --precisions bf16 \
  --executions batched --preconditioning-precisions fp32,bf16 --profile 1 --warmup 11 --steps 10 \
  --json "$logs/step_preconditioning.json"
show step_preconditioning
stage step_f1_evd 100 "${bench[@]}" --frequencies 1 --methods evd --precisions fp32 --executions batched,sequential \
  --warmup 1 --steps 2 --json "$logs/step_f1_evd.json"
show step_f1_evd
stage solvers 90 "$build/bench/dash-bench" solvers --device "$device" --preset full --tf32 1 \
  --json "$logs/solvers.json"
show solvers
# The whole model (16 layers, 953 M parameters) on one GPU, f = 10: the configurations
# the 2-layer rows single out, one root period of warm-up. Last: it is the longest.
if [[ " ${targets[*]} " == *" dash_python "* ]]; then
  stage peer_step_full 240 "${peer[@]}" --layers 16 --frequencies 10 --warmup-periods 1 \
    --configs ds-eigh-fp32,ds-cn-fp32,dash-ndb-pi-fp32,dash-cn-fro-fp16,dash-ndb-pi-bf16 \
    ${DASH_PEER_ARGS:-} --json "$logs/peer_step_full.json"
  show peer_step_full
fi
stamp "done${failed[*]:+; failed: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
