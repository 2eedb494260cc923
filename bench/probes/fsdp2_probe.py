"""Does dash.Dash take parameters sharded by FSDP2 (torch.distributed.fsdp.fully_shard)?

Spawns 2 Gloo ranks on CPU; each shards a small MLP with fully_shard, builds dash.Dash
over its parameters (distributed=False and the default) and takes one step, printing
the parameter type and what happens (in torch 2.6 on CPU, FSDP2's forward fails before
dash is reached: docs/experiments/2026-12-06-sharded-training.md). Needs a torch with FSDP2 (2.6: Debian 13's
python3-torch, e.g. in the chroot of ../shared/scripts/libtorch2-check.sh):

    USE_LIBUV=0 PYTHONPATH=<build>/python python3 bench/probes/fsdp2_probe.py
"""

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, world_size, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), USE_LIBUV="0")
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    import dash

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Tanh(), torch.nn.Linear(32, 8))
    fully_shard(model)
    first = next(model.parameters())
    local = first.to_local() if hasattr(first, "to_local") else first
    print(f"rank {rank}: parameters are {type(first).__name__}, global {tuple(first.shape)}, "
          f"local shard {tuple(local.shape)}", flush=True)
    for distributed in (False, True):
        try:
            optimizer = dash.Dash(model.parameters(), lr=1e-3, block_size=16, distributed=distributed)
            model(torch.randn(4, 64)).square().mean().backward()
            optimizer.step()
            print(f"rank {rank}: distributed={distributed}: a step ran", flush=True)
        except Exception as error:  # the finding is the error itself
            print(f"rank {rank}: distributed={distributed}: {type(error).__name__}: {error}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    mp.spawn(rank_main, args=(2, free_port), nprocs=2)
