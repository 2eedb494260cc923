"""dash.Dash over parameters sharded as FSDP2 shards them (Shard(0) DTensors): each rank
preconditions blocks within its own shards. Where torch has DTensors and
torch.distributed.checkpoint's state-dict helpers (the LibTorch 2.x check's torch 2.6;
not Debian 12's torch 1.13), 2 Gloo ranks on CPU train a small model (fsdp_worker.py:
FSDP2's fully_shard does not run on CPU in torch 2.6, so the worker does its all-gather
and reduce-scatter around the optimizer) and end where one process ends that steps,
per rank, a dash.Dash over that rank's shards with the average gradient; and a run
saved halfway through torch.distributed.checkpoint and resumed ends bitwise where the
uninterrupted one does."""

import pytest
import torch

import dash
from fsdp_problem import OPTIONS, STEPS, batch, make_model
from ranks import run_ranks


def has_dtensors_and_checkpoint_helpers():
    try:
        import torch.distributed.checkpoint.state_dict  # noqa: F401
        from torch.distributed.device_mesh import init_device_mesh  # noqa: F401
    except ImportError:
        return False
    return True


requires_dtensors = pytest.mark.skipif(not has_dtensors_and_checkpoint_helpers(),
                                       reason="DTensors and torch.distributed.checkpoint.state_dict are torch ≥ 2.2")
WORLD_SIZE = 2


def shards_of(tensor, world_size):
    """Rank r's rows of `tensor` as FSDP2 and Shard(0) shard it: torch.chunk, then empty shards."""
    chunks = list(torch.chunk(tensor, world_size, dim=0))
    return chunks + [tensor.new_empty((0,) + tuple(tensor.shape[1:]))] * (world_size - len(chunks))


def local_shard_reference():
    """One process: the model's average gradient over the ranks' batches, and per rank a
    dash.Dash over that rank's shards, whose steps are written back into the model."""
    model = make_model()
    params = list(model.parameters())
    shards = [[shard.clone().requires_grad_() for shard in (shards_of(p.detach(), WORLD_SIZE)[rank] for p in params)]
              for rank in range(WORLD_SIZE)]
    optimizers = [dash.Dash(rank_shards, distributed=False, **OPTIONS) for rank_shards in shards]
    for step in range(STEPS):
        model.zero_grad()
        loss = sum(torch.nn.functional.mse_loss(model(inputs), targets)
                   for inputs, targets in (batch(step, rank) for rank in range(WORLD_SIZE))) / WORLD_SIZE
        loss.backward()
        for rank in range(WORLD_SIZE):
            for shard, param in zip(shards[rank], params):
                shard.grad = shards_of(param.grad, WORLD_SIZE)[rank].clone()
            optimizers[rank].step()
        with torch.no_grad():
            for index, param in enumerate(params):
                param.copy_(torch.cat([shards[rank][index] for rank in range(WORLD_SIZE)]))
    return [p.detach() for p in params]


def run(tmp_path, mode):
    for rank, (code, output) in enumerate(run_ranks(tmp_path, mode, WORLD_SIZE, worker="fsdp_worker.py")):
        assert code == 0, f"{mode}: rank {rank} failed:\n{output}"


def assert_resumed_as_uninterrupted(tmp_path):
    """The resumed run's parameters (resumed.pt) equal the uninterrupted run's (trained.pt)."""
    for index, (resumed, uninterrupted) in enumerate(
            zip(torch.load(tmp_path / "resumed.pt"), torch.load(tmp_path / "trained.pt"))):
        assert torch.equal(resumed, uninterrupted), f"parameter {index}"


@requires_dtensors
def test_each_rank_preconditions_its_own_shards(tmp_path):
    run(tmp_path, "train")
    trained = torch.load(tmp_path / "trained.pt")
    reference = local_shard_reference()
    initial = [p.detach() for p in make_model().parameters()]
    assert trained[0].shape == (25, 40)
    for index, (fsdp, single, start) in enumerate(zip(trained, reference, initial)):
        assert not torch.equal(fsdp, start), f"parameter {index} did not move"
        # The ranks average the gradients by an all-reduce, in another order than the
        # reference's autograd: the last bits of the gradients differ.
        torch.testing.assert_close(fsdp, single, rtol=1e-5, atol=1e-6, msg=f"parameter {index}")


@requires_dtensors
def test_a_run_resumed_through_distributed_checkpoint_ends_as_the_uninterrupted_one(tmp_path):
    run(tmp_path, "train")
    run(tmp_path, "save-half")
    run(tmp_path, "resume-half")
    assert_resumed_as_uninterrupted(tmp_path)


@requires_dtensors
def test_the_rank_0_habit_under_fsdp_sharding(tmp_path):
    # torch.save of one rank's state dict is refused (the worker checks); after
    # consolidate_state_dict(to=0), rank 0's file resumes every rank bitwise.
    run(tmp_path, "train")
    run(tmp_path, "habit-save-half")
    run(tmp_path, "habit-resume-half")
    assert_resumed_as_uninterrupted(tmp_path)


def test_a_rank_takes_its_own_entries_of_a_state_saved_on_the_same_world_size():
    # The naming alone (no ranks needed): rank 1 of 2 keeps "rank1of2." entries, drops
    # rank 0's, keeps unprefixed ones; entries of another world size are refused.
    from dash.fsdp import LocalShards

    shards = object.__new__(LocalShards)
    shards.rank, shards.world_size = 1, 2
    mine, theirs, plain = torch.ones(1), torch.zeros(1), torch.full((1,), 2.0)
    entries = {"rank1of2.block.0.step": mine, "rank0of2.block.0.step": theirs, "grad_ema": plain,
               "rankless.name": plain}
    assert shards.own_entries(entries) == {"block.0.step": mine, "grad_ema": plain, "rankless.name": plain}
    assert shards.state_prefix == "rank1of2."
    assert shards.same_world(entries) and shards.same_world({})
    assert not shards.same_world({"rank0of4.block.0.step": theirs})
