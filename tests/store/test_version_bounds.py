"""A 5000-digit ``--release`` (issue #36, low): ``int()`` of a version part past Python's
4300-digit limit was a ValueError traceback in every command taking ``--release`` (a
4000-digit one an OS error on the folder name). A version part has at most 9 digits:
longer is VERSION, and a folder so named is no release."""

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.errors import DgtracesError
from dgtraces.store import manifest as store
from tests.attack_tally import record

LONG = ["1" * 5000 + ".0.0", "0." + "9" * 4000 + ".0", "1234567890.0.0"]


@pytest.mark.parametrize("version", LONG, ids=["5000 digits", "4000 digits", "10 digits"])
def test_a_version_part_past_nine_digits_is_version(version):
    with pytest.raises(DgtracesError) as exc:
        store.parse_version(version)
    assert exc.value.code == "VERSION" and len(exc.value.message) < 200


@pytest.mark.parametrize("args", [["cite"], ["sql", "select 1"],
                                  ["predict", "--model", "alexnet", "--device", "v100",
                                   "--batch-size", "32"]], ids=lambda a: a[0])
def test_every_command_says_version(args):
    res = CliRunner().invoke(main, [*args, "--release", LONG[0]])
    code = getattr(res.exception, "code", None)
    record("5000-digit --release", code == "VERSION")
    assert code == "VERSION", res.output


def test_a_folder_with_a_ten_digit_part_is_no_release(tmp_store):
    (store.releases_dir() / "v1234567890.0.0").mkdir()
    assert store.list_releases() == ["0.1.0"]
