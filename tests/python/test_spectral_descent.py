"""Spectral descent (preconditioner="spectral_descent") is Muon's update: dash's
steps against Muon's arithmetic written out here in float64 (momentum as a lerp,
Nesterov's form, quintic Newton–Schulz, the max(1, rows/cols)^½ scale, decoupled
weight decay) with AdamW for the 1-D parameters, as Muon's README prescribes; in
bfloat16 within its rounding. bench/muon_reference.py checks the same against
KellerJordan/Muon's own muon.py."""

import pytest
import torch

import dash

SHAPES = [(12, 8), (8, 20), (16, 16), (16,)]
LR, MUON_BETA, WEIGHT_DECAY = 0.02, 0.95, 0.1
ADAMW_BETAS, ADAMW_EPS = (0.9, 0.95), 1e-10


def muon_options(**overrides):
    """dash configured as Muon: whole matrices, Muon's momentum as the uncorrected
    gradient EMA with Nesterov's form, no grafting, from the first step."""
    return dict(preconditioner="spectral_descent", lr=LR, betas=(MUON_BETA, 0.95), bias_correction=False,
                nesterov_grad=True, grafting="none", start_step=1, block_size=64, weight_decay=WEIGHT_DECAY,
                adamw_betas=ADAMW_BETAS, adamw_eps=ADAMW_EPS, **overrides)


def newton_schulz(g, steps=5):
    tall = g.shape[0] > g.shape[1]
    x = g.T if tall else g
    x = x / (x.norm() + 1e-7)
    for _ in range(steps):
        a = x @ x.T
        x = 3.4445 * x + (-4.7750 * a + 2.0315 * a @ a) @ x
    return x.T if tall else x


class Float64Muon:
    """Muon on the parameters marked `muon`, AdamW (muon.py's adam_update) on the
    others, in float64; `settings[i]` = (muon, lr, weight_decay) of parameter i."""

    def __init__(self, params, settings):
        self.params = [p.detach().double().clone() for p in params]
        self.settings = settings
        self.state = [(torch.zeros_like(p), torch.zeros_like(p)) for p in self.params]
        self.t = 0

    def step(self, grads):
        self.t += 1
        for p, g, (first, second), (muon, lr, decay) in zip(self.params, grads, self.state, self.settings):
            g = g.double()
            p.mul_(1 - lr * decay)
            if muon:
                first.mul_(MUON_BETA).add_(g, alpha=1 - MUON_BETA)
                update = newton_schulz((1 - MUON_BETA) * g + MUON_BETA * first)
                p.sub_(lr * max(1.0, p.shape[0] / p.shape[1]) ** 0.5 * update)
            else:
                first.mul_(ADAMW_BETAS[0]).add_(g, alpha=1 - ADAMW_BETAS[0])
                second.mul_(ADAMW_BETAS[1]).add_(g * g, alpha=1 - ADAMW_BETAS[1])
                corrected = second / (1 - ADAMW_BETAS[1] ** self.t)
                p.sub_(lr * (first / (1 - ADAMW_BETAS[0] ** self.t)) / (corrected.sqrt() + ADAMW_EPS))


def run(steps, params, optimizer, reference):
    generator = torch.Generator().manual_seed(1)
    for _ in range(steps):
        grads = [torch.randn(p.shape, generator=generator) + 0.5 * p.detach() for p in params]
        for p, g in zip(params, grads):
            p.grad = g.clone()
        optimizer.step()
        reference.step(grads)
    return params, reference.params


def make_params(shapes):
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(shape, generator=generator).requires_grad_() for shape in shapes]


def train(steps, **overrides):
    params = make_params(SHAPES)
    reference = Float64Muon(params, [(p.dim() == 2, LR, WEIGHT_DECAY) for p in params])
    return run(steps, params, dash.Dash(params, **muon_options(**overrides)), reference)


def largest_error(params, references):
    return max(((p.detach().double() - r).abs().max() / r.abs().max()).item() for p, r in zip(params, references))


def test_spectral_descent_is_a_family():
    assert "spectral_descent" in dash.preconditioners()


def test_twenty_steps_match_float64_muon():
    params, references = train(20)
    assert largest_error(params, references) < 2e-5
    start = make_params(SHAPES)
    assert max((p.detach() - s.detach()).abs().max().item() for p, s in zip(params, start)) > 0.1, "really moved"


def test_muon_param_groups_are_muon_with_its_auxiliary_adamw():
    """Hidden matrices on Muon (weight decay 0.1); an embedding-like matrix and a
    vector on AdamW with Muon's auxiliary defaults (lr 3e-4, betas (0.9, 0.95), ε 1e-10)."""
    params = make_params([(12, 8), (8, 20), (20, 6), (16,)])
    hidden, others = params[:2], params[2:]
    groups = dash.muon_param_groups(hidden, others, lr=LR, weight_decay=WEIGHT_DECAY)
    optimizer = dash.Dash(groups, adamw_betas=ADAMW_BETAS)
    reference = Float64Muon(params, [(True, LR, WEIGHT_DECAY)] * 2 + [(False, 3e-4, 0.0)] * 2)
    params, references = run(20, params, optimizer, reference)
    assert largest_error(params, references) < 2e-5
    assert not any("factor" in name for state in optimizer.state_dict()["state"].values() for name in state)


def test_muon_param_groups_refuse_a_hidden_parameter_that_is_no_matrix():
    with pytest.raises(ValueError, match=r"must be 2-D .* shape \(2, 3, 4\)"):
        dash.muon_param_groups([torch.zeros(2, 3, 4, requires_grad=True)], [])


def test_bfloat16_newton_schulz_stays_within_bfloat16_rounding():
    params, references = train(20, preconditioning_precision="bf16")
    error = largest_error(params, references)
    assert 1e-5 < error < 1e-2


def test_without_nesterov_the_direction_is_the_ema_alone():
    generator = torch.Generator().manual_seed(1)
    weight = torch.randn(6, 10, generator=generator).requires_grad_()
    optimizer = dash.Dash([weight], **{**muon_options(), "nesterov_grad": False, "weight_decay": 0.0})
    g = torch.randn(6, 10, generator=generator)
    before = weight.detach().double().clone()
    weight.grad = g.clone()
    optimizer.step()
    # After one step the uncorrected EMA is (1 − β)·G: NS is scale-invariant.
    expected = before - LR * newton_schulz((1 - MUON_BETA) * g.double())
    assert torch.allclose(weight.detach().double(), expected, rtol=0, atol=1e-6)


def test_no_state_beyond_the_engines_moments():
    weight = torch.randn(8, 8).requires_grad_()
    optimizer = dash.Dash([weight], **muon_options())
    weight.grad = torch.randn(8, 8)
    optimizer.step()
    names = set(optimizer.state_dict()["state"][0])
    assert not any("factor" in name or "root" in name for name in names), names


@pytest.mark.parametrize("steps", [0, 101, 2.5])
def test_newton_schulz_steps_out_of_range_are_refused(steps):
    with pytest.raises(ValueError, match="newton_schulz_steps"):
        dash.Dash([torch.randn(4, 4).requires_grad_()], **muon_options(newton_schulz_steps=steps))


def test_muon_param_groups_keep_adamw_whatever_the_constructors_keywords():
    params = make_params([(12, 8), (20, 6)])
    groups = dash.muon_param_groups(params[:1], params[1:])
    optimizer = dash.Dash(groups, grafting="none", bias_correction=False)
    assert optimizer.param_groups[0]["grafting"] == "none"
    assert optimizer.param_groups[1]["grafting"] == "adam" and optimizer.param_groups[1]["bias_correction"] is True
