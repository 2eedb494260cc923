"""Threads that replace the gradients and step one dash.Dash: the probe of
docs/reliability.md ("Threads"). Each trial builds an optimizer over a small model
and runs THREADS threads of STEPS steps, each thread writing new gradients (by
assigning .grad, or zero_grad(set_to_none=True) then assigning) before its step. It
exits 0 when every trial ended with every step taken and finite parameters, and 1
naming a failed trial; a crash of the interpreter (what this probe found before the
step snapshotted the gradients under the GIL) kills it with a signal.

  /usr/bin/python3 tests/python/thread_probe.py --trials 1000    # the stress command

With --optimizer adamw the same trials run torch.optim.AdamW: on LibTorch 1.13 its
zero_grad mode dies too (double free), which is why dash.Dash's step() and
zero_grad() take turns.

tests/python/test_threads.py runs it within the test suite's time."""

import argparse
import sys
import threading

import torch

import dash


def trial(threads: int, steps: int, mode: str, seed: int, optimizer_name: str = "dash") -> str:
    """'' when the trial held, else what went wrong."""
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(24, 24, generator=generator).requires_grad_()
    bias = torch.randn(24, generator=generator).requires_grad_()
    params = [weight, bias]
    if optimizer_name == "dash":
        optimizer = dash.Dash(params, lr=1e-3, block_size=8, start_step=1, root_frequency=1)
    else:
        optimizer = torch.optim.AdamW(params, lr=1e-3)
    errors = []

    def work(thread: int) -> None:
        try:
            for _ in range(steps):
                if mode == "zero_grad":
                    optimizer.zero_grad(set_to_none=True)
                for param in params:
                    param.grad = torch.randn(param.shape)
                optimizer.step()
        except Exception as error:  # noqa: BLE001 (reported with its thread)
            errors.append(f"thread {thread}: {error!r}")

    workers = [threading.Thread(target=work, args=(thread,)) for thread in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    # zero_grad(set_to_none=True) in one thread can leave another's step without
    # gradients (a step with none is not taken, as in torch.optim): only the
    # assigning mode knows how many steps there were.
    taken = optimizer.diagnostics()["steps_taken"] if optimizer_name == "dash" else threads * steps
    if errors:
        return "; ".join(errors)
    if mode == "assign" and taken != threads * steps:
        return f"{taken} steps taken of {threads * steps}"
    if not all(torch.isfinite(param).all() for param in params):
        return "non-finite parameters"
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--modes", nargs="+", default=["assign", "zero_grad"], choices=["assign", "zero_grad"])
    parser.add_argument("--optimizer", default="dash", choices=["dash", "adamw"])
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    runs = 0
    for number in range(arguments.trials):
        threads = arguments.threads[number % len(arguments.threads)]
        mode = arguments.modes[(number // len(arguments.threads)) % len(arguments.modes)]
        failure = trial(threads, arguments.steps, mode, seed=number, optimizer_name=arguments.optimizer)
        runs += 1
        if failure:
            print(f"trial {number} ({threads} threads, {mode}): {failure}", file=sys.stderr)
            return 1
    print(f"{runs} trials held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
