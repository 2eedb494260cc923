"""Where the device time of one dash.Dash step goes on CUDA, by phase and by kernel.

The host-side split of `dash-bench step --profile 1` cannot see device time (it
would need a sync per phase). Here torch.profiler records the device's kernels and
attributes them to dash's "dash::<phase>" scopes; for each configuration, after
warm-up (two root periods), one non-root step and one root step are profiled:
  - device ms per phase: the time of the kernels launched inside each dash:: scope
    (from the Chrome trace, through its correlation ids);
  - the kernels with the most device time, with their call counts;
  - a Chrome trace per step (--trace DIR), to open in chrome://tracing or Perfetto.
Shapes: the llama-953m layers of `dash-bench step --preset llama-953m --layers N`.

    python3 bench/cuda_step_profile.py --layers 2 --block 1024 --tf32 1 --json out.json
"""
import argparse
import json
import os
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

import dash
from cuda_step_probe import ROOT_CONFIGS, llama_shapes, make_params, set_gradients, write_json


def device_ms(event, self_only=False):
    """Device (CUDA) milliseconds of a profiler average, under either name torch used."""
    names = ("self_device_time_total", "self_cuda_time_total") if self_only else (
        "device_time_total", "cuda_time_total")
    for name in names:
        if hasattr(event, name):
            return getattr(event, name) / 1000.0
    return 0.0


def is_scope(name):
    """dash's phase scopes are "dash::<phase>"; kernels of dash's own are "dash::…(arguments)"."""
    return name.startswith("dash::") and "(" not in name


def device_ms_by_phase(trace_path):
    """Device time of every kernel, memcpy and memset of a Chrome trace, each added to the
    innermost dash:: scope open on the host thread that launched it (the launch is found
    through the trace's correlation ids). Kernel time, not the span of a scope: a device
    waiting for the host between two kernels counts nowhere."""
    with open(trace_path) as trace:
        events = json.load(trace)["traceEvents"]
    # Launches through the driver API (cuBLASLt's kernels: cuLaunchKernelEx) are
    # "cuda_driver" events; the runtime's are "cuda_runtime".
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    scopes = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("user_annotation", "cpu_op")
              and is_scope(e["name"])]
    phases = {}
    total = 0.0
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        total += e["dur"]
        launch = launches.get(e.get("args", {}).get("correlation"))
        enclosing = [s for s in scopes if launch and s["tid"] == launch["tid"]
                     and s["ts"] <= launch["ts"] <= s["ts"] + s["dur"]]
        name = min(enclosing, key=lambda s: s["dur"])["name"] if enclosing else "outside dash:: scopes"
        phases[name] = phases.get(name, 0.0) + e["dur"]
    return total / 1000.0, {k: round(v / 1000.0, 3) for k, v in phases.items()}


def profile_step(optimizer, params, generator, trace_path):
    set_gradients(params, generator)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        optimizer.step()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as scratch:
        path = trace_path or os.path.join(scratch, "trace.json")
        prof.export_chrome_trace(path)
        total, phases = device_ms_by_phase(path)
    # Kernels by name (the scopes also show up as device-side annotations: not kernels).
    averages = prof.key_averages()
    kernels = sorted((e for e in averages if device_ms(e, self_only=True) > 0 and e.device_type.name == "CUDA"
                      and not is_scope(e.key) and not e.key.startswith("Optimizer.step")),
                     key=lambda e: -device_ms(e, self_only=True))
    rows = [{"kernel": e.key[:110], "ms": round(device_ms(e, self_only=True), 3), "calls": e.count} for e in kernels]
    return {"device_ms": round(total, 3), "phases_ms": phases, "kernels": rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--block", type=int, default=1024)
    parser.add_argument("--frequency", type=int, default=10)
    parser.add_argument("--configs", default="ndb-multi-pi-fp32,evd")
    parser.add_argument("--tf32", type=int, default=1)
    parser.add_argument("--top", type=int, default=25, help="kernels listed per step")
    parser.add_argument("--trace", default="", help="directory for Chrome traces")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    assert torch.cuda.is_available(), "needs a CUDA device"
    torch.backends.cuda.matmul.allow_tf32 = args.tf32 == 1
    shapes = llama_shapes(args.layers)
    print(f"cuda_step_profile: llama-953m {args.layers} layers, B = {args.block}, f = {args.frequency}, "
          f"TF32 {args.tf32}, torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    report = {}
    for name in args.configs.split(","):
        params = make_params(shapes, 0)
        optimizer = dash.Dash(params, lr=1e-3, block_size=args.block, root_frequency=args.frequency, start_step=1,
                              **ROOT_CONFIGS[name])
        generator = torch.Generator(device="cuda").manual_seed(1)
        # Two root periods, ending just after a root step: the next step is a non-root one.
        for _ in range(2 * args.frequency + 1):
            set_gradients(params, generator)
            optimizer.step()
        report[name] = {}
        for kind, steps_before in (("non-root", 0), ("root", args.frequency - 2)):
            for _ in range(steps_before):
                set_gradients(params, generator)
                optimizer.step()
            trace = os.path.join(args.trace, f"{name}-{kind}.json") if args.trace else ""
            result = profile_step(optimizer, params, generator, trace)
            report[name][kind] = result
            phases = "  ".join(f"{k.replace('dash::', '')} {v:.2f}" for k, v in sorted(result["phases_ms"].items()))
            print(f"\n{name} {kind} step: device {result['device_ms']:.2f} ms; by phase (ms): {phases}")
            for row in result["kernels"][:args.top]:
                print(f"  {row['ms']:9.3f} ms {row['calls']:5d}x  {row['kernel']}")
        del optimizer, params
        torch.cuda.empty_cache()
    write_json(args.json, report)


if __name__ == "__main__":
    main()
