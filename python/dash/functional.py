"""Batched inverse p-th roots: the solver half of DASH (C++ ``dash::inverse_root``)."""

import numbers
import warnings
from typing import Any, Dict, NamedTuple

import torch

from . import _C

# dash.Dash's keywords for root options whose solver keyword differs.
_OPTIMIZER_NAMES = {"root_method": "method"}


def _checked(where: str, matrices: Any, p: Any, options: Dict[str, Any]) -> None:
    """What the C++ binding would take badly: p of the wrong kind (pybind names only
    the types, with the whole tensor), dash.Dash's option names, autograd input."""
    if isinstance(p, bool) or not isinstance(p, numbers.Integral):
        raise TypeError(f"{where}: p must be an int (the root's order: 1 or a power of two), got {p!r}")
    for name, solver_name in _OPTIMIZER_NAMES.items():
        if name in options:
            raise ValueError(f"{where}: unknown option '{name}' (dash.Dash's name); here it is {solver_name}=")
    if isinstance(matrices, torch.Tensor) and matrices.requires_grad:
        warnings.warn(f"{where} is not differentiable: its result has no gradient with respect to the input",
                      stacklevel=3)


class InverseRootResult(NamedTuple):
    root: torch.Tensor  #: (A + εI)^(-1/p), float32 (float64 for float64 input)
    residual: torch.Tensor  #: ‖X^p (A + ε_eff I) − I‖_F / √b, ε_eff = max(ε, ε_rel·λ_max), shape (N,) or ()
    finite: torch.Tensor  #: bool per matrix: every entry of the root is finite


def inverse_root(matrices: torch.Tensor, p: int, **options) -> torch.Tensor:
    """(A + εI)^(-1/p) for a symmetric PSD matrix ``(b, b)`` or a stack ``(N, b, b)``.

    Keywords (defaults as in C++ ``dash::InverseRootOptions``): ``method`` ("evd",
    "cn", "ndb", "chebyshev"; "auto" is for ``dash.Dash`` and ``choose_root_method``), ``scaling`` ("fro", "pi", "multi-pi"), ``precision``
    ("fp32", "bf16", "fp16"), ``epsilon``, ``relative_epsilon`` (roots of
    A + max(ε, ε_rel·λ_max)·I), ``newton_steps``, ``tolerance``,
    ``tolerance_check_interval``, ``power_iterations``, ``power_vectors``,
    ``power_margin``, ``chebyshev_degree``, ``chebyshev_interval_min``,
    ``eigen_heuristic``, ``newton_db_polynomial`` ("newton-schulz", "minimax3",
    "minimax5"), ``minimax_interval_min``, ``newton_db_evaluation`` ("matmuls", "eigh":
    the same root from the eigenvalues, at EVD's cost, or "auto", the default: "eigh" for
    float32 roots on a CPU, "matmuls" elsewhere). A matrix with non-finite entries gives an all-NaN root.
    """
    _checked("dash.inverse_root", matrices, p, options)
    return _C.inverse_root(matrices, int(p), **options)


def inverse_root_with_diagnostics(matrices: torch.Tensor, p: int, **options) -> InverseRootResult:
    """``inverse_root`` with each matrix's residual and finiteness (computed on the device)."""
    _checked("dash.inverse_root_with_diagnostics", matrices, p, options)
    return InverseRootResult(*_C.inverse_root_with_diagnostics(matrices, int(p), **options))


def choose_root_method(matrices: torch.Tensor, p: int, **options) -> dict:
    """What ``root_method="auto"`` does for one ``(N, b, b)`` stack: times every method on
    it (with the other ``options``) and measures each one's error on up to 8 of its
    matrices against float64 eigh, weighted by the matrix as a gradient's second
    moment (C++ ``dash::choose_root_method``). Returns ``{"method": fastest within
    auto_max_error (methods within 10 % of its time count as tied: the most accurate
    of them; none within: the most accurate, with a warning), "trials": [{"method",
    "ms", "error", "meets_accuracy"}, ...]}``. A one-off: several root computations.
    """
    _checked("dash.choose_root_method", matrices, p, options)
    return _C.choose_root_method(matrices, int(p), **options)


def estimate_spectral_scale(matrices: torch.Tensor, **options) -> torch.Tensor:
    """The scale s ≥ λ_max the iterative solvers normalise by, shape (N, 1, 1) or (1, 1)."""
    return _C.estimate_spectral_scale(matrices, **options)
