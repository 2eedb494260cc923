#!/usr/bin/env python3
"""RootMethod::Auto on real training factors: records the Shampoo factors
L = EMA(G Gᵀ), R = EMA(Gᵀ G) of every 256 × 256 weight block of the small GPT of
examples/train_gpt.py while DASH-EVD trains it, and at the given steps runs
dash.choose_root_method on the stack, which times each method and measures its
error weighted by the factor (the preconditioned-gradient error). The plain
relative error ‖X − X*‖_F / ‖X*‖_F is printed next to it for contrast.

    /usr/bin/python3 bench/probes/auto_root_method.py [--steps 10,60] [--epsilons 1e-10,1e-6]
        [--precisions fp32,bf16] [--beta-factor 0.95] [--device cpu]
"""

import argparse
import importlib.util
from pathlib import Path

import torch
import torch.nn.functional as F

import dash

ROOT = Path(__file__).resolve().parents[2]
BLOCK = 256


def load_example():
    spec = importlib.util.spec_from_file_location("train_gpt", ROOT / "examples" / "train_gpt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def update_factors(model, factors, beta):
    for name, param in model.named_parameters():
        if param.grad is None or param.dim() != 2:
            continue
        grad = param.grad.double()
        for i in range(0, grad.shape[0] - BLOCK + 1, BLOCK):
            for j in range(0, grad.shape[1] - BLOCK + 1, BLOCK):
                block = grad[i:i + BLOCK, j:j + BLOCK]
                for side, moment in (("L", block @ block.T), ("R", block.T @ block)):
                    key = (name, i, j, side)
                    factors[key] = beta * factors.get(key, torch.zeros_like(moment)) + (1 - beta) * moment


def factor_snapshots(steps, beta, data=None):
    """Trains the small GPT with DASH-EVD and returns {step: (N, b, b) float64 stack of
    every factor} at each of `steps`."""
    gpt = load_example()
    torch.manual_seed(1)
    tokens, _ = gpt.load_corpus(data or gpt.DEFAULT_DATA)
    model = gpt.GPT(256, 2, heads=4, seq_len=128)
    optimizer = dash.Dash(model.parameters(), lr=3e-3, block_size=BLOCK, root_method="evd")
    batches = gpt.batches(tokens, 16, 128, torch.Generator().manual_seed(1))
    factors, snapshots = {}, {}
    for step in range(1, max(steps) + 1):
        inputs, targets = next(batches)
        loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        update_factors(model, factors, beta)
        optimizer.step()
        if step in steps:
            snapshots[step] = torch.stack(list(factors.values()))
    return snapshots


def plain_error(stack, p, epsilon, method, precision):
    values, vectors = torch.linalg.eigh(stack.double())
    values = values.clamp_min(0) + epsilon
    exact = (vectors * values.pow(-1.0 / p).unsqueeze(-2)) @ vectors.transpose(-1, -2)
    root = dash.inverse_root(stack, p, method=method, precision=precision, epsilon=epsilon,
                             newton_db_evaluation="matmuls").double()
    return ((root - exact).flatten(1).norm(dim=1) / exact.flatten(1).norm(dim=1)).max().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", default="10,60")
    parser.add_argument("--epsilons", default="1e-10,1e-6")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--beta-factor", type=float, default=0.95)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    report_steps = sorted(int(s) for s in args.steps.split(","))

    snapshots = factor_snapshots(report_steps, args.beta_factor, args.data)
    print("| step | ε | precision | method | ms | error (weighted) | plain error | chosen (auto_max_error 0.5) |")
    print("|---|---|---|---|---|---|---|---|")
    for step in report_steps:
        stack = snapshots[step].float().to(args.device)
        print(f"step {step}: {stack.shape[0]} factors of {BLOCK}×{BLOCK}", flush=True)
        for epsilon in (float(e) for e in args.epsilons.split(",")):
            for precision in args.precisions.split(","):
                choice = dash.choose_root_method(stack, 4, epsilon=epsilon, precision=precision,
                                                 newton_db_evaluation="matmuls")
                for trial in choice["trials"]:
                    plain = plain_error(stack, 4, epsilon, trial["method"], precision)
                    chosen = "**chosen**" if trial["method"] == choice["method"] else ""
                    print(f"| {step} | {epsilon:g} | {precision} | {trial['method']} | {trial['ms']:.0f} | "
                          f"{trial['error']:.3g} | {plain:.3g} | {chosen} |", flush=True)


if __name__ == "__main__":
    main()
