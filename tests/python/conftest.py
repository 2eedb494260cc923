"""Shared helpers of the Python package's tests (they import the installed `dash`)."""

import os
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def build_dir() -> Path:
    """The CMake build folder with the test programs (scripts/test.sh sets DASH_BUILD_DIR)."""
    return Path(os.environ.get("DASH_BUILD_DIR", ROOT / "build" / "release"))


def fixed_gradients(params, steps, seed=0):
    """Gradients for `steps` steps, drawn once: the optimizer state then depends on
    them alone, not on the parameters, so runs can be compared update by update."""
    generator = torch.Generator().manual_seed(seed)
    return [[torch.randn(p.shape, generator=generator, dtype=torch.float32).to(p.dtype) for p in params]
            for _ in range(steps)]


def apply_step(optimizer, params, gradients):
    for param, gradient in zip(params, gradients):
        param.grad = gradient.clone()
    optimizer.step()


def clone_params(params):
    return [p.detach().clone().requires_grad_() for p in params]
