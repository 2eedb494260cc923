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
    # Parameters (not plain leaf tensors) so that torch.nn.ParameterList(params) is a
    # model over the same objects, as torch.distributed.checkpoint's helpers need.
    params = [torch.nn.Parameter(torch.randn(shape, generator=generator)) for shape in SHAPES]
    optimizer = dash.Dash(params, lr=0.05, block_size=32, start_step=2, root_frequency=3, weight_decay=0.01,
                          **distributed)
    return params, optimizer


def has_checkpoint_helpers():
    """Whether this torch has torch.distributed.checkpoint's get/set_optimizer_state_dict (2.2 on)."""
    try:
        import torch.distributed.checkpoint.state_dict  # noqa: F401
    except ImportError:
        return False
    return True


def train(params, optimizer, steps, first=0, last=None):
    """Steps [first, last) of `steps` (all by default), with identical gradients on every
    rank, as after a data-parallel all-reduce."""
    for gradients in fixed_gradients(params, steps)[first:last]:
        apply_step(optimizer, params, gradients)


def ddp_zero_model():
    torch.manual_seed(11)
    return torch.nn.Sequential(torch.nn.Linear(40, 24), torch.nn.Tanh(), torch.nn.Linear(24, 8))


def ddp_zero_batch(step, rank):
    generator = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(16, 40, generator=generator), torch.randn(16, 8, generator=generator)


def ddp_zero_optimizer(parameters, **distributed):
    return dash.Dash(parameters, lr=0.05, block_size=16, start_step=2, root_frequency=3, **distributed)


def ddp_zero_loss(model, step, rank):
    inputs, targets = ddp_zero_batch(step, rank)
    return ((model(inputs) - targets) ** 2).mean()


def train_ddp_zero(rank):
    """One rank: DDP without its all-reduce, dash averaging the gradients (ZeRO-2)."""
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(ddp_zero_model())
    model.register_comm_hook(None, dash.no_reduce_hook)
    optimizer = ddp_zero_optimizer(model.parameters(), scheme="zero")
    for step in range(STEPS):
        optimizer.zero_grad()
        ddp_zero_loss(model, step, rank).backward()
        optimizer.step()
    return model.module


def train_ddp_zero_reference(world_size):
    """One process given each step the ranks' average gradient, rounded as dash averages."""
    model = ddp_zero_model()
    optimizer = ddp_zero_optimizer(model.parameters(), distributed=False)
    for step in range(STEPS):
        per_rank = []
        for rank in range(world_size):
            optimizer.zero_grad()
            ddp_zero_loss(model, step, rank).backward()
            per_rank.append([p.grad.clone() for p in model.parameters()])
        for i, param in enumerate(model.parameters()):
            param.grad = torch.stack([grads[i] for grads in per_rank]).sum(0) / world_size
        optimizer.step()
    return model
