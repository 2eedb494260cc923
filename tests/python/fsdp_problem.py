"""The model, batches and options test_fsdp.py trains under sharding and in one process."""

import torch

from distributed_problem import ddp_zero_batch as batch  # noqa: F401  (rank r's (16, 40) inputs, (16, 8) targets)

STEPS = 6
# 25 rows: a (25, 40) weight is sharded as 13 + 12 rows over 2 ranks (uneven shards).
OPTIONS = dict(lr=0.02, block_size=16, start_step=1, root_frequency=2, momentum=0.5, weight_decay=0.01)


def make_model():
    torch.manual_seed(5)
    return torch.nn.Sequential(torch.nn.Linear(40, 25), torch.nn.Tanh(), torch.nn.Linear(25, 8))
