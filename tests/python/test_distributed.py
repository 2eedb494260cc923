"""dash.Dash over torch.distributed: 2 local Gloo ranks end with parameters
bit-identical to each other and to a single process."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from distributed_problem import STEPS, has_checkpoint_helpers, make_optimizer, train, train_ddp_zero_reference

HERE = Path(__file__).resolve().parent


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_ranks(tmp_path, mode, world_size=2):
    """Runs distributed_worker.py as `world_size` local ranks: [(exit code, output)]."""
    # USE_LIBUV=0: torch ≥ 2.4 asks for a libuv TCPStore, which Debian's torch lacks.
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world_size),
               USE_LIBUV="0",
               PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
    ranks = [subprocess.Popen([sys.executable, str(HERE / "distributed_worker.py"), str(tmp_path), mode],
                              env=dict(env, RANK=str(rank)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
             for rank in range(world_size)]
    return [(process.returncode, output) for process, (output, _) in
            ((process, process.communicate(timeout=180)) for process in ranks)]


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
    pytest.param("dcp", marks=pytest.mark.skipif(not has_checkpoint_helpers(),
                                                 reason="torch.distributed.checkpoint.state_dict is torch ≥ 2.2")),
])
def test_a_checkpoint_resumes_on_another_number_of_ranks_bitwise(tmp_path, saved_on, resumed_on, through):
    prefix = "dcp-" if through == "dcp" else ""
    for mode, world_size in ((prefix + "save-half", saved_on), (prefix + "resume-half", resumed_on)):
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
