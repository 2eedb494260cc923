"""What one dash.Dash step costs the host on a CUDA device, seen from Python.

For each root configuration, after warm-up (two root periods), per step:
  - host syncs: operations that made the host wait for the device, counted with
    torch.cuda.set_sync_debug_mode("warn") (dash passes TORCH_WARN to Python);
  - allocations: new blocks handed out by the caching allocator
    (memory_stats "allocation.all.allocated"), which a step that reuses its
    workspaces keeps at the per-step scalars;
  - time: CUDA events around step(), against torch.optim.AdamW (foreach and fused)
    on the same parameters in the same run.
Shapes: the llama-953m layers of `dash-bench step --preset llama-953m --layers N`.

    python3 bench/cuda_step_probe.py --layers 2 --block 1024 --tf32 1 --json out.json
"""
import argparse
import json
import warnings

import torch

import dash


# dash.Dash root options by name, for --configs (this script's and cuda_step_profile.py's).
ROOT_CONFIGS = {
    "ndb-multi-pi-fp32": dict(root_method="ndb", scaling="multi-pi", precision="fp32"),
    "ndb-multi-pi-bf16": dict(root_method="ndb", scaling="multi-pi", precision="bf16"),
    # The same without the gradient check: what the step's one host sync costs.
    "ndb-multi-pi-fp32-unchecked": dict(root_method="ndb", scaling="multi-pi", precision="fp32",
                                        non_finite_gradients="unchecked"),
    "cn-multi-pi-fp32": dict(root_method="cn", scaling="multi-pi", precision="fp32"),
    "cn-fro-fp16": dict(root_method="cn", scaling="fro", precision="fp16"),
    "evd": dict(root_method="evd"),
    "evd-warm-0.05": dict(root_method="evd", eigen_refresh_tolerance=0.05),
    "auto": dict(root_method="auto"),
}


def llama_shapes(layers, dim=2048, hidden=5632, vocab=32000):
    shapes = [(vocab, dim)]
    for _ in range(layers):
        shapes += [(dim, dim)] * 4 + [(hidden, dim), (hidden, dim), (dim, hidden), (dim,), (dim,)]
    return shapes + [(dim,), (vocab, dim)]


def make_params(shapes, seed):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(s, device="cuda", generator=generator).mul_(0.02).requires_grad_() for s in shapes]


def set_gradients(params, generator):
    for p in params:
        p.grad = torch.randn(p.shape, device="cuda", generator=generator)


def measure(make_optimizer, params, frequency, timed_steps, seed, sync_debug=True, fresh_grads=True):
    """Per timed step: ms, host syncs, allocations. `fresh_grads`: new gradient
    tensors every step (autograd after zero_grad(set_to_none=True)); else written
    into the same ones (as dash-bench step does)."""
    optimizer = make_optimizer(params)
    generator = torch.Generator(device="cuda").manual_seed(seed)
    for _ in range(2 * frequency + 1):  # two root periods: workspaces and Auto choices settle
        set_gradients(params, generator)
        optimizer.step()
    torch.cuda.synchronize()
    rows = []
    for _ in range(timed_steps):
        if fresh_grads:
            set_gradients(params, generator)
        else:
            for p in params:
                p.grad.normal_(generator=generator)
        torch.cuda.synchronize()
        before = torch.cuda.memory_stats()["allocation.all.allocated"]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if sync_debug:
                torch.cuda.set_sync_debug_mode("warn")
            start.record()
            optimizer.step()
            end.record()
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
        # (torch's one-off "Synchronization debug mode is a prototype feature" is not one)
        syncs = [str(w.message) for w in caught if "called a synchronizing" in str(w.message)]
        allocations = torch.cuda.memory_stats()["allocation.all.allocated"] - before
        rows.append({"ms": start.elapsed_time(end), "syncs": len(syncs), "allocations": allocations,
                     "sync_messages": sorted(set(m.splitlines()[0][:160] for m in syncs))})
    return optimizer, rows


def write_json(path, report):
    if path:
        with open(path, "w") as out:
            json.dump(report, out, indent=1)


def summary(rows):
    ms = [r["ms"] for r in rows]
    return {
        "mean_ms": sum(ms) / len(ms),
        "max_ms": max(ms),
        "min_ms": min(ms),
        "syncs_per_step": [r["syncs"] for r in rows],
        "allocations_per_step": [r["allocations"] for r in rows],
        "sync_messages": sorted(set(m for r in rows for m in r["sync_messages"])),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--block", type=int, default=1024)
    parser.add_argument("--frequency", type=int, default=10)
    parser.add_argument("--configs",
                        default="ndb-multi-pi-fp32,ndb-multi-pi-fp32-unchecked,ndb-multi-pi-bf16,cn-fro-fp16,evd,auto")
    parser.add_argument("--json", default="")
    parser.add_argument("--sync-debug", type=int, default=1, help="0: do not count syncs (no debug mode)")
    parser.add_argument("--fresh-grads", type=int, default=1, help="0: write gradients into the same tensors")
    parser.add_argument("--adamw", type=int, default=1, help="0: no AdamW rows")
    parser.add_argument("--tf32", type=int, default=0,
                        help="1: float32 matmuls may run as TF32 (torch.backends.cuda.matmul.allow_tf32), "
                             "as dash-bench --tf32 1 and the paper's 'fp32' rows")
    args = parser.parse_args()
    assert torch.cuda.is_available(), "needs a CUDA device"
    torch.backends.cuda.matmul.allow_tf32 = args.tf32 == 1
    shapes = llama_shapes(args.layers)
    common = dict(lr=1e-3, block_size=args.block, root_frequency=args.frequency, start_step=1)
    makers = {"adamw-foreach": lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=True),
              "adamw-fused": lambda p: torch.optim.AdamW(p, lr=1e-3, fused=True)} if args.adamw else {}
    for name in args.configs.split(","):
        makers["dash " + name] = (lambda options: lambda p: dash.Dash(p, **common, **options))(ROOT_CONFIGS[name])
    print(f"cuda_step_probe: llama-953m {args.layers} layers, {sum(torch.Size(s).numel() for s in shapes) / 1e6:.1f} M "
          f"parameters, B = {args.block}, f = {args.frequency}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}, sync debug {args.sync_debug}, fresh grads {args.fresh_grads}, TF32 {args.tf32}", flush=True)
    report = {"layers": args.layers, "block": args.block, "frequency": args.frequency, "tf32": args.tf32,
              "torch": torch.__version__, "device": torch.cuda.get_device_name(), "rows": {}}
    for name, make in makers.items():
        params = make_params(shapes, 0)
        optimizer, rows = measure(make, params, args.frequency, args.frequency, 1, args.sync_debug == 1,
                                  args.fresh_grads == 1)
        result = summary(rows)
        if isinstance(optimizer, dash.Dash):
            diagnostics = optimizer.diagnostics()
            result["root_methods"] = sorted({s["root_method"] for s in diagnostics["factor_stacks"]})
            result["executions"] = sorted({s["execution"] for s in diagnostics["factor_stacks"]})
        report["rows"][name] = result
        print(f"{name:24s} mean {result['mean_ms']:8.2f} ms  max {result['max_ms']:8.2f}  min {result['min_ms']:7.2f}  "
              f"syncs/step {result['syncs_per_step']}  allocations/step {result['allocations_per_step']}  "
              f"{result.get('root_methods', '')} {result.get('executions', '')}", flush=True)
        for message in result["sync_messages"]:
            print(f"    sync: {message}")
        del optimizer, params
        torch.cuda.empty_cache()
    write_json(args.json, report)


if __name__ == "__main__":
    main()
