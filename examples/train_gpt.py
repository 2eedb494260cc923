#!/usr/bin/env python3
"""A small GPT in plain PyTorch, trained with AdamW or DASH: what a Python user copies.

    python3 examples/train_gpt.py --optimizer dash --steps 50
    python3 examples/train_gpt.py --optimizer adamw --steps 300 --data my_corpus/

The default text is dash-train's: the Python manual's reStructuredText sources
(Debian's python3.11-doc), byte-level tokens, the same per-document validation
split. Prints the training loss and the time of each step and of the optimizer.
"""

import argparse
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import dash

DEFAULT_DATA = "/usr/share/doc/python3.11/html/_sources"


def fnv1a(text: str) -> int:
    value = 0xCBF29CE484222325
    for byte in text.encode():
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


def load_corpus(path: str, validation_fraction: float = 0.05):
    """Byte tokens of every file under `path`; a document goes to validation by a
    hash of its relative path (as dash-train splits a folder)."""
    root = Path(path)
    if not root.exists():
        raise SystemExit(f"data path {path} does not exist (Debian's python3.11-doc has the default)")
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
    train, validation = bytearray(), bytearray()
    for file in files:
        relative = file.relative_to(root).as_posix() if root.is_dir() else ""
        held_out = root.is_dir() and fnv1a(relative) % 1_000_000 < validation_fraction * 1_000_000
        (validation if held_out else train).extend(file.read_bytes())
    if not validation:  # a single file: its tail
        cut = int(len(train) * (1 - validation_fraction))
        train, validation = train[:cut], train[cut:]
    return (torch.frombuffer(train, dtype=torch.uint8).long(), torch.frombuffer(validation, dtype=torch.uint8).long())


class Block(torch.nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False)
        self.proj = torch.nn.Linear(dim, dim, bias=False)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def forward(self, x):
        batch, length, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, length, 3, self.heads, dim // self.heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(dim // self.heads)
        causal = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
        attention = scores.masked_fill(causal, float("-inf")).softmax(-1) @ v
        x = x + self.proj(attention.transpose(1, 2).reshape(batch, length, dim))
        return x + self.mlp(self.norm2(x))


class GPT(torch.nn.Module):
    def __init__(self, dim=128, layers=4, heads=4, seq_len=128, vocab=256):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.position = torch.nn.Parameter(torch.zeros(seq_len, dim))
        self.blocks = torch.nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def batches(tokens, batch_size, seq_len, generator):
    while True:
        starts = torch.randint(len(tokens) - seq_len - 1, (batch_size,), generator=generator)
        window = torch.stack([tokens[s : s + seq_len + 1] for s in starts.tolist()])
        yield window[:, :-1], window[:, 1:]


# DASH: Shampoo on the matrices, AdamW on biases and norms (the default for 1-D).
DASH_SETTINGS = dict(block_size=128, root_method="ndb", scaling="multi-pi", root_frequency=10, start_step=10)


def make_optimizer(name, model, lr, **dash_overrides):
    if name == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95))
    return dash.Dash(model.parameters(), lr=lr, **{**DASH_SETTINGS, **dash_overrides})


def parse_args(argv=None, optimizers=("adamw", "dash")):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--optimizer", choices=list(optimizers), default="dash")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup-steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-every", type=int, default=10)
    return parser.parse_args(argv)


def train(args, make_optimizer, corpus=None):
    """Trains a GPT of `args`' shape with `make_optimizer(model)`; returns the
    validation loss and the mean optimizer ms per step. `corpus`: the (train,
    validation) tokens, when already loaded."""
    torch.manual_seed(args.seed)
    train_tokens, validation_tokens = corpus or load_corpus(args.data)
    model = GPT(args.dim, args.layers, args.heads, args.seq_len)
    optimizer = make_optimizer(model)
    warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / args.warmup_steps))
    generator = torch.Generator().manual_seed(args.seed)
    data = batches(train_tokens, args.batch_size, args.seq_len, generator)
    print(f"{args.optimizer}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters, "
          f"{len(train_tokens) / 1e6:.1f} M training tokens")

    optimizer_ms = 0.0
    for step in range(1, args.steps + 1):
        inputs, targets = next(data)
        start = time.perf_counter()
        loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer_start = time.perf_counter()
        optimizer.step()
        warmup.step()
        end = time.perf_counter()
        optimizer_ms += 1e3 * (end - optimizer_start)
        if step % args.log_every == 0 or step == 1 or step == args.steps:
            print(f"step {step:5d}  loss {loss.item():.4f}  step {1e3 * (end - start):7.1f} ms  "
                  f"optimizer {1e3 * (end - optimizer_start):7.1f} ms", flush=True)

    model.eval()
    with torch.no_grad():
        validation = batches(validation_tokens, args.batch_size, args.seq_len, torch.Generator().manual_seed(0))
        losses = [F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item() for x, y in
                  (next(validation) for _ in range(8))]
    validation_loss = sum(losses) / len(losses)
    print(f"validation loss {validation_loss:.4f}")
    return validation_loss, optimizer_ms / args.steps


def main():
    args = parse_args()
    train(args, lambda model: make_optimizer(args.optimizer, model, args.lr))


if __name__ == "__main__":
    main()
