#!/usr/bin/env python3
"""Why warm-started EVD has no matmul-only warm step: the iterative
refinement of Ogita & Aishima (2018, "Iterative refinement for symmetric eigenvalue
decomposition", Alg. 1: X ← X(I + E), E from R = I − XᵀX and S = XᵀAX by first-order
perturbation, four matmuls) would replace warm EVD's QR step by matmuls. On real
factors of the small GPT (examples/train_gpt.py, DASH-EVD) it diverges from the
previous root period's eigenbasis: the spectrum is too dense for first-order
corrections, which are valid only where |s_ij| ≪ |λ_i − λ_j|. Prints, in float64, the
root error (plain and gradient-weighted, as RootMethod::Auto measures it) of keeping
the previous basis, of one unshifted QR step (what warm EVD does), and of refinement
steps, with the paper's cluster threshold δ and with a per-pair one (|s_ij| ≤ c|gap|).

    PYTHONPATH=build/release/python /usr/bin/python3 bench/probes/warm_refinement_probe.py [--beta-factor 0.95]
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import auto_root_method as recording  # noqa: E402  (the factor recording)

P, EPSILON, MATRICES = 4, 1e-6, 16


def root_of_basis(x, a):
    """X f(λ) Xᵀ with Rayleigh quotients λ of the (nearly orthonormal) columns of X."""
    lam = (x.mT @ a @ x).diagonal(dim1=-2, dim2=-1) / (x.mT @ x).diagonal(dim1=-2, dim2=-1)
    return (x * (lam.clamp_min(0) + EPSILON).pow(-1 / P).unsqueeze(-2)) @ x.mT


def errors(root, a):
    values, vectors = torch.linalg.eigh(a)
    exact = (vectors * (values.clamp_min(0) + EPSILON).pow(-1 / P).unsqueeze(-2)) @ vectors.mT
    weight = vectors * values.clamp_min(0).sqrt().unsqueeze(-2)
    plain = (root - exact).flatten(1).norm(dim=1) / exact.flatten(1).norm(dim=1)
    weighted = ((root - exact) @ weight).flatten(1).norm(dim=1) / (exact @ weight).flatten(1).norm(dim=1)
    return f"plain {plain.median():.2g} (max {plain.max():.2g}), weighted {weighted.median():.2g}"


def refinement_step(a, x, pair_ratio=None):
    """Ogita–Aishima Alg. 1; pair_ratio=c replaces the global δ by |s_ij + λ_j r_ij| ≤ c|λ_j − λ_i|."""
    r = torch.eye(a.shape[-1], dtype=a.dtype) - x.mT @ x
    s = x.mT @ a @ x
    lam = s.diagonal(dim1=-2, dim2=-1) / (1 - r.diagonal(dim1=-2, dim2=-1))
    gap = lam.unsqueeze(-2) - lam.unsqueeze(-1)  # λ_j − λ_i
    numerator = s + lam.unsqueeze(-2) * r
    if pair_ratio is None:
        off = s - torch.diag_embed(lam)
        delta = 2 * (torch.linalg.matrix_norm(off, 2) + torch.linalg.matrix_norm(a, 2) * torch.linalg.matrix_norm(r, 2))
        separated = gap.abs() > delta.view(-1, 1, 1)
    else:
        separated = gap.abs() * pair_ratio > numerator.abs()
        separated = separated & separated.mT
    e = torch.where(separated, numerator / torch.where(separated, gap, torch.ones_like(gap)), r / 2)
    e.diagonal(dim1=-2, dim2=-1).copy_(r.diagonal(dim1=-2, dim2=-1) / 2)
    return x + x @ e, e.flatten(1).norm(dim=1).median().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beta-factor", type=float, default=0.95)
    parser.add_argument("--steps", default="20,30", help="the previous and the current root step")
    args = parser.parse_args()
    steps = [int(s) for s in args.steps.split(",")]
    snapshots = recording.factor_snapshots(steps, args.beta_factor)
    previous, current = (snapshots[step][:MATRICES] for step in steps)
    basis = torch.linalg.eigh(previous)[1].flip(-1)  # largest first, as warm EVD keeps it
    print(f"{MATRICES} factors, β = {args.beta_factor}, basis of step {steps[0]} for step {steps[1]}, float64")
    print(f"keep the basis: {errors(root_of_basis(basis, current), current)}")
    q_step, r_step = torch.linalg.qr(basis.mT @ current @ basis)
    print(f"one QR step: {errors(root_of_basis(basis @ q_step, current), current)}")
    for label, ratio in (("paper's δ", None), ("pair ratio 0.3", 0.3), ("pair ratio 0.05", 0.05)):
        x = basis
        for k in range(1, 4):
            x, correction = refinement_step(current, x, ratio)
            print(f"refinement ({label}) step {k}: ‖E‖_F {correction:.2g}, {errors(root_of_basis(x, current), current)}")


if __name__ == "__main__":
    main()
