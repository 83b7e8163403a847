"""Small output defects (issue #28 point 10)."""

import sys

from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.predict import Cluster, Policy, predict, resolve

BASE = ["predict", "--model", "resnet50", "--device", "v100", "--batch-size", "64",
        "--release", "0.3.0"]


def test_parity_markers_do_not_hide_each_other():
    import matplotlib.pyplot as plt

    from dgtraces.evaluation.validation import parity_figure, validate

    fig = parity_figure(validate("0.3.0"))
    try:
        ax = fig.axes[0]
        rings = [c for c in ax.collections if c.get_label().startswith("plain DAG")]
        points = [c for c in ax.collections if ": " in c.get_label()]
        assert len(rings) == 1 and len(points) >= 2
        for c in points:  # translucent, edged, drawn above the larger hollow rings
            assert c.get_alpha() < 1 and c.get_zorder() > rings[0].get_zorder()
            assert max(c.get_sizes()) < min(rings[0].get_sizes())
        assert rings[0].get_facecolors().size == 0  # hollow: what lies under shows
    finally:
        plt.close(fig)


def test_partial_last_node_is_noted():
    trace = resolve("resnet50", "v100", 64, release="0.3.0")
    uneven = predict(trace, Cluster(10, 4, release="0.3.0"), Policy("wfbp"))
    even = predict(trace, Cluster(8, 4, release="0.3.0"), Policy("wfbp"))
    extra = set(uneven.notes) - set(even.notes)
    assert extra == {"10 workers do not fill nodes of 4: 3 nodes, the last with 2 workers"}
    assert uneven.cluster["nodes"] == 3


def test_single_node_text_output_shows_no_inter_link_and_counts_workers():
    one = CliRunner().invoke(main, BASE)
    assert one.exit_code == 0, one.output
    assert "on 1 worker;" in one.output and "1 workers" not in one.output
    inter = [x for x in one.output.splitlines() if x.startswith("inter:")]
    assert inter == ["inter: unused (one node)"]
    two_nodes = CliRunner().invoke(main, [*BASE, "--workers", "8", "--gpus-per-node", "4"])
    (line,) = [x for x in two_nodes.output.splitlines() if x.startswith("inter:")]
    assert line.startswith("inter: 10gbe")


def test_collect_without_torch_fails_before_any_progress_bar(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    res = CliRunner().invoke(main, ["collect", "layers", "--model", "alexnet",
                                    "--batch-size", "2", "--out", str(tmp_path / "o")])
    assert res.exception.code == "MISSING_DEPENDENCY"
    assert "None" not in res.output and "/" not in res.output  # no "0/None" bar
