#!/usr/bin/env python3
"""NewtonDB's root as a function of the eigenvalues (newton_db_evaluation="eigh").

Every NewtonDB iterate is a polynomial in the normalised factor, so its ten-step root
is Q·φ(Λ)·Qᵀ for a scalar function φ. This script shows
1. φ against the exact λ^(-1/4), on a diagonal matrix (the ratio per decade of
   λ/λ_max, multi-vector power-iteration scaling with margin 2, the defaults);
2. on real factors of the small GPT (bench/probes/auto_root_method.py's recording), the
   matrix iteration's root against the eigenvalue evaluation's, and both against the
   exact root, as plain and gradient-weighted relative errors (RootMethod::Auto's
   measure), with the time of each on the whole stack.

    PYTHONPATH=build/release/python /usr/bin/python3 bench/probes/ndb_eigenvalue_function.py [--steps 10,60]
"""

import argparse
import sys
import time
from pathlib import Path

import torch

import dash

sys.path.insert(0, str(Path(__file__).resolve().parent))
import auto_root_method as recording  # noqa: E402  (the factor recording)

P = 4


def function_table(epsilon):
    decades = torch.arange(0, -13, -1, dtype=torch.float64)
    values = 10.0 ** decades
    root = dash.inverse_root(torch.diag(values), P, method="ndb", epsilon=epsilon, newton_db_evaluation="eigh")
    ratio = root.diagonal() / (values + epsilon) ** (-1.0 / P)
    print("φ(λ) / (λ + ε)^(-1/4), ten Newton–Schulz steps a pass, multi-pi scaling (margin 2), ε =", epsilon)
    print("| λ / λ_max | " + " | ".join(f"1e{int(d)}" for d in decades) + " |")
    print("|---" * (len(decades) + 1) + "|")
    print("| ratio | " + " | ".join(f"{r:.3g}" for r in ratio.tolist()) + " |")


def exact_root_and_weight(factors, epsilon):
    values, vectors = torch.linalg.eigh(factors)
    clipped = values.clamp_min(0)
    root = (vectors * (clipped + epsilon).pow(-1 / P).unsqueeze(-2)) @ vectors.mT
    return root, vectors * clipped.sqrt().unsqueeze(-2)


def errors(root, reference, weight):
    difference = root.double() - reference
    plain = difference.flatten(1).norm(dim=1) / reference.flatten(1).norm(dim=1)
    weighted = (difference @ weight).flatten(1).norm(dim=1) / (reference @ weight).flatten(1).norm(dim=1)
    return f"{plain.median():.3g} / {weighted.median():.3g}"


def timed(stack, **options):
    """The root and the fastest of three runs, in ms."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        root = dash.inverse_root(stack, P, method="ndb", **options)
        best = min(best, 1e3 * (time.perf_counter() - start))
    return root, best


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", default="10,60")
    parser.add_argument("--epsilon", type=float, default=1e-10)
    parser.add_argument("--beta-factor", type=float, default=0.95)
    args = parser.parse_args()
    function_table(args.epsilon)
    steps = sorted(int(s) for s in args.steps.split(","))
    snapshots = recording.factor_snapshots(steps, args.beta_factor)
    print("\nmedian relative error, plain / gradient-weighted; ms for the whole stack (fp32, fastest of 3)")
    print("| step | factors | matmuls vs eigh | matmuls vs exact | eigh vs exact | ms matmuls | ms eigh |")
    print("|---|---|---|---|---|---|---|")
    for step in steps:
        stack = snapshots[step].float()
        exact, weight = exact_root_and_weight(snapshots[step], args.epsilon)
        matmuls, matmuls_ms = timed(stack, epsilon=args.epsilon, newton_db_evaluation="matmuls")
        by_eigh, eigh_ms = timed(stack, epsilon=args.epsilon, newton_db_evaluation="eigh")
        print(f"| {step} | {stack.shape[0]} | {errors(by_eigh, matmuls.double(), weight)} | "
              f"{errors(matmuls, exact, weight)} | {errors(by_eigh, exact, weight)} | {matmuls_ms:.0f} | {eigh_ms:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
