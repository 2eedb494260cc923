#!/usr/bin/env python3
"""The accuracy floor of 16-bit inverse roots: how far the exact
root of A, rounded once to bfloat16 or float16, is from the root of A. Any solver
whose matmuls take A (normalised to λ_max = 1, as the iterative solvers do) or an
iterate carrying A's whole spectrum as a 16-bit operand starts from that rounded
matrix, so it cannot be more accurate than this, up to the iteration's own
rounding. Printed next to what dash's 16-bit NDB and CN reach on the same matrices,
and NDB in float32 (whose ten steps leave the smallest eigenvalues unconverged at
large κ).

Test spectra (b = 256, 8 matrices each, random eigenvectors): log-spaced over κ,
two clusters (half at 1, half at 1/κ), and rank b/4 (log-spaced over 1e-2) plus ε.
ε = 1/κ for all, i.e. regularised at the smallest eigenvalue: errors are relative
Frobenius against float64 eigh of A, median over the stack.

    PYTHONPATH=build/release/python /usr/bin/python3 bench/probes/half_precision_floor.py
"""

import math

import torch

import dash

B, COUNT, P = 256, 8, 4


def random_orthogonal(count, b, generator):
    q, r = torch.linalg.qr(torch.randn(count, b, b, dtype=torch.float64, generator=generator))
    return q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)


def spectra(kappa):
    ones = torch.ones(B // 2, dtype=torch.float64)
    return {
        "log-spaced": torch.logspace(0, -math.log10(kappa), B, dtype=torch.float64),
        "two clusters": torch.cat([ones, torch.full((B - B // 2,), 1 / kappa, dtype=torch.float64)]),
        "rank b/4 + ε": torch.cat([torch.logspace(0, -2, B // 4, dtype=torch.float64),
                                   torch.zeros(B - B // 4, dtype=torch.float64)]),
    }


def exact_root(a, epsilon):
    values, vectors = torch.linalg.eigh(a)
    return (vectors * (values.clamp_min(0) + epsilon).pow(-1 / P).unsqueeze(-2)) @ vectors.mT


def median_error(root, exact):
    return ((root.double() - exact).flatten(1).norm(dim=1) / exact.flatten(1).norm(dim=1)).median().item()


def main():
    generator = torch.Generator().manual_seed(0)
    print("| κ | spectrum | exact root of bf16(A) | of fp16(A) | NDB fp32 | NDB bf16 | NDB fp16 | CN bf16 | CN fp16 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kappa in (1e2, 1e4, 1e6):
        for name, values in spectra(kappa).items():
            q = random_orthogonal(COUNT, B, generator)
            a = (q * values.unsqueeze(-2)) @ q.mT
            a = (a + a.mT) / 2
            epsilon = 1 / kappa
            exact = exact_root(a, epsilon)
            cells = [median_error(exact_root(a.to(dtype).double(), epsilon), exact)
                     for dtype in (torch.bfloat16, torch.float16)]
            for method, precision in (("ndb", "fp32"), ("ndb", "bf16"), ("ndb", "fp16"), ("cn", "bf16"), ("cn", "fp16")):
                root = dash.inverse_root(a.float(), P, method=method, precision=precision, epsilon=epsilon,
                                         newton_db_evaluation="matmuls")
                cells.append(median_error(root, exact))
            print(f"| {kappa:g} | {name} | " + " | ".join(f"{c:.2g}" for c in cells) + " |", flush=True)


if __name__ == "__main__":
    main()
