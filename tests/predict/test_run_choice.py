"""Which stored run a setup means (acceptance review #1): among measured runs of the same
model/device/batch/precision, a layer-wise timed run (``collect layers``: CUDA events around
each layer) ranks before a profiler-attributed one (the kineto importer: autograd runs the
backward kernels outside the forward's record_function scopes), and the prediction says which
run was chosen over which."""

from __future__ import annotations

import json

import pandas as pd
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.importers.base import collector_version
from dgtraces.predict.trace import choose_run, pick_run
from tests.contribute.test_contribute import variant

COLLECTOR = "dgtraces 0.1.0 collect.layers (git 0000000)"


def _two(kineto_id="a-kineto", timed_id="z-timed", **timed):
    k_runs, k_lt = variant(kineto_id, model="alexnet", batch=8)
    t_runs, t_lt = variant(timed_id, model="alexnet", batch=8)
    k_runs = k_runs.assign(provenance="measured", collector_version=collector_version("kineto"))
    t_runs = t_runs.assign(**{"provenance": "measured", "collector_version": COLLECTOR,
                              **timed})
    return pd.concat([k_runs, t_runs]), pd.concat([k_lt, t_lt])


def test_a_layer_wise_timed_run_wins_over_a_profiler_attributed_one():
    runs, lt = _two()  # "a-kineto" sorts first by run id: the old tie-break picked it
    dev = runs["device"].iloc[0]
    run_id, why = choose_run(runs, lt, "alexnet", dev, 8)
    assert run_id == "z-timed"
    assert "a-kineto" in why  # the loser is named
    assert pick_run(runs[runs.run_id == "a-kineto"], lt, "alexnet", dev, 8) == "a-kineto"
    assert choose_run(runs[runs.run_id == "a-kineto"], lt, "alexnet", dev, 8)[1] == ""


def test_flags_and_provenance_still_rank_first():
    runs, lt = _two(flagged=True, flag_reason="test")
    dev = runs["device"].iloc[0]
    assert pick_run(runs, lt, "alexnet", dev, 8) == "a-kineto"  # unflagged first
    runs, lt = _two(provenance="reconstructed")
    assert pick_run(runs, lt, "alexnet", dev, 8) == "a-kineto"  # measured first


def test_predict_h200_alexnet_uses_the_cuda_event_run_and_says_why():
    res = CliRunner().invoke(main, ["predict", "--model", "alexnet", "--device", "h200",
                                    "--batch-size", "512", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["trace_run_id"].startswith("pytorch-alexnet-b512-h200-fp32-")
    assert "kineto-alexnet-alexnet-fp32-b512-349ecabb" in out["trace_source"]
