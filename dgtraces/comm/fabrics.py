"""The hardware NCCL's model sees (issue #34): boards (intra-node) and NICs (inter-node), each
declared once in :data:`FABRICS`, plus custom NIC specs (``ethernet:50gbps``,
``ib:400gbps,sharp``, ``PRESET,sharp``).

A board carries its NVLink count and compute capability (its bandwidth under a NCCL release is
``links x`` that release's ``SMxx_NVLINK_BW``, :mod:`.nccl_versions`), whether an NVSwitch
joins its GPUs (CollNet Direct, NVLS), and the issue #25 figure (``bandwidth_gb_s``) that the
2.4/2.7 models use. A NIC carries its line rate (what NCCL's topology reads: Mb/s / 8000), its
kind (``ib``, ``roce``, ``tcp``, ``efa``), a default NIC count (the EFA instance presets),
SHARP, and its achieved bandwidth and latency from ``links.csv`` (cited there; ``line rate
assumed`` where no achieved figure was found). Sources: ``docs/collectives.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from dgtraces.errors import Code, DgtracesError, Failure

TOPO_SOURCE = "NVIDIA/nccl src/graph/topo.h (commit 069a3d4)"
NVLINK_GB_S = {60: 18.0, 70: 20.0, 80: 20.0, 90: 20.6}  # issue #25's SMxx_NVLINK_BW per link
PCI_GB_S = 12.0  # topo.h PCI_BW, gen3 x16
QPI_GB_S = 10.0  # topo.h SKL_QPI_BW (v2.18.6-1): Intel inter-socket link, as NCCL sees it
NET_GB_S_PER_GBIT = 12.0 / 100.0  # topo.h NET_BW 12 for 100 Gbit (issue #25's NIC view)
TCP_EFFICIENCY = 0.60  # NVIDIA/nccl issue #209 (as links.csv)
MAX_NICS_PER_NODE = 32  # topo.h: "up to 32 NICs per node on GB200-NVL72"


@dataclass(frozen=True)
class Fabric:
    """A board (hw ``nvlink``/``pci``) or a NIC (hw ``net``) as NCCL's topology sees it."""

    name: str
    hw: str
    bandwidth_gb_s: float  # issue #25's figure: per GPU (board) or per NIC (net)
    source: str
    compcap: int | None = None
    links: int = 0  # NVLinks per GPU
    nvswitch: bool = False  # an NVSwitch joins every GPU of the node
    path_links: int | None = None  # NVLinks between two GPUs (None: all, NVSwitch)
    line_gbit_s: float = 0.0  # NIC line rate
    kind: str = ""  # NIC kind: ib, roce, tcp, efa
    nics: int | None = None  # NICs per node of an instance preset (EFA)
    sharp: bool = False  # in-network reduction (NCCL CollNet) on this fabric
    custom: bool = False  # a spec, not a preset of links.csv


def _nvlink(name: str, cc: int, links: int, gpu: str, *, nvswitch: bool = False,
            path: int | None = None) -> Fabric:
    return Fabric(name, "nvlink", links * NVLINK_GB_S[cc],
                  f"{links} NVLinks per GPU ({gpu} datasheet) x SM{cc}_NVLINK_BW "
                  f"{NVLINK_GB_S[cc]} GB/s ({TOPO_SOURCE})", cc, links, nvswitch, path)


def _pci(name: str, factor: int, cc: int) -> Fabric:
    return Fabric(name, "pci", PCI_GB_S * factor,
                  f"PCI_BW {PCI_GB_S} GB/s gen3 x16 ({TOPO_SOURCE})"
                  + (f" x {factor} by lane rate (assumed)" if factor > 1 else "")
                  + f"; GPU compute capability {cc / 10:.1f} assumed for the generation", cc)


def _nic(name: str, gbit_s: float, kind: str, spec: str, nics: int | None = None) -> Fabric:
    if kind == "tcp":
        bw, how = gbit_s / 8 * TCP_EFFICIENCY, (f"/ 8 x {TCP_EFFICIENCY} (NCCL over TCP "
                                                 "sockets, NVIDIA/nccl issue #209)")
    else:
        bw, how = gbit_s * NET_GB_S_PER_GBIT, f"x NET_BW 12 GB/s per 100 Gbit ({TOPO_SOURCE})"
    return Fabric(name, "net", bw, f"{spec}: {gbit_s:g} Gb/s {how}", line_gbit_s=gbit_s,
                  kind=kind, nics=nics)


FABRICS: dict[str, Fabric] = {f.name: f for f in (
    _nvlink("nvlink1", 60, 4, "P100 SXM2", path=1),
    _nvlink("nvlink2", 70, 6, "V100 SXM2", path=1),
    _nvlink("nvlink2-link", 70, 1, "V100 SXM2, one link", path=1),
    _nvlink("nvlink3", 80, 12, "A100 SXM4", nvswitch=True),
    _nvlink("nvlink4", 90, 18, "H100 SXM5", nvswitch=True),
    _pci("pcie3", 1, 70), _pci("pcie4", 2, 80), _pci("pcie5", 4, 90),
    Fabric("pcie4-sys", "pci", QPI_GB_S,
           f"PCIe gen4 GPUs on different CPU sockets: SKL_QPI_BW {QPI_GB_S} GB/s (NVIDIA/nccl "
           "v2.18.6-1 src/graph/topo.h; Intel CPU assumed), below the x16 link", 80),
    _nic("ib-fdr", 54.5, "ib", "IBTA 1.3 4x FDR"), _nic("ib-edr", 100, "ib", "IBTA 1.3 4x EDR"),
    _nic("ib-hdr", 200, "ib", "IBTA 1.4 4x HDR"), _nic("ib-ndr", 400, "ib", "IBTA 1.5 4x NDR"),
    _nic("ib-xdr", 800, "ib", "IBTA 1.7 4x XDR"),
    _nic("100gbe-roce", 100, "roce", "IEEE 802.3ba/bj 100GBASE, RoCE"),
    _nic("200gbe-roce", 200, "roce", "IEEE 802.3bs 200GBASE, RoCE"),
    _nic("400gbe-roce", 400, "roce", "IEEE 802.3bs 400GBASE, RoCE"),
    _nic("10gbe-nccl", 10, "tcp", "IEEE 802.3ae 10GBASE"),
    _nic("25gbe-nccl", 25, "tcp", "IEEE 802.3by"),
    _nic("50gbe-tcp", 50, "tcp", "IEEE 802.3cd 50GBASE"),
    _nic("100gbe-tcp", 100, "tcp", "IEEE 802.3ba/bj 100GBASE"),
    _nic("200gbe-tcp", 200, "tcp", "IEEE 802.3bs 200GBASE"),
    _nic("efa-p3dn", 100, "efa", "AWS EFA, p3dn.24xlarge: 1 x 100 Gb/s", 1),
    _nic("efa-p4d", 100, "efa", "AWS EFA, p4d.24xlarge: 4 x 100 Gb/s", 4),
    _nic("efa-p5", 100, "efa", "AWS EFA, p5.48xlarge: 32 x 100 Gb/s", 32))}

# custom NIC specs: kind -> (NIC kind, preset whose achieved efficiency and latency it takes)
SPEC_KINDS = {"ethernet": ("tcp", "100gbe-tcp"), "tcp": ("tcp", "100gbe-tcp"),
              "roce": ("roce", "100gbe-roce"), "ib": ("ib", "ib-hdr"),
              "infiniband": ("ib", "ib-hdr"), "efa": ("efa", "efa-p3dn")}
SHARP = "sharp"
_RATE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(g|gb|gbps|gbit|gbit/s|gb/s)\s*", re.IGNORECASE)


def unknown(what: str, name: object, known, code: Code = Code.BAD_INPUT) -> DgtracesError:
    """A typed error for an unknown name: the known ones and the closest (did you mean)."""
    from dgtraces.errors import suggestions

    known = sorted(known)
    close = next(iter(suggestions(str(name), known, n=1)), None)
    hint = f"; did you mean {close!r}?" if close else ""
    return DgtracesError(f"unknown {what} {name!r}{hint} known: {', '.join(known)}", code=code,
                         failures=[Failure(code, f"unknown {what}", column=what,
                                           expected=" | ".join(known), found=repr(name))])


def unsupported(what: str, reason: str, found: object) -> DgtracesError:
    """UNSUPPORTED_HARDWARE: ``what`` cannot run here, and why."""
    return DgtracesError(f"{what}: {reason}", code=Code.UNSUPPORTED_HARDWARE,
                         failures=[Failure(Code.UNSUPPORTED_HARDWARE, reason, column=what,
                                           expected="hardware that runs it",
                                           found=repr(found))])


def _with_sharp(f: Fabric, text: str) -> Fabric:
    if f.kind != "ib":
        raise unsupported("inter", f"SHARP reduces in InfiniBand (Quantum) switches; {f.name} "
                          f"is {f.kind or f.hw}", text)
    return replace(f, name=f"{f.name},{SHARP}", sharp=True,
                   source=f"{f.source}; SHARP (NCCL CollNet) in the switches")


MAX_GBIT = 1e5  # a custom NIC's rate: 100 Tb/s at most


def _spec(text: str) -> Fabric:
    kind_text, _, rate_text = text.partition(":")
    kind = kind_text.strip().lower()
    if kind not in SPEC_KINDS:
        raise unknown("NIC kind", kind_text, SPEC_KINDS, Code.UNKNOWN_LINK)
    m = _RATE.fullmatch(rate_text)
    if m is None or not 0 < float(m[1]) <= MAX_GBIT:
        why, expected = (("the rate is not in Gb/s (e.g. ethernet:50gbps, ib:400gbps)",
                          "KIND:RATEgbps") if m is None else
                         (f"the rate must be > 0 and <= {MAX_GBIT:g} Gb/s",
                          f"0 < RATE <= {MAX_GBIT:g}"))
        raise DgtracesError(f"{text!r}: {why}", code=Code.BAD_INPUT, failures=[Failure(
            Code.BAD_INPUT, "bad NIC rate", column="inter", expected=expected,
            found=repr(text))])
    nic_kind, like = SPEC_KINDS[kind]
    gbit = float(m[1])
    name = f"{kind}:{gbit:g}gbps"
    return replace(_nic(name, gbit, nic_kind, f"custom {kind} NIC"), custom=True,
                   source=f"custom {kind} NIC {gbit:g} Gb/s; achieved bandwidth and latency "
                          f"as the {like} preset (links.csv)")


def fabric(name: str, field: str) -> Fabric:
    """The board (``field`` intra) or NIC (inter) of a preset, alias or (inter) custom spec;
    UNKNOWN_LINK with a did-you-mean, UNSUPPORTED_HARDWARE for SHARP off InfiniBand."""
    from dgtraces.comm.links import link_aliases

    text = str(name)
    base, *flags = [x.strip() for x in text.split(",")]
    if field == "inter" and flags:
        if [f.lower() for f in flags] != [SHARP]:
            raise unknown("inter flag", ",".join(flags), (SHARP,), Code.BAD_INPUT)
        return _with_sharp(fabric(base, field), text)
    if field == "inter" and ":" in base:
        return _spec(base)
    target = link_aliases().get(base, (base, ""))[0]
    known = {k: f for k, f in FABRICS.items() if (f.hw == "net") == (field == "inter")}
    if target not in known or flags:
        raise unknown(field, name, known, Code.UNKNOWN_LINK)
    return known[target]



# The NVLink generation of each NVLink GPU of the device registry: the GPU each preset of
# FABRICS is taken from (nvlink1 P100 SXM2, nvlink2 V100 SXM2, nvlink3 A100 SXM4, nvlink4
# H100 SXM5; the H200 SXM keeps the H100's NVLink 4, as the V100-DGXS the V100's).
NVLINK_OF_DEVICE = {"p100": "nvlink1", "v100": "nvlink2", "v100-dgxs-32gb": "nvlink2",
                    "a100": "nvlink3", "h100": "nvlink4", "h200": "nvlink4"}


def check_nvlink_alias(device: str | None, intra) -> None:
    """BAD_INPUT when a bare alias names another GPU's NVLink than ``device``'s: ``nvlink``
    is the V100's NVLink 2 (link_aliases.csv, as in v0.3), so ``--device a100 --intra
    nvlink`` modelled an A100 on V100 links; the error names the device's own preset (#36
    trial). A preset named in full (``nvlink2``) is taken as given. ``intra``: preset names
    (or Links, ignored)."""
    from dgtraces.comm.links import link_aliases
    from dgtraces.values import bad_value

    native = NVLINK_OF_DEVICE.get(str(device).lower()) if device else None
    for name in intra:
        if not isinstance(name, str) or name not in link_aliases():
            continue
        target = link_aliases()[name][0]
        if native is not None and target in FABRICS and FABRICS[target].hw == "nvlink" \
                and target != native:
            gpu = next(d for d, link in NVLINK_OF_DEVICE.items() if link == target)
            raise bad_value("intra", f"'{name}' is the {gpu}'s NVLink ({target}), not the "
                            f"{device}'s ({native}): give --intra {native}",
                            f"{native} (the {device}'s NVLink)", name)

def default_nics(inter: object, nics: int | None) -> int:
    """``--nics-per-node``: as given, else the NIC preset's count (EFA instances), else 1."""
    if nics is not None:
        return nics
    try:
        return fabric(str(inter), "inter").nics or 1
    except DgtracesError:
        return 1


UNUSED_NIC = Fabric("unused", "net", 0.0, "one node: no network is crossed")


def nic(name: str, nodes: int) -> Fabric:
    """The NIC of ``name``; on one node any inter preset (even a board) reads as unused."""
    if nodes > 1:
        return fabric(name, "inter")
    try:
        return fabric(name, "inter")
    except DgtracesError:
        return UNUSED_NIC


def nic_link(f: Fabric):
    """The alpha-beta :class:`~.links.Link` of a NIC: its links.csv preset (achieved
    bandwidth, latency; no NIC preset is replaced by a release's fits), a custom spec's kind
    preset at the spec's rate."""
    from dgtraces.comm.links import Link, get_link

    if not f.custom:
        return get_link(f.name.split(",")[0], field="inter", use_store=False)
    like = get_link(SPEC_KINDS[f.name.split(":")[0]][1], field="inter", use_store=False)
    ref = FABRICS[like.name]
    bw = like.bandwidth_gb_s * f.line_gbit_s / ref.line_gbit_s
    return Link(f.name, like.alpha_us, bw, "published",
                f"{f.source}: {like.bandwidth_gb_s:g} GB/s x {f.line_gbit_s:g}/"
                f"{ref.line_gbit_s:g} Gb/s ({like.source})")


def link_or_spec(name, field: str, **kw):
    """:func:`~.links.get_link`, plus custom NIC specs and ``,sharp`` (the alpha-beta models
    ignore SHARP: a ring over the NIC's achieved figures)."""
    from dgtraces.comm.links import get_link

    if field == "inter" and isinstance(name, str) and ("," in name or ":" in name):
        link = nic_link(fabric(name, "inter"))
        return get_link(link, field=field, alpha_us=kw.get("alpha_us"), gbps=kw.get("gbps"))
    return get_link(name, field=field, **kw)
