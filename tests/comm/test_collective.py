"""dgtraces collective: NCCL's tuning model (comm/nccl.py), the collective API
(comm/collective_time.py) and its typed errors. The evaluation on nccl-tests logs
(validate-comm) is tested in tests/evaluation/test_comm_validation.py."""

import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.comm import nccl
from dgtraces.comm.collective_time import parse_sizes, predict_collective
from dgtraces.errors import DgtracesError
from tests.paths import FIXTURES

AR = FIXTURES / "nccl_tests" / "all_reduce_perf_8xh100.log"
GIB = 1 << 30


ISSUE25 = nccl.ISSUE25  # --nccl 2.7 --nccl-time tuning: issue #25's model, unchanged


def topo(ranks=4, nodes=1, intra="pcie3", nic="ib-hdr", nics=1):
    return nccl.Topology(ranks, nodes, nccl.FABRICS[intra], nccl.FABRICS[nic], nics)


def test_tables_by_hand_one_pcie_node():
    ar, t = nccl.KINDS["allreduce"], topo()
    # ring Simple: bus 12 GB/s x 4/6 ranks/steps; latency 8.4 + 6 steps x 5.7 us (PCI)
    assert nccl.time_us(ar, t, 64 << 20, "ring", "Simple", ISSUE25) == pytest.approx(
        8.4 + 6 * 5.7 + (64 << 20) / (1000 * 8.0))
    # ring LL: bus / 4; latency 3.6 + 6 x 1.0; chosen for 8 bytes
    assert nccl.choose(ar, t, 8, m=ISSUE25) == (pytest.approx(3.6 + 6 + 8 / 2000), "ring",
                                                "LL")
    assert nccl.choose(ar, t, GIB, m=ISSUE25)[1:] == ("ring", "Simple")
    assert ("ring", "LL128") not in nccl.candidates(ar, t, m=ISSUE25)  # LL128 needs NVLink


def test_ll128_and_the_a100_cap():
    ar, t = nccl.KINDS["allreduce"], topo(intra="nvlink3")
    assert ("ring", "LL128") in nccl.candidates(ar, t, m=ISSUE25)
    # 12 x 20 = 240 GB/s capped at 235 for compute capability 8.0
    assert nccl.time_us(ar, t, GIB, "ring", "Simple", ISSUE25) == pytest.approx(
        8.4 + 6 * 3.4 + GIB / (1000 * 235 * 4 / 6))


def test_nics_per_node_carry_the_inter_node_bandwidth():
    ar = nccl.KINDS["allreduce"]
    one = topo(16, 2, "nvlink3", "ib-hdr", 1)
    eight = topo(16, 2, "nvlink3", "ib-hdr", 8)
    assert (one.bus_gb_s, eight.bus_gb_s) == (pytest.approx(24.0), pytest.approx(192.0))
    t1, t8 = nccl.choose(ar, one, GIB, m=ISSUE25)[0], nccl.choose(ar, eight, GIB, m=ISSUE25)[0]
    assert t1 / t8 == pytest.approx(8.0, rel=0.02)
    # several nodes: tree is a choice for all-reduce, never for all-gather
    assert ("tree", "Simple") in nccl.candidates(ar, eight, m=ISSUE25)
    assert all(a == "ring" for a, _ in nccl.candidates(nccl.KINDS["allgather"], eight,
                                                       m=ISSUE25))


def test_busbw_follows_nccl_tests_factors():
    res = predict_collective("allgather", [GIB], workers=8, gpus_per_node=8, intra="nvlink3")
    row = res.rows[0]
    assert row.algbw_gb_s == pytest.approx(GIB / row.time_us / 1000)
    assert row.busbw_gb_s == pytest.approx(row.algbw_gb_s * 7 / 8)
    assert res.links["intra"]["link"] == "nvlink3" and "topo.h" in res.links["intra"]["source"]
    assert res.nccl == nccl.DEFAULT_VERSION and res.nccl_time == "run"


def test_todays_algorithms_stay_available():
    res = predict_collective("allreduce", [1 << 20], workers=8, gpus_per_node=4,
                             intra="pcie3", inter="10gbe", algorithm="ring", release=None)
    assert res.rows[0].algorithm == "ring" and res.rows[0].protocol == "-"
    assert res.links["inter"]["link"] == "10gbe-nccl"


def test_sizes_with_units():
    assert parse_sizes("8, 64KiB,1M,2GiB") == (8, 65536, 1 << 20, 2 * GIB)


@pytest.mark.parametrize("kw, code", [
    (dict(collective="allgathr"), "BAD_INPUT"),
    (dict(intra="nvlnk3"), "UNKNOWN_LINK"),
    (dict(intra="ib-hdr"), "UNKNOWN_LINK"),  # a NIC is not a board
    (dict(inter="nvlink3"), "UNKNOWN_LINK"),
    (dict(workers=12), "BAD_INPUT"),  # not a multiple of 8 GPUs per node
    (dict(nics_per_node=0), "BAD_INPUT"),
    (dict(nics_per_node=33), "BAD_INPUT"),
    (dict(algorithm="nccl-tree", collective="allgather"), "BAD_INPUT"),
    (dict(algorithm="nccl-pat"), "BAD_INPUT"),  # PAT: all-gather / reduce-scatter only
    (dict(nccl="2.8"), "UNKNOWN_NCCL"),
    (dict(nccl_time="fast"), "BAD_INPUT"),
    (dict(inter="100gbe-roce,sharp"), "UNSUPPORTED_HARDWARE"),
    (dict(inter="ethernet:50gbps,sharp"), "UNSUPPORTED_HARDWARE"),
    (dict(inter="ethernt:50gbps"), "UNKNOWN_LINK"),
    (dict(inter="ethernet:fast"), "BAD_INPUT"),
    (dict(inter="ib-ndr,shrp"), "BAD_INPUT"),
    (dict(algorithm="nccl-nvls"), "UNSUPPORTED_HARDWARE"),  # nvlink3: no NVLS
    (dict(algorithm="nccl-collnet-chain"), "UNSUPPORTED_HARDWARE"),  # no SHARP
    (dict(algorithm="nccl-collnet-chain", inter="ib-hdr,sharp", nccl="2.12"),
     "UNSUPPORTED_HARDWARE"),  # 2.12 has one CollNet, not chain
    (dict(inter="ib-hdr,sharp", nccl="2.4"), "UNSUPPORTED_HARDWARE"),  # no CollNet in 2.4
    (dict(algorithm="ring", collective="broadcast"), "BAD_INPUT"),
    (dict(algorithm="magic"), "BAD_INPUT"),
])
def test_bad_input_is_typed(kw, code):
    args = dict(collective="allreduce", workers=16, gpus_per_node=8, intra="nvlink3",
                inter="ib-hdr", nics_per_node=1, algorithm="auto")
    args.update(kw)
    coll = args.pop("collective")
    with pytest.raises(DgtracesError) as exc:
        predict_collective(coll, [8], **args)
    assert exc.value.code == code


def test_unknown_names_get_a_did_you_mean():
    with pytest.raises(DgtracesError) as exc:
        nccl.kind("allgathr")
    assert exc.value.failures[0].found == "'allgathr'"
    assert "alltoall" in exc.value.failures[0].expected.split(" | ")
    assert nccl.closest("allgathr", nccl.KINDS) == "allgather"
    with pytest.raises(DgtracesError) as exc:
        predict_collective("allreduce", [8], workers=8, nccl="2.81")
    assert exc.value.code == "UNKNOWN_NCCL" and "did you mean '2.18'" in str(exc.value)
    assert exc.value.failures[0].expected.split(" | ") == ["2.4", "2.7", "2.12", "2.18", "2.30"]
    assert nccl.closest("nvlnk3", nccl.FABRICS) == "nvlink3"
    assert nccl.closest("zzz", nccl.KINDS) is None


@pytest.mark.parametrize("size", ["0", "-1", "1.5", "8XB", "2TiB"])
def test_bad_sizes(size):
    with pytest.raises(DgtracesError) as exc:
        parse_sizes(size)
    assert exc.value.code == "BAD_INPUT"


def test_cli_json_and_table():
    res = CliRunner().invoke(main, ["collective", "--workers", "16", "--gpus-per-node", "8",
                                    "--nics-per-node", "8", "--sizes", "8,1MiB,1GiB",
                                    "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert [r["message_bytes"] for r in out["rows"]] == [8, 1 << 20, GIB]
    assert set(out["rows"][0]) == {"message_bytes", "time_us", "algbw_gb_s", "busbw_gb_s",
                                   "algorithm", "protocol"}
    assert out["nccl"] == nccl.DEFAULT_VERSION and out["nccl_time"] == "run"
    assert out["rows"][0]["protocol"] == "LL" and out["rows"][2]["protocol"] == "Simple"
    assert out["links"]["inter"]["link"] == "ib-hdr"
    text = CliRunner().invoke(main, ["collective", "--sizes", "1MiB"])
    assert text.exit_code == 0
    row = [line for line in text.output.splitlines() if not line.startswith("#")]
    assert row[0].split()[:3] == ["1048576", "262144", "float"]


@pytest.mark.parametrize("args, code", [
    (["collective", "--collective", "allgathr"], "BAD_INPUT"),
    (["collective", "--inter", "ib-hrd"], "UNKNOWN_LINK"),
    (["collective", "--intra", "nvlnk3"], "UNKNOWN_LINK"),
    (["collective", "--workers", "12", "--gpus-per-node", "8"], "BAD_INPUT"),
    (["collective", "--workers", "16", "--nics-per-node", "33"], "BAD_INPUT"),
    (["collective", "--nics-per-node", "0"], "BAD_INPUT"),
    (["validate-comm", "{empty}", "--intra", "nvlink3"], "EMPTY"),
    (["validate-comm", "{ambiguous}", "--intra", "pcie3"], "BAD_INPUT"),
])
def test_bad_input_on_the_cli_is_a_typed_error_without_traceback(tmp_path, args, code):
    # #25 Bad input, through the command line: exit 1, the code printed, no traceback
    empty = tmp_path / "empty.log"
    empty.write_text("")
    ambiguous = tmp_path / "two.log"  # 2 ranks, no root column, redop sum, busbw = algbw
    ambiguous.write_text("\n".join(
        ["# nThread 1 nGpus 2 minBytes 1048576 maxBytes 2097152 step: 2(factor) iters: 20",
         "# Using devices",
         "#   Rank  0 Pid 1 on h device  0 [0x3d] Tesla V100-PCIE-32GB",
         "#   Rank  1 Pid 1 on h device  1 [0x3e] Tesla V100-PCIE-32GB",
         "#       size         count    type   redop     time   algbw   busbw  error     time   "
         "algbw   busbw  error",
         "     1048576        262144   float     sum    100.0   10.49   10.49  0e+00    100.0   "
         "10.49   10.49  0e+00",
         "     2097152        524288   float     sum    200.0   10.49   10.49  0e+00    200.0   "
         "10.49   10.49  0e+00"]) + "\n")
    args = [a.format(empty=empty, ambiguous=ambiguous) for a in args]
    out = subprocess.run([sys.executable, "-m", "dgtraces", *args], capture_output=True,
                         text=True)
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"error [{code}]" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_broadcast_and_allgather_latency_by_hand():
    t = topo(8, 1, "nvlink2")
    # broadcast Simple, one node, not sameChannels: base 8.4 + 8 steps x tree Simple hop 28
    assert nccl.time_us(nccl.KINDS["broadcast"], t, 0.0, "ring", "Simple",
                        ISSUE25) == pytest.approx(8.4 + 8 * 28.0)
    # all-gather LL: 7 steps x NVLink ring LL hop .47; bus 120 / 3 (not all-reduce)
    ag = nccl.KINDS["allgather"]
    assert nccl.time_us(ag, t, 1 << 20, "ring", "LL", ISSUE25) == pytest.approx(
        3.6 + 7 * 0.47 + (1 << 20) / (1000 * 40.0 * 8 / 7))
    assert nccl.kind("reduce_scatter") is nccl.KINDS["reducescatter"]


@pytest.mark.parametrize("intra,inter,workers,gpn,nics", [
    ("nvlink3", "ib-hdr", 16, 8, 4), ("pcie3", "10gbe-nccl", 8, 2, 1),
    ("nvlink2", "ib-edr", 8, 8, 1), ("nvlink4", "400gbe-roce", 64, 8, 8)])
@pytest.mark.parametrize("forced", ["auto", "ring", "tree"])
@pytest.mark.parametrize("m", [nccl.ISSUE25, nccl.Model()], ids=["2.7-tuning", "newest-run"])
def test_vectorised_nccl_cost_equals_the_scalar_choice(intra, inter, workers, gpn, nics,
                                                       forced, m):
    t = nccl.Topology(workers, -(-workers // gpn), nccl.fabric(intra, "intra"),
                      nccl.fabric(inter, "inter"), nics)
    sizes = np.unique(np.concatenate([2.0 ** np.arange(0, 34), [3, 100, 127, 129, 5e5,
                                                                 3.3e7, 1.7e8, 0]]))
    vec = nccl.allreduce_ms(t, sizes, forced, m)
    for n, v in zip(sizes, vec, strict=True):
        assert v == pytest.approx(nccl.choose(nccl.KINDS["allreduce"], t, n, forced, m)[0]
                                  / 1000.0, rel=1e-12, abs=0.0)
    assert vec[sizes == 0][0] == 0.0


@pytest.mark.parametrize("inter", ["efa-p5", "efa-p4d"])
def test_the_text_output_says_where_the_achieved_bandwidth_comes_from(inter):
    """Acceptance review #10: the JSON's achieved_source ('line rate assumed' for efa-p5)
    was missing from the text output of collective and predict."""
    args = ["--workers", "16", "--intra", "nvlink4", "--inter", inter]
    out = json.loads(CliRunner().invoke(main, ["collective", *args, "--json"]).output)
    source = out["links"]["inter"]["achieved_source"]
    text = CliRunner().invoke(main, ["collective", *args]).output
    assert source in " ".join(text.split())
    pred = CliRunner().invoke(main, ["predict", "--model", "resnet50", "--device", "v100",
                                     "--batch-size", "64", "--gpus-per-node", "8", *args])
    assert pred.exit_code == 0, pred.output
    assert source in " ".join(pred.output.split())
