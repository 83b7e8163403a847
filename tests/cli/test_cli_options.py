"""CLI option conventions (#12 item 7): new spellings, deprecated aliases, one sentinel."""

import json

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.comm.collectives import ALGORITHMS
from dgtraces.predict.policy_registry import POLICY_NAMES

BASE = ["predict", "--model", "alexnet", "--device", "k80", "--batch-size", "32",
        "--workers", "4", "--policy", "bucketed", "--json"]


def run(*args):
    res = CliRunner().invoke(main, list(args))
    return res


def test_deprecated_aliases_warn_and_mean_the_same():
    new = run(*BASE, "--bucket-mib", "4", "--link-bandwidth-gb-s", "2")
    old = run(*BASE, "--bucket-mb", "4", "--link-gbps", "16")
    assert new.exit_code == 0 and old.exit_code == 0, old.output
    assert "deprecated" in old.stderr and "deprecated" not in new.stderr
    a, b = json.loads(new.stdout), json.loads(old.stdout)
    assert a["iter_ms"] == pytest.approx(b["iter_ms"], rel=1e-12)
    assert a["cluster"]["inter"]["bandwidth_gb_s"] == pytest.approx(2.0)


def test_alias_and_new_spelling_together_is_a_usage_error():
    res = run(*BASE, "--bucket-mib", "4", "--bucket-mb", "4")
    assert res.exit_code == 2


def test_io_overlap_same_syntax_in_predict_and_sweep():
    bare = json.loads(run(*BASE, "--io-overlap").stdout)
    on = json.loads(run(*BASE, "--io-overlap", "on").stdout)
    assert bare["io_overlap"] is True and on["iter_ms"] == bare["iter_ms"]
    assert run(*BASE, "--io-overlap", "both").exit_code == 2  # one prediction, one choice


def test_release_latest_sentinel_and_registry_choices():
    assert run(*BASE, "--release", "latest").exit_code == 0
    helptext = run("predict", "--help").output
    for name in ALGORITHMS + POLICY_NAMES:
        assert name in helptext


def test_the_framework_help_names_only_options_its_command_has():
    """Acceptance review #16: export-astra-sim's --framework said explicit
    --policy/--bucket-mib/--algorithm win, and it has none of them."""
    import re

    checked = 0
    for name in main.list_commands(None):
        command = main.get_command(None, name)
        fw = next((p for p in command.params if p.name == "framework"), None)
        if fw is None or not hasattr(command, "params"):
            continue
        opts = {o for p in command.params for o in p.opts}
        m = re.search(r"explicit (\S+) win", fw.help or "")
        named = m[1].split("/") if m else []
        assert all(o in opts for o in named), (name, named)
        checked += 1
    assert checked >= 5


def test_inter_list_keeps_sharp_on_every_nic_and_drops_only_true_repeats():
    from dgtraces.cli.options import inter_list

    assert inter_list("ib-ndr,sharp,ib-hdr,sharp") == ("ib-ndr,sharp", "ib-hdr,sharp")
    assert inter_list("ib-ndr,sharp,ib-ndr,sharp,ib-ndr") == ("ib-ndr,sharp", "ib-ndr")
    assert inter_list("ib-ndr") == ("ib-ndr",)
