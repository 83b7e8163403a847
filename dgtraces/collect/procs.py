"""Local torch.distributed process groups: free port, spawn, init, result hand-back.

Workers are spawned with ``torch.multiprocessing.spawn`` on 127.0.0.1; rank 0 writes its
result as JSON to a file the parent reads. A failing worker becomes a ``COLLECT`` error.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..errors import Code, DgtracesError

ADDR = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((ADDR, 0))
        return s.getsockname()[1]


def init(rank: int, world: int, port: int, backend: str, threads: int):
    """Join the process group of ``world`` local processes; set intra-op threads."""
    import datetime

    import torch
    import torch.distributed as dist

    torch.set_num_threads(int(threads))
    torch.set_flush_denormal(True)
    dist.init_process_group(backend, init_method=f"tcp://{ADDR}:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=300))
    return dist


def finish(rank: int, result_path: str, result) -> None:
    """Rank 0 writes ``result`` as JSON; every rank leaves the process group."""
    import torch.distributed as dist

    if rank == 0:
        Path(result_path).write_text(json.dumps(result), encoding="utf-8")
    dist.barrier()
    dist.destroy_process_group()


def spawn(fn: Callable, workers: int, *args):
    """Run ``fn(rank, world, port, result_path, *args)`` in ``workers`` processes; return
    rank 0's JSON result."""
    import torch.multiprocessing as mp

    if workers < 2:
        raise DgtracesError(f"need at least 2 workers, got {workers}", code=Code.BAD_INPUT)
    with tempfile.TemporaryDirectory(prefix="dgtraces-") as tmp:
        result_path = os.path.join(tmp, "result.json")
        port = free_port()
        try:
            mp.spawn(fn, args=(workers, port, result_path, *args), nprocs=workers, join=True)
        except Exception as exc:  # ProcessRaisedException / ProcessExitedException
            raise DgtracesError(f"a distributed worker failed: {str(exc)[-800:]}",
                                code=Code.COLLECT) from exc
        if not os.path.exists(result_path):
            raise DgtracesError("workers finished without a result", code=Code.COLLECT)
        return json.loads(Path(result_path).read_text(encoding="utf-8"))
