"""bench/peer_step.py and bench/peer_quality.py (dash against Distributed Shampoo) on a
CPU with tiny shapes: the timed steps and their root steps, Distributed Shampoo
configured like dash under both of its APIs, and the quality table. Distributed
Shampoo itself is not installed here: a stand-in package records what the scripts ask
of it (the real one ran in docs/experiments/2026-12-06-distributed-shampoo-cpu.md)."""

import json
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

SCRIPT = ROOT / "bench" / "peer_step.py"
QUALITY = ROOT / "bench" / "peer_quality.py"


def run_script(tmp_path, *arguments):
    out = tmp_path / "report.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--preset", "smoke", "--layers", "1", "--block", "8",
         "--json", str(out), *arguments], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(out.read_text()), result.stdout


# Classes under the names of Distributed Shampoo before 2025-05 ("old") or since ("new");
# the optimizer is SGD and writes the arguments it was given to RECORD.
STAND_IN = textwrap.dedent("""
    import json, os, torch

    class _Config:
        def __init__(self, **fields):
            self.fields = fields

    class EigenConfig(_Config): pass
    class CoupledNewtonConfig(_Config): pass
    class {grafting}(_Config): pass
    class {shampoo}(_Config): pass

    class DistributedShampoo(torch.optim.SGD):
        def __init__(self, params, lr, **options):
            super().__init__(params, lr=lr)
            config = options["preconditioner_config"].fields
            recorded = dict(options, lr=lr, grafting_config=options["grafting_config"].fields,
                            preconditioner_config=dict(config, amortized_computation_config=type(
                                config["amortized_computation_config"]).__name__))
            with open(os.environ["RECORD"], "a") as out:
                out.write(json.dumps(recorded, default=str) + "\\n")
            self.gives_up = (os.environ.get("NEWTON_GIVES_UP") == "1" and
                             isinstance(config["amortized_computation_config"], CoupledNewtonConfig))

        def step(self, closure=None):
            if self.gives_up:
                raise ValueError("Encountered nan or inf values in inverse factor matrix 0.block_0.0!")
            return super().step(closure)
""")


def stand_in_checkout(tmp_path, monkeypatch, api):
    """A checkout path whose distributed_shampoo is the stand-in; its records' file."""
    names = ({"grafting": "AdamGraftingConfig", "shampoo": "ShampooPreconditionerConfig"} if api == "old" else
             {"grafting": "AdamPreconditionerConfig", "shampoo": "RootInvShampooPreconditionerConfig"})
    package = tmp_path / "checkout" / "distributed_shampoo"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(STAND_IN.format(**names))
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv("RECORD", str(record))
    return tmp_path / "checkout", record


@pytest.mark.parametrize("api", ["old", "new"])
def test_distributed_shampoo_is_configured_like_dash(tmp_path, monkeypatch, api):
    checkout, record = stand_in_checkout(tmp_path, monkeypatch, api)
    report, stdout = run_script(tmp_path, "--frequencies", "3", "--ds-path", str(checkout),
                                "--configs", "ds-eigh-fp32,ds-cn-fp32,dash-evd")
    eigh, newton = [json.loads(line) for line in record.read_text().splitlines()]
    for options, root in ((eigh, "EigenConfig"), (newton, "CoupledNewtonConfig")):
        assert options["max_preconditioner_dim"] == 8
        assert options["precondition_frequency"] == 3 and options["start_preconditioning_step"] == 3
        assert options["betas"] == [0.9, 0.95] and options["epsilon"] == 1e-10
        assert options["grafting_config"] == {"beta2": 0.95, "epsilon": 1e-8}
        assert options["preconditioner_config"]["amortized_computation_config"] == root
        # 1-D parameters: grafting alone, as dash's AdamW ({order: {dimension: exponent 0}})
        assert options["preconditioner_config"]["inverse_exponent_override"] == {"1": {"0": 0.0}}
    rows = report["rounds"][0]["3"]
    assert set(rows) == {"ds-eigh-fp32", "ds-cn-fp32", "dash-evd"}
    for name, row in rows.items():
        assert row["ratios"]["ds-eigh-fp32"] == pytest.approx(rows["ds-eigh-fp32"]["mean_ms"] / row["mean_ms"])
        assert row["ratios"]["ds-cn-fp32"] == pytest.approx(rows["ds-cn-fp32"]["mean_ms"] / row["mean_ms"])
    assert "x DS eigh" in stdout


def test_a_peer_that_raises_is_reported_and_the_others_run(tmp_path, monkeypatch):
    checkout, _ = stand_in_checkout(tmp_path, monkeypatch, "old")
    monkeypatch.setenv("NEWTON_GIVES_UP", "1")
    report, stdout = run_script(tmp_path, "--frequencies", "2", "--ds-path", str(checkout),
                                "--configs", "ds-eigh-fp32,ds-cn-fp32,dash-evd")
    rows = report["rounds"][0]["2"]
    assert rows["ds-cn-fp32"] == {"failed": "ValueError: Encountered nan or inf values in inverse factor matrix "
                                            "0.block_0.0!"}
    assert "ds-cn-fp32 at f = 2 failed: ValueError" in stdout
    assert set(rows["dash-evd"]["ratios"]) == {"ds-eigh-fp32"}


def test_timed_steps_and_root_steps(tmp_path):
    report, stdout = run_script(tmp_path, "--frequencies", "4,1", "--configs", "ds-cn-fp32,dash-ndb-pi-fp32,dash-evd",
                                "--rounds", "2")
    assert "no --ds-path: Distributed Shampoo's configurations are left out" in stdout
    assert report["distributed_shampoo"] is None and len(report["rounds"]) == 2
    for tables in report["rounds"]:
        assert set(tables) == {"4", "1"}
        for frequency, rows in tables.items():
            f = int(frequency)
            assert set(rows) == {"dash-ndb-pi-fp32", "dash-evd"}
            for row in rows.values():
                steps = row["steps"]
                # after two root periods (at least two steps), max(f, 3) steps; roots at t % f == 0
                first = 2 * f + 1 if f > 1 else 3
                assert [s["t"] for s in steps] == list(range(first, first + max(f, 3)))
                assert [s["root"] for s in steps] == [s["t"] % f == 0 for s in steps]
                assert all(s["ms"] > 0 for s in steps)
                assert row["root_median_ms"] is not None
                assert (row["non_root_median_ms"] is None) == (f == 1)
                assert "ratios" in row and not row["ratios"]
                assert row["dash"]["state_bytes"] > 0


def test_a_checkout_that_does_not_import_is_named(tmp_path):
    report, stdout = run_script(tmp_path, "--frequencies", "2", "--ds-path", str(tmp_path / "missing"),
                                "--configs", "ds-eigh-fp32,dash-evd")
    assert "did not import" in stdout and "ModuleNotFoundError" in stdout
    assert set(report["rounds"][0]["2"]) == {"dash-evd"}


def test_an_unknown_configuration_is_refused(tmp_path):
    result = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--configs", "dash-fast"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "unknown configuration(s) dash-fast" in result.stderr


def test_quality_table_pairs_each_optimizer_with_distributed_shampoo(tmp_path, monkeypatch):
    checkout, record = stand_in_checkout(tmp_path, monkeypatch, "new")
    monkeypatch.setenv("NEWTON_GIVES_UP", "1")
    text = tmp_path / "text.txt"
    text.write_text("The quick brown fox jumps over the lazy dog. " * 200)
    out = tmp_path / "quality.json"
    result = subprocess.run(
        [sys.executable, str(QUALITY), "--ds-path", str(checkout),
         "--optimizers", "adamw,dash-ndb,ds-eigh,ds-coupled-newton,dash-fast",
         "--seeds", "1,2", "--json", str(out), "--steps", "12", "--dim", "16", "--layers", "1", "--heads", "2",
         "--seq-len", "16", "--batch-size", "2", "--data", str(text), "--log-every", "100"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "left out dash-fast" in result.stdout
    # Distributed Shampoo at the example's B = 128 and f = 10, with the example's learning rate
    options = json.loads(record.read_text().splitlines()[0])
    assert options["max_preconditioner_dim"] == 128 and options["precondition_frequency"] == 10
    assert options["lr"] == 3e-3
    results = json.loads(out.read_text())["results"]
    assert list(results) == ["adamw", "dash-ndb", "ds-eigh", "ds-coupled-newton"]
    for runs in results.values():
        assert [run["seed"] for run in runs] == [1, 2]
    assert all(run["failed"].startswith("ValueError: Encountered nan") for run in results["ds-coupled-newton"])
    line = next(line for line in result.stdout.splitlines() if line.startswith("ds-coupled-newton "))
    assert "failed at seed(s) 1, 2: ValueError" in line
    dash_losses = [run["validation_loss"] for run in results["dash-ndb"]]
    ds_losses = [run["validation_loss"] for run in results["ds-eigh"]]
    line = next(line for line in result.stdout.splitlines() if line.startswith("dash-ndb "))
    paired = [a - b for a, b in zip(dash_losses, ds_losses)]
    assert f"minus ds-eigh, paired: {sum(paired) / 2:+.4f}" in line
