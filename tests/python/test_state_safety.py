"""What a load refuses and what an edit cannot do (docs/python.md, "State and
checkpoints"; docs/reliability.md): poisoned entries and damaged files are refused
naming what is wrong, the state's views cannot gain or lose entries, shares of several
ranks load only all of them in rank order, and options are named with their group."""

import io
import warnings

import pytest
import torch

import dash

SHAPES = [(40, 24), (24,), (9, 70)]
OPTIONS = dict(block_size=16, start_step=2, root_frequency=2, root_method="evd", momentum=0.5)


def stepped(steps=3):
    generator = torch.Generator().manual_seed(0)
    params = [torch.randn(shape, generator=generator).requires_grad_() for shape in SHAPES]
    optimizer = dash.Dash(params, lr=0.01, **OPTIONS)
    for _ in range(steps):
        for param in params:
            param.grad = torch.randn(param.shape, generator=generator)
        optimizer.step()
    return params, optimizer


def saved_copy(optimizer):
    buffer = io.BytesIO()
    torch.save(optimizer.state_dict(), buffer)
    buffer.seek(0)
    return torch.load(buffer)


def fresh():
    return dash.Dash([torch.zeros(shape, requires_grad=True) for shape in SHAPES], lr=0.01, **OPTIONS)


def without_checksums(state_dict):
    """`state_dict` with its checksums dropped, as a hand edit would leave it."""
    state = {index: {name: tensor for name, tensor in entries.items() if not name.endswith("checksum")}
             for index, entries in state_dict["state"].items()}
    return {**state_dict, "state": state}


@pytest.mark.parametrize("parameter, entry, value, message", [
    (0, "block.0.grad_ema", float("nan"), "block.0.grad_ema"),
    (0, "block.1.graft_stat", -1.0, "block.1.graft_stat"),
    (1, "graft_stat", float("-inf"), "graft_stat"),
    (0, "block.2.step", -3.0, "block.2.step"),
    (2, "block.0.factor_left", float("inf"), "block.0.factor_left"),
])
def test_a_poisoned_entry_is_refused_naming_it_and_changes_nothing(parameter, entry, value, message):
    _, optimizer = stepped()
    saved = without_checksums(saved_copy(optimizer))
    poisoned = saved["state"][parameter][entry].clone()
    poisoned.view(-1)[0] = value
    saved["state"][parameter][entry] = poisoned
    target = fresh()
    before = {name: tensor.clone() for name, tensor in target.state_dict()["state"][0].items()}
    with pytest.raises(ValueError, match=message):
        target.load_state_dict(saved)
    for name, tensor in target.state_dict()["state"][0].items():
        assert torch.equal(tensor, before[name]), name


def test_a_negative_step_count_is_refused():
    _, optimizer = stepped()
    saved = saved_copy(optimizer)
    for group in saved["param_groups"]:
        group["dash"]["steps_taken"] = -1
    with pytest.raises(ValueError, match="steps_taken is -1"):
        fresh().load_state_dict(saved)


def test_a_bit_flipped_anywhere_in_the_state_is_refused_by_its_checksum():
    _, optimizer = stepped()
    saved = saved_copy(optimizer)
    generator = torch.Generator().manual_seed(1)
    names = [(index, name) for index, entries in saved["state"].items() for name in entries
             if not name.endswith("checksum")]
    for trial in range(40):
        index, name = names[torch.randint(len(names), (1,), generator=generator).item()]
        damaged = {i: dict(entries) for i, entries in saved["state"].items()}
        tensor = damaged[index][name].clone()
        raw = tensor.view(-1).view(torch.uint8)
        byte = torch.randint(raw.numel(), (1,), generator=generator).item()
        raw[byte] ^= 1 << torch.randint(8, (1,), generator=generator).item()
        damaged[index][name] = tensor
        with pytest.raises(ValueError, match="corrupted"):
            fresh().load_state_dict({**saved, "state": damaged})
    fresh().load_state_dict(saved)  # the intact copy loads


def test_state_for_a_parameter_the_groups_do_not_list_is_refused():
    _, optimizer = stepped()
    saved = saved_copy(optimizer)
    saved["state"][7] = {}
    with pytest.raises(ValueError, match=r"state for \[7\]"):
        fresh().load_state_dict(saved)


def test_the_state_views_cannot_gain_or_lose_entries():
    params, optimizer = stepped()
    with pytest.raises(TypeError, match="views of the C\\+\\+ state"):
        optimizer.state[params[0]] = {}
    entries = optimizer.state[params[0]]
    with pytest.raises(TypeError, match="change a value in place"):
        entries["mine"] = torch.zeros(1)
    with pytest.raises(TypeError, match="views of the C\\+\\+ state"):
        entries.pop("block.0.grad_ema")
    entries["block.0.grad_ema"].mul_(0.5)  # in place: the C++ state itself
    assert torch.equal(optimizer.state[params[0]]["block.0.grad_ema"], entries["block.0.grad_ema"])
    import copy
    assert torch.equal(copy.deepcopy(entries)["block.0.grad_ema"], entries["block.0.grad_ema"])


def test_shares_of_several_ranks_load_only_all_of_them_in_rank_order():
    _, optimizer = stepped()
    saved = saved_copy(optimizer)

    def share(rank, world):
        groups = [{**group, "dash": {**group["dash"], "rank": rank, "world_size": world}}
                  for group in saved["param_groups"]]
        return {**saved, "param_groups": groups}

    for shares, given in [([share(1, 2), share(0, 2)], "rank 1 of 2, rank 0 of 2"),
                          ([share(0, 2), share(0, 2)], "rank 0 of 2, rank 0 of 2"),
                          ([share(0, 2)], "rank 0 of 2")]:
        with pytest.raises(ValueError, match=f"in rank order .*got {given}"):
            fresh().load_sharded_state_dicts(shares)
    fresh().load_sharded_state_dicts([saved])  # one process's: no rank


def test_a_bad_option_names_its_param_group():
    params = [torch.zeros(8, 8, requires_grad=True), torch.zeros(8, 8, requires_grad=True)]
    with pytest.raises(ValueError, match="dash.Dash: param group 1: .*momentum"):
        dash.Dash([dict(params=params[:1]), dict(params=params[1:], momentum=2.0)])
    optimizer = dash.Dash(params[:1])
    with pytest.raises(ValueError, match="dash.Dash.add_param_group: param group 1: .*block_size"):
        optimizer.add_param_group(dict(params=params[1:], block_size=0))
    params[0].grad = torch.ones(8, 8)
    optimizer.param_groups[0]["beta_graft"] = 2.0
    with pytest.raises(ValueError, match="dash.Dash.step: param group 0: .*beta_graft"):
        optimizer.step()


def test_a_misspelt_group_key_at_construction_warns_as_the_constructor():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dash.Dash([dict(params=[torch.zeros(4, 4, requires_grad=True)], momentun=0.9)])
    messages = [str(warning.message) for warning in caught]
    assert any(message.startswith("dash.Dash: param group key 'momentun'") for message in messages), messages


@pytest.mark.parametrize("options, message", [
    (dict(adamw_betas=(0.9, 1.0000001)), r"adamw_betas\[1\] must be in \[0, 1\), got 1.0000001"),
    (dict(root_method="qr"), "^dash: option 'root_method': unknown root method 'qr'"),
    (dict(timeout=0), "timeout must be a positive number of seconds"),
    (dict(timeout="5"), "timeout must be a positive number of seconds"),
])
def test_option_errors_say_exactly_what_is_wrong(options, message):
    with pytest.raises(ValueError, match=message):
        dash.Dash([torch.zeros(4, 4, requires_grad=True)], **options)
