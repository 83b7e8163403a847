"""The reference nccl-tests logs of ``validate-comm`` and the cluster each ran on, declared once
(issue #34 item 4; pre-registered in docs/collectives.md before the first score).

Each setting names the field of ``logs.csv`` / ``multinode_logs.csv`` or the raw line it comes
from (``../shared/reference/nccl-tests``). The four CC BY 3.0 sweeps ship in
``dgtraces/reference/nccl-tests``; every other log has no licence and is read from
``../shared`` only, when that folder is beside the clone (never shipped).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

MIB = 1 << 20
SHIPPED = Path(__file__).resolve().parents[1] / "reference" / "nccl-tests"
SHARED_NAME = "shared/reference/nccl-tests"  # beside a source checkout (developers only)


def shared_folder(package_parent: Path) -> Path | None:
    """``../shared/reference/nccl-tests`` of a source checkout (``package_parent`` holds a
    pyproject.toml), else None: an installed package has no such neighbour (beside a wheel
    it named a path inside the virtual environment; #36 trial)."""
    if not (package_parent / "pyproject.toml").is_file():
        return None
    return package_parent.parent / SHARED_NAME


SHARED = shared_folder(Path(__file__).resolve().parents[2])
# The developer-local, unlicensed points (never shipped) count only as they were when the
# evaluation was registered (docs/collectives.md): these sha256, at most SHARED_MAX_BYTES.
# Any other file there (edited, swapped, or beside an installed package) is not evaluated
# (#36 low: unchecked developer-local reference files).
POINT_FILES = {
    "allreduce_points.csv": "3333f67446692c64ee4904f5d819e82a880c16064665e22796943c86300419db",
    "multinode_points.csv": "a4b3d341f4029ef29ad4ded7886a6ee6a7d578f85730a25f7fa1b3d55086daa7",
}
SHARED_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class LogCluster:
    """The cluster a log ran on (``None``: from the log's rank lines) and how NCCL ran:
    release (``None``: a user's log's printed release, else the newest modelled), forced
    algorithm (``auto``: NCCL's choice) and GPUs driven by one process (nccl-tests ``-g``;
    ``None``: a user's log's ``nGpus``, else 1)."""

    workers: int | None
    gpus_per_node: int | None
    intra: str
    inter: str = "ib-hdr"
    nics_per_node: int = 1
    collective: str | None = None
    nccl: str | None = None
    algorithm: str = "auto"
    gpus_per_process: int | None = 1


@dataclass(frozen=True)
class ReferenceLog:
    """A reference log: its cluster (None: not predicted), whether it is scored, and where
    each setting comes from (or why it is not scored)."""

    log_id: str
    cluster: LogCluster | None
    scored: bool
    why: str


_LOGS_CSV = "logs.csv"
_MULTI = "multinode_logs.csv"
REFERENCE_LOGS: dict[str, ReferenceLog] = {r.log_id: r for r in (
    ReferenceLog(
        "konnase_dgx1like_v100x8", LogCluster(8, 8, "nvlink2", collective="allreduce",
                                              nccl="2.4", gpus_per_process=8), True,
        f"{_LOGS_CSV}: ranks 8, nodes 1, intra_link NVLink2 hybrid cube-mesh -> nvlink2; "
        "nccl_version 'not stated' -> the newest modelled release tagged before the post's "
        "front matter 'date: 2019-09-26' (raw NCCL.md) = 2.4 (v2.4.2-1, 2018-12-13); "
        "procs_x_gpus '1 proc x -g 8' -> 8 GPUs per process"),
    *(ReferenceLog(
        f"sheffield_bessemer_v100pcie_x4_{tag}",
        LogCluster(4, 4, "pcie3", collective="allreduce", nccl=key, gpus_per_process=4), True,
        f"{_LOGS_CSV}: ranks 4, nodes 1, intra_link PCIe gen3 -> pcie3; nccl_version {ver} "
        f"-> {key} (the newest modelled release not newer); procs_x_gpus '1 proc x -g 4'")
      for tag, ver, key in (("nccl283_cu111", "2.8.3", "2.7"), ("nccl283_cu110", "2.8.3", "2.7"),
                            ("nccl242_cu101", "2.4.2", "2.4"))),
    ReferenceLog(
        "sheffield_stanage_a100sxm4_x4", LogCluster(4, 4, "nvlink3", collective="allreduce",
                                                    nccl="2.12", gpus_per_process=4), True,
        f"{_LOGS_CSV}: ranks 4, nodes 1, intra_link NVLink3 -> nvlink3; nccl_version 'NCCL "
        "2.12.x ... (inferred, unverified)' -> 2.12; procs_x_gpus '1 proc x -g 4'"),
    ReferenceLog(
        "coreweave_a100_128rank_ib_sharp",
        LogCluster(128, 8, "nvlink3", "ib-hdr", 8, "allreduce", "2.12"), True,
        f"{_MULTI}: ranks 128, gpus_per_node 8, intra_link NVSwitch (A100 HGX) -> nvlink3; "
        "inter_link 'HDR 200G per GPU rail (inferred)' -> ib-hdr, 8 NICs per node; "
        "nccl_version 'NCCL 2.12.x (inferred)' -> 2.12; SHARP off: the job the README runs "
        "(nccl-test-distributed-128-las1-mpijob.yaml at a0cb1a67) sets no "
        "NCCL_COLLNET_ENABLE, and NCCL 2.12 enables CollNet only when it is 1 (src/init.cc); "
        "the SHARP group lines of the log come from the SHARP library, not from NCCL's "
        "choice; procs_x_gpus '128 procs x -g 1'"),
    ReferenceLog(
        "coreweave_h100_64rank_ib_sharp",
        LogCluster(64, 8, "nvlink4", "ib-ndr,sharp", 8, "allreduce", "2.18",
                   "nccl-collnet-chain"), True,
        f"{_MULTI}: ranks 64, gpus_per_node 8, intra_link NVSwitch (HGX H100) -> nvlink4; "
        "inter_link 'NDR 400G (inferred)' -> ib-ndr; the manifest the README block came with "
        "(nccl-test-distributed-h100-64-sharp-las1-mpijob.yaml at fb4787c, the commit that "
        "added the block): image ...-nccl2.18.1-... -> 2.18, NCCL_COLLNET_ENABLE=1 -> SHARP "
        "on (,sharp), NCCL_ALGO=COLLNETCHAIN -> nccl-collnet-chain forced, "
        "UCX_NET_DEVICES=ibp0..ibp7 -> 8 NICs per node; -np 64 -g 1"),
    ReferenceLog(
        "unknown_h100_2node_x16_8hca",
        LogCluster(16, 8, "nvlink4", "ib-ndr", 8, "allreduce"), True,
        f"{_MULTI}: ranks 16, nodes 2, gpus_per_node 8, intra_link NVSwitch (HGX H100) -> "
        "nvlink4; inter_link '8 HCAs/node listed in NCCL_IB_HCA (stated); speed/type not "
        "stated' -> 8 NICs per node, ib-ndr assumed (the HGX H100 NIC); nccl_version 'not "
        "printed' and no date -> the newest modelled release; SHARP off (the printed mpirun "
        "line sets no NCCL_COLLNET_ENABLE); '-np 16 ... -g 1'"),
    ReferenceLog(
        "unknown_a100pcie_x4_sys",
        LogCluster(4, 4, "pcie4-sys", collective="allreduce", gpus_per_process=4), True,
        f"{_MULTI}: ranks 4, nodes 1, intra_link 'PCIe only, all pairs SYS' -> pcie4-sys "
        "(A100 PCIe is gen4; SYS crosses the CPU sockets); nccl_version 'not printed' and no "
        "date -> the newest modelled release; procs_x_gpus '1 proc x -g 4'"),
    *(ReferenceLog(f"coreweave_gb200_nvl72_{n}rank", None, False,
                   f"{_MULTI}: GB200 NVL72 (quality_flag 'extra (GB200)'): an NVLink5 domain "
                   "spanning a rack, no board preset models it")
      for n in (72, 144, 1440)),
    ReferenceLog(
        "unknown_nig_v100_2node_x4_alltoall", None, False,
        f"{_MULTI}: collective 'alltoall' (not all-reduce; all-to-all is outside NCCL's "
        "tuning model) and inter_link 'not stated'"),
    ReferenceLog(
        "issue293_a100pcie_2node_hdr_gdr",
        LogCluster(2, 1, "pcie4", "ib-hdr", 1, "allreduce", "2.18"), False,
        f"{_MULTI}: quality_flag 'ANOMALOUS (misconfigured host) - use only as negative "
        "example'; predicted for reference (2 nodes x 1 A100 PCIe, 1 HDR NIC each, "
        "nccl_version 2.21.5 -> 2.18), not scored"),
)}


def _points(text: str) -> dict[str, list[tuple[int, float]]]:
    import io

    out: dict[str, list[tuple[int, float]]] = {}
    for r in csv.DictReader(io.StringIO(text, newline="")):
        out.setdefault(r["log_id"], []).append((int(r["size_B"]), float(r["oop_time_us"])))
    return out


def _shared_points(name: str) -> tuple[str | None, str | None]:
    """(text of a developer-local points file, None), or (None, why it is not evaluated):
    no source checkout, absent, larger than SHARED_MAX_BYTES, or not the pinned bytes (read
    once, then hashed)."""
    import hashlib

    if SHARED is None:
        return None, (f"the unlicensed logs ({name}) are not shipped: they are evaluated only "
                      f"in a source checkout with ../{SHARED_NAME} beside it")
    path = SHARED / name
    if not path.is_file():
        return None, f"{path} absent: its unlicensed logs are not evaluated"
    with open(path, "rb") as fh:
        data = fh.read(SHARED_MAX_BYTES + 1)
    if hashlib.sha256(data).hexdigest() != POINT_FILES[name]:
        return None, (f"{path} is not the copy the evaluation was registered with (sha256 "
                      f"{POINT_FILES[name][:12]}...): its logs are not evaluated")
    return data.decode("utf-8"), None


def reference_points() -> tuple[dict[str, tuple[str, list[tuple[int, float]]]], list[str]]:
    """log_id -> (source, [(bytes, measured out-of-place us)]): the shipped sweeps, then the
    unlicensed ones of ``../shared`` when present and pinned (with a note when not)."""
    shipped = (SHIPPED / "allreduce_points.csv").read_text(encoding="utf-8")
    logs = {k: (f"shipped {SHIPPED.name}/allreduce_points.csv", v)
            for k, v in _points(shipped).items()}
    notes = []
    for name in POINT_FILES:
        text, why = _shared_points(name)
        if text is None:
            notes.append(str(why))
            continue
        for k, v in _points(text).items():
            logs.setdefault(k, (f"{SHARED}/{name} (not shipped)", v))
    return logs, notes
