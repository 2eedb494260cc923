"""Muon's recipe as dash param groups: spectral descent (Newton–Schulz orthogonalised
momentum) on the hidden matrices, AdamW on everything else (embeddings, the output
layer, gains and biases), as KellerJordan/Muon's README prescribes. docs/python.md,
"Spectral descent (Muon)"."""

from typing import Any, Dict, Iterable, List, Tuple

import torch

# A start_step no run reaches: the group's matrices keep the grafting direction
# (Adam's) for good, and their family (spectral descent) keeps no state for them.
_NEVER = 2 ** 62


def muon_param_groups(hidden_matrices: Iterable[torch.Tensor], others: Iterable[torch.Tensor], *, lr: float = 0.02,
                      momentum: float = 0.95, nesterov: bool = True, weight_decay: float = 0.0,
                      block_size: int = 8192, adamw_lr: float = 3e-4, adamw_betas: Tuple[float, float] = (0.9, 0.95),
                      adamw_eps: float = 1e-10, adamw_weight_decay: float = 0.0) -> List[Dict[str, Any]]:
    """Two param groups for ``dash.Dash``: Muon's (``SingleDeviceMuonWithAuxAdam``'s
    arithmetic: momentum as an EMA without bias correction, Nesterov's form, five
    Newton–Schulz steps, the max(1, rows/cols)^½ scale, decoupled weight decay) on
    `hidden_matrices`, each orthogonalised whole up to `block_size` (larger ones in
    blocks of that size, each block in one batched call with its equals), and AdamW
    with Muon's auxiliary defaults on `others`. Further dash options (e.g.
    ``preconditioning_precision="bf16"`` on GPUs) can be set on the groups."""
    hidden, rest = list(hidden_matrices), list(others)
    for param in hidden:
        if param.dim() != 2:
            raise ValueError(f"dash.muon_param_groups: a hidden matrix must be 2-D (Muon views others as matrices "
                             f"itself; dash does not), got a parameter of shape {tuple(param.shape)}")
    common = dict(preconditioner="spectral_descent", block_size=block_size)
    muon = dict(params=hidden, lr=lr, betas=(momentum, 0.95), bias_correction=False, nesterov_grad=nesterov,
                grafting="none", start_step=1, weight_decay=weight_decay, **common)
    # AdamW whatever the constructor's keywords: Adam's direction, bias-corrected.
    adamw = dict(params=rest, lr=adamw_lr, betas=(adamw_betas[0], 0.95), beta_graft=adamw_betas[1],
                 eps=adamw_eps, adamw_betas=adamw_betas, grafting="adam", bias_correction=True, start_step=_NEVER,
                 weight_decay=adamw_weight_decay, **common)
    return [group for group in (muon, adamw) if group["params"]]
