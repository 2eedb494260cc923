"""torch.nn models train with dash.Dash as far as with AdamW (the test output prints both)."""

import pytest
import torch

import dash


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 4))


class Block(torch.nn.Module):
    """A pre-norm transformer block (attention + MLP) and a linear read-out."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
                                                      batch_first=True, norm_first=True)
        self.out = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.out(self.layer(x))


def regression_task(make_model, input_shape):
    """Inputs and the outputs of a randomly initialised teacher of the same architecture."""
    torch.manual_seed(1)
    teacher = make_model()
    inputs = torch.randn(*input_shape)
    with torch.no_grad():
        targets = teacher(inputs)
    return inputs, targets


def train(make_model, inputs, targets, make_optimizer, steps):
    torch.manual_seed(0)
    model = make_model()
    optimizer = make_optimizer(model.parameters())
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        return torch.nn.functional.mse_loss(model(inputs), targets).item()


@pytest.mark.parametrize("name, make_model, input_shape", [
    ("mlp", mlp, (256, 16)),
    ("transformer-block", Block, (32, 12, 32)),
])
def test_dash_trains_as_far_as_adamw(name, make_model, input_shape):
    inputs, targets = regression_task(make_model, input_shape)
    steps = 150
    initial = torch.nn.functional.mse_loss(torch.zeros_like(targets), targets).item()
    adamw = train(make_model, inputs, targets, lambda p: torch.optim.AdamW(p, lr=3e-3), steps)
    shampoo = train(make_model, inputs, targets,
                    lambda p: dash.Dash(p, lr=3e-3, block_size=64, root_frequency=5, start_step=5), steps)
    print(f"\n{name}: mean-square error after {steps} steps: AdamW {adamw:.4g}, DASH {shampoo:.4g} "
          f"(predicting 0: {initial:.4g})")
    threshold = 0.02 * initial
    assert adamw < threshold, "the task is too hard for this check"
    assert shampoo < threshold
