"""Parameters sharded by FSDP2 (``torch.distributed.fsdp.fully_shard``): ``DTensor``s of
which each rank holds a shard. dash preconditions blocks within each rank's local
shards, each rank its own, as Distributed Shampoo's FSDP mode does (the C++ scheme
``local_shards``): the C++ optimizer steps the local tensors in place, from the local
part of each gradient, which FSDP's reduce-scatter has already averaged."""

from typing import Any, Dict, List, Optional

import torch


def _dtensor_type() -> Optional[type]:
    try:
        from torch.distributed.tensor import DTensor  # torch >= 2.5
    except ImportError:
        try:
            from torch.distributed._tensor import DTensor  # torch 2.2 to 2.4
        except ImportError:
            return None
    return DTensor


class LocalShards:
    """The sharded parameters of one optimizer and the local shard of each."""

    def __init__(self, params: List[torch.Tensor], where: str):
        meshes = {id(param.device_mesh): param.device_mesh for param in params}
        if len(meshes) != 1:
            raise ValueError(f"{where}: the sharded parameters lie on {len(meshes)} device meshes; "
                             "dash takes the parameters of one FSDP mesh")
        mesh = next(iter(meshes.values()))
        if mesh.ndim != 1:
            raise ValueError(f"{where}: a {mesh.ndim}-D device mesh (HSDP or FSDP with tensor parallelism) "
                             "is not supported; dash takes parameters sharded by FSDP over a 1-D mesh")
        for param in params:
            if not all(placement.is_shard() for placement in param.placements):
                raise ValueError(f"{where}: a parameter of shape {tuple(param.shape)} has placements "
                                 f"{param.placements}; dash takes parameters that FSDP shards (Shard placements)")
        self.process_group = mesh.get_group()
        self.rank = mesh.get_local_rank()
        self.world_size = mesh.size()
        with torch.no_grad():
            self._local = {id(param): (param, param.to_local()) for param in params}

    @staticmethod
    def of(params: List[torch.Tensor], where: str) -> Optional["LocalShards"]:
        """The local shards of `params` when they are sharded (DTensors); None when none is;
        a ValueError when only some are."""
        dtensor = _dtensor_type()
        sharded = [dtensor is not None and isinstance(param, dtensor) for param in params]
        if not any(sharded):
            return None
        if not all(sharded):
            raise ValueError(f"{where}: {sum(sharded)} of {len(params)} parameters are sharded by FSDP (DTensors) "
                             "and the others are not; give dash the parameters of the FSDP-sharded model only")
        return LocalShards(params, where)

    def add(self, params: List[torch.Tensor], where: str) -> None:
        """Takes the sharded parameters of a group added since."""
        added = LocalShards(params, where)
        if added.process_group is not self.process_group:
            raise ValueError(f"{where}: the added parameters are sharded over another device mesh")
        self._local.update(added._local)

    def local(self, param: torch.Tensor) -> torch.Tensor:
        """`param`'s local shard, which the C++ optimizer steps in place."""
        return self._local[id(param)][1]

    def receive_gradients(self) -> None:
        """Each local shard's gradient: the local part of its parameter's gradient."""
        for param, local in self._local.values():
            local.grad = None if param.grad is None else param.grad.to_local()

    @property
    def state_prefix(self) -> str:
        """The names of this rank's state entries begin with it: the ranks' entries of one
        parameter are of different shards, so each must be saved (and loaded) apart."""
        return f"rank{self.rank}of{self.world_size}." if self.world_size > 1 else ""

    def same_world(self, entries: Dict[str, Any]) -> bool:
        """Whether a parameter's saved entries, if they are any rank's, are of this world size."""
        worlds = {_rank_and_world(name)[1] for name in entries} - {None}
        return not worlds or worlds == {self.world_size}

    def own_entries(self, entries: Dict[str, Any]) -> Dict[str, Any]:
        """Of a parameter's saved entries, this rank's (without the prefix); the other ranks'
        are dropped, entries without a rank prefix kept as they are."""
        own = {}
        for name, value in entries.items():
            rank, _ = _rank_and_world(name)
            if rank is None:
                own[name] = value
            elif rank == self.rank:
                own[name.split(".", 1)[1]] = value
        return own


def _rank_and_world(name: str):
    """(r, w) of an entry named "rank<r>of<w>.<name>"; (None, None) for any other name."""
    head = name.split(".", 1)[0]
    if not head.startswith("rank") or "of" not in head or "." not in name:
        return None, None
    rank, _, world = head[len("rank"):].partition("of")
    return (int(rank), int(world)) if rank.isdigit() and world.isdigit() else (None, None)
