"""Contributor text is inert in the terminal (issue #29 M7): control sequences in a
contributor's name, a run's source or a query result are shown escaped by `staging list`,
`staging reject`, `sql` (grid and vertical), and error reports; nothing reaches the
terminal as a control character."""

import sys
import unicodedata

import pytest
from click.testing import CliRunner

from dgtraces.cli import main, run
from dgtraces.contribute import contribute
from dgtraces.io.terminal_text import inert
from tests.attack_tally import record
from tests.contribute.test_contribute import CONTRIBUTOR, META, variant, write_contrib

PAYLOADS = ["\x1b]0;pwned\x07", "\x1b[2J", "\x9b2J", "\u202eevil", "\x1b[31mred\x1b[0m",
            "a\rb", "x\x08\x08y", "\u2028line"]


def _control_free(text: str) -> bool:
    return not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") and c not in "\n\t"
                   for c in text)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_inert_escapes_every_control_character(payload):
    out = inert(f"name {payload} end")
    ok = _control_free(out) and out.startswith("name ") and out.endswith(" end")
    record("terminal control sequence in shown text", ok)
    assert ok, repr(out)
    assert inert("plain text [x] ü 東京") == "plain text [x] ü 東京"


@pytest.mark.parametrize("payload", PAYLOADS[:4])
def test_staging_list_and_reject_show_a_hostile_contributor_inertly(store, tmp_path, payload):
    import json

    evil = CONTRIBUTOR.replace("Test Rig", f"Rig {payload}")
    meta = META.replace(CONTRIBUTOR, json.dumps(evil))  # YAML takes JSON's \u escapes
    entry = contribute(write_contrib(tmp_path / "c", *variant("r-t"), meta=meta), root=store)
    listed = CliRunner().invoke(main, ["staging", "list"])
    rejected = CliRunner().invoke(main, ["staging", "reject", entry.id])
    ok = listed.exit_code == 0 and rejected.exit_code == 0 and "Rig " in listed.output \
        and _control_free(listed.output) and _control_free(rejected.output)
    record("terminal control sequence in shown text", ok)
    assert ok, (listed.output, rejected.output)


@pytest.mark.parametrize("payload", PAYLOADS[:5])
@pytest.mark.parametrize("wide", [False, True])
def test_sql_table_output_is_inert(mini_store, payload, wide, monkeypatch):
    monkeypatch.setenv("COLUMNS", "30" if wide else "200")
    codes = " || ".join(f"chr({ord(c)})" for c in payload)
    query = f"SELECT {codes} AS v, 'x' || {codes} AS \"col{payload}\""
    res = CliRunner().invoke(main, ["sql", query])
    ok = res.exit_code == 0 and _control_free(res.output) and \
        ("\\x" in res.output or "\\u" in res.output)
    record("terminal control sequence in shown text", ok)
    assert ok, repr(res.output)


def test_error_reports_are_inert(store, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["dgtraces", "staging", "show", "\x1b]0;pwned\x07"])
    with pytest.raises(SystemExit):
        run()
    err = capsys.readouterr().err
    ok = _control_free(err) and "BAD_INPUT" in err
    record("terminal control sequence in shown text", ok)
    assert ok, repr(err)


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_sql_csv_and_json_to_a_terminal_are_inert(mini_store, monkeypatch, fmt):
    """CSV to a terminal escapes control characters (a file or pipe gets the bytes as
    stored); JSON escapes them always (ensure_ascii)."""
    import io

    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    monkeypatch.setattr(sys, "stdout", out)
    from dgtraces.cli.query import _write_csv, _write_json
    from dgtraces.query import Query

    with Query("SELECT chr(27) || '[2J' || chr(155) AS \"c\x1b]0;t\x07\"") as q:
        {"csv": _write_csv, "json": _write_json}[fmt](q, None)
    ok = _control_free(out.getvalue()) and out.getvalue().strip() != ""
    record("terminal control sequence in shown text", ok)
    assert ok, repr(out.getvalue())


@pytest.mark.parametrize("payload", PAYLOADS[:3])
def test_a_released_hostile_source_is_inert_in_predict_and_export(store, tmp_path, payload):
    """Variant (another code path): `predict` and `export-astra-sim` print the stored run's
    `source`, a contributor's text once released."""
    from dgtraces.contribute.release import build_release

    runs, lt = variant("r-src")
    runs["source"] = f"rig {payload} src"
    contribute(write_contrib(tmp_path / "c", runs, lt), root=store)
    build_release("0.9.0", root=store)
    outs = [CliRunner().invoke(main, ["predict", "--run-id", "r-src"]),
            CliRunner().invoke(main, ["export-astra-sim", "--run-id", "r-src",
                                      "--out", str(tmp_path / "w.txt")])]
    ok = all(r.exit_code == 0 and "rig " in r.output and _control_free(r.output)
             for r in outs)
    record("terminal control sequence in shown text", ok)
    assert ok, [(r.exit_code, r.output) for r in outs]
