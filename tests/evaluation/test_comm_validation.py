"""dgtraces validate-comm: the evaluation of the collective model on nccl-tests logs
(evaluation/comm.py, evaluation/comm_logs.py; issue #34 item 4)."""

import json

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.errors import DgtracesError
from dgtraces.evaluation.comm import REFERENCE_LOGS, SHARED, LogCluster, validate
from dgtraces.evaluation.comm_logs import reference_points
from tests.paths import FIXTURES, REPO

AR = FIXTURES / "nccl_tests" / "all_reduce_perf_8xh100.log"
SCORED = {k for k, r in REFERENCE_LOGS.items() if r.scored}
needs_shared = pytest.mark.skipif(not (SHARED / "multinode_points.csv").is_file(),
                                  reason="no ../shared/reference/nccl-tests beside the clone")


def test_reference_logs_are_declared_once_with_their_sources():
    assert len(SCORED) == 9 and len(REFERENCE_LOGS) == 14
    logs, _ = reference_points()
    shipped = {k for k in logs if k.startswith("sheffield")}
    assert len(shipped) == 4 and all(len(logs[k][1]) == 25 for k in shipped)
    for r in REFERENCE_LOGS.values():  # every setting names the table it comes from
        assert r.why.split(":")[0] in ("logs.csv", "multinode_logs.csv")
    # the pre-registered table of docs/collectives.md carries every log and its reason
    doc = (REPO / "docs" / "collectives.md").read_text()
    assert all(f"| {k} | " in doc and r.why in doc for k, r in REFERENCE_LOGS.items())


def test_issue25_numbers_stay_reachable():
    # issue #25's shipped result: NCCL 2.7's tuning time, 4.9% on the NCCL 2.4.2 sweep
    rep = validate(nccl="2.7", nccl_time="tuning", sharp=False)
    log = next(x for x in rep.logs if x.log_id == "sheffield_bessemer_v100pcie_x4_nccl242_cu101")
    assert log.mape_large == pytest.approx(0.049, abs=0.001)
    assert log.n_large == 8 and log.n_small == 17 and log.nccl == "2.7"


@needs_shared
def test_the_preregistered_headline():
    # run B of docs/collectives.md (each log's declared release, run time); nothing fitted
    rep = validate()
    by = {x.log_id: x for x in rep.logs}
    assert {k for k, x in by.items() if x.scored} == SCORED
    assert by["coreweave_h100_64rank_ib_sharp"].nccl == "2.18"
    assert {p.algorithm for p in by["coreweave_h100_64rank_ib_sharp"].points} == {
        "collnet-chain"}
    assert by["unknown_h100_2node_x16_8hca"].mape_large == pytest.approx(0.029, abs=0.001)
    assert rep.median_large == pytest.approx(0.161, abs=0.001)
    assert rep.max_large == pytest.approx(0.454, abs=0.001)
    assert rep.median_small == pytest.approx(0.262, abs=0.001)
    assert [t.met for t in rep.targets()] == [False, False, True]
    assert {k for k, _ in rep.unscored} == set(REFERENCE_LOGS) - SCORED


def test_validate_a_users_log_and_plot(tmp_path):
    plot = tmp_path / "comm.png"
    res = CliRunner().invoke(main, ["validate-comm", str(AR), "--intra", "nvlink4",
                                    "--nccl", "2.18", "--plot", str(plot), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    (log,) = out["logs"]
    assert (log["collective"], log["workers"], len(log["points"])) == ("allreduce", 8, 28)
    assert log["nccl"] == "2.18" and len(out["targets"]) == 3
    assert plot.stat().st_size > 1000


def test_validate_refuses_empty_or_truncated_logs(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("#  Rank  0 Group  0 Pid 1 on h device  0 [0x07] NVIDIA A100\n")
    with pytest.raises(DgtracesError) as exc:
        validate([str(empty)], LogCluster(None, None, "nvlink3"))
    assert exc.value.code == "EMPTY"
    cut = tmp_path / "cut.log"
    lines = AR.read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if line.strip().startswith("1024 "))
    cut.write_text("\n".join(lines[:i] + [lines[i][:30]]) + "\n")
    with pytest.raises(DgtracesError) as exc:
        validate([str(cut)], LogCluster(None, None, "nvlink3"))
    assert exc.value.code == "BAD_FILE"
    cut.write_text("\n".join(lines[:i]) + "\n")  # cut at a line boundary: the header's sweep
    with pytest.raises(DgtracesError) as exc:
        validate([str(cut)], LogCluster(None, None, "nvlink3"))
    assert exc.value.code == "BAD_FILE"


def test_shipped_points_are_the_shared_rows():
    import csv

    from dgtraces.evaluation.comm import SHIPPED

    if SHARED is None or not SHARED.is_dir():
        pytest.skip("no ../shared/reference/nccl-tests beside the clone")
    with open(SHARED / "allreduce_points.csv", newline="") as fh:
        shared = [r for r in csv.DictReader(fh) if r["log_id"].startswith("sheffield")]
    with open(SHIPPED / "allreduce_points.csv", newline="") as fh:
        assert list(csv.DictReader(fh)) == shared


def test_validate_comm_cli_text():
    res = CliRunner().invoke(main, ["validate-comm", "--per-size"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    heads = [x for x in lines if x.startswith("sheffield_stanage")]
    assert len(heads) == 1 and "nvlink3" in heads[0] and " 2.12 " in heads[0]
    assert sum(1 for x in lines if x.startswith("  ") and " B  measured " in x) >= 100
    assert sum(1 for x in lines if x.startswith("target ")) == 3


def test_the_nccl_help_says_what_the_default_runs():
    """Acceptance review #3: the help said "'latest' = 2.30" while each reference log runs
    its own pre-registered release."""
    from dgtraces.comm.nccl_versions import DEFAULT_VERSION

    res = CliRunner().invoke(main, ["validate-comm", "--nccl", "latest", "--json"])
    ran = {x["nccl"] for x in json.loads(res.output)["logs"]}
    assert ran != {DEFAULT_VERSION}  # the default runs the logs' own releases
    text = " ".join(CliRunner().invoke(main, ["validate-comm", "--help"]).output.split())
    assert f"('latest' = {DEFAULT_VERSION})" not in text


def _sheffield_block(tmp_path, gpus: int, version_line: str | None):
    """The first sweep of the shipped Sheffield V100 page as a log of its own (nGpus set,
    an NCCL INFO version line after the rank lines when given)."""
    raw = (REPO / "dgtraces" / "reference" / "nccl-tests" / "raw" /
           "sheffield_bessemer_v100pcie_x4_cuda.rst").read_text().splitlines()
    start = next(i for i, x in enumerate(raw) if x.strip().startswith("# nThread"))
    end = next(i for i in range(start, len(raw)) if "Avg bus bandwidth" in raw[i])
    lines = [x.strip() for x in raw[start:end + 1]]
    lines[0] = lines[0].replace("nGpus 4", f"nGpus {gpus}")
    if version_line is not None:
        at = max(i for i, x in enumerate(lines) if x.startswith("#   Rank"))
        lines.insert(at + 1, version_line)
    log = tmp_path / f"v100_{gpus}.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def test_a_users_log_supplies_gpus_per_process_and_its_printed_nccl_release(tmp_path):
    """Acceptance review #4: the log's nGpus header and a printed 'NCCL version x.y.z' line
    are used when the options do not give them (the options win)."""
    log = _sheffield_block(tmp_path, 4, "bessemer-node026:1:1 [0] NCCL INFO NCCL version "
                                        "2.8.3+cuda11.1")

    def run(*extra):
        res = CliRunner().invoke(main, ["validate-comm", str(log), "--intra", "pcie3",
                                        "--json", *extra])
        assert res.exit_code == 0, res.output
        return json.loads(res.output)

    read = run()
    pinned = run("--gpus-per-process", "4", "--nccl", "2.7")
    assert read["logs"][0]["nccl"] == "2.7"  # 2.8.3 -> the newest modelled not newer
    assert read["logs"][0]["points"] == pinned["logs"][0]["points"]
    assert len(read["notes"]) == 1
    given = run("--gpus-per-process", "1", "--nccl", "2.4")
    assert given["logs"][0]["nccl"] == "2.4"
    one = run("--gpus-per-process", "1", "--nccl", "2.7")
    assert given["logs"][0]["points"] != pinned["logs"][0]["points"]
    assert one["logs"][0]["points"] != pinned["logs"][0]["points"]  # nGpus 4 was used
    bare = _sheffield_block(tmp_path, 1, None)
    res = CliRunner().invoke(main, ["validate-comm", str(bare), "--intra", "pcie3", "--json"])
    from dgtraces.comm.nccl_versions import DEFAULT_VERSION

    assert json.loads(res.output)["logs"][0]["nccl"] == DEFAULT_VERSION


def test_targets_say_how_many_scored_logs_they_are_over(monkeypatch):
    """Acceptance review #11/#12: without ../shared a target was printed over 4 of the 9
    scored logs without saying so; a log without sizes < 1 MiB printed 'n/a (not met)'."""
    from dgtraces.evaluation import comm, comm_logs

    monkeypatch.setattr(comm_logs, "SHARED", None)
    targets = validate().targets()
    assert [(t.logs, t.of) for t in targets] == [(4, 9)] * 3
    large = [p for p in validate([str(AR)], LogCluster(None, None, "nvlink4")).logs[0].points
             if p.message_bytes >= comm.MIB]
    only = comm.CommReport("auto", "run", [comm.LogResult("big", "-", "allreduce", 8, "nvlink4",
                                                          "-", "2.30", large)])
    small = only.targets()[2]
    assert small.value is None and (small.logs, small.of) == (0, 1)
    res = CliRunner().invoke(main, ["validate-comm"])
    assert res.exit_code == 0 and "(not met)" not in res.output
