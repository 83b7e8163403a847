"""predict --timeline: slices land on whole ns in Perfetto, back to back without overlap."""

import json
from collections import defaultdict
from itertools import pairwise

import pytest

from dgtraces.export import load_run_trace
from dgtraces.predict import Cluster, Policy, predict_trace
from dgtraces.predict.timeline import chrome_trace, ns, perfetto_us

RELEASE = "0.3.0"
REC = "rec-v100-resnet50-b32-fp32-v1.1"


def perfetto_ns(value, rounding):
    """Perfetto's JSON importer (``CoerceToTs``): an int is us x 1000; a double is us x 1000
    rounded (``llround``, current versions) or truncated (older versions)."""
    if isinstance(value, int):
        return value * 1000
    return round(value * 1000.0) if rounding else int(value * 1000.0)


@pytest.fixture
def doc(monkeypatch):
    monkeypatch.delenv("DGTRACES_DATA", raising=False)
    trace = load_run_trace(REC, RELEASE)
    pred, sched = predict_trace(trace, Cluster(4, 2, "pcie3", "10gbe", "ring"), Policy("wfbp"))
    # written and read back as a file would be
    return json.loads(json.dumps(chrome_trace(sched, pred), default=str)), sched


@pytest.mark.parametrize("rounding", [True, False], ids=["llround", "truncating"])
def test_no_slice_ends_after_the_next_on_its_track_begins(doc, rounding):
    """#28 point 14: Perfetto converts ts and dur to ns apart; float us rounded apart made
    174 of 1,939 slices end 1 ns after the next began (they spill to an overflow track)."""
    events, sched = doc[0]["traceEvents"], doc[1]
    tracks = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            start = perfetto_ns(e["ts"], rounding)
            tracks[e["pid"], e["tid"]].append((start, start + perfetto_ns(e["dur"], rounding)))
    assert len(tracks) >= 4 + 1  # compute per worker, at least one link
    touching = 0
    for slices in tracks.values():
        slices.sort()
        for (_, end), (start, _) in pairwise(slices):
            assert end <= start
            touching += end == start
    assert touching > 1000  # back-to-back layers stay back to back
    # every slice sits on the schedule's times rounded to whole ns
    worker0 = {e["name"]: e for e in events if e["ph"] == "X" and e["pid"] == 0}
    for t in sched.tasks:
        if t.id in worker0:
            e = worker0[t.id]
            assert perfetto_ns(e["ts"], rounding) == ns(t.start_ms)
            assert perfetto_ns(e["dur"], rounding) == ns(t.end_ms) - ns(t.start_ms)


@pytest.mark.parametrize("n", [0, 1, 999, 1000, 123_456_789, 91_379_559, 2**40 + 7])
def test_perfetto_us_reads_back_exactly(n):
    x = perfetto_us(n)
    assert perfetto_ns(x, True) == n and perfetto_ns(x, False) == n
