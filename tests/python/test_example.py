"""examples/train_gpt.py runs with both optimizers and its loss falls (a small model
on a small text, to keep the suite fast)."""

import re
import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.mark.parametrize("optimizer", ["adamw", "dash"])
def test_train_gpt_loss_falls(tmp_path, optimizer):
    text = tmp_path / "text.txt"
    text.write_text("The quick brown fox jumps over the lazy dog. " * 400 +
                    "Shampoo preconditions each gradient with two factor matrices. " * 400)
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "train_gpt.py"), "--optimizer", optimizer, "--data", str(text),
         "--steps", "40", "--dim", "32", "--layers", "1", "--heads", "2", "--seq-len", "32", "--batch-size", "8",
         "--warmup-steps", "5", "--log-every", "5"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    losses = [float(value) for value in re.findall(r"loss (\d+\.\d+)  step", result.stdout)]
    assert len(losses) >= 5, result.stdout
    assert losses[-1] < 0.6 * losses[0], result.stdout
    assert re.search(r"validation loss \d+\.\d+", result.stdout)


@pytest.mark.parametrize("optimizer", ["adamw", "dash"])
def test_configure_optimizers_pattern_runs_unchanged(optimizer):
    # Two weight-decay groups, fused/foreach, LambdaLR, clipping, add_param_group halfway:
    # the same script with either optimizer, and the loss falls with both.
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "configure_optimizers.py"), "--optimizer", optimizer],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    losses = [float(value) for value in re.findall(r"loss (\d+\.\d+)", result.stdout)]
    assert len(losses) >= 6, result.stdout
    assert losses[-1] < 0.5 * losses[0], result.stdout
