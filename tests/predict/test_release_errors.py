"""Only "no release" falls back to an on-the-fly reconstruction (issue #36 item 3): a damaged
release (INTEGRITY) or a malformed version (VERSION) reaches predict, sweep and validate
as itself, never as "nothing stored" (a reconstructed trace cited with the damaged
release's digest, or UNKNOWN_DEVICE for a CPU run)."""

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.contribute.files import validate_files
from dgtraces.errors import DgtracesError
from dgtraces.predict import resolve
from dgtraces.store import release
from tests.attack_tally import record
from tests.store.test_read_integrity import flip_byte, own_store  # noqa: F401 (a fixture)

CLS = "damaged release read as no release"


@pytest.fixture
def damaged(request):
    """A copy of the mini store (``own_store``) whose v0.2.0 runs shard has one byte
    flipped."""
    root = request.getfixturevalue("own_store")
    (path,) = release.table_files("0.2.0", root)["runs"]
    flip_byte(path)
    return root


# a stored CPU run (cpu-x, batch 8), a stored GPU run (k80, batch 64) and a GPU setup that
# would be reconstructed (v100): each must fail on the damaged shard
SETUPS = [("alexnet", "cpu-x", 8), ("alexnet", "k80", 64), ("alexnet", "v100", 32)]


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: s[1])
def test_resolve_propagates_integrity(damaged, setup):
    with pytest.raises(DgtracesError) as exc:
        resolve(*setup, release="0.2.0")
    record(f"{CLS} (resolve)", exc.value.code == "INTEGRITY")
    assert exc.value.code == "INTEGRITY"


@pytest.mark.parametrize("args", [
    ["predict", "--model", "alexnet", "--device", "cpu-x", "--batch-size", "8"],
    ["predict", "--model", "alexnet", "--device", "v100", "--batch-size", "32", "--workers",
     "2", "--gpus-per-node", "2"],
    ["sweep", "--models", "alexnet", "--device", "k80", "--batch-sizes", "64",
     "--workers", "1,2"],
], ids=["predict-cpu", "predict-gpu", "sweep"])
def test_cli_fails_with_integrity(damaged, args):
    res = CliRunner().invoke(main, args)
    code = getattr(res.exception, "code", None)
    record(f"{CLS} ({args[0]})", code == "INTEGRITY")
    assert code == "INTEGRITY", res.output


def test_malformed_version_is_version_not_a_reconstruction(mini_store):
    with pytest.raises(DgtracesError) as exc:
        resolve("alexnet", "v100", 32, release="0.x.0")
    record(f"{CLS} (malformed version)", exc.value.code == "VERSION")
    assert exc.value.code == "VERSION"


def test_no_release_still_reconstructs(empty_store):
    trace = resolve("alexnet", "v100", 32)
    assert trace.provenance == "reconstructed" and len(trace.fwd_ms) > 0


def test_validate_refuses_a_damaged_parent(damaged, tmp_path):
    """validate reads the runs a layer_timings file references from the latest release: a
    damaged runs shard is INTEGRITY, not "no parents" (then 3 CROSS_TABLE failures)."""
    lt = tmp_path / "layer_timings.csv"
    lt.write_text("run_id,layer,fwd_ms,bwd_ms,n\nm1,conv1,1.0,2.0,5\n")
    with pytest.raises(DgtracesError) as exc:
        validate_files([lt])
    record(f"{CLS} (validate)", exc.value.code == "INTEGRITY")
    assert exc.value.code == "INTEGRITY"
