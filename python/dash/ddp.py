"""DistributedDataParallel with ``dash.Dash(..., scheme="zero")``."""

import torch


def no_reduce_hook(state, bucket):
    """A DDP communication hook that leaves each rank's gradients as they are.

    With ``scheme="zero"`` dash averages the gradients itself, each rank receiving
    only those of the blocks it owns, so DDP's own all-reduce would send them twice::

        model = DistributedDataParallel(model)
        model.register_comm_hook(None, dash.no_reduce_hook)
        optimizer = dash.Dash(model.parameters(), scheme="zero")

    After ``backward()`` each rank's ``.grad`` are its own; ``optimizer.step()`` then
    replaces the gradients of the blocks this rank owns by their average over the ranks.
    """
    del state
    future = torch.futures.Future()
    future.set_result(bucket.buffer())
    return future
