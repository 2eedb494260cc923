#!/usr/bin/env python3
"""The Python layer's cost per step: dash.Dash.step against the bare C++ step it wraps,
on a 4×4 parameter that does no preconditioning (the step is all overhead).

    /usr/bin/python3 bench/probes/python_step_overhead.py [--steps 2000]
"""

import argparse
import time

import torch

import dash
from dash.optimizer import _cpp_from_group


def per_step_us(step, steps):
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return 1e6 * (time.perf_counter() - start) / steps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    param = torch.randn(4, 4, requires_grad=True)
    param.grad = torch.randn(4, 4)
    optimizer = dash.Dash([param], lr=1e-3, start_step=10**9, grafting="sgd")
    for _ in range(50):
        optimizer.step()
    options = [_cpp_from_group(group) for group in optimizer.param_groups]
    wrapped = per_step_us(optimizer.step, args.steps)
    bare = per_step_us(lambda: optimizer._cpp.step(options), args.steps)
    print(f"dash.Dash.step {wrapped:.1f} us, bare _C step {bare:.1f} us, Python layer {wrapped - bare:.1f} us "
          f"({args.steps} steps)")


if __name__ == "__main__":
    main()
