#!/usr/bin/env python3
"""Warm-started eigenbases on real training factors: the small GPT of
examples/train_gpt.py trained with DASH-EVD, eigh every root step (τ = 0) against
warm-started eigenbases (eigen_refresh_tolerance τ > 0), runs interleaved step by
step so that machine noise hits all alike. Reports the root steps' optimizer time,
how each root was computed, and the training loss.

    /usr/bin/python3 bench/probes/warm_roots.py [--steps 120] [--dim 256] [--block-size 256]
        [--tolerances 0,0.02,0.05,0.1] [--warm-iterations 1] [--beta-factor 0.95] [--root-frequency 10]
"""

import argparse
import importlib.util
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import dash

ROOT = Path(__file__).resolve().parents[2]


def load_example():
    spec = importlib.util.spec_from_file_location("train_gpt", ROOT / "examples" / "train_gpt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--block-size", type=int, default=256)
    parser.add_argument("--tolerances", default="0,0.02,0.05,0.1")
    parser.add_argument("--warm-iterations", type=int, default=1, help="QR steps before eigh (0: keep or eigh)")
    parser.add_argument("--beta-factor", type=float, default=0.95)
    parser.add_argument("--root-frequency", type=int, default=10)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--data", default=None)
    args = parser.parse_args()

    gpt = load_example()
    train_tokens, _ = gpt.load_corpus(args.data or gpt.DEFAULT_DATA)
    tolerances = [float(t) for t in args.tolerances.split(",")]
    runs = []
    for tolerance in tolerances:
        torch.manual_seed(1)
        model = gpt.GPT(args.dim, args.layers, heads=4, seq_len=128)
        optimizer = dash.Dash(model.parameters(), lr=args.lr, block_size=args.block_size, root_method="evd",
                              root_frequency=args.root_frequency, start_step=args.root_frequency,
                              betas=(0.9, args.beta_factor), eigen_refresh_tolerance=tolerance,
                              eigen_warm_iterations=args.warm_iterations)
        data = gpt.batches(train_tokens, 16, 128, torch.Generator().manual_seed(1))
        runs.append(dict(tolerance=tolerance, model=model, optimizer=optimizer, data=data, root_ms=[], other_ms=[],
                         losses=[]))
    for step in range(1, args.steps + 1):
        for run in runs:  # interleaved: each step of every run under the same conditions
            inputs, targets = next(run["data"])
            loss = F.cross_entropy(run["model"](inputs).flatten(0, 1), targets.flatten())
            run["optimizer"].zero_grad()
            loss.backward()
            start = time.perf_counter()
            run["optimizer"].step()
            elapsed = 1e3 * (time.perf_counter() - start)
            root_step = step >= args.root_frequency and (step - args.root_frequency) % args.root_frequency == 0
            (run["root_ms"] if root_step else run["other_ms"]).append(elapsed)
            run["losses"].append(loss.item())

    print(f"GPT dim {args.dim}, {args.layers} layers, B = {args.block_size}, f = {args.root_frequency}, "
          f"beta_factor {args.beta_factor}, {args.warm_iterations} QR steps, {args.steps} steps, "
          f"torch threads {torch.get_num_threads()}")
    print("| τ | root step ms (mean) | × τ=0 | non-root ms (median) | roots kept / warm / eigh | loss (last 20) |")
    print("|---|---|---|---|---|---|")
    base = statistics.mean(runs[0]["root_ms"][1:]) if tolerances[0] == 0 else None
    for run in runs:
        stacks = run["optimizer"].diagnostics()["factor_stacks"]
        kept = sum(s["roots_kept"] for s in stacks)
        warm = sum(s["roots_warm_started"] for s in stacks)
        eigh = sum(s["roots_recomputed"] for s in stacks)
        root = statistics.mean(run["root_ms"][1:])  # the first root step also fills the workspace
        ratio = f"{root / base:.2f}" if base else "-"
        counts = f"{kept} / {warm} / {eigh}" if run["tolerance"] > 0 else "all eigh"
        print(f"| {run['tolerance']:g} | {root:.1f} | {ratio} | {statistics.median(run['other_ms']):.1f} | "
              f"{counts} | {statistics.mean(run['losses'][-20:]):.4f} |")


if __name__ == "__main__":
    main()
