"""Release and validate details (issue #14 item 8): contributor text cannot inject CHANGELOG
headings, temp files of a killed run are removed by the rerun, rerunning a completed release
succeeds, `validate --table nope` is an error."""

import re
import subprocess
import sys

import pytest

from dgtraces.contribute import contribute
from dgtraces.contribute.files import validate_files
from dgtraces.contribute.release import JOURNAL, build_release, md_inline
from dgtraces.errors import DgtracesError
from tests.attack_tally import record
from tests.contribute.test_contribute import (
    CONTRIBUTOR,
    META,
    TEST_DEVICE,
    variant,
    write_contrib,
)

LOG = "# Changelog\n\n## Dataset releases\n\n### [v0.1.0] - 2026-12-02\n- layers\n"
INJECTIONS = [
    'Eve\\n### [v0.2.0] - 2020-01-01\\n#### Added\\n- nothing',
    'Eve ### [v0.2.0]',
    'Eve\\r\\n## Dataset releases\\n',
    'Eve <img src=x onerror=alert(1)> [click](http://evil.invalid)',
    'Eve\\u2028### [v0.2.0]',
]


@pytest.mark.parametrize("who", INJECTIONS)
def test_contributor_text_cannot_break_the_changelog(store, tmp_path, who):
    (tmp_path / "CHANGELOG.md").write_text(LOG)
    meta = META.replace(f"contributor: {CONTRIBUTOR}", f'contributor: "{who}"')
    assert meta != META
    runs, lt = variant("x1")
    contribute(write_contrib(tmp_path / "c", runs, lt, meta=meta), root=store)
    build_release("0.2.0", root=store)
    lines = (tmp_path / "CHANGELOG.md").read_text().splitlines()
    headings = [ln for ln in lines if ln.startswith("#")]
    ok = len(headings) == 5 and headings[2].startswith("### [v0.2.0] - ") and \
        [headings[i] for i in (0, 1, 3, 4)] == ["# Changelog", "## Dataset releases",
                                                "#### Added", "### [v0.1.0] - 2026-12-02"]
    entry = [ln for ln in lines if ln.startswith("- Contribution")]
    ok = ok and len(entry) == 1 and not re.search(r"(?<!\\)[<\[]", entry[0].split("` by ")[1])
    record("CHANGELOG injection via contributor text", ok)
    assert ok, lines


def test_md_inline_is_one_inert_line():
    assert md_inline("a\nb\tc\x00d") == "a b c d"
    assert md_inline("# [x](y) `z` <b>") == r"\# \[x\]\(y\) \`z\` \<b\>"


def test_rerun_cleans_temps_and_completed_release_is_success(store, tmp_path):
    (tmp_path / "CHANGELOG.md").write_text(LOG)
    runs, lt = variant("y1")
    contribute(write_contrib(tmp_path / "c", runs, lt), root=store)
    stale = [store / f".tmp-{JOURNAL}.dead1", tmp_path / ".tmp-CHANGELOG.md.dead2"]
    for p in stale:
        p.write_text("half")
    first = build_release("0.2.0", root=store)
    assert not any(p.exists() for p in stale) and not first.resumed
    again = build_release("0.2.0", root=store)
    assert again.resumed and again.version == "0.2.0" and again.notes
    env = {"DGTRACES_DATA": str(store), "DGTRACES_CHANGELOG": str(tmp_path / "CHANGELOG.md"),
           "DGTRACES_CARDS": str(tmp_path / "cards"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "dgtraces", "release", "0.2.0"],
                         capture_output=True, text=True, env={**__import__("os").environ, **env})
    assert out.returncode == 0, out.stderr
    runs, lt = variant("y2", scale=1.1)
    contribute(write_contrib(tmp_path / "c2", runs, lt), root=store)
    with pytest.raises(DgtracesError) as exc:  # something staged since: a new version needed
        build_release("0.2.0", root=store)
    assert exc.value.code == "VERSION"


@pytest.mark.parametrize("table", ["nope", "", "RUNS", "runs "])
def test_validate_unknown_table_is_an_error(tmp_path, table):
    path = tmp_path / "runs.csv"
    path.write_text("a\n1\n")
    with pytest.raises(DgtracesError) as exc:
        validate_files([path], table)
    assert exc.value.code == "BAD_INPUT" and exc.value.failures


def test_contributed_devices_reach_the_devices_table(store, tmp_path):
    """v0.1.0 has no devices table: the release gains one with the declared device, and a
    second contribution declaring the same key adds no duplicate."""
    from dgtraces.store import release

    for rid, scale in (("d1", 1.0), ("d2", 1.2)):
        runs, lt = variant(rid, scale=scale)
        contribute(write_contrib(tmp_path / f"c-{rid}", runs, lt), root=store)
    build_release("0.2.0", root=store)
    dev = release.read_table("devices", "0.2.0", store)
    assert dev["device"].tolist() == [TEST_DEVICE]
    row = dev.iloc[0]
    assert row["kind"] == "gpu" and row["provenance"] == "measured"
    assert row["peak_fp32_tflops"] != row["peak_fp32_tflops"]  # null: no datasheet figure
    assert "contribution" in row["source"]
