"""Every output option goes through the one data-folder guard (issue #29 M6): `contribute
--template DIR` wrote into releases/ (then `info`, `sql` and `load()` broke)."""

import os

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.contribute.template import write_template
from dgtraces.errors import DgtracesError
from dgtraces.store import manifest as st
from tests.attack_tally import record
from tests.contribute.test_contribute import tree_digest

TARGETS = ["releases/v9.9.9", "releases", "staging/x", "shards/runs/t", ".", "sub/../releases/t"]


@pytest.mark.parametrize("where", TARGETS)
def test_template_inside_the_data_folder_is_refused(store, where):
    before = tree_digest(store)
    res = CliRunner().invoke(main, ["contribute", "--template", str(store / where)])
    ok = res.exit_code != 0 and getattr(res.exception, "code", None) == "BAD_INPUT" and \
        tree_digest(store) == before
    record("output into the data folder", ok)
    assert ok, res.output
    with pytest.raises(DgtracesError) as exc:
        write_template(store / where)
    record("output into the data folder", exc.value.code == "BAD_INPUT")
    assert exc.value.code == "BAD_INPUT" and tree_digest(store) == before


def test_a_link_pointing_into_the_data_folder_is_refused(store, tmp_path):
    link = tmp_path / "innocent"
    os.symlink(store / "releases", link)
    before = tree_digest(store)
    with pytest.raises(DgtracesError) as exc:
        write_template(link / "t")
    record("output into the data folder", exc.value.code == "BAD_INPUT")
    assert exc.value.code == "BAD_INPUT" and tree_digest(store) == before
    assert st.latest() is not None


def test_template_elsewhere_still_works(store, tmp_path):
    res = CliRunner().invoke(main, ["contribute", "--template", str(tmp_path / "t")])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == \
        ["contribution.yaml", "layer_timings.csv", "runs.csv"]


@pytest.mark.parametrize("where", ["releases/hub", "hub"])
def test_hub_export_inside_the_data_folder_is_refused(store, where):
    from dgtraces.publish.hf import export

    before = tree_digest(store)
    with pytest.raises(DgtracesError) as exc:
        export(store / where)
    record("output into the data folder", exc.value.code == "BAD_INPUT")
    assert exc.value.code == "BAD_INPUT" and tree_digest(store) == before
