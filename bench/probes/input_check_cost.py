"""Cost of inverse_root's admissibility check (finite, symmetric, non-negative
diagonal; src/kernels/stack_reductions.cpp) against whole root computations of the
same stack: the same ATen reductions, timed alone.

    "$(scripts/python.sh)" bench/probes/input_check_cost.py        (docs/reliability.md)
"""

import time

import torch

import dash


def median_ms(function, repetitions):
    function()
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3


def main():
    torch.manual_seed(0)
    gradients = torch.randn(64, 256, 512)
    stack = gradients @ gradients.transpose(1, 2)
    asymmetry = torch.empty_like(stack)

    def check():
        torch.maximum(stack.amax((1, 2), keepdim=True), -stack.amin((1, 2), keepdim=True))
        torch.sub(stack, stack.transpose(1, 2), out=asymmetry)
        torch.maximum(asymmetry.amax((1, 2), keepdim=True), -asymmetry.amin((1, 2), keepdim=True))
        stack.diagonal(0, 1, 2).amin(1, keepdim=True)

    check_ms = median_ms(check, 5)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), stack {tuple(stack.shape)}")
    print(f"admissibility check: {check_ms:.1f} ms")
    for method in ("evd", "ndb"):
        root_ms = median_ms(lambda: dash.inverse_root(stack, 4, method=method, newton_db_evaluation="matmuls"), 3)
        print(f"inverse_root {method}: {root_ms:.0f} ms (check = {100 * check_ms / root_ms:.1f} % of it)")


if __name__ == "__main__":
    main()
