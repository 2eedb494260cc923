"""One rank of test_fsdp.py: dash.Dash over parameters sharded as FSDP2 shards them,
preconditioning each rank's local shards.

FSDP2's fully_shard itself does not run on CPU in torch 2.6 (its forward fails with
"AttributeError: 'Stream' object has no attribute 'record_event'"), so this rank does
what it does around the optimizer: the parameters are DTensors sharded by rows
(Shard(0), distribute_tensor), a full replica computes this rank's gradients, which
are averaged over the ranks (FSDP's reduce-scatter) and handed to the sharded
parameters as Shard(0) DTensors, and after each step the replica takes the updated
parameters back (FSDP's all-gather).

usage: fsdp_worker.py OUT_DIR train|save-half|resume-half|habit-save-half|habit-resume-half
       (RANK, WORLD_SIZE, MASTER_* set)

train: STEPS steps, each rank on its own batches; rank 0 saves the full parameters to
OUT_DIR/trained.pt. save-half: the first half, then the sharded parameters and the
optimizer through torch.distributed.checkpoint to OUT_DIR/dcp; resume-half: fresh
ones from it, then the second half, saving as train does to OUT_DIR/resumed.pt.
habit-save-half and habit-resume-half: the DDP habit, rank 0 alone saving: torch.save
of one rank's optimizer.state_dict() is refused naming consolidate_state_dict; after
consolidate_state_dict(to=0) rank 0 saves it (and the full parameters) to
OUT_DIR/habit.pt, which every rank of the resumed run loads.
"""

import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict, set_optimizer_state_dict
from torch.distributed.device_mesh import init_device_mesh

import dash
from fsdp_problem import OPTIONS, STEPS, batch, make_model

try:
    from torch.distributed.tensor import Shard, distribute_tensor
except ImportError:
    from torch.distributed._tensor import Shard, distribute_tensor

out_dir, mode = Path(sys.argv[1]), sys.argv[2]
dist.init_process_group("gloo")
rank, world_size = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (world_size,))
replica = make_model()
sharded = torch.nn.ParameterList(
    [torch.nn.Parameter(distribute_tensor(p.detach().clone(), mesh, [Shard(0)])) for p in replica.parameters()])
optimizer = dash.Dash(sharded.parameters(), **OPTIONS)
assert optimizer._construction["scheme"] == "local_shards"


def train(first, last):
    for step in range(first, last):
        inputs, targets = batch(step, rank)
        replica.zero_grad()
        torch.nn.functional.mse_loss(replica(inputs), targets).backward()
        for shard, param in zip(sharded, replica.parameters()):
            dist.all_reduce(param.grad)
            shard.grad = distribute_tensor(param.grad / world_size, mesh, [Shard(0)])
        optimizer.step()
        with torch.no_grad():
            for shard, param in zip(sharded, replica.parameters()):
                param.copy_(shard.full_tensor())


def checkpoint():
    return {"model": sharded.state_dict(), "optim": get_optimizer_state_dict(sharded, optimizer)}


def habit_save():
    try:
        torch.save(optimizer.state_dict(), out_dir / f"refused{rank}.pt")
        raise AssertionError("torch.save of one rank's state dict was not refused")
    except RuntimeError as error:
        assert "consolidate_state_dict" in str(error), error
    optimizer.consolidate_state_dict(to=0)
    full = [shard.full_tensor() for shard in sharded]  # (a collective: every rank)
    if rank == 0:
        torch.save({"optim": optimizer.state_dict(), "params": full}, out_dir / "habit.pt")


def habit_resume():
    saved = torch.load(out_dir / "habit.pt")
    with torch.no_grad():
        for shard, param, value in zip(sharded, replica.parameters(), saved["params"]):
            shard.copy_(distribute_tensor(value, mesh, [Shard(0)]))
            param.copy_(value)
    optimizer.load_state_dict(saved["optim"])


if mode == "train":
    train(0, STEPS)
elif mode == "habit-save-half":
    train(0, STEPS // 2)
    habit_save()
elif mode == "habit-resume-half":
    habit_resume()
    train(STEPS // 2, STEPS)
elif mode == "save-half":
    train(0, STEPS // 2)
    dcp.save(checkpoint(), checkpoint_id=str(out_dir / "dcp"))
else:
    state = checkpoint()
    dcp.load(state, checkpoint_id=str(out_dir / "dcp"))
    sharded.load_state_dict(state["model"])
    set_optimizer_state_dict(sharded, optimizer, state["optim"])
    with torch.no_grad():
        for shard, param in zip(sharded, replica.parameters()):
            param.copy_(shard.full_tensor())
    train(STEPS // 2, STEPS)
if rank == 0 and mode in ("train", "resume-half", "habit-resume-half"):
    torch.save([param.detach() for param in replica.parameters()],
               out_dir / ("trained.pt" if mode == "train" else "resumed.pt"))
dist.barrier()
dist.destroy_process_group()
