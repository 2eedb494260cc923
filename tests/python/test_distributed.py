"""dash.Dash over torch.distributed: 2 local Gloo ranks end with parameters
bit-identical to each other and to a single process."""

import pytest
import torch

from distributed_problem import STEPS, has_checkpoint_helpers, make_optimizer, train, train_ddp_zero_reference
from ranks import run_ranks


@pytest.mark.parametrize("which_group", ["default", "explicit"])
def test_two_ranks_match_one_process_bitwise(tmp_path, which_group):
    world_size = 2
    for rank, (code, output) in enumerate(run_ranks(tmp_path, which_group, world_size)):
        assert code == 0, f"rank {rank} failed:\n{output}"

    params, optimizer = make_optimizer(distributed=False)
    initial = [p.detach().clone() for p in params]
    train(params, optimizer, STEPS)
    assert not any(torch.equal(p.detach(), start) for p, start in zip(params, initial)), "nothing trained"
    for rank in range(world_size):
        distributed = torch.load(tmp_path / f"rank{rank}.pt")
        for single, shared in zip(params, distributed):
            assert torch.equal(single.detach(), shared), f"rank {rank} differs from one process"


def test_ranks_with_different_parameters_refuse_to_start(tmp_path):
    for rank, (code, output) in enumerate(run_ranks(tmp_path, "mismatch")):
        assert code == 3, f"rank {rank} did not refuse:\n{output}"
        assert "the ranks disagree about the parameter shapes" in output, output


def test_ddp_with_zero_scheme_matches_one_process_on_the_average_gradient(tmp_path):
    world_size = 2
    for rank, (code, output) in enumerate(run_ranks(tmp_path, "ddp-zero", world_size)):
        assert code == 0, f"rank {rank} failed:\n{output}"
    reference = train_ddp_zero_reference(world_size)
    for rank in range(world_size):
        distributed = torch.load(tmp_path / f"rank{rank}.pt")
        for single, shared in zip(reference.parameters(), distributed):
            assert torch.equal(single.detach(), shared), (
                f"rank {rank} differs from one process by {(single.detach() - shared).abs().max().item()}")


@pytest.mark.parametrize("saved_on, resumed_on", [(1, 2), (2, 1), (2, 4)])
@pytest.mark.parametrize("through", [
    "state-dicts",
    "rank-0-habit",
    pytest.param("dcp", marks=pytest.mark.skipif(not has_checkpoint_helpers(),
                                                 reason="torch.distributed.checkpoint.state_dict is torch ≥ 2.2")),
])
def test_a_checkpoint_resumes_on_another_number_of_ranks_bitwise(tmp_path, saved_on, resumed_on, through):
    prefix = {"dcp": "dcp-", "state-dicts": "", "rank-0-habit": "consolidated-"}[through]
    modes = [(prefix + "save-half", saved_on), (prefix + "resume-half", resumed_on)]
    run_and_compare(tmp_path, modes, saved_on, resumed_on)


def test_the_rank_0_habit_under_the_zero_scheme(tmp_path):
    # (the replicated scheme's: "rank-0-habit" above)
    modes = [("consolidated-save-half:zero", 2), ("consolidated-resume-half:zero", 2)]
    run_and_compare(tmp_path, modes, 2, 2)


def run_and_compare(tmp_path, modes, saved_on, resumed_on):
    """Runs the save and resume `modes` ([(mode, world size)]) and compares every resumed
    rank's parameters with the uninterrupted run's."""
    for mode, world_size in modes:
        for rank, (code, output) in enumerate(run_ranks(tmp_path, mode, world_size)):
            assert code == 0, f"{mode} on {world_size} ranks: rank {rank} failed:\n{output}"
    params, optimizer = make_optimizer(distributed=False)
    train(params, optimizer, STEPS)
    for rank in range(resumed_on):
        resumed = torch.load(tmp_path / f"rank{rank}.pt")
        for single, shared in zip(params, resumed):
            assert torch.equal(single.detach(), shared), (
                f"{saved_on} → {resumed_on} ranks: rank {rank} differs from the uninterrupted run by "
                f"{(single.detach() - shared).abs().max().item()}")
