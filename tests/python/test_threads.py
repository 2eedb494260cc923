"""Threads on one optimizer (docs/reliability.md, "Threads"): 2 and 4 threads that
each assign .grad, or zero_grad(set_to_none=True) and assign, then step; 100
trials of 100 steps each in a subprocess (tests/python/thread_probe.py), so that a
crash of the interpreter fails the test rather than the suite. Before step() and
zero_grad() took turns, 19 of 40 such runs died (the zero_grad mode: LibTorch 1.13
is not safe against a .grad set to None while another thread steps, and
`thread_probe.py --optimizer adamw --modes zero_grad` still crashes torch.optim.AdamW)."""

import pathlib
import subprocess
import sys


def test_threads_that_replace_gradients_and_step_never_crash():
    probe = pathlib.Path(__file__).with_name("thread_probe.py")
    result = subprocess.run([sys.executable, str(probe), "--trials", "100", "--steps", "100"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (f"the probe ended with {result.returncode} "
                                    f"(negative: killed by that signal): {result.stderr[-2000:]}")
    assert "100 trials held" in result.stdout
