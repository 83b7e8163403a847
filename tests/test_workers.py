"""The suite's worker plan (tests/workers.py): the shared module groups exist and are
scheduled as one unit each (issue #36)."""

from tests.paths import REPO
from tests.workers import SHARED, scope


def test_every_shared_prefix_names_a_test_module_or_folder():
    for group, prefixes in SHARED.items():
        for prefix in prefixes:
            path = REPO / prefix
            assert (path.is_dir() if prefix.endswith("/") else path.is_file()), (group, prefix)
            assert prefix.startswith("tests/") and (prefix.endswith("/") or
                                                     prefix.endswith(".py"))


def test_a_group_is_one_unit_and_every_other_module_its_own():
    assert scope("tests/collect/test_collect_torch.py::test_x[a]") == "shared:torch"
    assert scope("tests/collect/test_collect_gpu.py::TestX::test_y") == "shared:torch"
    assert scope("tests/models/test_models_torchvision.py::test_z") == "shared:torch"
    assert scope("tests/reconstruct/test_variants.py::test_loo") == "shared:fits"
    assert scope("tests/predict/test_predict_kineto.py::t") == "shared:v100-traces"
    assert scope("tests/models/test_models.py::test_z") == "tests/models/test_models.py"
    assert scope("tests/predict/test_predict.py::t[1-2]") == "tests/predict/test_predict.py"
    assert scope("tests/collectors_elsewhere.py::t") == "tests/collectors_elsewhere.py"


def test_the_whole_suite_schedules_with_the_groups(monkeypatch):
    """The conftest hook hands pytest-xdist a loadscope scheduler that splits by
    :func:`scope` (only for ``--dist loadscope``, which the whole-suite run sets)."""
    import pytest

    xdist = pytest.importorskip("xdist.scheduler")
    from tests import conftest

    class Config:
        def __init__(self, dist):
            self.dist = dist

        def getvalue(self, name):
            assert name == "dist"
            return self.dist

    made = []
    monkeypatch.setattr(xdist.LoadScopeScheduling, "__init__",
                        lambda self, config, log=None: made.append(config))
    assert conftest.pytest_xdist_make_scheduler(Config("load"), None) is None and not made
    sched = conftest.pytest_xdist_make_scheduler(Config("loadscope"), None)
    assert isinstance(sched, xdist.LoadScopeScheduling) and len(made) == 1
    ids = ["tests/collect/test_collect.py::a", "tests/models/test_models_torchvision.py::b",
           "tests/models/test_models.py::c"]
    assert [sched._split_scope(i) for i in ids] == ["shared:torch", "shared:torch",
                                                    "tests/models/test_models.py"]
