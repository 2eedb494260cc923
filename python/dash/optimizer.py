"""dash.Dash: the C++ dash::Dash as a torch.optim.Optimizer."""

import difflib
from typing import Any, Callable, Dict, Iterable, Optional

import torch

from . import _C

# The C++ options as keywords: every DashOptions field under its C++ name, the root
# options flat (``root_method``, ``scaling``, ...), enums as strings. In param groups
# (beta_grad, beta_factor) are stored as ``betas``, as torch's Adam and Distributed
# Shampoo do, so that schedulers that cycle betas[0] (OneCycleLR) reach β_G.
_BETA_KEYS = ("beta_grad", "beta_factor")
_CPP_KEYS = tuple(_C.default_options().keys())
_GROUP_KEYS = tuple(key for key in _CPP_KEYS if key not in _BETA_KEYS) + ("betas",)
_CHECKPOINT_FORMAT = 1


def _group_from_cpp(options: Dict[str, Any]) -> Dict[str, Any]:
    group = dict(options)
    group["betas"] = tuple(group.pop(key) for key in _BETA_KEYS)
    return group


def _cpp_from_group(group: Dict[str, Any]) -> Dict[str, Any]:
    options = {key: group[key] for key in _GROUP_KEYS if key in group and key != "betas"}
    if "betas" in group:
        betas = group["betas"]
        if isinstance(betas, str) or len(betas) != 2:
            raise ValueError(f"dash: option 'betas' must be a pair (beta_grad, beta_factor), got {betas!r}")
        options.update(zip(_BETA_KEYS, betas))
    return options


def _normalise_keywords(options: Dict[str, Any], where: str) -> None:
    """Folds beta_grad/beta_factor into betas and rejects unknown keys, in place."""
    given = [key for key in _BETA_KEYS if key in options]
    if given:
        if "betas" in options:
            raise ValueError(f"{where}: give either betas or {'/'.join(given)}, not both")
        betas = list(_C.default_options()[key] for key in _BETA_KEYS)
        for index, key in enumerate(_BETA_KEYS):
            if key in options:
                betas[index] = options.pop(key)
        options["betas"] = tuple(betas)
    for key in options:
        if key not in _GROUP_KEYS and key != "params":
            close = difflib.get_close_matches(key, _GROUP_KEYS + _BETA_KEYS, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ValueError(f"{where}: unknown option '{key}'{hint}")


class Dash(torch.optim.Optimizer):
    """DASH (batched block Shampoo) as a ``torch.optim`` optimizer, backed by C++ ``dash::Dash``.

    Every ``dash::DashOptions`` field is a keyword with the same name and default
    (``dash.default_options()`` lists them); the root options are flat
    (``root_method="ndb"``, ``scaling="multi-pi"``, ``precision="bf16"``, ...), enums
    are strings, and ``betas=(beta_grad, beta_factor)``. ``param_groups`` is the
    source of truth: schedulers and hand edits take effect at the next ``step()``.
    Options that fix the shape of the state (block_size, one_dimensional,
    exponent_override, grafting with or without a statistic, momentum on/off)
    cannot change after the first step.

    Distributed: when ``torch.distributed`` is initialised with more than one rank,
    each rank keeps the state of and computes the updates for its share of the
    blocks, and every step all-gathers the updates (``process_group``: the group to
    use, default the default group; ``distributed=False`` keeps everything on this
    process). The gradients must be identical on all ranks at ``step()`` (DDP or an
    all-reduce does that).
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        *,
        process_group: Optional[Any] = None,
        distributed: bool = True,
        communication_dtype: str = "fp32",
        **options: Any,
    ):
        _normalise_keywords(options, "dash.Dash")
        defaults = _group_from_cpp(_C.default_options())
        defaults.update(options)
        defaults["lr"] = lr
        _C.validate_options(_cpp_from_group(defaults))  # ValueError naming a bad option
        self._cpp = None
        super().__init__(params, defaults)
        devices = {param.device.type for group in self.param_groups for param in group["params"]}
        group = _process_group(process_group) if distributed else None
        self._cpp = _C.Optimizer(
            [(group_["params"], _cpp_from_group(group_)) for group_ in self.param_groups],
            process_group=group,
            device_type=devices.pop() if len(devices) == 1 else "cpu",
            communication_dtype=communication_dtype,
        )
        self._params = self._param_identities()

    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        _normalise_keywords(param_group, "dash.Dash.add_param_group")
        if self._cpp is not None and self._cpp.diagnostics()["steps_taken"] > 0:
            raise RuntimeError("dash.Dash: add_param_group after the first step is not supported; "
                               "add every param group before stepping")
        super().add_param_group(param_group)
        if self._cpp is not None:
            group = self.param_groups[-1]
            try:
                self._cpp.add_param_group(group["params"], _cpp_from_group(group))
            except Exception:
                self.param_groups.pop()
                raise
            self._params = self._param_identities()

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], Any]] = None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self._param_identities() != self._params:
            raise RuntimeError("dash.Dash: the parameters in param_groups changed after construction; "
                               "use add_param_group (before the first step)")
        self._cpp.step([_cpp_from_group(group) for group in self.param_groups])
        return loss

    def state_dict(self) -> Dict[str, Any]:
        """The whole optimizer state as one byte tensor (the C++ checkpoint) plus the
        param groups' options; goes through ``torch.save``/``torch.load``."""
        archive = bytearray(self._cpp.save())
        groups, start = [], 0
        for group in self.param_groups:
            packed = {key: value for key, value in group.items() if key != "params"}
            packed["params"] = list(range(start, start + len(group["params"])))
            start += len(group["params"])
            groups.append(packed)
        return {
            "state": {},
            "param_groups": groups,
            "dash": {"format": _CHECKPOINT_FORMAT, "archive": torch.frombuffer(archive, dtype=torch.uint8)},
        }

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restores a ``state_dict()`` of a ``dash.Dash`` over the same parameters. On
        any mismatch it raises ValueError and leaves this optimizer as it was."""
        saved = state_dict.get("dash") if isinstance(state_dict, dict) else None
        if not isinstance(saved, dict) or "archive" not in saved:
            raise ValueError("dash.Dash.load_state_dict: not a dash.Dash state dict (no 'dash' entry); "
                             "was it saved by another optimizer?")
        if saved.get("format") != _CHECKPOINT_FORMAT:
            raise ValueError(f"dash.Dash.load_state_dict: unsupported state dict format {saved.get('format')!r}")
        saved_groups = state_dict.get("param_groups", [])
        sizes = [len(group["params"]) for group in saved_groups]
        own_sizes = [len(group["params"]) for group in self.param_groups]
        if sizes != own_sizes:
            raise ValueError(f"dash.Dash.load_state_dict: the state dict has param groups of {sizes} parameters, "
                             f"this optimizer {own_sizes}")
        archive = saved["archive"].detach().cpu().contiguous().numpy().tobytes()
        try:
            self._cpp.load(archive)  # checks every shape before it changes anything
        except RuntimeError as error:
            raise ValueError(f"dash.Dash.load_state_dict: {error}") from error
        for group, saved_group in zip(self.param_groups, saved_groups):
            group.update({key: value for key, value in saved_group.items() if key != "params"})

    def diagnostics(self) -> Dict[str, Any]:
        """Root failures per factor stack, skipped steps, stack shapes, state bytes, Auto's
        choices; reads a few scalars back from the device."""
        return self._cpp.diagnostics()

    def profile_phases(self, enabled: bool = True) -> None:
        """Time the following steps by phase (copies, factors, roots, ...); see phase_times_ms()."""
        self._cpp.profile_phases(enabled)

    def phase_times_ms(self) -> Dict[str, float]:
        return self._cpp.phase_times_ms()

    def _param_identities(self):
        return [[id(param) for param in group["params"]] for group in self.param_groups]


def _process_group(process_group: Optional[Any]) -> Optional[Any]:
    """The group to split the blocks over, or None for a single process."""
    import torch.distributed as dist

    if process_group is None:
        if not (dist.is_available() and dist.is_initialized()):
            return None
        process_group = dist.group.WORLD
    return process_group if dist.get_world_size(process_group) > 1 else None
