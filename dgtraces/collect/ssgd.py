"""Real synchronous data-parallel SGD (gloo on localhost, or NCCL with one process per GPU)
-> measured ``iterations`` rows.

Every worker holds the same model (same seed) and its own synthetic batch. Gradients are
averaged across workers under one of three policies:

* ``naive``: after the whole backward, each layer's gradients are all-reduced in turn
  (blocking), last layer first;
* ``wfbp`` (wait-free backpropagation): a layer's gradients are all-reduced with an async
  work handle as soon as its last parameter gradient is accumulated
  (``register_post_accumulate_grad_hook``), overlapping communication with the rest of the
  backward; the handles are waited on after backward;
* ``bucketed``: DDP-style; gradients are packed in readiness order into flat buckets of at
  least ``bucket_mb`` MiB, each bucket all-reduced asynchronously when full (the last one
  after backward), then unpacked;
* ``ddp``: PyTorch's own ``DistributedDataParallel`` (``bucket_cap_mb`` = ``bucket_mb``),
  stored as policy ``bucketed`` with the implementation named in ``phases_json`` and
  ``notes`` (its allreduces run inside backward, so ``comm_wait`` is ~0).

One iteration: barrier, forward, backward, communication wait (+ averaging/unpacking),
SGD-momentum update. Its time is the slowest worker's; phases are medians of the slowest
worker per phase. All policies of one call share the process group and the model.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from ..errors import Code, DgtracesError
from ..models import get_spec
from ..tables.vocab import COLLECTED_POLICIES, Grouping, grouping  # the policy registry
from . import env, procs

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

DDP = "ddp"  # PyTorch's DistributedDataParallel: an implementation of policy bucketed
POLICIES = (*COLLECTED_POLICIES, DDP)
BACKENDS = ("gloo", "nccl")
STORED_POLICY = {DDP: "bucketed"}  # the iterations.policy a collector policy is stored as
PHASES = ("iter", "fwd", "bwd", "comm_wait", "update")


class Reducer:
    """Gradient averaging of one policy; ``attach()`` before, ``finish()`` after backward."""

    def __init__(self, net, policy: str, bucket_bytes: int, world: int) -> None:
        self.dist = __import__("torch.distributed", fromlist=["all_reduce"])
        self.policy, self.bucket_bytes, self.world = policy, bucket_bytes, world
        self.layer_params = net.layer_params()
        self.owner = {p: name for name, ps in self.layer_params.items() for p in ps}
        self.hooks: list[Any] = []
        self.pending: list[Any] = []
        self.bucket: list[Any] = []
        self.left: dict[str, int] = {}
        self.calls = 0

    def attach(self) -> None:
        if self.policy == DDP or grouping(self.policy) is Grouping.AFTER_BACKWARD:
            return
        for ps in self.layer_params.values():
            for p in ps:
                self.hooks.append(p.register_post_accumulate_grad_hook(self._ready))

    def detach(self) -> None:
        for h in self.hooks:
            h.remove()
        self.hooks = []

    def start(self) -> None:
        self.left = {name: len(ps) for name, ps in self.layer_params.items()}
        self.pending, self.bucket, self.calls = [], [], 0

    def _launch(self, params) -> None:
        import torch

        flat = torch.cat([p.grad.reshape(-1) for p in params])
        handle = self.dist.all_reduce(flat, async_op=True)
        self.pending.append((handle, flat, params))
        self.calls += 1

    def _ready(self, p) -> None:
        if grouping(self.policy) is Grouping.PER_LAYER:
            name = self.owner[p]
            self.left[name] -= 1
            if self.left[name] == 0:
                self._launch(self.layer_params[name])
            return
        self.bucket.append(p)
        if sum(q.numel() for q in self.bucket) * 4 >= self.bucket_bytes:
            self._launch(self.bucket)
            self.bucket = []

    def finish(self) -> None:
        if self.policy == DDP:  # DistributedDataParallel reduced inside backward
            return
        if grouping(self.policy) is Grouping.AFTER_BACKWARD:
            for name in reversed(list(self.layer_params)):
                self._launch(self.layer_params[name])
                self._unpack(*self.pending.pop())
            return
        if self.bucket:
            self._launch(self.bucket)
            self.bucket = []
        for item in self.pending:
            self._unpack(*item)
        self.pending = []

    def _unpack(self, handle, flat, params) -> None:
        handle.wait()
        flat.div_(self.world)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
            offset += n


def _model_for(net, policy: str, cfg: dict, target):
    """The module a policy trains: the net itself, or the net inside DDP for ``ddp``."""
    if policy != DDP:
        return net
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(net, device_ids=[target.index] if target.cuda else None,
                                   bucket_cap_mb=cfg["bucket_bytes"] / 2 ** 20)


def run_policies(dist, net, opt, x, labels, cfg: dict, world: int, target, clock) -> dict:
    """Per policy: this rank's (iteration, fwd, bwd, comm_wait, update) seconds per timed
    iteration, gathered from every rank, and the collective calls of the last iteration."""
    import torch

    from .layers import whole_pass

    out = {}
    # DDP last: its autograd hooks stay on the parameters while the wrapper lives
    order = sorted(cfg["policies"], key=lambda p: p == DDP)
    for policy in order:
        red = Reducer(net, policy, cfg["bucket_bytes"], world)
        model = _model_for(net, policy, cfg, target)
        red.attach()
        samples = []
        for i in range(cfg["warmup"] + cfg["iters"]):
            opt.zero_grad(set_to_none=True)
            red.start()
            dist.barrier()
            phases = whole_pass(model, opt, x, labels, sync=red.finish, clock=clock)
            if i >= cfg["warmup"]:
                samples.append([sum(phases), *phases])
        red.detach()
        mine = torch.tensor(samples, dtype=torch.float64, device=x.device)
        every = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(every, mine)
        out[policy] = {"per_rank_s": [t.cpu().tolist() for t in every],
                       "comm_calls": None if policy == DDP else red.calls}
    return out


def _worker(rank, world, port, result_path, cfg):
    import torch

    from . import gpu
    from . import net as tnet

    target = gpu.Target("cuda", rank) if cfg["backend"] == "nccl" else gpu.Target("cpu")
    if target.cuda:
        torch.cuda.set_device(rank)
    dist = procs.init(rank, world, port, cfg["backend"], cfg["threads"])
    net = tnet.build(cfg["model"], aux=cfg["aux"], seed=0).to(target.label)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=1e-4, momentum=0.9)
    x, labels = tnet.synthetic_batch(net, cfg["batch_size"], seed=1 + rank)
    x, labels = x.to(target.label), labels.to(target.label)
    out = run_policies(dist, net, opt, x, labels, cfg, world, target,
                       gpu.clock_for(target, torch))
    procs.finish(rank, result_path, {"policies": out, "loadavg": env.loadavg()})


def _row(model, policy, cfg, res, trace_run_id, before, after) -> dict:
    import numpy as np

    per_rank = np.asarray(res["per_rank_s"]) * 1000.0  # rank x iteration x phase
    slowest = per_rank.max(axis=0)
    med = {ph: env.stats(slowest[:, i]) for i, ph in enumerate(PHASES)}
    it_med, it_p10, it_p90, n = med["iter"]
    phases: dict[str, Any] = {f"{ph}_ms": med[ph][0] for ph in PHASES[1:]}
    phases.update({
        "per_rank_median_ms": {f"rank{r}": {ph: float(np.median(per_rank[r, :, i]))
                                            for i, ph in enumerate(PHASES)}
                               for r in range(per_rank.shape[0])},
        "iter_samples_ms": [round(float(v), 3) for v in slowest[:, 0]],
        "allreduce_calls_per_iter": res["comm_calls"], "warmup": cfg["warmup"],
        "loadavg_before": before, "loadavg_after": after,
        "phase_definition": "fwd | bwd (incl. launching async allreduces) | comm_wait "
                            "(remaining allreduce, averaging, unpacking) | update (SGD step)",
    })
    bucket = cfg["bucket_bytes"] if policy in ("bucketed", DDP) else None
    workers, batch, backend = cfg["workers"], cfg["batch_size"], cfg["backend"]
    device, interconnect, where = cfg["where"]
    notes = "synthetic input (no input pipeline)"
    if policy == DDP:
        phases["implementation"] = "torch.nn.parallel.DistributedDataParallel"
        notes += "; torch DistributedDataParallel (allreduce inside backward)"
    if cfg["aux"]:
        notes += "; aux classifiers included"
    return {
        "iter_id": env.new_id("ssgd", model, f"b{batch}", f"w{workers}", backend, policy),
        "model": model, "device": device, "framework": env.framework(),
        "precision": "fp32", "phase": "train", "batch_size": batch, "workers": workers,
        "nodes": 1, "interconnect": interconnect, "backend": backend,
        "policy": STORED_POLICY.get(policy, policy),
        "bucket_bytes": bucket, "io_overlap": None,
        "threads_per_worker": cfg["threads"], "iter_ms": it_med, "iter_p10_ms": it_p10,
        "iter_p90_ms": it_p90, "n": n, "throughput_img_s": workers * batch / (it_med / 1e3),
        "provenance": "measured",
        "source": (f"dgtraces collect ssgd: {workers} torch.distributed {backend} processes "
                   f"on {where}, synthetic input, median of {n} iterations after "
                   f"{cfg['warmup']} warm-up"),
        "trace_run_id": trace_run_id, "timestamp_utc": env.utc_now(),
        "phases_json": json.dumps(phases, sort_keys=True),
        "notes": notes,
    }


def _where(backend: str, workers: int) -> tuple[str, str, str]:
    """(device key, interconnect, where-text) of the workers."""
    if backend != "nccl":
        return env.DEVICE, env.INTERCONNECT, f"127.0.0.1 ({env.cpu_model()})"
    import torch

    from dgtraces.reference.devices import device_key

    name = torch.cuda.get_device_name(0)
    key = device_key(name)
    return key, f"{key}-x{workers}-intra-node", f"{workers} x {name} in one node"


def find_trace(folder, model: str, batch_size: int) -> tuple["pd.DataFrame", str]:
    """The runs frame in a ``collect layers`` output folder and the id of its threads=1 run
    of ``model`` at ``batch_size`` (code NOT_FOUND if there is none)."""
    from pathlib import Path

    from dgtraces.tables.checks import read_file

    folder = Path(folder)
    csv = folder / "runs.csv"  # `collect layers --csv` writes CSV
    runs = read_file(csv if csv.is_file() and not (folder / "runs.parquet").is_file()
                     else folder / "runs.parquet")
    hit = runs[(runs["model"] == model) & (runs["batch_size"] == batch_size)
               & (runs["threads"] == 1)]
    if hit.empty:
        raise DgtracesError(f"{folder}: no threads=1 run of {model} at batch {batch_size}",
                            code=Code.NOT_FOUND)
    return runs, str(hit["run_id"].iloc[0])


def collect_ssgd(model: str, *, workers: int = 2, threads_per_worker: int = 1,
                 policies=("naive",), bucket_mb: float = 25.0, iters: int = 10,
                 warmup: int = 2, batch_size: int = 8, aux: bool = False,
                 trace_run_id: str | None = None, backend: str = "gloo") -> "pd.DataFrame":
    """Run real S-SGD for each policy; returns one ``iterations`` row per policy.
    ``backend`` nccl runs one process per GPU (NO_CUDA at once without CUDA, NCCL or
    ``workers`` GPUs)."""
    get_spec(model)
    for name, value in (("workers", workers), ("threads per worker", threads_per_worker),
                        ("iterations", iters), ("batch size", batch_size)):
        env.positive_int(name, value)
    policies = tuple(dict.fromkeys(policies))
    bad = [p for p in policies if p not in POLICIES]
    if bad or not policies:
        raise DgtracesError(f"policies must be among {POLICIES}, got {list(policies)}",
                            code=Code.BAD_INPUT)
    if not 0 < bucket_mb < math.inf:  # also NaN
        raise DgtracesError(f"bucket size must be a finite number of MiB > 0, got {bucket_mb}",
                            code=Code.BAD_INPUT)
    env.nonneg_int("warmup", warmup)
    if backend not in BACKENDS:
        raise DgtracesError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}",
                            code=Code.BAD_INPUT)
    if backend == "nccl":
        from .gpu import require_nccl

        require_nccl("collect ssgd --backend nccl", workers)
    else:
        env.require_torch("S-SGD collection")
    cfg = {"model": model, "workers": workers, "threads": threads_per_worker,
           "backend": backend, "where": _where(backend, workers),
           "policies": list(policies), "bucket_bytes": int(bucket_mb * 1024 * 1024),
           "iters": iters, "warmup": warmup, "batch_size": batch_size, "aux": aux}
    before = env.loadavg()
    result = procs.spawn(_worker, workers, cfg)
    rows = [_row(model, p, cfg, result["policies"][p], trace_run_id, before,
                 result["loadavg"]) for p in policies]
    return env.frame(rows)
