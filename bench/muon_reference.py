"""dash's spectral descent against KellerJordan/Muon's muon.py, the reference a user
would otherwise install: the same parameters after the same steps, and the optimizer
step's time, in one process.

`--muon PATH` names a checkout of github.com/KellerJordan/Muon (the folder holding
muon.py; not part of dash). Two checks:

  agreement  A small GPT-shaped parameter set (--dim, --layers: per layer the
             attention's qkv and output and the MLP's two matrices, plus an embedding,
             a head and gains) trained --steps steps on fixed random gradients by
             SingleDeviceMuonWithAuxAdam (Muon on the layers' matrices, its AdamW on the
             rest) and by dash.Dash(dash.muon_param_groups(...)) with Newton–Schulz in
             bf16 (muon.py's only precision) and fp32; and by muon.py with its
             Newton–Schulz run in float32 (its source with .bfloat16() read as .float(),
             nothing else changed), which dash's fp32 must match within fp32 rounding.
             Reports the largest relative parameter difference per pair.
  time       The same parameter set: ms per optimizer step of each (muon.py as it is, bf16
             Newton–Schulz, and with it in fp32), --rounds rounds of
             --timed steps after --warmup, the order alternating every round; the
             median round and dash's ratio to muon.py measured in the same run.

    /usr/bin/python3 bench/muon_reference.py --muon build/peers/Muon --dim 256 --layers 4
"""
import argparse
import statistics
import sys
import time
import types

import torch

import dash


def load_muon(path, float32):
    source = open(f"{path}/muon.py").read()
    if float32:
        source = source.replace(".bfloat16()", ".float()")
    module = types.ModuleType("muon_float32" if float32 else "muon")
    exec(compile(source, f"{path}/muon.py", "exec"), module.__dict__)
    return module


def shapes(dim, layers, vocab):
    hidden = []
    for _ in range(layers):
        hidden += [(3 * dim, dim), (dim, dim), (4 * dim, dim), (dim, 4 * dim)]
    others = [(vocab, dim), (vocab, dim)] + [(dim,)] * (2 * layers + 1)
    return hidden, others


def parameters(hidden_shapes, other_shapes, seed=0):
    generator = torch.Generator().manual_seed(seed)
    make = lambda shape: torch.nn.Parameter(torch.randn(shape, generator=generator) * 0.02)  # noqa: E731
    return [make(s) for s in hidden_shapes], [make(s) for s in other_shapes]


def muon_optimizer(module, hidden, others, args):
    return module.SingleDeviceMuonWithAuxAdam([
        dict(params=hidden, lr=args.lr, momentum=0.95, weight_decay=args.weight_decay, use_muon=True),
        dict(params=others, lr=args.adamw_lr, betas=(0.9, 0.95), eps=1e-10, weight_decay=0.0, use_muon=False),
    ])


def dash_optimizer(hidden, others, args, precision):
    groups = dash.muon_param_groups(hidden, others, lr=args.lr, weight_decay=args.weight_decay,
                                    adamw_lr=args.adamw_lr)
    return dash.Dash(groups, preconditioning_precision=precision, adamw_betas=(0.9, 0.95))


def gradients(params, steps, seed=1):
    generator = torch.Generator().manual_seed(seed)
    return [[torch.randn(p.shape, generator=generator) * 0.01 for p in params] for _ in range(steps)]


def train(make, hidden_shapes, other_shapes, grads):
    hidden, others = parameters(hidden_shapes, other_shapes)
    params = hidden + others
    optimizer = make(hidden, others)
    for step in grads:
        for p, g in zip(params, step):
            p.grad = g.clone()  # (muon.py's Nesterov form overwrites the gradient)
        optimizer.step()
    return [p.detach().clone() for p in params]


def difference(a, b):
    return max(((x - y).abs().max() / y.abs().max()).item() for x, y in zip(a, b))


def agreement(args, muon_bf16, muon_fp32, hidden_shapes, other_shapes):
    hidden, others = parameters(hidden_shapes, other_shapes)
    grads = gradients(hidden + others, args.steps)
    runs = {
        "muon.py (bf16 NS)": lambda h, o: muon_optimizer(muon_bf16, h, o, args),
        "muon.py (NS in fp32)": lambda h, o: muon_optimizer(muon_fp32, h, o, args),
        "dash bf16": lambda h, o: dash_optimizer(h, o, args, "bf16"),
        "dash fp32": lambda h, o: dash_optimizer(h, o, args, "fp32"),
    }
    result = {name: train(make, hidden_shapes, other_shapes, grads) for name, make in runs.items()}
    start = [p.detach() for p in hidden + others]
    print(f"\nagreement after {args.steps} steps (largest relative parameter difference; "
          f"the steps moved the parameters by {difference(result['dash fp32'], start):.3g} relative)")
    for a, b in [("dash fp32", "muon.py (NS in fp32)"), ("dash bf16", "muon.py (bf16 NS)"),
                 ("dash fp32", "muon.py (bf16 NS)"), ("muon.py (NS in fp32)", "muon.py (bf16 NS)")]:
        print(f"  {a:>22} vs {b:<22} {difference(result[a], result[b]):.2e}")


def timing(args, muon_bf16, muon_fp32, hidden_shapes, other_shapes):
    makers = {
        "muon.py": lambda h, o: muon_optimizer(muon_bf16, h, o, args),
        "muon.py fp32": lambda h, o: muon_optimizer(muon_fp32, h, o, args),
        "dash bf16": lambda h, o: dash_optimizer(h, o, args, "bf16"),
        "dash fp32": lambda h, o: dash_optimizer(h, o, args, "fp32"),
    }
    setups = {}
    for name, make in makers.items():
        hidden, others = parameters(hidden_shapes, other_shapes)
        params = hidden + others
        grads = gradients(params, 1)[0]
        setups[name] = (make(hidden, others), params, grads)
    rounds = {name: [] for name in makers}
    names = list(makers)
    for number in range(args.rounds):
        for name in (names if number % 2 == 0 else names[::-1]):
            optimizer, params, grads = setups[name]
            times = []
            for step in range(args.warmup + args.timed):
                for p, g in zip(params, grads):
                    p.grad = g.clone()
                begin = time.perf_counter()
                optimizer.step()
                if step >= args.warmup:
                    times.append((time.perf_counter() - begin) * 1e3)
            rounds[name].append(statistics.mean(times))
    print(f"\nms per optimizer step ({args.rounds} rounds of {args.timed} steps after {args.warmup}, alternating; "
          f"torch threads {torch.get_num_threads()})")
    baseline = statistics.median(rounds["muon.py"])
    for name, values in rounds.items():
        median = statistics.median(values)
        print(f"  {name:>12}  median {median:8.2f}  rounds {' '.join(f'{v:.2f}' for v in values)}  "
              f"muon.py / this {baseline / median:.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--muon", required=True, help="folder holding KellerJordan/Muon's muon.py")
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--adamw-lr", type=float, default=3e-4)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--timed", type=int, default=10)
    parser.add_argument("--checks", default="agreement,time")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch's intra-op threads, for muon.py and dash alike (0: torch's default)")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    hidden_shapes, other_shapes = shapes(args.dim, args.layers, args.vocab)
    count = sum(torch.Size(s).numel() for s in hidden_shapes + other_shapes)
    print(f"parameters: {len(hidden_shapes)} hidden matrices, {len(other_shapes)} others, {count / 1e6:.2f} M")
    muon_bf16, muon_fp32 = load_muon(args.muon, False), load_muon(args.muon, True)
    checks = args.checks.split(",")
    if "agreement" in checks:
        agreement(args, muon_bf16, muon_fp32, hidden_shapes, other_shapes)
    if "time" in checks:
        timing(args, muon_bf16, muon_fp32, hidden_shapes, other_shapes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
