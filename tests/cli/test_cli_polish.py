"""Output polish (issue #17 item 6): readable `sql` tables in narrow or piped output, option
names in CLI errors, help texts, Gantt titles that name device and links."""

import pytest
from click.testing import CliRunner

from dgtraces.cli import main, name_options
from dgtraces.cli.query import _cell
from dgtraces.errors import DgtracesError, Failure

WIDE_SQL = ("SELECT r.provenance, r.device, r.model, r.batch_size, count(*) AS n, "
            "sum(t.fwd_ms + t.bwd_ms) AS compute_ms FROM layer_timings t JOIN runs r "
            "USING (run_id) WHERE r.provenance = 'measured' GROUP BY ALL ORDER BY 3, 4 LIMIT 2")


def _sql(columns: int, query: str = WIDE_SQL):
    res = CliRunner().invoke(main, ["sql", query], env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    return res.output


def test_cell_precision():
    assert _cell(596.6193149990886) == "596.619"
    assert _cell(0.000123456789) == "0.000123457"
    assert _cell(151011328.0) == "151011328"
    assert _cell(12345678.91) == "12345678.9"
    assert (_cell(None), _cell("a[b]"), _cell(7)) == ("null", "a[b]", "7")


def test_sql_switches_to_one_block_per_row_when_narrow():
    narrow = _sql(50)
    assert narrow.count("-[ row ") == 2
    lines = [x for x in narrow.splitlines() if x.startswith("compute_ms")]
    assert len(lines) == 2 and all(len(x.split("|")[1].strip()) <= 12 for x in lines)
    wide = _sql(200)
    assert "-[ row " not in wide and "compute_ms" in wide
    assert not any(len(x) > 200 for x in wide.splitlines())


def test_cli_errors_name_the_option():
    res = CliRunner().invoke(main, ["predict", "--device", "v100", "--batch-size", "8"])
    exc = res.exception
    assert isinstance(exc, DgtracesError) and exc.code == "BAD_INPUT"
    assert [f.column for f in exc.failures] == ["--model"]
    res = CliRunner().invoke(main, ["predict", "--model", "resnet50", "--device", "v100",
                                    "--batch-size", "8", "--bucket-mib", "-1"])
    assert [f.column for f in res.exception.failures] == ["--bucket-mib"]


def test_data_columns_are_not_renamed():
    exc = DgtracesError("model: bad", failures=[
        Failure("BAD_INPUT", "bad", column="model"),
        Failure("SCHEMA", "bad", file="runs.csv", row=3, column="model")])
    name_options(exc, {"model": "--model"})
    assert [f.column for f in exc.failures] == ["--model", "model"]
    assert exc.message.startswith("--model:")
    assert "option --model" in exc.failures[0].line()


@pytest.mark.parametrize("command,options", [
    ("sweep", ("algorithms", "link_alpha_us", "release")),
    ("validate-predictor", ("as_json",)),
])
def test_options_have_help(command, options):
    cmd = main.get_command(None, command)
    helps = {p.name: p.help for p in cmd.params}
    assert all(helps[o] for o in options)


def test_predict_help_marks_required_options_and_shows_an_example():
    helps = {p.name: p.help or "" for p in main.get_command(None, "predict").params}
    assert [n for n, h in helps.items() if h.endswith("[required unless --run-id]")] == \
        ["model", "device", "batch_size"]
    out = CliRunner().invoke(main, ["predict", "--help"]).output
    assert "dgtraces predict --model resnet50" in out


def test_gantt_title_names_device_and_links():
    from dgtraces.predict import Cluster, Policy, predict
    from dgtraces.predict.timeline import _links

    p = predict("rec-v100-resnet50-b64-fp32-v1.1", Cluster(8, 4, "nvlink2", "10gbe"),
                Policy("wfbp"))
    assert p.trace_device == "v100"
    assert _links(p) == "nvlink2 intra, 10gbe-nccl inter"  # the alias names its preset
    one_node = predict("rec-v100-resnet50-b64-fp32-v1.1", Cluster(4, 4, "nvlink2", "10gbe"),
                       Policy("wfbp"))
    assert _links(one_node) == "nvlink2 intra"


def test_sql_piped_keeps_one_line_per_row():
    """Issue #28 point 8: ``dgtraces sql ... | cat`` counted as 80 columns and switched to
    one block per row (58 rows became ~400 lines); a pipe has no width to wrap at."""
    query = WIDE_SQL.replace("LIMIT 2", "LIMIT 5").replace(
        "r.provenance,", "r.provenance, r.run_id, r.host,")
    res = CliRunner().invoke(main, ["sql", query], env={"COLUMNS": None})
    assert res.exit_code == 0, res.output
    assert "-[ row " not in res.output
    rows = [x for x in res.output.splitlines() if x.startswith("│ measured")]
    assert len(rows) == 5  # one line per row
    assert len(res.output.splitlines()) == 5 + 6  # + title, 3 header lines, 2 borders


def test_gantt_legend_explains_the_dashed_line():
    """Issue #28 point 10: the Gantt chart's dashed line (end of the modelled iteration) had
    no legend entry."""
    import matplotlib.pyplot as plt

    from dgtraces.predict import Cluster, Policy
    from dgtraces.predict.dag import predict_trace
    from dgtraces.predict.timeline import gantt_figure
    from dgtraces.predict.trace import Trace

    trace = Trace("toy", 8, ("a", "b"), (1.0, 2.0), (2.0, 3.0), (4 << 20, 8 << 20))
    pred, sched = predict_trace(trace, Cluster(2, 2, "pcie3", "10gbe"), Policy("wfbp"))
    fig = gantt_figure(sched, pred)
    ax = fig.axes[0]
    dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert len(dashed) == 1
    assert dashed[0].get_xdata()[0] == pytest.approx(sched.iter_ms)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert dashed[0].get_label() in labels
    assert dashed[0].get_label().startswith("iteration end")
    assert {"fwd", "bwd", "comm"} <= set(labels)
    plt.close(fig)
