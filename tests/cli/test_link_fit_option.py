"""#34 item 3 (the --link-fit part): `--link-fit` is declared once and works in `predict`,
`sweep`, `export-chakra` and `collective`; the fit replaces both presets under the
alpha-beta collectives (NCCL's algorithm choice is not used), and the output says so."""

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from tests.paths import FIXTURES

AR = str(FIXTURES / "nccl_tests" / "all_reduce_perf_8xh100.log")
AG = str(FIXTURES / "nccl_tests" / "ag_2nodes.log")
NAME = "fit:all_reduce_perf_8xh100.log"


def run(*args):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("command", ["predict", "sweep", "export-chakra", "collective"])
def test_link_fit_is_declared_once_for_every_command(command):
    import click

    from dgtraces.cli.options import LINK_FIT_HELP

    cmd = main.get_command(click.Context(main), command)
    (opt,) = [p for p in cmd.params if "--link-fit" in getattr(p, "opts", ())]
    assert opt.help == LINK_FIT_HELP and opt.metavar == "FILE|INTERCONNECT[@WORKERS]"


def test_collective_with_a_fit_replaces_both_presets():
    from dgtraces.comm.linkfit import fit_link

    res = run("collective", "--workers", "8", "--gpus-per-node", "8", "--inter", "ib-ndr",
              "--link-fit", AR, "--sizes", "1MiB,1GiB", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["algorithm"] == "ring"
    assert {side: (v["link"], v["replaces"]) for side, v in out["links"].items()} == {
        "intra": (NAME, "nvlink3"), "inter": (NAME, "ib-ndr")}
    fit = fit_link(AR, None)  # among the fit's own 8 workers, the ring gives the fit back
    for row in out["rows"]:
        n = row["message_bytes"]
        assert row["time_us"] == pytest.approx(fit.alpha_us + fit.beta_us_per_byte * n,
                                               rel=1e-9)
    tree = json.loads(run("collective", "--workers", "8", "--link-fit", AR, "--algorithm",
                          "tree", "--sizes", "1MiB", "--json").stdout)
    assert tree["algorithm"] == "tree" and tree["links"]["intra"]["link"] == NAME
    plain = json.loads(run("collective", "--workers", "8", "--sizes", "1MiB", "--json").stdout)
    assert plain["algorithm"] == "auto"  # without a fit: NCCL's choice, as before


@pytest.mark.parametrize("args", [
    ["--algorithm", "auto"],  # NCCL's model takes no fit
    ["--algorithm", "nccl-ring"],
    ["--sizes", "2GiB"],  # beyond the log's maxBytes (1 GiB)
])
def test_collective_with_a_fit_refuses_nccl_and_sizes_beyond_it(args):
    res = run("collective", "--workers", "8", "--link-fit", AR, *args)
    assert getattr(res.exception, "code", None) == "BAD_INPUT", res.output


def test_collective_refuses_a_log_of_another_collective():
    res = run("collective", "--workers", "4", "--link-fit", AG, "--sizes", "1MiB")
    assert getattr(res.exception, "code", None) == "BAD_INPUT", res.output


ALLTOALL = "\n".join([  # the NIG page's all-to-all log, cut short (its 0-byte first row)
    "# nThread 1 nGpus 2 minBytes 2 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20",
    "#",
    "# Using devices",
    *(f"#  Rank  {r} Group  0 Pid {r // 2} on igt00{r // 2} device  {r % 2} [0x1{r}] "
      "Tesla V100-SXM2-16GB" for r in range(4)),
    "#",
    "# size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
    "# (B) (elements) (us) (GB/s) (GB/s) (us) (GB/s) (GB/s)",
    "0 0 float none -1 24.28 0.00 0.00 0 18.51 0.00 0.00 N/A",
    "16 1 float none -1 24.52 0.00 0.00 0 24.88 0.00 0.00 N/A", ""])


def test_an_all_to_all_log_is_refused_as_not_all_reduce_before_its_rows(tmp_path):
    """Acceptance review #7: a real all-to-all log (its 0-byte rows) was PLAUSIBILITY; the
    binary it names makes it BAD_INPUT first, whatever its rows."""
    log = tmp_path / "nig.txt"
    log.write_text("# job: mpirun ./alltoall_perf -b 2 -e 1K -f 2 -g 2\n" + ALLTOALL)
    res = run("collective", "--workers", "4", "--link-fit", str(log), "--sizes", "512")
    assert getattr(res.exception, "code", None) == "BAD_INPUT", res.output
    assert res.exception.failures[0].column == "collective"


BASE = ["--device", "k80", "--workers", "4", "--gpus-per-node", "2"]


def test_sweep_with_a_fit_agrees_with_predict(tmp_path):
    out = tmp_path / "sweep.csv"
    res = run("sweep", "--models", "alexnet", "--batch-sizes", "32", *BASE, "--policies",
              "wfbp", "--link-fit", AR, "--out", str(out))
    assert res.exit_code == 0, res.output
    (row,) = pd.read_csv(out).to_dict("records")
    assert (row["intra"], row["inter"], row["algorithm"]) == (NAME, NAME, "ring")
    pred = run("predict", "--model", "alexnet", "--batch-size", "32", *BASE, "--policy",
               "wfbp", "--link-fit", AR, "--json")
    assert pred.exit_code == 0, pred.output
    p = json.loads(pred.stdout)
    assert row["iter_ms"] == pytest.approx(p["iter_ms"], rel=1e-6)
    assert row["inter_bandwidth_gb_s"] == pytest.approx(p["cluster"]["inter"]["bandwidth_gb_s"])
    assert p["link_fit"]["replaces"] == {"intra": "pcie3", "inter": "10gbe"}
    assert p["link_fit"]["nccl_algorithm_choice"] is False
    assert (p["link_fit"]["min_bytes"], p["link_fit"]["max_bytes"]) == (8, 1 << 30)


@pytest.mark.parametrize("args", [
    ["--intra", "pcie3,nvlink2"],  # a fit replaces both links: several presets are moot
    ["--algorithms", "auto"],
])
def test_sweep_with_a_fit_refuses_what_it_cannot_mean(args):
    res = run("sweep", "--models", "alexnet", "--batch-sizes", "32", *BASE, "--policies",
              "wfbp", "--link-fit", AR, *args)
    assert getattr(res.exception, "code", None) == "BAD_INPUT", res.output


def test_predict_notes_a_message_beyond_the_fit(tmp_path):
    """A message larger than the fit measured is extrapolated, and the prediction says so."""
    from dgtraces.comm.linkfit import fit_link

    small = tmp_path / "comm.csv"
    sizes = [2 ** k for k in range(14, 19)]  # up to 256 KiB
    pd.DataFrame({"collective": "allreduce", "workers": 2, "message_bytes": sizes,
                  "time_ms": [0.05 + n / 1e6 for n in sizes]}).to_csv(small, index=False)
    fit = fit_link(str(small), None)
    args = ["predict", "--model", "alexnet", "--batch-size", "32", *BASE, "--policy", "wfbp",
            "--json", "--link-fit"]
    p = json.loads(run(*args, str(small)).stdout)
    wide = json.loads(run(*args, AR).stdout)  # measured up to 1 GiB: no extrapolation
    assert p["link_fit"]["max_bytes"] == 1 << 18
    assert fit.note("pcie3", "10gbe") in p["notes"]
    assert len(p["notes"]) == len(wide["notes"]) + 1  # alexnet's fc6 gradient is 151 MB


ESCAPE = "\x1b]0;owned\x07\x1b[2J"


@pytest.mark.parametrize("command", ["collective", "predict", "sweep", "import"])
def test_a_fit_file_name_and_gpu_name_reach_no_terminal(tmp_path, command):
    """The --link-fit file name (in the link's name and source) and a log's GPU name are the
    user's text: printed through inert() (#36 item 6 for these lines)."""
    from tests.attack_tally import record

    log = tmp_path / f"run{ESCAPE}.log"
    log.write_text(open(AR).read().replace("NVIDIA H100 80GB HBM3", f"H100{ESCAPE}"))
    args = {
        "collective": ["collective", "--workers", "8", "--link-fit", str(log), "--sizes", "1MiB"],
        "predict": ["predict", "--model", "alexnet", "--batch-size", "32", *BASE,
                    "--link-fit", str(log)],
        "sweep": ["sweep", "--models", "alexnet", "--batch-sizes", "32", *BASE,
                  "--policies", "wfbp", "--link-fit", str(log)],
        "import": ["import", "nccl-tests", str(log), "--out", str(tmp_path / "out")],
    }[command]
    res = run(*args)
    assert res.exit_code == 0, res.output
    clean = "\x1b" not in res.output and "\x07" not in res.output
    record("terminal control sequence in shown text", clean)
    assert clean
