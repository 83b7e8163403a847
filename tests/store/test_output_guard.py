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


# every path parameter that is read, not written (anything else must be an OutPath)
INPUTS = {("collect ssgd", "trace"), ("contribute", "path"), ("import bcaffe", "log"),
          ("import caffe-time", "log"), ("import kineto", "trace"),
          ("import kineto", "map_path"), ("import nccl-tests", "logs"),
          ("import osu", "logs"), ("import pipedream", "graph"), ("validate", "paths"),
          ("validate-comm", "logs"),
          ("recipe", "root")}  # the data root a recipe builds in (the store's by default)


def path_params():
    """(command words joined, parameter) of every click.Path parameter of every command."""
    import click

    ctx = click.Context(main)

    def walk(cmd, prefix):
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), prefix + [name])
        else:
            for p in cmd.params:
                if isinstance(p.type, click.Path):
                    yield " ".join(prefix), p

    return list(walk(main, []))


def test_every_output_option_goes_through_the_guard(store):
    """Variant (every other output option): each CLI path parameter is either read or an
    OutPath, and each OutPath refuses a path inside the data folder (BAD_INPUT)."""
    from dgtraces.cli import OutPath

    params = path_params()
    outs = [(cmd, p) for cmd, p in params if isinstance(p.type, OutPath)]
    others = {(cmd, p.name) for cmd, p in params if not isinstance(p.type, OutPath)}
    assert others == INPUTS and len(outs) >= 30
    before = tree_digest(store)
    for cmd, p in outs:
        with pytest.raises(DgtracesError) as exc:
            p.type.convert(str(store / "releases" / "v9.9.9"), p, None)
        record("output into the data folder", exc.value.code == "BAD_INPUT")
        assert exc.value.code == "BAD_INPUT", (cmd, p.opts)
    assert tree_digest(store) == before
