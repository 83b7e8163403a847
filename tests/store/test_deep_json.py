"""JSON nested deeper than the interpreter's recursion limit in the data folder (issue #36,
low): a manifest so nested gave a RecursionError traceback from every reader and from
``verify``; it is INTEGRITY like any unreadable manifest. The per-user hash cache, the
release journal and a run's ``params_json`` so nested are read as a damaged cache (only
time is lost), INTEGRITY and no phase time."""

import json

import pytest
from click.testing import CliRunner

import dgtraces
from dgtraces.cli import main
from dgtraces.errors import DgtracesError
from dgtraces.store import integrity
from dgtraces.store import manifest as store
from tests.attack_tally import record
from tests.store.test_read_integrity import own_store  # noqa: F401 (a fixture)

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.usefixtures("own_store")
def test_a_deeply_nested_manifest_is_integrity():
    path = store.releases_dir() / "v0.2.0" / store.MANIFEST
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


@pytest.mark.usefixtures("own_store")
def test_a_deeply_nested_hash_cache_only_costs_time():
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
