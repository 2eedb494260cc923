"""What dash.Dash's state dicts carry besides the state: a checksum per block, so that a
damaged file is refused rather than loaded as a different state, and the mark of a
rank's share, so that saving one rank's share alone (the DDP habit of saving on rank 0)
fails when it is saved, naming the remedies, instead of when the other ranks' state is
gone (docs/python.md, "State and checkpoints")."""

import zlib
from typing import Dict, List, Optional

import torch

_CHECKSUM = "checksum"


def _unit(name: str) -> str:
    """The entries saved and loaded together: a block's ("block.3.factor_left" ->
    "block.3", with any rank prefix), or a 1-D parameter's AdamW entries ("")."""
    return name.rpartition(".")[0]


def _field(name: str) -> str:
    return name.rpartition(".")[2]


def _checksum_name(unit: str) -> str:
    return f"{unit}.{_CHECKSUM}" if unit else _CHECKSUM


def _crc32(entries: Dict[str, torch.Tensor]) -> int:
    """CRC-32 of a unit's entries: each field's name, dtype, shape and bytes, in name order."""
    crc = 0
    for name in sorted(entries):
        tensor = entries[name].detach()
        crc = zlib.crc32(f"{_field(name)}:{tensor.dtype}:{list(tensor.shape)};".encode(), crc)
        flat = tensor.reshape(-1).contiguous().cpu()
        if flat.numel():
            crc = zlib.crc32(flat.view(torch.uint8).numpy().tobytes(), crc)
    return crc


def with_checksums(entries: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """A parameter's entries and, per unit, a "<unit>.checksum" entry (int64, on the CPU)."""
    units: Dict[str, Dict[str, torch.Tensor]] = {}
    for name, tensor in entries.items():
        units.setdefault(_unit(name), {})[name] = tensor
    checked = dict(entries)
    for unit, members in units.items():
        checked[_checksum_name(unit)] = torch.tensor(_crc32(members), dtype=torch.int64)
    return checked


def checked_entries(entries: Dict[str, torch.Tensor], where: str) -> Dict[str, torch.Tensor]:
    """A parameter's saved entries without their checksums, once every unit that has one
    matches it (state dicts written before 2026-12-07 have none); else ValueError
    naming the unit."""
    units: Dict[str, Dict[str, torch.Tensor]] = {}
    sums: Dict[str, torch.Tensor] = {}
    for name, tensor in entries.items():
        if _field(name) == _CHECKSUM:
            sums[_unit(name)] = tensor
        else:
            units.setdefault(_unit(name), {})[name] = tensor
    for unit, saved in sums.items():
        if saved.numel() != 1 or saved.dtype != torch.int64 or unit not in units:
            raise ValueError(f"{where}: {_checksum_name(unit)!r} is not a checksum of saved entries")
        if int(saved.item()) != _crc32(units[unit]):
            what = f"block {unit}" if unit else "its AdamW entries"
            raise ValueError(f"{where}: {what}: the state is corrupted (its checksum does not match its entries): "
                             "load an intact copy. (A state dict's tensors are the live state, as torch.optim's: "
                             "save it before the next step.)")
    return {name: tensor for name, tensor in entries.items() if _field(name) != _CHECKSUM}


class RankShare(dict):
    """The state dict of one rank of several that splits the state (each rank holds its
    own blocks): a dict that torch.distributed.checkpoint and load_state_dict take as
    any, but that refuses to be pickled (torch.save) alone, where it could not resume."""

    def __init__(self, state_dict: Dict, rank: int, world_size: int):
        super().__init__(state_dict)
        self._rank, self._world_size = rank, world_size

    def __reduce_ex__(self, protocol):
        raise RuntimeError(
            f"dash.Dash.state_dict() on rank {self._rank} of {self._world_size} holds the state of this rank's "
            "blocks only: saved alone it cannot resume. Save every rank's state: call "
            "optimizer.consolidate_state_dict(to=0) on every rank, then torch.save(optimizer.state_dict()) on rank "
            "0 (as torch's ZeroRedundancyOptimizer); or use torch.distributed.checkpoint "
            "(get_optimizer_state_dict, dcp.save); or torch.save(optimizer.sharded_state_dict()) on every rank and "
            "load_sharded_state_dicts([...]) to resume")

    def __copy__(self):
        return RankShare(self, self._rank, self._world_size)

    def __deepcopy__(self, memo):
        import copy
        return RankShare(copy.deepcopy(dict(self), memo), self._rank, self._world_size)


def to_cpu(state_dict: Dict) -> Dict:
    """A copy of a state dict whose state tensors are on the CPU (for a gather)."""
    state = {index: {name: tensor.detach().cpu().clone() for name, tensor in entries.items()}
             for index, entries in state_dict["state"].items()}
    return {**state_dict, "state": state}


def merged(shares: List[Dict]) -> Dict:
    """Every rank's state dict in one: each parameter's entries the union of the ranks'
    (each block is one rank's), the param groups the first's."""
    state: Dict[int, Dict[str, torch.Tensor]] = {}
    for share in shares:
        for index, entries in share["state"].items():
            state.setdefault(index, {}).update(entries)
    # The whole state, as one process's: no rank's share any more.
    groups = [{**group, "dash": {key: value for key, value in group["dash"].items()
                                 if key not in ("rank", "world_size")}} for group in shares[0]["param_groups"]]
    return {"state": state, "param_groups": groups}


def group_rank(process_group, rank: int) -> int:
    """The global rank of `rank` of `process_group` (what gather_object's dst takes)."""
    import torch.distributed as dist

    if hasattr(dist, "get_global_rank"):
        return dist.get_global_rank(process_group, rank)
    return dist.distributed_c10d._get_global_rank(process_group, rank)  # torch < 2.0


def gathered_on(own: Dict, to: int, process_group) -> Optional[Dict]:
    """Every rank's `own` state dict merged on rank `to` of `process_group` (None on the
    others): one gather_object, a collective of every rank."""
    import torch.distributed as dist

    rank, world = dist.get_rank(process_group), dist.get_world_size(process_group)
    if not 0 <= to < world:
        raise ValueError(f"dash.Dash.consolidate_state_dict: to={to} is not a rank of the optimizer's "
                         f"{world} ranks")
    shares = [None] * world if rank == to else None
    dist.gather_object(to_cpu(own), shares, dst=group_rank(process_group, to), group=process_group)
    return merged(shares) if rank == to else None
