"""dash.Dash: the C++ dash::Dash as a torch.optim.Optimizer."""

import collections.abc
import copy
import difflib
import threading
import warnings
import weakref
import zlib
from typing import Any, Callable, Dict, Iterable, List, Optional

import torch

from . import _C
from .fsdp import LocalShards
from .state_dicts import RankShare, checked_entries, gathered_on, with_checksums

# The C++ options as keywords: every DashOptions field under its C++ name, the root
# options flat (``root_method``, ``scaling``, ...), enums as strings. In param groups
# (beta_grad, beta_factor) are stored as ``betas``, as torch's Adam and Distributed
# Shampoo do, so that schedulers that cycle betas[0] (OneCycleLR) reach β_G.
_BETA_KEYS = ("beta_grad", "beta_factor")
_CPP_KEYS = tuple(_C.default_options().keys())
_GROUP_KEYS = tuple(key for key in _CPP_KEYS if key not in _BETA_KEYS) + ("betas",)
# Keys torch's lr schedulers add to param groups; not misspelt options.
_SCHEDULER_KEYS = ("initial_lr", "max_lr", "min_lr", "base_lr", "max_momentum", "base_momentum", "swa_lr")
# torch.optim's implementation switches, accepted where they hold for dash and kept in
# the param groups as torch keeps them: dash's step is one batched pass per stack
# whatever foreach/fused say; it reads one value back per step, so it cannot be
# captured in a CUDA graph; it is not differentiable.
_TORCH_SWITCHES = {"foreach": (None, True, False), "fused": (None, True, False), "capturable": (None, False),
                   "differentiable": (None, False)}
_SWITCH_REFUSALS = {
    "capturable": "a dash step decides on the host (its root schedule, from host step counts; the gradient check's "
                  "read-back unless non_finite_gradients='unchecked'), so it cannot be captured in a CUDA graph",
    "differentiable": "a dash step is not differentiable (its roots come from eigendecompositions and iterations "
                      "outside autograd)",
}
# torch.optim options dash has no counterpart for: an error, never silently ignored.
# Any other key of a param group that is not a dash option is the user's metadata.
_TORCH_UNSUPPORTED = ("amsgrad", "dampening", "lr_decay", "initial_accumulator_value", "rho", "alpha", "centered",
                      "lambd", "t0", "etas", "step_sizes", "momentum_decay", "decoupled_weight_decay", "max_iter",
                      "max_eval", "tolerance_grad", "tolerance_change", "history_size", "line_search_fn")
_OPTION_KEYS = frozenset(_GROUP_KEYS + ("params",) + tuple(_TORCH_SWITCHES))
_KNOWN_KEYS = _OPTION_KEYS | frozenset(_SCHEDULER_KEYS)
# State dicts of one C++ archive (still read): 2 carries a CRC-32 of its bytes
# ("checksum"), 1 does not.
_CHECKPOINT_FORMAT = 2
# State dicts keyed by parameter, as torch.optim's (what state_dict() writes): each
# param group's "dash" entry holds this format, the options the state was built with
# (C++ names) and the step counters.
_STATE_FORMAT = 3
_COUNTERS = ("steps_taken", "skipped_steps", "overflow_skipped_steps")


def _group_from_cpp(options: Dict[str, Any]) -> Dict[str, Any]:
    group = dict(options)
    group["betas"] = tuple(group.pop(key) for key in _BETA_KEYS)
    return group


def _cpp_from_group(group: Dict[str, Any]) -> Dict[str, Any]:
    stray = [key for key in _BETA_KEYS if key in group]
    if stray:
        raise ValueError(f"dash.Dash: a param group holds '{stray[0]}'; in param groups β_G and β_LR are "
                         "group['betas'] = (beta_grad, beta_factor)")
    options = {key: group[key] for key in _GROUP_KEYS if key in group and key != "betas"}
    if "betas" in group:
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"dash: option 'betas' must be a pair (beta_grad, beta_factor), got {betas!r}")
        options.update(zip(_BETA_KEYS, betas))
    return options


def _same_option(a, b) -> bool:
    """Whether a param group's option value `a` is the one the C++ optimizer holds
    (`b`): the same kind and value (a bool is not a number; a list is its tuple)."""
    if a is b:
        return True
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same_option(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 (a value that cannot be compared is sent, and checked there)
        return False


def _changed_options(group: Dict[str, Any], held: Dict[str, Any]) -> Dict[str, Any]:
    """The options of `group` (C++ names) that differ from `held`, the ones the C++
    optimizer holds for it."""
    return {key: value for key, value in _cpp_from_group(group).items()
            if key not in held or not _same_option(value, held[key])}


def _check_torch_switches(options: Dict[str, Any], where: str) -> None:
    for key, allowed in _TORCH_SWITCHES.items():
        value = options.get(key)
        if not any(value is choice for choice in allowed):
            reason = _SWITCH_REFUSALS.get(key, "it takes None, True or False")
            raise ValueError(f"{where}: {key}={value!r} is not supported: {reason}")


def _normalise_keywords(options: Dict[str, Any], where: str, default_betas, strict: bool) -> None:
    """Folds beta_grad/beta_factor into betas and torch's `eps` into Adam's ε (eps_graft
    and adamw_eps), in place, and checks torch's switches. Unknown keys: an error when
    `strict` (constructor keywords) or when they are torch.optim options dash does not
    implement, else kept (param groups may carry other keys, e.g. a scheduler's or a
    name) with a warning when they look like a misspelt option."""
    if "eps" in options:
        # Adam's ε, as in torch.optim.AdamW; dash's `epsilon` is the root's ε of (A + εI)^(-1/p).
        given = [key for key in ("eps_graft", "adamw_eps") if key in options]
        if given:
            raise ValueError(f"{where}: give either eps (Adam's ε: sets eps_graft and adamw_eps) or "
                             f"{'/'.join(given)}, not both")
        options["eps_graft"] = options["adamw_eps"] = options.pop("eps")
    _check_torch_switches(options, where)
    given = [key for key in _BETA_KEYS if key in options]
    if given:
        if "betas" in options:
            raise ValueError(f"{where}: give either betas or {'/'.join(given)}, not both")
        betas = list(default_betas)
        for index, key in enumerate(_BETA_KEYS):
            if key in options:
                betas[index] = options.pop(key)
        options["betas"] = tuple(betas)
    known = _OPTION_KEYS if strict else _KNOWN_KEYS
    _check_unknown_keys([key for key in options if key not in known], where, strict, stacklevel=4)


def _check_unknown_keys(keys, where: str, strict: bool, stacklevel: int) -> None:
    for key in keys:
        if key in _TORCH_UNSUPPORTED:
            raise ValueError(f"{where}: '{key}' is a torch.optim option that dash does not implement "
                             "(docs/python.md, \"Coming from torch.optim\")")
        close = difflib.get_close_matches(str(key), _GROUP_KEYS, n=1, cutoff=0.8 if not strict else 0.6)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        if strict:
            raise ValueError(f"{where}: unknown option '{key}'{hint}")
        if close:
            warnings.warn(f"{where}: param group key '{key}' is not a dash option (ignored){hint}",
                          stacklevel=stacklevel)


_READ_ONLY_STATE = ("dash.Dash.state holds views of the C++ state, which it names (docs/python.md, \"State and "
                    "checkpoints\"): change a value in place (optimizer.state[p][name].copy_(...)), or load a "
                    "state dict; entries cannot be added, replaced or removed")


class _ParameterEntries(dict):
    """One parameter's entries in ``Dash.state``: a dict of views that refuses to gain,
    replace or lose entries (a write there would be lost: the C++ state is the state)."""

    def _refuse(self, *args, **kwargs):
        raise TypeError(_READ_ONLY_STATE)

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _refuse

    def __deepcopy__(self, memo):
        return {name: copy.deepcopy(tensor, memo) for name, tensor in self.items()}

    def __reduce_ex__(self, protocol):
        return (dict, (dict(self),))


class _ParameterState(collections.abc.Mapping):
    """``Dash.state``: per parameter, views of its part of the C++ state (its blocks'
    factors, roots and moments, or its AdamW moments), made when read; iteration skips
    the parameters this process holds no state for (on a rank of several)."""

    def __init__(self, optimizer: "Dash"):
        # Weakly: the optimizer holds this mapping, and a cycle would keep its C++ state
        # (GPU memory, the process group) alive until Python's cycle collector ran.
        self._optimizer = weakref.ref(optimizer)

    def _live(self) -> "Dash":
        optimizer = self._optimizer()
        if optimizer is None:
            raise RuntimeError("dash.Dash.state: the optimizer no longer exists")
        return optimizer

    def _index(self, param) -> int:
        for index, other in enumerate(p for group in self._live().param_groups for p in group["params"]):
            if other is param:
                return index
        raise KeyError(param)

    def __getitem__(self, param) -> Dict[str, torch.Tensor]:
        """A parameter of this optimizer without state here gives {} (as torch.optim's
        defaultdict does); any other tensor a KeyError."""
        return _ParameterEntries(self._live()._cpp.parameter_state(self._index(param)))

    def __setitem__(self, param, value):
        raise TypeError(_READ_ONLY_STATE)

    def __delitem__(self, param):
        raise TypeError(_READ_ONLY_STATE)

    def __iter__(self):
        optimizer = self._live()
        params = [p for group in optimizer.param_groups for p in group["params"]]
        return iter([p for index, p in enumerate(params) if optimizer._cpp.parameter_state(index)])

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Dash(torch.optim.Optimizer):
    """DASH (batched block Shampoo) as a ``torch.optim`` optimizer, backed by C++ ``dash::Dash``.

    Every ``dash::DashOptions`` field is a keyword with the same name and default
    (``dash.default_options()`` lists them); the root options are flat
    (``root_method="ndb"``, ``scaling="multi-pi"``, ``precision="bf16"``, ...), enums
    are strings, and ``betas=(beta_grad, beta_factor)``. ``root_method="auto"`` times
    every method at each factor stack's first root computation and keeps the fastest
    within ``auto_max_error`` (``diagnostics()`` shows the choice). ``param_groups`` is the
    source of truth: schedulers and hand edits take effect at the next ``step()``.
    Options that fix the shape of the state (block_size, one_dimensional,
    exponent_override, grafting with or without a statistic, momentum on/off)
    cannot change after the first step.

    Distributed: when ``torch.distributed`` is initialised with more than one rank,
    each rank keeps the state of and computes the updates for its share of the
    blocks, and every step all-gathers the updates (``process_group``: the group to
    use, default the default group; ``distributed=False`` keeps everything on this
    process). ``scheme="replicated"`` (default): the gradients must be identical on
    all ranks at ``step()`` (DDP or an all-reduce does that). ``scheme="zero"``: each
    rank's own gradients, which dash averages so that each rank receives only those
    of its blocks (ZeRO-2; under DDP, register ``dash.no_reduce_hook`` as its
    communication hook so that DDP does not all-reduce them first). Parameters
    sharded by FSDP2's ``fully_shard`` (DTensors): ``scheme="local_shards"`` (the
    default for them), each rank preconditions blocks within its own shards of them
    (docs/python.md, "FSDP").
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        *,
        process_group: Optional[Any] = None,
        distributed: bool = True,
        communication_dtype: str = "fp32",
        scheme: Optional[str] = None,
        timeout: Optional[Any] = None,
        **options: Any,
    ):
        defaults = _group_from_cpp(_C.default_options())
        _normalise_keywords(options, "dash.Dash", defaults["betas"], strict=True)
        defaults.update(options)
        defaults["lr"] = lr
        _C.validate_options(_cpp_from_group(defaults))  # ValueError naming a bad option
        # step() and zero_grad() take turns (docs/reliability.md, "Threads"): LibTorch
        # itself is not safe against a .grad set to None while another thread steps
        # (torch.optim.AdamW crashes there too), so neither may run inside the other.
        self._turns = threading.RLock()
        self._cpp = None
        super().__init__(params, defaults)
        for index, group in enumerate(self.param_groups):
            try:
                _C.validate_options(_cpp_from_group(group))
            except ValueError as error:
                raise ValueError(f"dash.Dash: param group {index}: {error}") from error
        devices = {param.device.type for group in self.param_groups for param in group["params"]}
        self._shards = LocalShards.of([p for group in self.param_groups for p in group["params"]], "dash.Dash")
        if self._shards is not None:
            if scheme not in (None, "local_shards"):
                raise ValueError(f"dash.Dash: parameters sharded by FSDP (DTensors) take scheme='local_shards', "
                                 f"not {scheme!r}: FSDP has already averaged each rank's shard of the gradients")
            scheme = "local_shards"
            group = (self._shards.process_group if process_group is None else process_group) if distributed else None
            group = _process_group(group) if group is not None else None
        else:
            group = _process_group(process_group) if distributed else None
        self._process_group = group  # None in one process
        self._consolidated = None  # consolidate_state_dict's, on its rank `to`, until the next step
        scheme = scheme or "replicated"
        self._cpp = _C.Optimizer(
            [(self._cpp_params(group_["params"]), _cpp_from_group(group_)) for group_ in self.param_groups],
            process_group=group,
            device_type=devices.pop() if len(devices) == 1 else "cpu",
            communication_dtype=communication_dtype,
            scheme=scheme,
            timeout=_timeout_seconds(timeout),
        )
        self._params = self._param_identities()
        self._mirror_options()
        self.state = _ParameterState(self)
        self._unknown_keys_seen = self._unknown_keys()
        self._construction = dict(process_group=process_group, distributed=distributed,
                                  communication_dtype=communication_dtype, scheme=scheme, timeout=timeout)

    def _mirror_options(self) -> None:
        """Notes the options the C++ optimizer holds for each group: a step sends a
        group's only where the param group has changed them since (a scheduler's lr,
        a hand edit), and the C++ optimizer converts and checks only those."""
        self._held_options = [dict(self._cpp.group_options(index)) for index in range(len(self.param_groups))]

    def _unknown_keys(self) -> frozenset:
        return frozenset(key for group in self.param_groups for key in group if key not in _KNOWN_KEYS)

    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        # (torch.optim.Optimizer.__init__ adds the constructor's groups through here)
        where = "dash.Dash" if self._cpp is None else "dash.Dash.add_param_group"
        _normalise_keywords(param_group, where, self.defaults["betas"], strict=False)
        super().add_param_group(param_group)
        if self._cpp is not None:
            group = self.param_groups[-1]
            try:
                if self._shards is not None:
                    self._shards.add(group["params"], "dash.Dash.add_param_group")
                elif LocalShards.of(group["params"], "dash.Dash.add_param_group") is not None:
                    raise ValueError("dash.Dash.add_param_group: the optimizer's parameters are not sharded by "
                                     "FSDP, the added ones are")
                try:
                    self._cpp.add_param_group(self._cpp_params(group["params"]), _cpp_from_group(group))
                except ValueError as error:
                    raise ValueError(f"dash.Dash.add_param_group: param group {len(self.param_groups) - 1}: "
                                     f"{error}") from error
            except Exception:
                self.param_groups.pop()
                raise
            self._params = self._param_identities()
            self._mirror_options()

    def zero_grad(self, *args: Any, **kwargs: Any) -> None:
        with self._turns:
            super().zero_grad(*args, **kwargs)

    def step(self, closure: Optional[Callable[[], Any]] = None):
        with self._turns:
            return self._step(closure)

    @torch.no_grad()
    def _step(self, closure: Optional[Callable[[], Any]]):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self._param_identities() != self._params:
            raise RuntimeError("dash.Dash: the parameters in param_groups changed after construction; "
                               "add parameters with add_param_group")
        for group in self.param_groups:
            if "eps" in group:  # torch's name for Adam's ε, set on a group since
                group["eps_graft"] = group["adamw_eps"] = group.pop("eps")
        unknown = self._unknown_keys()
        if unknown != self._unknown_keys_seen:  # a key added to a group since: misspelt?
            added = sorted((key for key in unknown - self._unknown_keys_seen if key not in _BETA_KEYS), key=str)
            _check_unknown_keys(added, "dash.Dash.step", strict=False, stacklevel=5)
            self._unknown_keys_seen = unknown
        for group in self.param_groups:
            _check_torch_switches(group, "dash.Dash.step")
        if self._shards is not None:
            self._shards.receive_gradients()
        self._consolidated = None
        changes = [_changed_options(group, held) for group, held in zip(self.param_groups, self._held_options)]
        # Read here, under the GIL: another thread may replace a .grad while the C++
        # step runs without it (it never reads the parameters' gradients itself).
        gradients = [param.grad for group in self.param_groups for param in self._cpp_params(group["params"])]
        self._cpp.step(changes, gradients)
        for index, changed in enumerate(changes):
            if changed:  # what the C++ optimizer holds now (a tensor lr may change in place later)
                self._held_options[index] = dict(self._cpp.group_options(index))
        return loss

    def _cpp_params(self, params: List[torch.Tensor]) -> List[torch.Tensor]:
        """The tensors the C++ optimizer steps: the parameters, or their local shards."""
        return params if self._shards is None else [self._shards.local(param) for param in params]

    def state_dict(self) -> Dict[str, Any]:
        """The state keyed by parameter index, as torch.optim's: ``state[i]`` is parameter
        i's part (``optimizer.state[p]``'s views, block by block: docs/python.md, "State
        and checkpoints", with a checksum per block), ``param_groups`` the groups' options,
        each with a ``"dash"`` entry (the options the state was built with and the step
        counters). Goes through ``torch.save`` and ``torch.distributed.checkpoint``. The
        tensors are the live state, as in torch.optim: save it (``torch.save``,
        ``copy.deepcopy``) before the next step. On a rank of several that split the
        state, the entries of the blocks the rank owns (a parameter it owns none of has
        ``{}``), which torch.distributed.checkpoint saves with every other rank's, and
        which ``torch.save`` refuses alone, naming the remedies; after
        ``consolidate_state_dict(to)``, on rank ``to``, every rank's."""
        if self._consolidated is not None:
            return self._consolidated
        own = self.sharded_state_dict()
        if self._process_group is None:
            return own
        import torch.distributed as dist

        return RankShare(own, dist.get_rank(self._process_group), dist.get_world_size(self._process_group))

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gathers every rank's state on rank ``to`` of the optimizer's process group (a
        collective: call it on every rank), as torch's ``ZeroRedundancyOptimizer`` does:
        until the next step, ``state_dict()`` on rank ``to`` holds the state of every
        block (on the CPU), which ``load_state_dict`` takes on any number of ranks. In
        one process it does nothing."""
        self._consolidated = None
        if self._process_group is not None:
            self._consolidated = gathered_on(self.sharded_state_dict(), to, self._process_group)

    def sharded_state_dict(self) -> Dict[str, Any]:
        """This process's state dict, a plain dict: in one process the whole state; on a
        rank of several, its own blocks' (save every rank's, and resume with
        ``load_sharded_state_dicts``)."""
        for hook in getattr(self, "_optimizer_state_dict_pre_hooks", {}).values():
            hook(self)
        diagnostics = self._cpp.diagnostics()
        saved = {"format": _STATE_FORMAT, **{key: diagnostics[key] for key in _COUNTERS}}
        if self._process_group is not None:  # which share this is, for load_sharded_state_dicts
            import torch.distributed as dist

            saved.update(rank=dist.get_rank(self._process_group), world_size=dist.get_world_size(self._process_group))
        groups, start = [], 0
        for index, group in enumerate(self.param_groups):
            packed = {key: value for key, value in group.items() if key != "params"}
            packed["params"] = list(range(start, start + len(group["params"])))
            packed["dash"] = {**saved, "options": dict(self._cpp.group_options(index))}
            start += len(group["params"])
            groups.append(packed)
        prefix = self._shards.state_prefix if self._shards is not None else ""
        state_dict = {
            "state": {index: with_checksums({prefix + name: tensor
                                             for name, tensor in self._cpp.parameter_state(index).items()})
                      for index in range(start)},
            "param_groups": groups,
        }
        for hook in getattr(self, "_optimizer_state_dict_post_hooks", {}).values():
            state_dict = hook(self, state_dict) or state_dict
        return state_dict

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restores a ``state_dict()`` of a ``dash.Dash`` over the same parameters; the
        param groups become the saved ones, as in torch.optim: every option the saved
        groups hold (edited or not: a scheduler's lr set after the last step, a hand
        edit before loading) and their other keys, and the options the state was built
        with for any they lack. Its ``state`` may be keyed by index or, as
        torch.distributed.checkpoint gives it back, by name; on a rank of several it
        must hold the entries of the blocks this rank owns (its own ``state_dict()``,
        or a checkpoint that torch.distributed.checkpoint resharded), else see
        ``load_sharded_state_dicts``. State dicts of the older format (one C++ archive)
        still load. On any mismatch or bad value it raises ValueError and leaves this
        optimizer as it was."""
        self._load_state_dicts([state_dict], "load_state_dict")

    def load_sharded_state_dicts(self, state_dicts: List[Dict[str, Any]]) -> None:
        """Restores a checkpoint written on any number of ranks into this optimizer on
        any number: ``state_dicts`` are the ``state_dict()`` of every rank of the
        writing run, in rank order (one for a single process), and each rank of this
        run takes the state of the blocks it owns now. Otherwise as ``load_state_dict``
        (the param groups come from the first)."""
        state_dicts = list(state_dicts)
        if not state_dicts:
            raise ValueError("dash.Dash.load_sharded_state_dicts: no state dicts")
        _check_rank_order(state_dicts, "dash.Dash.load_sharded_state_dicts")
        self._load_state_dicts(state_dicts, "load_sharded_state_dicts")

    def _load_state_dicts(self, state_dicts: List[Dict[str, Any]], name: str) -> None:
        where = f"dash.Dash.{name}"
        hooks = getattr(self, "_optimizer_load_state_dict_pre_hooks", {}).values()
        for index, state_dict in enumerate(state_dicts):
            for hook in hooks:
                state_dict = hook(self, state_dict) or state_dict
            state_dicts[index] = state_dict
            if not isinstance(state_dict, dict):
                raise ValueError(f"{where}: a state dict must be a dict, got {type(state_dict).__name__}")
        state_dict = state_dicts[0]
        saved_groups = state_dict.get("param_groups")
        if not isinstance(saved_groups, list) or not all(
                isinstance(group, dict) and isinstance(group.get("params"), list) for group in saved_groups):
            raise ValueError(f"{where}: 'param_groups' must be a list of dicts with 'params' lists")
        sizes = [len(group["params"]) for group in saved_groups]
        own_sizes = [len(group["params"]) for group in self.param_groups]
        if sizes != own_sizes:
            raise ValueError(f"{where}: the state dict has param groups of {sizes} parameters, "
                             f"this optimizer {own_sizes}")
        saved_options = []
        for index, saved_group in enumerate(saved_groups):
            options = {key: saved_group[key] for key in _GROUP_KEYS if key in saved_group}
            try:
                _C.validate_options(_cpp_from_group(options))
            except ValueError as error:
                raise ValueError(f"{where}: param group {index}: {error}") from error
            saved_options.append(options)
        if all(isinstance(sd.get("dash"), dict) and "archive" in sd["dash"] for sd in state_dicts):
            archives = [self._checked_archive(sd, where) for sd in state_dicts]
            load = (lambda: self._cpp.load(archives[0])) if name == "load_state_dict" else (
                lambda: self._cpp.load_resharded(archives))
        else:
            load = self._parameter_states_loader(state_dicts, where)
        try:
            load()  # checks every shape before it changes anything
        except Exception as error:  # noqa: BLE001 (whatever a damaged state raises: ValueError, as documented)
            raise ValueError(f"{where}: {error}") from error
        for index, (group, saved_group) in enumerate(zip(self.param_groups, saved_groups)):
            extra = {key: value for key, value in saved_group.items()
                     if key not in _GROUP_KEYS and key not in _BETA_KEYS and key not in ("params", "dash")}
            params = group["params"]
            group.clear()  # the same dict: schedulers hold references to the groups
            group.update(params=params, **extra, **_group_from_cpp(self._cpp.group_options(index)))
            # The saved options take effect at the next step, but for an edit of one that
            # shapes the state (block_size, ...): the state is built for its own.
            layout = _C.state_layout(_cpp_from_group(group))  # the loaded state's, kept by every key applied
            for key, value in saved_options[index].items():
                if key in group and _C.state_layout(_cpp_from_group({**group, key: value})) != layout:
                    warnings.warn(f"{where}: param group {index}'s {key}={value!r} would change "
                                  f"the shape of the loaded state; the checkpoint's {group[key]!r} is kept",
                                  stacklevel=3)
                    continue
                group[key] = value
        self._mirror_options()
        self._consolidated = None
        for hook in getattr(self, "_optimizer_load_state_dict_post_hooks", {}).values():
            hook(self)

    def _parameter_states_loader(self, state_dicts: List[Dict[str, Any]], where: str) -> Callable[[], None]:
        """The load of state dicts keyed by parameter: every parameter's entries, the
        union over ``state_dicts`` (each maps its groups' saved ids, indices or names,
        to this optimizer's parameters by position), with the first's options and
        counters."""
        count = sum(len(group["params"]) for group in self.param_groups)
        states: List[Dict[str, torch.Tensor]] = [{} for _ in range(count)]
        for number, state_dict in enumerate(state_dicts):
            groups = state_dict.get("param_groups")
            saved = [group.get("dash") if isinstance(group, dict) else None for group in groups or []]
            if not groups or not all(isinstance(entry, dict) for entry in saved):
                raise ValueError(f"{where}: not a dash.Dash state dict (no 'dash' entry in its param groups); "
                                 "was it saved by another optimizer, or flattened (torch.distributed.checkpoint's "
                                 "flatten_optimizer_state_dict drops it)?")
            if any(entry.get("format") != _STATE_FORMAT for entry in saved):
                raise ValueError(f"{where}: unsupported state dict format {saved[0].get('format')!r}")
            ids = [key for group in groups for key in group.get("params", [])]
            if len(ids) != count:
                raise ValueError(f"{where}: state dict {number} has {len(ids)} parameters, this optimizer {count}")
            state = state_dict.get("state")
            if not isinstance(state, dict):
                raise ValueError(f"{where}: 'state' must be a dict")
            listed = set(ids)
            unknown = [key for key in state if key not in listed]
            if unknown:
                raise ValueError(f"{where}: state dict {number} has state for {unknown[:3]!r}, which its param "
                                 "groups do not list (a state dict of another model?)")
            for index, key in enumerate(ids):
                entries = state.get(key, {})
                if not isinstance(entries, dict) or not all(
                        isinstance(name, str) and isinstance(value, torch.Tensor) for name, value in entries.items()):
                    raise ValueError(f"{where}: the state of parameter {key!r} must be a dict of named tensors")
                entries = checked_entries(entries, f"{where}: parameter {key!r}")
                if self._shards is not None:
                    if not self._shards.same_world(entries):
                        raise ValueError(f"{where}: the state of parameter {key!r} was saved by another number of "
                                         "ranks: the state of FSDP shards loads on the world size that saved it")
                    entries = self._shards.own_entries(entries)
                states[index].update(entries)
        # Frozen parameters keep their state: torch.distributed.checkpoint's
        # set_optimizer_state_dict passes none for them.
        params = [param for group in self.param_groups for param in group["params"]]
        for index, param in enumerate(params):
            if not states[index] and not param.requires_grad:
                states[index] = dict(self._cpp.parameter_state(index))
        first = [group["dash"] for group in state_dicts[0]["param_groups"]]
        options, counters = [], []
        for index, entry in enumerate(first):
            if not isinstance(entry.get("options"), dict) or not all(
                    isinstance(entry.get(key), int) for key in _COUNTERS):
                raise ValueError(f"{where}: param group {index}'s 'dash' entry lacks its options or counters")
            options.append(entry["options"])
            counters.append(tuple(entry[key] for key in _COUNTERS))
        return lambda: self._cpp.load_parameter_states(options, states, counters[0])

    @staticmethod
    def _checked_archive(state_dict: Dict[str, Any], where: str) -> bytes:
        """The C++ archive of a state dict of the older format, refused before it is
        parsed when its checksum fails (parsing a damaged one could fail in any way,
        allocate what a damaged size field says, or load a different state)."""
        saved = state_dict["dash"]
        if not isinstance(saved.get("archive"), torch.Tensor):
            raise ValueError(f"{where}: not a dash.Dash state dict (no 'dash' archive); "
                             "was it saved by another optimizer?")
        if saved.get("format") not in (1, _CHECKPOINT_FORMAT):
            raise ValueError(f"{where}: unsupported state dict format {saved.get('format')!r}")
        archive = saved["archive"].detach().cpu().contiguous().numpy().tobytes()
        if saved.get("format") == _CHECKPOINT_FORMAT and zlib.crc32(archive) != saved.get("checksum"):
            raise ValueError(f"{where}: the optimizer state is corrupted (its checksum does not match "
                             "its bytes); load an intact copy")
        return archive

    def __getstate__(self):
        raise TypeError("dash.Dash cannot be pickled or shallow-copied (its state lives in C++); "
                        "save and restore it with state_dict() / load_state_dict(), or copy.deepcopy() it")

    def __deepcopy__(self, memo):
        """An optimizer with its own copy of the C++ state (EMA/SWA utilities and some
        trainers deep-copy optimizers): the param groups deep-copied through ``memo``
        (so the parameters are the copied model's where the model was copied first),
        the state through a state dict. A distributed optimizer's copy uses the same
        process group, so every rank must copy it (its construction is collective)."""
        groups = copy.deepcopy(self.param_groups, memo)
        defaults = {key: value for key, value in self.defaults.items() if key != "lr"}
        copied = Dash(groups, lr=self.defaults["lr"], **self._construction, **defaults)
        memo[id(self)] = copied
        copied.load_state_dict(self.state_dict())
        return copied

    def diagnostics(self) -> Dict[str, Any]:
        """Root failures per factor stack, skipped steps, stack shapes, Auto's choices, and
        memory: state, workspace and (with profile_memory) the last step's peak, in bytes;
        reads a few scalars back from the device."""
        return self._cpp.diagnostics()

    def profile_memory(self, enabled: bool = True) -> None:
        """Measure the following steps' peak of temporary memory, diagnostics()["step_peak_bytes"]
        (the allocators' reporting hook, as torch.profiler's profile_memory; not while a
        profiler runs)."""
        self._cpp.profile_memory(enabled)

    def profile_phases(self, enabled: bool = True) -> None:
        """Time the following steps by phase (copies, factors, roots, ...); see phase_times_ms()."""
        self._cpp.profile_phases(enabled)

    def phase_times_ms(self) -> Dict[str, float]:
        return self._cpp.phase_times_ms()

    def _param_identities(self):
        return [[id(param) for param in group["params"]] for group in self.param_groups]


def _check_rank_order(state_dicts: List[Dict[str, Any]], where: str) -> None:
    """Refuses rank shares given out of rank order, twice, or not all of them (each
    share's groups name its rank and world size; older state dicts do not, and pass)."""
    shares = []
    for state_dict in state_dicts:
        groups = state_dict.get("param_groups") if isinstance(state_dict, dict) else None
        entry = groups[0].get("dash") if isinstance(groups, list) and groups and isinstance(groups[0], dict) else None
        shares.append((entry.get("rank"), entry.get("world_size")) if isinstance(entry, dict) else (None, None))
    if all(rank is None for rank, _ in shares):
        return
    expected = [(rank, len(state_dicts)) for rank in range(len(state_dicts))]
    if shares != expected:
        given = ", ".join("?" if rank is None else f"rank {rank} of {world}" for rank, world in shares)
        raise ValueError(f"{where}: give every rank's state dict once, in rank order (0, 1, ...); got {given}")


def _timeout_seconds(timeout: Optional[Any]) -> float:
    """dash.Dash's `timeout` (seconds, or a datetime.timedelta as torch.distributed takes
    it) in seconds for C++; 0 for its default, 5 minutes."""
    if timeout is None:
        return 0.0
    seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise ValueError(f"dash.Dash: timeout must be a positive number of seconds or a datetime.timedelta, "
                         f"got {timeout!r}")
    return float(seconds)


def _process_group(process_group: Optional[Any]) -> Optional[Any]:
    """The group to split the blocks over, or None for a single process."""
    import torch.distributed as dist

    if process_group is None:
        if not (dist.is_available() and dist.is_initialized()):
            return None
        process_group = dist.group.WORLD
    group_type = getattr(dist, "ProcessGroup", None) if dist.is_available() else None
    if group_type is not None and not isinstance(process_group, group_type):
        raise TypeError(f"dash.Dash: process_group must be a torch.distributed ProcessGroup, "
                        f"got {type(process_group).__name__}")
    return process_group if dist.get_world_size(process_group) > 1 else None
