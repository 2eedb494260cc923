#!/usr/bin/env python3
"""Why the matmul solvers are not warm-started: on real factors of
the small GPT (examples/train_gpt.py, DASH-EVD, β_LR = 0.95), the exact root of each
factor at step 50 is the start for the same factor at step 60, one root period later.
Prints the gradient-weighted error (as RootMethod::Auto measures it) of that start and
of the uncoupled Newton iteration X ← X((p+1)I − X^p A)/p from it, in float64. (The
coupled iterations cannot start from it at all: their invariant M = X^p A needs X to
commute with A.)

    PYTHONPATH=build/release/python /usr/bin/python3 bench/probes/warm_newton_probe.py
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import auto_root_method as recording  # noqa: E402  (the factor recording)

P, EPSILON, STEPS = 4, 1e-6, 6


def exact_root_and_weight(factors):
    values, vectors = torch.linalg.eigh(factors)
    clipped = values.clamp_min(0)
    root = (vectors * (clipped + EPSILON).pow(-1 / P).unsqueeze(-2)) @ vectors.mT
    return root, vectors * clipped.sqrt().unsqueeze(-2)


def weighted_error(root, exact, weight):
    return ((root - exact) @ weight).flatten(1).norm(dim=1) / (exact @ weight).flatten(1).norm(dim=1)


def main():
    snapshots = recording.factor_snapshots([50, 60], 0.95)
    start, _ = exact_root_and_weight(snapshots[50])
    exact, weight = exact_root_and_weight(snapshots[60])
    identity = torch.eye(recording.BLOCK, dtype=torch.float64)
    regularised = snapshots[60] + EPSILON * identity
    error = weighted_error(start, exact, weight)
    print(f"{snapshots[60].shape[0]} factors; step-50 root for step 60: median {error.median():.3g}, max {error.max():.3g}")
    x = start.clone()
    for k in range(1, STEPS + 1):
        x = x @ ((P + 1) * identity - torch.linalg.matrix_power(x, P) @ regularised) / P
        x = (x + x.mT) / 2
        error = weighted_error(x, exact, weight)
        print(f"uncoupled Newton step {k}: median {error.median():.3g}, max {error.max():.3g}")


if __name__ == "__main__":
    main()
