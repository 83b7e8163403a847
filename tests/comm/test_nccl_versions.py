"""Issue #34: NCCL releases (comm/nccl_versions.py, comm/nccl_tuning.py), run-time terms
(comm/nccl_run.py) and fabrics (comm/fabrics.py): values by hand from NCCL's source."""

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.cli.options import inter_list
from dgtraces.comm import nccl, nccl_run, nccl_tuning
from dgtraces.comm.fabrics import FABRICS, default_nics, fabric, link_or_spec
from dgtraces.comm.nccl_versions import (
    DEFAULT_VERSION,
    VERSIONS,
    version,
    version_for_date,
    version_for_release,
)
from dgtraces.errors import DgtracesError

AR = nccl.KINDS["allreduce"]
GIB = 1 << 30


def topo(ranks, nodes, intra, inter="ib-hdr", nics=1):
    return nccl.Topology(ranks, nodes, fabric(intra, "intra"), nccl.nic(inter, nodes), nics)


def tuning(key):
    return nccl.Model(version(key), "tuning")


def test_registry_entries_cite_a_tag_and_commit():
    assert list(VERSIONS) == ["2.4", "2.7", "2.12", "2.18", "2.30"]
    assert DEFAULT_VERSION == "2.30" and nccl.Model().version.key == "2.30"
    for v in VERSIONS.values():
        assert re.fullmatch(r"[0-9a-f]{40}", v.commit) and v.tag.startswith(f"v{v.key}.")
        assert {"tree", "ring"} <= set(v.algorithms) and v.source.startswith("NVIDIA/nccl")
        assert set(v.base_lat) == set(v.algorithms) == set(v.hw_lat["net"])


@pytest.mark.parametrize("text, key", [("2.18", "2.18"), ("2.18.3", "2.18"),
                                       ("v2.12.12-1", "2.12"), (None, "2.30"),
                                       ("latest", "2.30")])
def test_version_names(text, key):
    assert version(text).key == key


def test_unknown_version_lists_the_known_and_a_did_you_mean():
    with pytest.raises(DgtracesError) as exc:
        version("2.8")
    assert exc.value.code == "UNKNOWN_NCCL"
    assert exc.value.failures[0].expected == "2.4 | 2.7 | 2.12 | 2.18 | 2.30"
    assert version_for_release("2.8.3").key == "2.7"
    assert version_for_release("2.21.5").key == "2.18"
    assert version_for_date("2019-09-26").key == "2.4"


def test_2_18_ring_ll_on_one_h100_node_by_hand():
    t = topo(8, 1, "nvlink4")
    # graph: 18 x 20 GB/s = 360; SM90 speed 60 -> 6 channels = 360, doubled (60 >= 50):
    # 12 x 30. Ring LL: min(llMaxBws Hopper one node 87.7, 360 / 4) x 8/14; latency
    # baseLat 6.6 + 14 steps x NVLink ring LL hop 0.6
    g = nccl_tuning.graph(version("2.18"), t)
    assert (g.channels, g.bw, g.comm_channels) == (12, 30.0, 24)
    assert nccl.time_us(AR, t, 8, "ring", "LL", tuning("2.18")) == pytest.approx(
        6.6 + 14 * 0.6 + 8 / (1000 * 87.7 * 8 / 14))


def test_releases_differ_where_their_source_does():
    t = topo(8, 1, "nvlink4")
    pairs = {k: set(nccl.candidates(AR, t, m=tuning(k))) for k in VERSIONS}
    assert ("nvls", "Simple") in pairs["2.18"] and ("nvls", "Simple") in pairs["2.30"]
    assert not any(a.startswith("nvls") for a, _ in pairs["2.12"] | pairs["2.7"])
    assert ("ring", "LL128") not in pairs["2.4"]  # no LL128 before 2.5
    assert ("ring", "LL128") not in pairs["2.12"]  # 2.12: LL128 on cc 7.0 / 8.0 only
    # no NVLS off an NVSwitch Hopper board
    assert not any(a.startswith("nvls") for a, _ in nccl.candidates(AR, topo(8, 1, "nvlink3")))


def test_2_4_picks_by_thresholds():
    m = tuning("2.4")
    # 2 nodes: tree bandwidth 3/4 x 2 of the ring's, above it: tree for every size
    two = topo(16, 2, "nvlink2", "ib-edr")
    assert nccl.choose(AR, two, GIB, m=m)[1:] == ("tree", "Simple")
    # 4 nodes: treeThreshold = 5000 x 3750 / 1250 x (6 x 31 - (15 x 2 + 4 x 7)) = 1.92 MB
    four = topo(32, 4, "nvlink2", "ib-edr")
    assert nccl.choose(AR, four, 8, m=m)[1:] == ("tree", "LL")
    assert nccl.choose(AR, four, 1.9e6, m=m)[1] == "tree"
    assert nccl.choose(AR, four, 1.93e6, m=m)[1] == "ring"
    assert nccl.choose(AR, four, GIB, m=m)[1:] == ("ring", "Simple")
    assert nccl.choose(AR, topo(8, 1, "nvlink2"), 8, m=m)[1] == "ring"  # no tree on one node


def test_sharp_collnet_and_nvls_need_their_hardware():
    t = topo(64, 8, "nvlink4", "ib-ndr,sharp", 8)
    algos = {a for a, _ in nccl.candidates(AR, t, m=tuning("2.18"))}
    assert {"collnet-direct", "collnet-chain", "nvls", "nvls-tree"} <= algos
    plain = {a for a, _ in nccl.candidates(AR, topo(64, 8, "nvlink4", "ib-ndr", 8),
                                           m=tuning("2.18"))}
    assert "nvls" not in plain and not plain & set(nccl_tuning.COLLNET)  # no SHARP
    assert "nvls-tree" in plain
    with pytest.raises(DgtracesError) as exc:
        fabric("400gbe-roce,sharp", "inter")
    assert exc.value.code == "UNSUPPORTED_HARDWARE"
    with pytest.raises(DgtracesError) as exc:
        nccl.choose(AR, topo(16, 2, "nvlink3", "ib-hdr"), GIB, "nvls")
    assert exc.value.code == "UNSUPPORTED_HARDWARE" and "NVSwitch" in str(exc.value)


def test_custom_specs_and_efa_presets():
    eth = fabric("ethernet:50gbps", "inter")
    assert (eth.kind, eth.line_gbit_s, eth.custom) == ("tcp", 50.0, True)
    # achieved: 100gbe-tcp's 7.5 GB/s at 100 Gb/s, scaled to 50 Gb/s
    assert link_or_spec("ethernet:50gbps", "inter").bandwidth_gb_s == pytest.approx(3.75)
    ib = fabric("ib:400gbps,sharp", "inter")
    assert ib.sharp and ib.kind == "ib" and ib.line_gbit_s == 400
    assert [default_nics(x, None) for x in ("efa-p3dn", "efa-p4d", "efa-p5", "ib-ndr")] == \
        [1, 4, 32, 1]
    assert default_nics("efa-p4d", 2) == 2
    assert nccl.topology(16, 8, "nvlink3", "efa-p4d", None).nics_per_node == 4
    assert {"ib-xdr", "50gbe-tcp", "200gbe-tcp"} <= set(FABRICS)
    with pytest.raises(DgtracesError) as exc:
        fabric("infiniband:fast", "inter")
    assert exc.value.code == "BAD_INPUT"
    assert inter_list("ib-ndr,sharp,10gbe") == ("ib-ndr,sharp", "10gbe")


def test_run_time_adds_launch_channels_and_achieved_bandwidth():
    t = topo(4, 1, "nvlink3")
    tun, run = tuning("2.12"), nccl.Model(version("2.12"), "run", gpus_per_process=4)
    big = nccl.choose(AR, t, GIB, m=run)
    assert big[1:] == nccl.choose(AR, t, GIB, m=tun)[1:] == ("ring", "Simple")
    # one node, all channels at 1 GiB, a ring has no fill: only the launch of 4 GPUs
    assert big[0] - nccl.choose(AR, t, GIB, m=tun)[0] == pytest.approx(4 * 0.75)
    # small sizes launch fewer channels: floor(n / (nt x threshold)), at least 1
    e = nccl_tuning.Entry("ring", "Simple", 0.0, 1.0)
    g = nccl_tuning.Graph(8, 20.0, 16, 160.0)
    n = np.array([1.0, 512 * 64 * 3.5, 1e9])
    assert nccl_run.launched_channels(t, e, g, n).tolist() == [1, 3, 16]
    # across nodes the NIC's achieved bandwidth (links.csv) replaces its line rate
    t2 = topo(16, 2, "nvlink3", "ib-hdr", 8)
    assert t2.nic_achieved_gb_s == pytest.approx(21.25)
    slow = nccl.choose(AR, t2, GIB, m=nccl.Model(version("2.18"), "run"))[0]
    fast = nccl.choose(AR, t2, GIB, m=tuning("2.18"))[0]
    assert slow > fast


def test_pipeline_fill_of_chunked_algorithms():
    t = topo(8, 1, "nvlink4")
    m = nccl.Model(version("2.18"), "run")
    sizes = np.array([1 << 20, 1 << 26])
    e = next(x for x in nccl_tuning.tune(m.version, AR, t, True) if x.algorithm == "nvls")
    with_fill = nccl_run.run_us(m.version, AR, t, e, sizes)
    g = nccl_tuning.nvls_graph(m.version, t, True)
    lat, bw = nccl_tuning.algo_parts(m.version, AR, t, e, sizes, g.comm_channels)
    no_fill = nccl_run.launch_us(1) + lat + sizes / (1000 * bw)
    # NVLS: 2 stages, one chunk at the channel's speed; 128 KiB shrinks to 64 KiB below
    # 64 x 8 channels x 8 heads chunks (536 MB), to 16 KiB at 1 MiB
    assert with_fill[1] - no_fill[1] == pytest.approx(65536 / (1000 * bw[1] / g.channels))
    assert 0 < with_fill[0] - no_fill[0] < with_fill[1] - no_fill[1]


def test_collective_cli_prints_the_release_per_row_and_in_json():
    args = ["collective", "--nccl", "2.18", "--workers", "16", "--gpus-per-node", "8",
            "--intra", "nvlink4", "--inter", "ib-ndr", "--nics-per-node", "8",
            "--sizes", "8,1MiB,1GiB"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    rows = [x.split() for x in res.output.splitlines() if not x.startswith("#")]
    assert [r[-1] for r in rows] == ["2.18"] * 3 and rows[2][-3:-1] == ["nvls-tree", "Simple"]
    out = json.loads(CliRunner().invoke(main, args + ["--json"]).output)
    assert (out["nccl"], out["nccl_time"]) == ("2.18", "run")
    assert out["links"]["inter"]["achieved_gb_s"] == pytest.approx(42.5)
    for extra in (["--inter", "efa-p4d"], ["--inter", "ib-ndr,sharp"],
                  ["--inter", "ethernet:50gbps"], ["--inter", "ib:400gbps,sharp"]):
        assert CliRunner().invoke(main, args + extra).exit_code == 0, extra


def test_predict_cluster_carries_the_release():
    from dgtraces.predict import Cluster

    c = Cluster(16, 8, "nvlink4", "ib-ndr,sharp", "auto", nics_per_node=8, nccl="2.18")
    d = c.describe()["nccl"]
    assert (d["version"], d["time"]) == ("2.18", "run") and d["inter"]["nics_per_node"] == 8
    assert c.describe()["inter"]["link"] == "ib-ndr"  # the alpha-beta view: achieved preset
    old = Cluster(16, 8, "nvlink4", "ib-ndr", "auto", nccl="2.7", nccl_time="tuning")
    assert old.comm_cost().time_ms(1 << 20) != c.comm_cost().time_ms(1 << 20)
    with pytest.raises(DgtracesError) as exc:
        Cluster(16, 8, "nvlink4", "ib-ndr", "auto", nccl="3.0")
    assert exc.value.code == "UNKNOWN_NCCL"
