"""The framework profiles registry (reference/frameworks.py, moved from predict/ so that the cost
models below the predictor read the same declaration): the ``family`` field of issue #33."""

from dgtraces.reference.frameworks import FAMILIES, FRAMEWORKS, NAMES, get_framework


def test_every_profile_names_a_declared_family_or_none():
    assert {p.family for p in FRAMEWORKS} <= set(FAMILIES) | {None}
    by_name = {p.name: p.family for p in FRAMEWORKS}
    assert by_name == {"pytorch-ddp": "pytorch", "apex-ddp": "pytorch", "horovod": None,
                       "tf-mirrored": "tf", "tf-ps": "tf", "mxnet-kvstore": "mxnet",
                       "paddle": "paddle", "caffe-mpi": "caffe"}
    # every family but the ones without a profile of their own is reachable by a name
    assert {get_framework(n).family for n in NAMES if n != "none"} - {None} == set(FAMILIES)
    assert get_framework("none") is None
