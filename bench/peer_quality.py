"""Training quality: the example GPT (examples/train_gpt.py) trained with AdamW, dash and
Meta's Distributed Shampoo, the same model, data, seeds and schedule, one after the other.

dash runs as the example configures it (NDB with power-iteration scaling, B = 128,
f = 10) and with EVD; Distributed Shampoo with eigh (its default) and the same B, f, betas,
root ε and Adam grafting, its 1-D parameters on the grafting step alone as dash's are on
AdamW (bench/peer_step.py builds it). Prints each run's validation loss, the mean and
standard deviation over the seeds, each optimizer's paired difference from Distributed
Shampoo seed by seed, and the mean optimizer ms per step. A run whose optimizer raises is
reported as failed, with the error, and the others go on.

    python3 bench/peer_quality.py --ds-path build/peers/optimizers --seeds 1,2,3 --steps 300
"""
import argparse
import json
import os
import statistics
import sys

from peer_step import distributed_shampoo_maker, ds_version_of, failure_text, import_distributed_shampoo

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import train_gpt  # noqa: E402  (the example, from its folder)


def optimizer_makers(lr, ds_classes):
    makers = {
        "adamw": lambda model: train_gpt.make_optimizer("adamw", model, lr),
        "dash-ndb": lambda model: train_gpt.make_optimizer("dash", model, lr),
        "dash-evd": lambda model: train_gpt.make_optimizer("dash", model, lr, root_method="evd"),
    }
    if ds_classes is not None:
        settings = train_gpt.DASH_SETTINGS
        for root in ("eigh", "coupled-newton"):
            make = distributed_shampoo_maker(ds_classes, root, settings["root_frequency"], settings["block_size"], lr)
            makers["ds-" + root] = (lambda build: lambda model: build(model.parameters()))(make)
    return makers


def summary_lines(results, reference):
    lines = []
    for name, runs in results.items():
        done = [run for run in runs if "failed" not in run]
        failed = [run for run in runs if "failed" in run]
        line = f"{name:16s} "
        if done:
            losses = [run["validation_loss"] for run in done]
            spread = statistics.stdev(losses) if len(losses) > 1 else 0.0
            line += (f"validation {statistics.fmean(losses):.4f} ± {spread:.4f}  "
                     f"({', '.join(f'{x:.4f}' for x in losses)})  optimizer "
                     f"{statistics.fmean(run['optimizer_ms'] for run in done):7.1f} ms/step")
        if failed:
            line += f"  failed at seed(s) {', '.join(str(run['seed']) for run in failed)}: {failed[0]['failed']}"
        # Paired by seed, over the seeds where both trained to the end.
        pairs = [(a, b) for a, b in zip(runs, results.get(reference, [])) if "failed" not in a and "failed" not in b]
        if pairs and name != reference:
            paired = [a["validation_loss"] - b["validation_loss"] for a, b in pairs]
            line += f"  minus {reference}, paired: {statistics.fmean(paired):+.4f} ({', '.join(f'{x:+.4f}' for x in paired)})"
        lines.append(line)
    return lines


def train_or_record_failure(model_args, make, corpus):
    """One run's result, or {"failed": why} where the optimizer raised (Distributed
    Shampoo's coupled Newton gives up on some factors): the other runs go on."""
    try:
        loss, optimizer_ms = train_gpt.train(model_args, make, corpus)
        return {"seed": model_args.seed, "validation_loss": loss, "optimizer_ms": optimizer_ms}
    except Exception as error:  # noqa: BLE001  (whatever the optimizer raises is the finding)
        why = failure_text(error)
        print(f"peer_quality: {model_args.optimizer}, seed {model_args.seed}, failed: {why}", flush=True)
        return {"seed": model_args.seed, "failed": why}


def main():
    # No abbreviations: the example's own options (--seed, --optimizer) pass through.
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--ds-path", default="", help="a checkout of facebookresearch/optimizers")
    parser.add_argument("--optimizers", default="adamw,dash-ndb,dash-evd,ds-eigh,ds-coupled-newton")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--json", default="")
    args, rest = parser.parse_known_args()
    model_args = train_gpt.parse_args(rest)  # --steps, --data, --dim, ... as the example takes them
    ds_classes = import_distributed_shampoo(args.ds_path) if args.ds_path else None
    makers = optimizer_makers(model_args.lr, ds_classes)
    names = [name for name in args.optimizers.split(",") if name in makers]
    left_out = [name for name in args.optimizers.split(",") if name not in makers]
    if left_out:
        print(f"peer_quality: left out {', '.join(left_out)} (unknown, or Distributed Shampoo's without --ds-path)",
              flush=True)
    corpus = train_gpt.load_corpus(model_args.data)
    results = {name: [] for name in names}
    for seed in (int(s) for s in args.seeds.split(",")):
        for name in names:
            model_args.seed, model_args.optimizer = seed, name
            results[name].append(train_or_record_failure(model_args, makers[name], corpus))
    print(f"\n{model_args.steps} steps, seeds {args.seeds}, Distributed Shampoo "
          f"{ds_version_of(args.ds_path) if args.ds_path else 'absent'}")
    print("\n".join(summary_lines(results, "ds-eigh")))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"steps": model_args.steps, "results": results}, out, indent=1)
    # A peer's failure is a result; dash's is an error.
    failed = [name for name, runs in results.items() if name.startswith("dash") and any("failed" in r for r in runs)]
    if failed:
        sys.exit(f"peer_quality: dash run(s) failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
