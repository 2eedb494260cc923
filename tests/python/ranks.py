"""Local ranks for the distributed tests: a worker script run as WORLD_SIZE processes
that meet over Gloo on a free loopback port."""

import os
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_ranks(tmp_path, mode, world_size=2, worker="distributed_worker.py"):
    """Runs `worker` (in this folder) as `world_size` local ranks with arguments
    tmp_path and mode: [(exit code, output)]."""
    # USE_LIBUV=0: torch ≥ 2.4 asks for a libuv TCPStore, which Debian's torch lacks.
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world_size),
               USE_LIBUV="0",
               PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
    ranks = [subprocess.Popen([sys.executable, str(HERE / worker), str(tmp_path), mode],
                              env=dict(env, RANK=str(rank)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
             for rank in range(world_size)]
    return [(process.returncode, output) for process, (output, _) in
            ((process, process.communicate(timeout=180)) for process in ranks)]
