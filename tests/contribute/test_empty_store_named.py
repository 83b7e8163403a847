"""An empty ``DGTRACES_DATA`` store (issue #36, trial): a contribution checked against a
folder without any release was refused with "device not in the store's devices table", and
nothing said which store that was, or that it was empty. The refusal now names the store
and says it holds no release (``contribute`` and ``validate``)."""

import pytest

from dgtraces.contribute import contribute
from dgtraces.contribute.files import validate_files
from dgtraces.errors import DgtracesError
from tests.contribute.test_contribute import META, variant, write_contrib


def test_contribute_names_the_empty_store(empty_store, tmp_path):
    runs, lt = variant("r-empty")
    runs["device"] = "v100"  # known to every shipped release, not to an empty store
    folder = write_contrib(tmp_path / "c", runs, lt, meta=META[:META.index("devices:")])
    with pytest.raises(DgtracesError) as exc:
        contribute(folder, dry_run=True)
    assert exc.value.code == "UNKNOWN_DEVICE"
    assert exc.value.hint and str(empty_store) in exc.value.hint
    assert "$DGTRACES_DATA" in exc.value.hint


def test_validate_names_the_empty_store(empty_store, tmp_path):
    _, lt = variant("r-empty")
    path = tmp_path / "layer_timings.csv"
    lt.drop(columns=["grad_bytes"]).to_csv(path, index=False)
    with pytest.raises(DgtracesError) as exc:
        validate_files([path])
    assert exc.value.code == "CROSS_TABLE"
    assert exc.value.hint and str(empty_store) in exc.value.hint


def test_a_store_with_releases_gives_no_such_hint(store, tmp_path):
    runs, lt = variant("r-full")
    runs["device"] = "no-such-gpu"
    folder = write_contrib(tmp_path / "c", runs, lt, meta=META[:META.index("devices:")])
    with pytest.raises(DgtracesError) as exc:
        contribute(folder, root=store, dry_run=True)
    assert exc.value.code == "UNKNOWN_DEVICE" and exc.value.hint is None
