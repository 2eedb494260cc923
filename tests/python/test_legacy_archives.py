"""Checkpoints of the format dash wrote until 2026-12-07 (format 1: the state by
stack, one archive per rank) still load, into exactly the state they held:
fixtures/legacy_archives.pt was written by that code (fixtures/make_legacy_archives.py,
run against 8e87eb0), with the same state keyed by parameter next to each archive."""

from pathlib import Path

import pytest
import torch

import dash

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "legacy_archives.pt"


@pytest.fixture(scope="module")
def fixture():
    return torch.load(FIXTURE)


def fresh_optimizer(fixture):
    """The fixture's parameter shapes and groups, other values and options: the
    archive's options and state must replace them."""
    params = [torch.zeros(shape, requires_grad=True) for shape in fixture["shapes"]]
    return dash.Dash([dict(params=params[:3]), dict(params=params[3:])], lr=0.5)


def expect_state(optimizer, states, choices=True):
    """`choices`: compare the stacks' root choices too (a stack whose rows came from
    shards that chose differently makes its choices again)."""
    for index, expected in enumerate(states):
        loaded = dict(optimizer._cpp.parameter_state(index))
        assert sorted(loaded) == sorted(expected), f"parameter {index}"
        for name, tensor in expected.items():
            if choices or "root_choice" not in name:
                assert torch.equal(loaded[name], tensor), f"parameter {index}: '{name}' differs"


def test_a_single_process_archive_loads_into_the_state_it_held(fixture):
    optimizer = fresh_optimizer(fixture)
    optimizer._cpp.load(fixture["single"]["archive"])
    expect_state(optimizer, fixture["single"]["states"])
    assert optimizer.diagnostics()["steps_taken"] == fixture["single"]["steps_taken"]
    assert optimizer._cpp.group_options(0)["lr"] == 0.02 and optimizer._cpp.group_options(1)["block_size"] == 6


def test_every_ranks_archive_loads_into_one_process(fixture):
    optimizer = fresh_optimizer(fixture)
    ranks = fixture["two_ranks"]
    optimizer._cpp.load_resharded([rank["archive"] for rank in ranks])
    union = [{**first, **second} for first, second in zip(ranks[0]["states"], ranks[1]["states"])]
    expect_state(optimizer, union, choices=False)


def test_a_legacy_state_dict_loads_through_load_state_dict(fixture):
    import zlib

    optimizer = fresh_optimizer(fixture)
    archive = bytearray(fixture["single"]["archive"])
    groups = [{"params": [0, 1, 2]}, {"params": [3, 4, 5]}]
    optimizer.load_state_dict({"state": {}, "param_groups": groups,
                               "dash": {"format": 2, "archive": torch.frombuffer(archive, dtype=torch.uint8),
                                        "checksum": zlib.crc32(archive)}})
    expect_state(optimizer, fixture["single"]["states"])
    assert optimizer.param_groups[0]["lr"] == 0.02 and optimizer.param_groups[1]["block_size"] == 6
    for param in (p for group in optimizer.param_groups for p in group["params"]):
        param.grad = torch.ones_like(param)
    optimizer.step()  # and steps on from there
    assert optimizer.diagnostics()["steps_taken"] == fixture["single"]["steps_taken"] + 1


def test_a_legacy_archive_for_other_parameters_is_refused_naming_it(fixture):
    params = [torch.zeros(shape, requires_grad=True) for shape in fixture["shapes"]]
    params[0] = torch.zeros(8, 5, requires_grad=True)
    optimizer = dash.Dash([dict(params=params[:3]), dict(params=params[3:])], lr=0.5)
    with pytest.raises(RuntimeError, match="was not saved by rank 0 of 1 for these parameters and options"):
        optimizer._cpp.load(fixture["single"]["archive"])
    assert optimizer.diagnostics()["steps_taken"] == 0
