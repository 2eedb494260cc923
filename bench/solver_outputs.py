"""Before/after check of a numerics change: every solver path's output, bitwise.

    python3 bench/solver_outputs.py save OUT.pt          # with one build's dash on PYTHONPATH
    python3 bench/solver_outputs.py compare OLD.pt NEW.pt

`save` runs dash.inverse_root for every method (NDB, CN, Chebyshev) x precision
(fp32, bf16, fp16) x p (1, 2, 4, 8) x scaling (fro, pi, multi-pi), with and without a
residual tolerance and (NDB) the minimax polynomials, on two seeded SPD stacks
(κ = 1e3 and 1e5), plus dash.estimate_spectral_scale and seven steps of dash.Dash per
root method, and saves them all. `compare` counts the outputs that are bitwise equal
(NaN in the same places counts as equal) and, for those that are not, prints both
builds' relative error against a float64 eigendecomposition, flagging any that got
worse.
"""
import argparse
import collections
import itertools

import torch


def spd_stacks():
    generator = torch.Generator().manual_seed(0)

    def spd(count, b, condition):
        q, _ = torch.linalg.qr(torch.randn(count, b, b, generator=generator, dtype=torch.float64))
        values = torch.logspace(0, -torch.log10(torch.tensor(condition)).item(), b, dtype=torch.float64)
        return ((q * values) @ q.transpose(1, 2) * 3.0).float()

    return {"a": spd(3, 48, 1e3), "b": spd(2, 33, 1e5)}


def save(path):
    import dash

    out = {}
    stacks = spd_stacks()
    variants = ({}, {"tolerance": 1e-3, "tolerance_check_interval": 2}, {"newton_db_polynomial": "minimax5"})
    for (name, matrices), method, precision, p, scaling, extra in itertools.product(
            stacks.items(), ["ndb", "cn", "chebyshev"], ["bf16", "fp16", "fp32"], [1, 2, 4, 8],
            ["fro", "pi", "multi-pi"], variants):
        if "newton_db_polynomial" in extra and (method != "ndb" or precision == "fp16"):
            continue
        key = f"{name}|{method}|{precision}|{p}|{scaling}|{sorted(extra.items())}"
        try:
            out[key] = dash.inverse_root(matrices, p, method=method, precision=precision, scaling=scaling,
                                         newton_db_evaluation="matmuls", **extra)
        except Exception as error:  # an error is an output too: both builds should raise it
            out[key] = str(error)
    for (name, matrices), precision, scaling in itertools.product(stacks.items(), ["bf16", "fp16", "fp32"],
                                                                  ["fro", "pi", "multi-pi"]):
        out[f"scale|{name}|{precision}|{scaling}"] = dash.estimate_spectral_scale(
            matrices, precision=precision, scaling=scaling)
    torch.manual_seed(0)
    for method, precision in [("ndb", "bf16"), ("cn", "fp16"), ("chebyshev", "bf16"), ("ndb", "fp32"), ("cn", "fp32")]:
        model = torch.nn.Sequential(torch.nn.Linear(40, 70), torch.nn.Tanh(), torch.nn.Linear(70, 5))
        optimizer = dash.Dash(model.parameters(), lr=1e-2, block_size=32, root_frequency=2, start_step=1,
                              root_method=method, precision=precision, newton_db_evaluation="matmuls")
        x, y = torch.randn(64, 40), torch.randn(64, 5)
        for _ in range(7):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
        out[f"dash|{method}|{precision}"] = torch.cat([q.detach().flatten() for q in model.parameters()])
    torch.save(out, path)
    print(f"{len(out)} outputs, {sum(isinstance(v, str) for v in out.values())} of them errors, in {path}")


def reference_root(matrices, p, epsilon=1e-10):
    values, vectors = torch.linalg.eigh(matrices.double())
    return (vectors * ((values.clamp_min(0) + epsilon) ** (-1.0 / p)).unsqueeze(1)) @ vectors.transpose(1, 2)


def relative_error(result, reference):
    return ((result.double() - reference).norm(dim=(1, 2)) / reference.norm(dim=(1, 2))).max().item()


def compare(old_path, new_path):
    old, new = torch.load(old_path), torch.load(new_path)
    stacks = spd_stacks()
    equal, differ, worse = collections.Counter(), collections.Counter(), 0
    for key, before in old.items():
        after = new[key]
        fields = key.split("|")
        group = "|".join(fields[:3])
        if isinstance(before, str) or isinstance(after, str):
            same = before == after
        else:
            same = before.dtype == after.dtype and torch.equal(torch.nan_to_num(before), torch.nan_to_num(after)) \
                and torch.equal(before.isnan(), after.isnan())
        (equal if same else differ)[group] += 1
        if same or fields[0] in ("scale", "dash") or isinstance(before, str) or isinstance(after, str):
            if not same:
                print(f"{key}: differs")
            continue
        reference = reference_root(stacks[fields[0]], int(fields[3]))
        error_before, error_after = relative_error(before, reference), relative_error(after, reference)
        flag = error_after > 1.05 * error_before + 1e-6
        worse += flag
        print(f"{key}: error {error_before:.3e} -> {error_after:.3e}{'  WORSE' if flag else ''}")
    for group in sorted(set(equal) | set(differ)):
        print(f"{group:28s} bitwise equal {equal[group]:3d}, differ {differ[group]:3d}")
    print(f"outputs whose error against float64 grew by more than 5 %: {worse}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("save").add_argument("path")
    compare_parser = commands.add_parser("compare")
    compare_parser.add_argument("old")
    compare_parser.add_argument("new")
    args = parser.parse_args()
    if args.command == "save":
        save(args.path)
    else:
        compare(args.old, args.new)


if __name__ == "__main__":
    main()
