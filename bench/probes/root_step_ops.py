#!/usr/bin/env python3
"""Where a root step's time goes, op by op: torch.profiler over one dash.Dash step of
llama-tiny's shapes (as `dash-bench step --preset llama-tiny`) in which every factor's
root is recomputed, after two warm-up steps. Prints the ops by self time, grouped by
input shape, so that each memory pass over a factor stack shows as its own row. dash's
own CPU loops (kernels/stack_reductions.h, stack_select.h) are no ATen ops: their time
is in the `dash::roots` row's self time.

    MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=17179869184 \\
      /usr/bin/python3 bench/probes/root_step_ops.py [--method cn] [--precision bf16] [--layers 2] [--rows 30]

Run it with nothing else on the machine; the package from the build tree with
PYTHONPATH=build/release/python.
"""

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

import dash


def llama_shapes(layers, d=512, hidden=1408, vocab=8192):
    """bench/model_shapes.cpp's llama(): embedding, per layer q/k/v/o, gate, up, down and two norms, final norm, head."""
    shapes = [(vocab, d)]
    for _ in range(layers):
        shapes += [(d, d)] * 4 + [(hidden, d), (hidden, d), (d, hidden), (d,), (d,)]
    return shapes + [(d,), (vocab, d)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--method", default="cn")
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--block", type=int, default=256)
    parser.add_argument("--rows", type=int, default=30)
    args = parser.parse_args()
    torch.manual_seed(0)
    params = [torch.nn.Parameter(0.02 * torch.randn(*shape)) for shape in llama_shapes(args.layers)]
    optimizer = dash.Dash(params, block_size=args.block, root_method=args.method, precision=args.precision,
                          root_frequency=1, start_step=1, execution="batched")

    def step():
        for param in params:
            param.grad = 0.01 * torch.randn_like(param)
        optimizer.step()

    for _ in range(2):
        step()
    start = time.perf_counter()
    step()
    print(f"root step, unprofiled: {1e3 * (time.perf_counter() - start):.1f} ms")
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    print(prof.key_averages(group_by_input_shape=True).table(
        sort_by="self_cpu_time_total", row_limit=args.rows, max_name_column_width=30, max_shapes_column_width=60))


if __name__ == "__main__":
    main()
