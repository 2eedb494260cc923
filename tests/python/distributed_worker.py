"""One rank of test_distributed.py: trains the shared problem with dash.Dash over
torch.distributed (Gloo) and saves its final parameters to OUT_DIR/rank<R>.pt.

usage: distributed_worker.py OUT_DIR default|explicit|mismatch|ddp-zero|save-half|resume-half|
                             dcp-save-half|dcp-resume-half|consolidated-save-half|consolidated-resume-half[:SCHEME]
(RANK, WORLD_SIZE, MASTER_* set)

mismatch: rank 1 has a parameter of another shape; every rank must refuse to start
(prints the error and exits 3). ddp-zero: a small model under DDP with
dash.no_reduce_hook and dash.Dash(scheme="zero"), each rank on its own batches
(distributed_problem.train_ddp_zero). save-half: the first half of the steps, then
each rank's sharded_state_dict() to OUT_DIR/state<R>.pt and the parameters to
OUT_DIR/half.pt; resume-half: every saved state dict (whatever number of ranks wrote
them) into this world size through load_sharded_state_dicts, then the second half.
dcp-save-half and dcp-resume-half: the same through torch.distributed.checkpoint
(get_optimizer_state_dict, dcp.save to OUT_DIR/dcp; dcp.load, set_optimizer_state_dict).
consolidated-save-half and consolidated-resume-half: the DDP habit, rank 0 alone saving
optimizer.state_dict(): refused by torch.save before consolidate_state_dict(to=0) on
several ranks, then saved to OUT_DIR/state0.pt; resumed with load_state_dict. A
":zero" or ":replicated" suffix picks the scheme.
"""

import io

import sys
from pathlib import Path

import torch
import torch.distributed as dist

import dash
from distributed_problem import STEPS, make_optimizer, train, train_ddp_zero

out_dir, which_group = Path(sys.argv[1]), sys.argv[2]
which_group, _, scheme = which_group.partition(":")
schemes = {"scheme": scheme} if scheme else {}
dist.init_process_group("gloo")
group = dist.new_group(list(range(dist.get_world_size()))) if which_group == "explicit" else None
if which_group == "mismatch":
    shapes = [(20, 16)] if dist.get_rank() == 0 else [(30, 16)]
    try:
        dash.Dash([torch.zeros(shape, requires_grad=True) for shape in shapes])
    except RuntimeError as error:
        print(error)
        sys.exit(3)
    sys.exit(0)
if which_group == "ddp-zero":
    model = train_ddp_zero(dist.get_rank())
    torch.save([p.detach() for p in model.parameters()], out_dir / f"rank{dist.get_rank()}.pt")
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(0)
if which_group.endswith("save-half") or which_group.endswith("resume-half"):
    params, optimizer = make_optimizer(**schemes)
    if which_group.startswith("dcp-"):
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict, set_optimizer_state_dict
        model = torch.nn.ParameterList(params)
    if which_group.endswith("save-half"):
        train(params, optimizer, STEPS, first=0, last=STEPS // 2)
        if which_group == "save-half":
            torch.save(optimizer.sharded_state_dict(), out_dir / f"state{dist.get_rank()}.pt")
        elif which_group == "consolidated-save-half":
            if dist.get_world_size() > 1:
                try:
                    torch.save(optimizer.state_dict(), io.BytesIO())
                    raise AssertionError("torch.save took one rank's share of the state alone")
                except RuntimeError as error:
                    assert "consolidate_state_dict(to=0)" in str(error), error
            optimizer.consolidate_state_dict(to=0)
            if dist.get_rank() == 0:
                torch.save(optimizer.state_dict(), out_dir / "state0.pt")
        else:
            dcp.save({"optim": get_optimizer_state_dict(model, optimizer)}, checkpoint_id=str(out_dir / "dcp"))
        if dist.get_rank() == 0:
            torch.save([p.detach() for p in params], out_dir / "half.pt")
    else:
        with torch.no_grad():
            for param, value in zip(params, torch.load(out_dir / "half.pt")):
                param.copy_(value)
        if which_group == "consolidated-resume-half":
            optimizer.load_state_dict(torch.load(out_dir / "state0.pt"))
        elif which_group == "resume-half":
            shards = sorted(out_dir.glob("state*.pt"), key=lambda path: int(path.stem[len("state"):]))
            optimizer.load_sharded_state_dicts([torch.load(path) for path in shards])
        else:
            state = {"optim": get_optimizer_state_dict(model, optimizer)}
            dcp.load(state, checkpoint_id=str(out_dir / "dcp"))
            set_optimizer_state_dict(model, optimizer, state["optim"])
        train(params, optimizer, STEPS, first=STEPS // 2, last=STEPS)
        torch.save([p.detach() for p in params], out_dir / f"rank{dist.get_rank()}.pt")
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(0)
params, optimizer = make_optimizer(process_group=group)
assert optimizer.diagnostics()["communicated_bytes_per_step"] > 0, "not distributed"
train(params, optimizer, STEPS)
torch.save([p.detach() for p in params], out_dir / f"rank{dist.get_rank()}.pt")
dist.barrier()
dist.destroy_process_group()
