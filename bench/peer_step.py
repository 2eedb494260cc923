"""dash against Meta's Distributed Shampoo: the optimizer step, same shapes, same process.

For each frequency f and each configuration (Distributed Shampoo's and dash's, through
the Python package), a fresh optimizer over the same parameters runs `--warmup-periods`
root periods and then max(f, 3) timed steps, one period at f >= 3. Both optimizers
compute roots at the steps t with t % f == 0 (dash's start_step and Distributed
Shampoo's start_preconditioning_step are f). Per configuration:
  - mean ms per step over the timed steps, the median of its non-root steps and its
    root step (CUDA events on a GPU; the wall clock after a synchronize on a CPU);
  - memory: on CUDA, the caching allocator's peak over the optimizer's life and what it
    keeps after the last step (both above the parameters and gradients); on a CPU, the
    resident set's growth over the optimizer's life (approximate: the heap keeps what
    earlier configurations freed);
  - on CUDA, the allocations of a non-root step (the caching allocator's count);
  - the ratio of Distributed Shampoo's mean step (eigh, coupled Newton) to this one's,
    measured in the same run, and the paper's numbers for the row where it has one.
`--rounds R` repeats the list, its order reversed every other round (the CPU's noise),
and reports each round. A configuration whose step raises (a peer's root solver giving
up, memory running out) is reported as failed, with the error, and the others go on;
the exit status is non-zero only where one of dash's failed.

Distributed Shampoo is not part of dash: `--ds-path` names a checkout of
github.com/facebookresearch/optimizers (the folder holding `distributed_shampoo/`).
Its API changed in 2025; both the versions before (e.g. 3d6c54b, torch 2.6) and after
(e.g. f606606, torch >= 2.8) are understood. Without `--ds-path` only dash's
configurations run, and the ratios are left out.

    python3 bench/peer_step.py --device cuda --preset llama-953m --layers 2 --block 1024 \
        --frequencies 10,1 --tf32 1 --ds-path build/peers/optimizers --json out.json
"""
import argparse
import gc
import os
import statistics
import subprocess
import sys
import time

import torch

import dash
from cuda_step_probe import llama_shapes, write_json

# (width, MLP width, vocabulary): dash-bench's presets (bench/model_shapes.cpp).
PRESETS = {"llama-953m": (2048, 5632, 32000), "llama-tiny": (512, 1408, 8192), "smoke": (16, 24, 40)}

# The configurations by name: who runs it, and its root options.
DS_CONFIGS = {"ds-eigh-fp32": "eigh", "ds-cn-fp32": "coupled-newton"}
DASH_CONFIGS = {
    "dash-evd": dict(root_method="evd"),
    "dash-cn-fro-fp32": dict(root_method="cn", scaling="fro", precision="fp32"),
    "dash-cn-fro-fp16": dict(root_method="cn", scaling="fro", precision="fp16"),
    "dash-ndb-pi-fp32": dict(root_method="ndb", scaling="multi-pi", precision="fp32"),
    "dash-ndb-pi-bf16": dict(root_method="ndb", scaling="multi-pi", precision="bf16"),
    "dash-auto": dict(root_method="auto"),
}

# dash-algorithm.md §7: llama-953m, B = 1024, 8 H100s, optimizer step ms (Distributed
# Shampoo / DASH) by (configuration, f). Distributed Shampoo ran the same root method
# as DASH in each row, so a DS column stands beside its own DASH row.
PAPER_MS = {
    ("dash-evd", 1): (3080, 2850),
    ("dash-evd", 10): (355, 313),
    ("dash-cn-fro-fp32", 1): (666, 136),
    ("dash-cn-fro-fp16", 1): (471, 119),
    ("dash-ndb-pi-fp32", 1): (740, 177),
}

# The hyperparameters both optimizers get (they set no time; they are equal so that
# the arithmetic is the same kind: Adam grafting, factor EMA 0.95, root ε 1e-10).
LR, BETA_GRAD, BETA_FACTOR, BETA_GRAFT, EPS_GRAFT, EPSILON = 1e-3, 0.9, 0.95, 0.95, 1e-8, 1e-10


def import_distributed_shampoo(path):
    """The classes a run needs from a Distributed Shampoo checkout, under either API."""
    sys.path.insert(0, os.path.abspath(path))
    import distributed_shampoo as ds

    # Before 2025-05 grafting took AdamGraftingConfig and Shampoo ShampooPreconditionerConfig;
    # since, AdamPreconditionerConfig and RootInvShampooPreconditionerConfig.
    grafting = getattr(ds, "AdamGraftingConfig", None) or ds.AdamPreconditionerConfig
    shampoo = getattr(ds, "RootInvShampooPreconditionerConfig", None) or ds.ShampooPreconditionerConfig
    return ds, grafting, shampoo


def distributed_shampoo_maker(classes, root, frequency, block, lr=LR):
    ds, grafting, shampoo = classes
    computation = ds.EigenConfig() if root == "eigh" else ds.CoupledNewtonConfig()
    return lambda params: ds.DistributedShampoo(
        params, lr=lr, betas=(BETA_GRAD, BETA_FACTOR), epsilon=EPSILON, weight_decay=0.0,
        max_preconditioner_dim=block, precondition_frequency=frequency, start_preconditioning_step=frequency,
        grafting_config=grafting(beta2=BETA_GRAFT, epsilon=EPS_GRAFT),
        # 1-D parameters take the grafting (Adam) step alone, as dash's do (AdamW): a
        # vector's factor has rank <= t, on which coupled Newton returns non-finite roots.
        preconditioner_config=shampoo(amortized_computation_config=computation, inverse_exponent_override={1: {0: 0.0}}))


def dash_maker(options, frequency, block):
    return lambda params: dash.Dash(
        params, lr=LR, betas=(BETA_GRAD, BETA_FACTOR), beta_graft=BETA_GRAFT, eps_graft=EPS_GRAFT, epsilon=EPSILON,
        block_size=block, root_frequency=frequency, start_step=frequency, **options)


class Clock:
    """Step timing and memory on the device: CUDA events and the caching allocator, or
    the wall clock and the resident set."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def time_ms(self, action):
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            action()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)
        begin = time.perf_counter()
        action()
        return (time.perf_counter() - begin) * 1e3

    def allocations(self):
        return torch.cuda.memory_stats()["allocation.all.allocated"] if self.cuda else 0

    def memory_start(self):
        if self.cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            return torch.cuda.memory_allocated()
        return resident_bytes()

    def memory_end(self, start):
        """(peak, kept) bytes above `start`; peak is None on a CPU."""
        if self.cuda:
            return torch.cuda.max_memory_allocated() - start, torch.cuda.memory_allocated() - start
        return None, resident_bytes() - start


def resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(make_optimizer, shapes, device, frequency, warmup_periods, clock, seed=0):
    """One configuration at one f: per timed step (t, ms, root step or not), memory,
    and the allocations of the timed non-root steps."""
    generator = torch.Generator(device=device).manual_seed(seed)
    params = [torch.randn(s, device=device, generator=generator).mul_(0.02).requires_grad_() for s in shapes]
    for p in params:
        p.grad = torch.empty_like(p)
    clock.sync()
    memory_start = clock.memory_start()
    optimizer = make_optimizer(params)
    warmup = warmup_periods * frequency if frequency > 1 else max(warmup_periods, 2)
    timed, allocations = [], []
    for t in range(1, warmup + max(frequency, 3) + 1):
        for p in params:
            p.grad.normal_(generator=generator)  # the same tensors: no gradient allocations in the step
        clock.sync()
        before = clock.allocations()
        ms = clock.time_ms(optimizer.step)
        root = t % frequency == 0
        if t > warmup:
            timed.append({"t": t, "ms": ms, "root": root})
            if not root and clock.cuda:
                allocations.append(clock.allocations() - before)
    peak, kept = clock.memory_end(memory_start)
    row = {"steps": timed, "peak_bytes": peak, "kept_bytes": kept, "non_root_allocations": allocations}
    if isinstance(optimizer, dash.Dash):
        diagnostics = optimizer.diagnostics()
        stacks = diagnostics["factor_stacks"]
        row["dash"] = {"root_methods": sorted({s["root_method"] for s in stacks}),
                       "evaluations": sorted({s["newton_db_evaluation"] for s in stacks if s["root_method"] == "ndb"}),
                       "executions": sorted({s["execution"] for s in stacks}),
                       "state_bytes": diagnostics["state_bytes"], "step_peak_bytes": diagnostics["step_peak_bytes"]}
    del optimizer, params
    return row


def summarise(row):
    ms = [s["ms"] for s in row["steps"]]
    non_root = [s["ms"] for s in row["steps"] if not s["root"]]
    root = [s["ms"] for s in row["steps"] if s["root"]]
    row["mean_ms"] = statistics.fmean(ms)
    row["non_root_median_ms"] = statistics.median(non_root) if non_root else None
    row["root_median_ms"] = statistics.median(root) if root else None
    return row


def format_ms(value):
    return f"{value:9.1f}" if value is not None else f"{'-':>9}"


def format_mb(value):
    return f"{value / 1e6:8.0f}" if value is not None else f"{'-':>8}"


def print_table(frequency, rows, paper_device):
    print(f"\nf = {frequency}: ms per step (mean over the timed steps; median of the non-root steps; root step), "
          f"memory MB above the parameters and gradients, ratio = Distributed Shampoo's mean / this mean")
    print(f"{'configuration':20s} {'mean':>9} {'non-root':>9} {'root':>9} {'peak MB':>8} {'kept MB':>8} "
          f"{'x DS eigh':>9} {'x DS CN':>8}  paper ({paper_device}): DS / DASH ms")
    for name, row in rows.items():
        if "failed" in row:
            print(f"{name:20s} failed: {row['failed']}", flush=True)
            continue
        ratios = [f"{row['ratios'][ds]:8.2f}x" if ds in row.get("ratios", {}) else f"{'-':>9}"
                  for ds in DS_CONFIGS]
        paper = PAPER_MS.get((name, frequency))
        extra = row.get("dash", {})
        notes = " ".join(x for x in (",".join(extra.get("evaluations", [])), ",".join(extra.get("executions", [])),
                                     ",".join(extra.get("root_methods", [])) if name == "dash-auto" else "") if x)
        print(f"{name:20s} {format_ms(row['mean_ms'])} {format_ms(row['non_root_median_ms'])} "
              f"{format_ms(row['root_median_ms'])} {format_mb(row['peak_bytes'])} {format_mb(row['kept_bytes'])} "
              f"{ratios[0]} {ratios[1]}  {f'{paper[0]} / {paper[1]}' if paper else ''}  {notes}", flush=True)


def add_ratios(rows):
    timed = {name: row for name, row in rows.items() if "failed" not in row}
    for row in timed.values():
        row["ratios"] = {ds: timed[ds]["mean_ms"] / row["mean_ms"] for ds in DS_CONFIGS if ds in timed}


def failure_text(error):
    """An exception as one short line: its type and the first line of its message."""
    message = str(error).splitlines()[0][:200] if str(error) else ""
    return f"{type(error).__name__}: {message}"


def measure_or_record_failure(name, frequency, *arguments):
    """A configuration's row, or {"failed": why} where its step raised (a peer's root
    solver giving up, memory running out): the others still run."""
    try:
        return summarise(measure(*arguments))
    except Exception as error:  # noqa: BLE001  (whatever the optimizer raises is the finding)
        why = failure_text(error)
    print(f"peer_step: {name} at f = {frequency} failed: {why}", flush=True)
    gc.collect()  # the traceback, gone now, held the optimizer and its parameters
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return {"failed": why}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--preset", default="llama-953m", choices=sorted(PRESETS))
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--block", type=int, default=1024)
    parser.add_argument("--frequencies", default="10,1")
    parser.add_argument("--configs", default=",".join([*DS_CONFIGS, *DASH_CONFIGS]),
                        help=f"any of {', '.join([*DS_CONFIGS, *DASH_CONFIGS])}")
    parser.add_argument("--ds-path", default="", help="a checkout of facebookresearch/optimizers")
    parser.add_argument("--warmup-periods", type=int, default=2,
                        help="root periods before the timed steps (the first root step and Auto's trials)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--tf32", type=int, default=1,
                        help="1: float32 matmuls may run as TF32, as the paper's 'fp32' rows (CUDA)")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    args.configs = [name for name in args.configs.split(",") if name]
    unknown = [name for name in args.configs if name not in DS_CONFIGS and name not in DASH_CONFIGS]
    if unknown:
        parser.error(f"unknown configuration(s) {', '.join(unknown)}; valid: {', '.join([*DS_CONFIGS, *DASH_CONFIGS])}")
    try:
        args.frequencies = [int(f) for f in args.frequencies.split(",")]
    except ValueError:
        parser.error(f"--frequencies takes integers separated by commas, got {args.frequencies!r}")
    if any(f < 1 for f in args.frequencies):
        parser.error("--frequencies must be >= 1")
    return args


def main():
    args = parse_args()
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32 == 1
    ds_classes, ds_version = None, None
    if args.ds_path:
        try:
            ds_classes, ds_version = import_distributed_shampoo(args.ds_path), ds_version_of(args.ds_path)
        except Exception as error:  # e.g. a checkout that needs a newer torch or Python than this one
            print(f"peer_step: Distributed Shampoo at {args.ds_path} did not import ({type(error).__name__}: "
                  f"{error}); its configurations are left out", flush=True)
    elif any(name in DS_CONFIGS for name in args.configs):
        print("peer_step: no --ds-path: Distributed Shampoo's configurations are left out", flush=True)
    if ds_classes is None:
        args.configs = [name for name in args.configs if name not in DS_CONFIGS]
    shapes = llama_shapes(args.layers, *PRESETS[args.preset])
    clock = Clock(device)
    machine = torch.cuda.get_device_name(device) if clock.cuda else f"CPU, {os.cpu_count()} cores"
    print(f"peer_step: {args.preset} {args.layers} layers ({sum(torch.Size(s).numel() for s in shapes) / 1e6:.1f} M "
          f"parameters), B = {args.block}, torch {torch.__version__}, {machine}, TF32 {args.tf32}, "
          f"Distributed Shampoo {ds_version or 'absent'}", flush=True)
    report = {"preset": args.preset, "layers": args.layers, "block": args.block, "torch": torch.__version__,
              "device": machine, "tf32": args.tf32, "distributed_shampoo": ds_version, "rounds": []}
    for round_index in range(args.rounds):
        order = args.configs if round_index % 2 == 0 else args.configs[::-1]
        tables = {}
        for frequency in args.frequencies:
            rows = {}
            for name in order:
                make = (distributed_shampoo_maker(ds_classes, DS_CONFIGS[name], frequency, args.block)
                        if name in DS_CONFIGS else dash_maker(DASH_CONFIGS[name], frequency, args.block))
                rows[name] = measure_or_record_failure(name, frequency, make, shapes, device, frequency,
                                                       args.warmup_periods, clock)
            rows = {name: rows[name] for name in args.configs}
            add_ratios(rows)
            print_table(frequency, rows, "8 H100s, all 16 layers")
            tables[str(frequency)] = rows
        report["rounds"].append(tables)
        write_json(args.json, report)
    # A peer's failure is a result; dash's is an error.
    failed = sorted({name for tables in report["rounds"] for rows in tables.values() for name, row in rows.items()
                     if "failed" in row and name in DASH_CONFIGS})
    if failed:
        sys.exit(f"peer_step: dash configuration(s) failed: {', '.join(failed)}")


def ds_version_of(path):
    """The checkout's commit, or its path where it is not a git work tree."""
    try:
        return subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.path.abspath(path)


if __name__ == "__main__":
    main()
