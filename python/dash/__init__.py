"""dash: the DASH optimizer (Distributed Accelerated SHampoo) for PyTorch.

Batched block Shampoo backed by dash's C++ library::

    import dash
    optimizer = dash.Dash(model.parameters(), lr=1e-3, root_method="ndb")

``dash.Dash`` is a ``torch.optim.Optimizer``; ``dash.inverse_root`` computes the
batched inverse p-th roots it uses. See docs/python.md.
"""

import torch  # noqa: F401  (first: the extension uses torch's type registrations)

from . import _C
from .functional import (
    InverseRootResult,
    choose_root_method,
    estimate_spectral_scale,
    inverse_root,
    inverse_root_with_diagnostics,
)
from .ddp import no_reduce_hook
from .muon import muon_param_groups
from .optimizer import Dash

__all__ = [
    "Dash",
    "InverseRootResult",
    "choose_root_method",
    "default_options",
    "estimate_spectral_scale",
    "inverse_root",
    "inverse_root_with_diagnostics",
    "muon_param_groups",
    "no_reduce_hook",
    "preconditioners",
    "solver_methods",
]

__version__ = "0.1.0"


def preconditioners():
    """Every preconditioner family's name (what ``preconditioner`` takes), from the C++
    ``dash::kPreconditioners``: tests, benchmarks and dash-train iterate it."""
    return _C.preconditioners()


def solver_methods():
    """Every root solver's name (what ``root_method`` and ``method`` take, but "auto"),
    with its traits: ``matmul_only`` (roots by matrix products from a spectral scale),
    ``newton_iteration`` (``newton_steps`` applies), ``fixed_degree`` (a polynomial
    approximation of fixed degree). From the C++ ``dash::kSolverMethods``."""
    return _C.solver_methods()


def default_options():
    """Every ``dash.Dash`` keyword with its default, from the C++ ``DashOptions``."""
    from .optimizer import _group_from_cpp

    return _group_from_cpp(_C.default_options())
