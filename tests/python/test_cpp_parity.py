"""The Python optimizer is the C++ optimizer: bit-identical parameters for the same
parameters, gradients and options (C++ side: tests/python/parity_driver.cpp)."""

import subprocess

import pytest
import torch

import dash

SHAPES = [(64, 48), (48,), (7, 130), (3, 5, 11)]  # as in parity_driver.cpp


@pytest.mark.parametrize("root_method", list(dash.solver_methods()))
def test_python_and_cpp_give_bit_identical_parameters(build_dir, tmp_path, root_method):
    driver = build_dir / "tests" / "dash-parity-driver"
    assert driver.exists(), f"{driver} not built (scripts/test.sh builds it)"
    steps = 7
    out = tmp_path / "cpp.bin"
    subprocess.run([str(driver), str(out), root_method, str(steps)], check=True)
    cpp = torch.frombuffer(bytearray(out.read_bytes()), dtype=torch.float32)

    torch.manual_seed(0)
    params = [torch.randn(shape).requires_grad_() for shape in SHAPES]
    initial = torch.cat([p.detach().flatten() for p in params])
    optimizer = dash.Dash(params, lr=1e-2, block_size=32, start_step=3, root_frequency=2, weight_decay=0.01,
                          root_method=root_method)
    for _ in range(steps):
        for param in params:
            param.grad = torch.randn(param.shape)
        optimizer.step()
    python = torch.cat([p.detach().flatten() for p in params])

    assert cpp.numel() == python.numel()
    assert not torch.equal(python, initial), "the optimizer did not move the parameters"
    assert torch.equal(python, cpp), f"max |python - C++| = {(python - cpp).abs().max().item()}"
    assert optimizer.diagnostics()["steps_taken"] == steps
