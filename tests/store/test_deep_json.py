"""JSON nested deeper than the interpreter's recursion limit in the data folder (issue #36,
low): a manifest so nested gave a RecursionError traceback from every reader and from
``verify``; it is INTEGRITY like any unreadable manifest. The per-user hash cache, the
release journal and a run's ``params_json`` so nested are read as a damaged cache (only
time is lost), INTEGRITY and no phase time."""

import json
import shutil

import pytest
from click.testing import CliRunner

import dgtraces
from dgtraces.cli import main
from dgtraces.errors import DgtracesError
from dgtraces.store import integrity
from dgtraces.store import manifest as store
from tests.attack_tally import record

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture
def own_store(mini_release_root, tmp_path, monkeypatch):
    root = tmp_path / "data"
    shutil.copytree(mini_release_root, root)
    monkeypatch.setenv("DGTRACES_DATA", str(root))
    integrity.forget()
    return root


def test_a_deeply_nested_manifest_is_integrity(own_store):
    path = own_store / "releases" / "v0.2.0" / store.MANIFEST
    path.write_text(path.read_text().rstrip().rstrip("}") + f', "x": {DEEP}}}')
    for read in (lambda: dgtraces.load("runs"), lambda: store.read_manifest("0.2.0")):
        with pytest.raises(DgtracesError) as exc:
            read()
        record("deeply nested JSON in the store", exc.value.code == "INTEGRITY")
        assert exc.value.code == "INTEGRITY"
    res = CliRunner().invoke(main, ["verify"])
    code = getattr(res.exception, "code", None)
    record("deeply nested JSON in the store", code == "INTEGRITY")
    assert code == "INTEGRITY", res.output


def test_a_deeply_nested_hash_cache_only_costs_time(own_store):
    integrity.cache_dir().mkdir(parents=True, exist_ok=True)
    (integrity.cache_dir() / integrity.CACHE_NAME).write_text(DEEP)
    integrity.forget()
    assert len(dgtraces.load("runs")) == 2


def test_a_deeply_nested_journal_is_integrity(store):
    from dgtraces.contribute.release import JOURNAL, build_release

    (store / JOURNAL).write_text('{"version": "0.2.0", "e": ' + DEEP + "}")
    with pytest.raises(DgtracesError) as exc:
        build_release("0.2.0", root=store)
    record("deeply nested JSON in the store", exc.value.code == "INTEGRITY")
    assert exc.value.code == "INTEGRITY"


def test_a_deeply_nested_params_json_gives_no_phase_time():
    from dgtraces.predict.trace import _phase

    assert _phase(DEEP, "io_ms") == 0.0
    assert _phase(json.dumps({"io_ms": 2.5}), "io_ms") == 2.5
