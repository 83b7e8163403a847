"""Error classes: reason codes as an enum, defaults that match their use, pickling."""

import ast
import inspect
import pickle
from pathlib import Path

import pytest

import dgtraces
from dgtraces import errors
from dgtraces.errors import CODES, Code, DgtracesError, Failure


def _all_error_classes() -> list[type[DgtracesError]]:
    import dgtraces.query.engine  # noqa: F401  (SqlError lives there)

    seen, todo = [], [DgtracesError]
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo.extend(cls.__subclasses__())
    return seen


def _instance(cls):
    sig = inspect.signature(cls.__init__)
    if "known" in sig.parameters:
        return cls("nope", ["alexnet", "resnet50"])
    if "purpose" in sig.parameters:
        return cls("torch", "collect", "layer collection")
    return cls("boom", failures=[Failure(str(cls.code), "x", row=3)], hint="try again")


@pytest.mark.parametrize("cls", _all_error_classes(), ids=lambda c: c.__name__)
def test_every_error_class_pickles(cls):
    err = _instance(cls)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert back.code == err.code and back.message == err.message
    assert back.failures == err.failures and back.hint == err.hint and back.args == err.args
    assert back.report() == err.report()


def test_codes_are_an_enum_documented_once():
    assert set(CODES) == set(Code)
    assert Code.SCHEMA == "SCHEMA" and DgtracesError("x", code="SQL").code is Code.SQL
    with pytest.raises(ValueError):
        DgtracesError("x", code="NOT_A_CODE")


def test_subclasses_are_raised_with_their_own_code():
    """No ``raise Sub(..., code=X)`` where X differs from Sub's default (the base class
    DgtracesError is the one raised with an explicit code)."""
    defaults = {cls.__name__: str(cls.code) for cls in _all_error_classes()}
    bad = []
    for path in Path(dgtraces.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in defaults and node.func.id != "DgtracesError"):
                continue
            for kw in node.keywords:
                if (kw.arg == "code" and isinstance(kw.value, ast.Constant)
                        and kw.value.value != defaults[node.func.id]):
                    bad.append(f"{path.name}:{node.lineno} {node.func.id} {kw.value.value}")
    assert bad == []


def test_missing_dependency_keeps_its_package_after_pickling():
    err = errors.MissingDependencyError("pynvml", "gpu", "GPU metadata")
    assert pickle.loads(pickle.dumps(err)).package == "pynvml"


def test_a_missing_module_is_named_by_its_pip_distribution(monkeypatch):
    """#36 trial: a missing ``google.protobuf`` said "needs the optional package 'google'";
    the install names the distribution, ``protobuf``."""
    import importlib

    real = importlib.import_module

    def no_protobuf(name, *args, **kwargs):
        if name.startswith("google"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", no_protobuf)
    try:
        errors.require("google.protobuf", "sim", "writing Chakra execution traces")
    except errors.MissingDependencyError as exc:
        assert exc.code == "MISSING_DEPENDENCY" and exc.package == "protobuf"
    else:
        raise AssertionError("google.protobuf imported although its import was refused")
