"""The problem test_distributed.py trains in one process and in each rank: the
shapes and options of the C++ distributed test (tests/distributed/distributed_problem.h),
full and edge blocks at block size 32 in stacks shared between parameters."""

import torch

import dash
from conftest import apply_step, fixed_gradients

SHAPES = [(70, 40), (32, 32), (48, 20), (16,), (64, 32), ()]
STEPS = 6


def make_optimizer(**distributed):
    generator = torch.Generator().manual_seed(3)
    params = [torch.randn(shape, generator=generator).requires_grad_() for shape in SHAPES]
    optimizer = dash.Dash(params, lr=0.05, block_size=32, start_step=2, root_frequency=3, weight_decay=0.01,
                          **distributed)
    return params, optimizer


def train(params, optimizer, steps):
    # Identical gradients on every rank, as after a data-parallel all-reduce.
    for gradients in fixed_gradients(params, steps):
        apply_step(optimizer, params, gradients)
