"""A contribution's check reports every problem at once, and ``validate`` accepts what
``contribute`` accepts (issue #28 point 6)."""

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.contribute.files import validate_files
from dgtraces.contribute.template import PLACEHOLDER_CONTRIBUTOR, write_template
from dgtraces.errors import DgtracesError
from tests.contribute.test_contribute import (
    CONTRIBUTOR,
    META,
    fill_template,
    refused,
    variant,
    write_contrib,
)


def test_validate_accepts_the_templates_grad_bytes_and_checks_them(tmp_path):
    write_template(tmp_path / "tpl")
    fill_template(tmp_path / "tpl")
    files = [str(tmp_path / "tpl" / n) for n in ("runs.csv", "layer_timings.csv")]
    assert validate_files(files, use_store=False) == {"runs": 1, "layer_timings": 23}
    res = CliRunner().invoke(main, ["validate", *files])
    assert res.exit_code == 0, res.output
    lt = tmp_path / "tpl" / "layer_timings.csv"
    text = lt.read_text().splitlines()
    header = text[0].split(",")
    col = header.index("grad_bytes")
    row = text[1].split(",")
    row[col] = str(int(row[col]) + 4)  # one layer's gradient off by one float
    lt.write_text("\n".join([text[0], ",".join(row), *text[2:]]) + "\n")
    with pytest.raises(DgtracesError) as exc:
        validate_files(files, use_store=False)
    assert exc.value.code == "GRAD_MISMATCH"
    assert [(f.code, f.column, f.row) for f in exc.value.failures] == [
        ("GRAD_MISMATCH", "grad_bytes", 0)]


def test_every_stray_file_and_missing_table_in_one_report(store, tmp_path):
    runs, lt = variant()
    folder = write_contrib(tmp_path / "c", runs, lt)
    (folder / "layer_timings.csv").unlink()
    for name in (".DS_Store", "notes.txt", "runs.parquet"):
        (folder / name).write_bytes(b"x")
    (folder / "figures").mkdir()
    (folder / "figures" / "a.png").write_bytes(b"x")
    (folder / "README.md").write_text("how we measured\n")  # allowed beside the tables
    err = refused(folder, store, "BAD_FILE", dry_run=True)
    assert sorted((f.code, f.file) for f in err.failures) == [
        ("BAD_FILE", ".DS_Store"), ("BAD_FILE", "figures"), ("BAD_FILE", "notes.txt"),
        ("BAD_FILE", "runs.parquet"),  # a second file for table runs
        ("BAD_INPUT", "layer_timings.csv")]  # missing
    expected = next(f.expected for f in err.failures if f.file == "notes.txt")
    assert {"contribution.yaml", "README.md", "runs.csv/.parquet"} <= {
        x.strip() for x in expected.split("|")}


def test_stray_files_are_reported_with_the_tables_problems(store, tmp_path):
    """With the required tables present, the stray files and every table and metadata
    problem come in one report (it stopped at the first stray file)."""
    runs, lt = variant()
    runs["model"] = "alexnett"
    folder = write_contrib(tmp_path / "c", runs, lt,
                           meta=META.replace("license: CC-BY-4.0", "license: mine"))
    for name in (".DS_Store", "notes.txt"):
        (folder / name).write_bytes(b"x")
    err = refused(folder, store, "SCHEMA", dry_run=True)
    got = {(f.code, f.file, f.column) for f in err.failures}
    assert {("BAD_FILE", ".DS_Store", None), ("BAD_FILE", "notes.txt", None),
            ("METADATA", "contribution.yaml", "license"),
            ("SCHEMA", "runs.csv", "model")} <= got


def test_placeholder_contributor_is_not_hidden_by_a_schema_failure(store, tmp_path):
    """#28 Goal (every problem in one run): the template's placeholder contributor needs
    only contribution.yaml; a schema failure in a table hid it until that was fixed."""

    runs, lt = variant()
    runs["model"] = "alexnett"
    meta = META.replace(CONTRIBUTOR, PLACEHOLDER_CONTRIBUTOR)
    folder = write_contrib(tmp_path / "c", runs, lt, meta=meta)
    err = refused(folder, store, "SCHEMA", dry_run=True)
    got = [(f.code, f.file, f.column) for f in err.failures]
    assert ("METADATA", "contribution.yaml", "contributor") in got
    assert ("SCHEMA", "runs.csv", "model") in got
