"""dgtraces validate-comm: the evaluation of the collective model on nccl-tests logs
(evaluation/comm.py)."""

import json

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.errors import DgtracesError
from dgtraces.evaluation.comm import REFERENCE_CLUSTERS, LogCluster, reference_logs, validate
from tests.paths import FIXTURES

AR = FIXTURES / "nccl_tests" / "all_reduce_perf_8xh100.log"


def test_reference_logs_and_their_clusters():
    logs, _ = reference_logs()
    shipped = {k for k in logs if k.startswith("sheffield")}
    assert len(shipped) == 4 and set(logs) <= set(REFERENCE_CLUSTERS)
    assert all(len(logs[k][1]) == 25 for k in shipped)


def test_validate_reference_logs_before_and_after():
    # the numbers of docs/collectives.md (pre-registered rule; nothing fitted)
    after = {x.log_id: x for x in validate(algorithm="auto").logs}
    before = {x.log_id: x for x in validate(algorithm="ring").logs}
    log = "sheffield_bessemer_v100pcie_x4_nccl242_cu101"
    assert after[log].mape_1mib == pytest.approx(0.049, abs=0.001)
    assert before[log].mape_1mib == pytest.approx(0.220, abs=0.001)
    assert after[log].n_1mib == 8 and after[log].n_all == 25


def test_validate_a_users_log_and_plot(tmp_path):
    plot = tmp_path / "comm.png"
    res = CliRunner().invoke(main, ["validate-comm", str(AR), "--intra", "nvlink4",
                                    "--plot", str(plot), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    (log,) = out["logs"]
    assert (log["collective"], log["workers"], len(log["points"])) == ("allreduce", 8, 28)
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

    from dgtraces.evaluation.comm import SHARED, SHIPPED

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
    assert len(heads) == 1 and "nvlink3" in heads[0]
    assert sum(1 for x in lines if x.startswith("  ") and " B  measured " in x) >= 100
