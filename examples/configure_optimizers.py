"""The optimizer set-up of popular training scripts, with dash.Dash in place of
torch.optim.AdamW and nothing else changed: two weight-decay groups from a
``configure_optimizers`` (matrices decayed, biases and norms not), ``fused`` and
``foreach`` passed through, a LambdaLR warm-up, gradient clipping, and a head
unfrozen halfway with ``add_param_group``.

    python3 examples/configure_optimizers.py --optimizer dash   # or adamw
"""

import argparse
import inspect

import torch
import torch.nn as nn

import dash


class Model(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(dim, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, dim))
        self.head = nn.Linear(dim, 1)  # frozen at first, unfrozen halfway

    def forward(self, x):
        return self.head(x + self.body(x))


def configure_optimizers(module, optimizer_class, weight_decay, lr, betas):
    # As nanoGPT and many others: decay the matrices, not the biases and norms.
    params = [p for p in module.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
    use_fused = fused_available and next(module.parameters()).device.type == "cuda"
    extra = dict(fused=True) if use_fused else dict(foreach=False)
    return optimizer_class(groups, lr=lr, betas=betas, **extra)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--optimizer", choices=["adamw", "dash"], default="dash")
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    optimizer_class = dash.Dash if args.optimizer == "dash" else torch.optim.AdamW

    torch.manual_seed(0)
    model = Model()
    for p in model.head.parameters():
        p.requires_grad_(False)
    optimizer = configure_optimizers(model.body, optimizer_class, weight_decay=0.1, lr=3e-3, betas=(0.9, 0.95))
    warmup = 10
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
    target = torch.randn(32, 1)
    for step in range(args.steps):
        if step == args.steps // 2:  # progressive unfreezing
            for p in model.head.parameters():
                p.requires_grad_(True)
            optimizer.add_param_group({"params": list(model.head.parameters()), "weight_decay": 0.0})
        x = torch.randn(64, 32)
        loss = nn.functional.mse_loss(model(x), x @ target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        if step % 10 == 0 or step == args.steps - 1:
            print(f"step {step} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.2e}")


if __name__ == "__main__":
    main()
