"""dash.inverse_root against a float64 eigendecomposition, on CPU and (when present) CUDA."""

import pytest
import torch

import dash

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def spd_stack(count, size, condition, seed=0):
    generator = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(count, size, size, generator=generator, dtype=torch.float64))
    eigenvalues = torch.logspace(0, -torch.log10(torch.tensor(condition)).item(), size, dtype=torch.float64)
    return (q * eigenvalues) @ q.transpose(-1, -2)


def reference_root(matrices, p, epsilon):
    eigenvalues, vectors = torch.linalg.eigh(matrices)
    return (vectors * ((eigenvalues + epsilon) ** (-1.0 / p)).unsqueeze(-2)) @ vectors.transpose(-1, -2)


def relative_error(root, reference):
    return ((root.double() - reference).flatten(-2).norm(dim=-1) / reference.flatten(-2).norm(dim=-1)).max().item()


@pytest.mark.parametrize("device", DEVICES)
# A fixed-degree approximation (Chebyshev) is within its degree's error, the others
# converge to rounding.
@pytest.mark.parametrize("method, tolerance", [(method, 1e-2 if traits["fixed_degree"] else 1e-5)
                                               for method, traits in dash.solver_methods().items()])
def test_matches_float64_eigh(device, method, tolerance):
    matrices = spd_stack(5, 24, condition=1e2)
    # NDB as its matmul iteration on every device ("auto" would take eigh on a CPU).
    root = dash.inverse_root(matrices.float().to(device), 4, method=method, epsilon=1e-6,
                             newton_db_evaluation="matmuls")
    assert root.shape == (5, 24, 24) and root.dtype == torch.float32 and root.device.type == device
    assert relative_error(root.cpu(), reference_root(matrices, 4, 1e-6)) < tolerance


@pytest.mark.parametrize("device", DEVICES)
def test_minimax_newton_db_resolves_what_newton_schulz_does_not(device):
    # κ = 1e4: ten Newton–Schulz steps a pass leave the smallest eigenvalues far off.
    matrices = spd_stack(3, 32, condition=1e4, seed=1)
    reference = reference_root(matrices, 4, 0.0)
    iteration = dict(method="ndb", epsilon=0.0, newton_db_evaluation="matmuls")
    paper = dash.inverse_root(matrices.float().to(device), 4, **iteration)
    minimax = dash.inverse_root(matrices.float().to(device), 4, **iteration,
                                newton_db_polynomial="minimax5", minimax_interval_min=1e-6)
    assert relative_error(paper.cpu(), reference) > 0.1
    assert relative_error(minimax.cpu(), reference) < 1e-3


@pytest.mark.parametrize("device", DEVICES)
def test_newton_db_by_eigh_is_the_matrix_iterations_root(device):
    # κ = 1e6: ten steps are far from the exact root, and evaluating them on the
    # eigenvalues must give that same under-resolved root, not the exact one.
    matrices = spd_stack(3, 32, condition=1e6, seed=2).to(device)
    matmuls = dash.inverse_root(matrices, 4, method="ndb", scaling="fro", epsilon=0.0, newton_db_evaluation="matmuls")
    by_eigh = dash.inverse_root(matrices, 4, method="ndb", scaling="fro", epsilon=0.0, newton_db_evaluation="eigh")
    assert relative_error(by_eigh.cpu(), matmuls.cpu().double()) < 1e-8
    assert relative_error(by_eigh.cpu(), reference_root(matrices.cpu(), 4, 0.0)) > 0.1
    with pytest.raises(ValueError, match="matmuls, eigh, auto"):
        dash.inverse_root(matrices, 4, method="ndb", newton_db_evaluation="svd")


@pytest.mark.parametrize("device", DEVICES)
def test_newton_db_evaluation_auto_is_eigh_on_a_cpu_in_fp32_and_matmuls_otherwise(device):
    matrices = spd_stack(3, 32, condition=1e3, seed=3).float().to(device)
    for precision in ("fp32", "bf16"):
        options = dict(method="ndb", precision=precision, epsilon=1e-6)
        default = dash.inverse_root(matrices, 4, **options)
        by_eigh = dash.inverse_root(matrices, 4, **options, newton_db_evaluation="eigh")
        matmuls = dash.inverse_root(matrices, 4, **options, newton_db_evaluation="matmuls")
        assert not torch.equal(by_eigh, matmuls)
        expected = by_eigh if device == "cpu" and precision == "fp32" else matmuls
        assert torch.equal(default, expected), (device, precision)


def test_minimax_with_16_bit_matmuls_warns():
    # The only test that asks for this combination: the warning is once per process.
    with pytest.warns(UserWarning, match="minimax polynomials with 16-bit matmuls"):
        dash.inverse_root(torch.eye(4), 4, method="ndb", newton_db_polynomial="minimax5", precision="bf16")


def test_unknown_newton_db_polynomial_names_the_valid_ones():
    with pytest.raises(ValueError, match="minimax5"):
        dash.inverse_root(torch.eye(4), 4, method="ndb", newton_db_polynomial="minimax7")


def test_single_matrix_and_float64_input():
    matrix = spd_stack(1, 16, condition=10.0)[0]
    root = dash.inverse_root(matrix, 2, method="evd", epsilon=0.0)
    assert root.shape == (16, 16) and root.dtype == torch.float64
    assert relative_error(root, reference_root(matrix, 2, 0.0)) < 1e-10


def test_with_diagnostics_flags_the_non_finite_matrix_only():
    matrices = spd_stack(3, 8, condition=10.0).float()
    matrices[1, 2, 3] = float("nan")
    result = dash.inverse_root_with_diagnostics(matrices, 4, method="ndb")
    assert result.finite.tolist() == [True, False, True]
    assert torch.isnan(result.root[1]).all() and torch.isfinite(result.root[[0, 2]]).all()
    assert (result.residual[[0, 2]] < 1e-2).all()


def reference_residual(root, matrices, ridge, p):
    """‖X^p (A + ridge·I) − I‖_F / √b in float64 from the returned root."""
    size = matrices.shape[-1]
    identity = torch.eye(size, dtype=torch.float64)
    regularised = matrices.double() + ridge.reshape(-1, 1, 1) * identity
    product = torch.linalg.matrix_power(root.double(), p) @ regularised
    return torch.linalg.matrix_norm(product - identity) / size ** 0.5


@pytest.mark.parametrize("method, evaluation", [(method, evaluation) for method in dash.solver_methods()
                                                for evaluation in (("matmuls", "eigh") if method == "ndb" else ("auto",))])
def test_diagnostics_residual_is_against_the_regularised_matrix(method, evaluation):
    # Rank 3 of 8: against A instead of A + εI, EVD reported √(5/8) = 0.79 here.
    q, _ = torch.linalg.qr(torch.randn(2, 8, 8, generator=torch.Generator().manual_seed(5), dtype=torch.float64))
    eigenvalues = torch.tensor([5.0, 2.5, 1.0, 0, 0, 0, 0, 0], dtype=torch.float64)
    matrices = ((q * eigenvalues) @ q.transpose(-1, -2)).float()
    options = dict(method=method, newton_db_evaluation=evaluation, newton_steps=25)
    result = dash.inverse_root_with_diagnostics(matrices, 4, epsilon=1e-3, **options)
    reference = reference_residual(result.root, matrices, torch.full((2,), 1e-3, dtype=torch.float64), 4)
    assert torch.allclose(result.residual.double(), reference, rtol=1e-2, atol=1e-4), (result.residual, reference)
    # ε_rel·λ_max = 5e-3 > ε: EVD and NewtonDB by eigh put it on the eigenvalues.
    if method == "evd" or evaluation == "eigh":
        result = dash.inverse_root_with_diagnostics(matrices, 4, epsilon=1e-10, relative_epsilon=1e-3, **options)
        top = torch.linalg.eigvalsh(matrices.double())[:, -1]
        reference = reference_residual(result.root, matrices, (1e-3 * top).clamp_min(1e-10), 4)
        assert torch.allclose(result.residual.double(), reference, rtol=1e-2, atol=1e-4), (result.residual, reference)
        assert (result.residual < 5e-3).all()


def test_spectral_scale_bounds_the_largest_eigenvalue():
    matrices = spd_stack(4, 32, condition=1e3).float()
    scale = dash.estimate_spectral_scale(matrices, scaling="fro")
    assert scale.shape == (4, 1, 1)
    assert (scale.flatten() >= torch.linalg.eigvalsh(matrices.double())[:, -1].float() * (1 - 1e-6)).all()


@pytest.mark.parametrize("call, error, message", [
    (lambda m: dash.inverse_root(m, 3, method="ndb"), ValueError, "power of two"),
    (lambda m: dash.inverse_root(m, 0), ValueError, r"p must be an integer in \[1, 64\]"),
    (lambda m: dash.inverse_root(m, 10**9), ValueError, r"p must be an integer in \[1, 64\]"),
    (lambda m: dash.estimate_spectral_scale(m, power_vectors=0), ValueError, r"power_vectors \(scaling.vectors\) must be in"),
    (lambda m: dash.inverse_root(m, 4, method="qr"), ValueError, "unknown root method 'qr'"),
    (lambda m: dash.inverse_root(m, 4, newton_step=3), ValueError, "unknown option 'newton_step'"),
    (lambda m: dash.inverse_root(m, 4, newton_steps="ten"), ValueError, "must be an integer"),
    (lambda m: dash.inverse_root(m[:, :3, :], 4), RuntimeError, "square"),
    (lambda m: dash.inverse_root(m.int(), 4), RuntimeError, "float"),
    (lambda m: dash.estimate_spectral_scale(m[0, :3, :]), RuntimeError,
     r"dash::estimate_spectral_scale: matrices must be square, got shape \[3, 4\]"),
    (lambda m: dash.estimate_spectral_scale(m.int()), RuntimeError,
     "dash::estimate_spectral_scale: expected a floating-point tensor, got Int"),
    (lambda m: dash.estimate_spectral_scale(m[0, 0]), RuntimeError, "expected a \\(b, b\\) matrix"),
])
def test_bad_arguments_raise_clear_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(spd_stack(2, 4, condition=10.0).float())


def test_choose_root_method_takes_the_fastest_accurate_method_and_inverse_root_needs_one():
    matrices = spd_stack(4, 24, condition=1e2).float()
    choice = dash.choose_root_method(matrices, 4, method="ndb", epsilon=1e-6, auto_max_error=1e-2)
    trials = {trial["method"]: trial for trial in choice["trials"]}
    assert set(trials) == set(dash.solver_methods())
    assert trials["evd"]["error"] < 1e-4 and trials["evd"]["meets_accuracy"]
    chosen = trials[choice["method"]]
    assert chosen["meets_accuracy"]
    fastest = min(t["ms"] for t in trials.values() if t["meets_accuracy"])
    assert chosen["ms"] <= 1.1 * fastest  # within 10 %, the more accurate wins
    assert all(chosen["error"] <= t["error"] for t in trials.values() if t["meets_accuracy"] and t["ms"] <= 1.1 * fastest)
    with pytest.raises(ValueError, match="RootMethod::Auto is chosen per stack"):
        dash.inverse_root(matrices, 4, method="auto")


def test_choose_root_method_warns_when_no_method_is_accurate_enough():
    with pytest.warns(UserWarning, match="no method reaches auto_max_error"):
        choice = dash.choose_root_method(spd_stack(2, 8, condition=10.0).float(), 2, auto_max_error=1e-15)
    assert choice["method"] == min(choice["trials"], key=lambda t: t["error"])["method"]
