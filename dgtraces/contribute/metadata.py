"""``contribution.yaml``: who contributed, under which license, on what, and how.

Parsed with PyYAML's safe loader after refusing anchors/aliases (no billion-laughs) and
files over a size limit. Required: ``contributor``, ``license`` (one of
:data:`LICENSES`), ``hardware``, ``software``, ``collection``. Optional ``devices``: a
list of ``{device, kind, name}`` (no other keys; text values) for devices that are not in
the store's devices table, and ``notes``. :func:`json_failures` checks that the parsed
metadata can be written as JSON (staging records it in ``entry.json``).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import Code, DgtracesError, Failure

REQUIRED = ("contributor", "license", "hardware", "software", "collection")
OPTIONAL = ("devices", "notes", "email", "partial")
LICENSES = ("CC-BY-4.0", "CC0-1.0", "ODC-By-1.0", "PDDL-1.0")
MAX_TEXT = 4000
DEVICE_KEYS = ("device", "kind", "name")
_DEVICE_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]*")  # fullmatch (#29 M3)


def _fail(failures: list[Failure], column: str, message: str, expected=None, found=None):
    failures.append(Failure(Code.METADATA, message, file="contribution.yaml", column=column,
                            expected=expected, found=found))


def _text_ok(value) -> bool:
    """A short string, or a flat mapping/list of short scalars."""
    def scalar(v):
        return isinstance(v, (str, int, float, bool)) and len(str(v)) <= MAX_TEXT

    if isinstance(value, str):
        return 0 < len(value.strip()) and len(value) <= MAX_TEXT
    if isinstance(value, dict):
        return 0 < len(value) <= 64 and all(isinstance(k, str) and scalar(v)
                                            for k, v in value.items())
    if isinstance(value, list):
        return 0 < len(value) <= 64 and all(scalar(v) for v in value)
    return False


def _check_devices(devices, failures: list[Failure]) -> None:
    if not isinstance(devices, list) or len(devices) > 64:
        _fail(failures, "devices", "devices must be a list (at most 64)",
              "list of {device, kind, name}", type(devices).__name__)
        return
    seen: set[str] = set()
    for i, dev in enumerate(devices):
        key = dev.get("device") if isinstance(dev, dict) else None
        if isinstance(key, str) and key in seen:  # one declaration per device (#29 M2)
            _fail(failures, f"devices[{i}].device", "device declared twice",
                  "each device once", repr(key)[:80])
        seen.add(key) if isinstance(key, str) else None
        extra = sorted(map(str, set(dev) - set(DEVICE_KEYS))) if isinstance(dev, dict) else []
        if extra:
            _fail(failures, f"devices[{i}]", "unknown key in device entry",
                  " | ".join(DEVICE_KEYS), ", ".join(extra)[:80])
        elif not isinstance(dev, dict) or not isinstance(dev.get("device"), str) \
                or not _DEVICE_KEY.fullmatch(dev["device"]):
            _fail(failures, f"devices[{i}].device", "bad device key",
                  "letters, digits, ._:+-", repr(dev)[:80])
        elif dev.get("kind") not in ("cpu", "gpu"):
            _fail(failures, f"devices[{i}].kind", "bad device kind", "cpu | gpu",
                  repr(dev.get("kind")))
        elif not isinstance(dev.get("name"), str) or not dev["name"].strip() \
                or len(dev["name"]) > MAX_TEXT:
            _fail(failures, f"devices[{i}].name", "device needs a name", "text",
                  repr(dev.get("name")))


class _DuplicateKey(Exception):
    pass


def _strict_loader():
    import yaml

    class Loader(yaml.SafeLoader):
        """SafeLoader refusing a key given twice in one mapping (PyYAML keeps the last)."""

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in seen:
                        raise _DuplicateKey(str(key)[:80])
                    seen.add(key)
                except TypeError:  # an unhashable key: SafeLoader reports it
                    pass
            return super().construct_mapping(node, deep=deep)

    return Loader


def parse_meta(text: str, problems: list[Failure] | None = None) -> dict:
    """Parse and check the YAML text; raises METADATA / BAD_FILE with every problem.

    With ``problems``, field-level METADATA failures are appended there instead and the
    mapping is returned, so the tables can be checked in the same report; unreadable YAML,
    anchors and a non-mapping still raise."""
    import yaml

    from dgtraces.io.bounded import check_yaml_depth

    try:
        check_yaml_depth(yaml.parse(text, Loader=yaml.SafeLoader), "contribution.yaml")
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise DgtracesError("contribution.yaml: anchors/aliases are not allowed",
                                    code=Code.BAD_FILE,
                                    failures=[Failure(Code.BAD_FILE, "YAML anchor or alias",
                                                      file="contribution.yaml")])
        meta = yaml.load(text, Loader=_strict_loader())  # noqa: S506 (a SafeLoader)
    except ValueError as exc:  # a 5000-digit integer: past Python's int-from-text limit
        raise DgtracesError(f"contribution.yaml: a value YAML cannot read ({str(exc)[:120]})",
                            code=Code.BAD_FILE,
                            failures=[Failure(Code.BAD_FILE, "unreadable YAML value",
                                              file="contribution.yaml")]) from None
    except _DuplicateKey as exc:
        raise DgtracesError(f"contribution.yaml: key {exc.args[0]!r} given twice",
                            code=Code.METADATA,
                            failures=[Failure(Code.METADATA, "duplicate YAML key",
                                              file="contribution.yaml", column=exc.args[0],
                                              expected="each key once",
                                              found="twice")]) from None
    except yaml.YAMLError as exc:
        raise DgtracesError(f"contribution.yaml: not valid YAML ({str(exc)[:200]})",
                            code=Code.BAD_FILE,
                            failures=[Failure(Code.BAD_FILE, "invalid YAML",
                                              file="contribution.yaml")]) from None
    if not isinstance(meta, dict):
        raise DgtracesError("contribution.yaml must be a mapping", code=Code.METADATA,
                            failures=[Failure(Code.METADATA, "not a mapping",
                                              file="contribution.yaml", expected="mapping",
                                              found=type(meta).__name__)])
    failures: list[Failure] = []
    for key in meta:
        if key not in REQUIRED + OPTIONAL:
            _fail(failures, str(key), "unknown field", " | ".join(REQUIRED + OPTIONAL),
                  repr(key)[:80])
    for key in REQUIRED:
        if key not in meta:
            _fail(failures, key, "required field missing", "present", "absent")
        elif not _text_ok(meta[key]):
            _fail(failures, key, "must be non-empty text (or a flat mapping/list)",
                  f"<= {MAX_TEXT} chars", repr(meta[key])[:80])
    if "license" in meta and meta["license"] not in LICENSES:
        _fail(failures, "license", "license not accepted", " | ".join(LICENSES),
              repr(meta["license"])[:80])
    if "partial" in meta and not isinstance(meta["partial"], bool):
        _fail(failures, "partial", "must be true or false (true: traces lack layers on "
              "purpose)", "true | false", repr(meta["partial"])[:80])
    for key in ("notes", "email"):
        if key in meta and not _text_ok(meta[key]):
            _fail(failures, key, "must be text", f"<= {MAX_TEXT} chars", repr(meta[key])[:80])
    if "devices" in meta:
        _check_devices(meta["devices"], failures)
    if failures and problems is None:
        raise DgtracesError(f"contribution.yaml: {len(failures)} problem(s)", code=Code.METADATA,
                            failures=failures)
    if problems is not None:
        problems.extend(failures)
    return meta


def read_meta(path: Path, max_bytes: int, problems: list[Failure] | None = None) -> dict:
    size = path.stat().st_size
    if size > max_bytes:
        raise DgtracesError(f"{path.name}: too large", code=Code.BAD_FILE,
                            failures=[Failure(Code.BAD_FILE, "file too large", file=path.name,
                                              expected=f"<= {max_bytes} bytes", found=str(size))])
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DgtracesError(f"{path.name}: not UTF-8", code=Code.BAD_FILE,
                            failures=[Failure(Code.BAD_FILE, f"not UTF-8 at byte {exc.start}",
                                              file=path.name)]) from None
    return parse_meta(text, problems)


def json_failures(meta: dict) -> list[Failure]:
    """METADATA failure if ``meta`` cannot be stored as strict JSON (a YAML date, NaN...)."""
    import json

    try:
        json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return [Failure(Code.METADATA, f"value cannot be stored as JSON ({str(exc)[:120]})",
                        file="contribution.yaml", expected="text, numbers, true/false",
                        found=type(exc).__name__)]
    return []


def device_keys(meta: dict) -> dict[str, str | None]:
    """Devices declared in contribution.yaml: key -> kind (cpu | gpu); malformed entries
    (reported as METADATA failures) are skipped."""
    devices = meta.get("devices") or []
    return {d["device"]: d.get("kind") for d in devices if isinstance(devices, list)
            and isinstance(d, dict) and isinstance(d.get("device"), str)}


def device_names(meta: dict) -> dict[str, str]:
    """Devices declared in contribution.yaml: key -> name (malformed entries skipped)."""
    devices = meta.get("devices") or []
    return {d["device"]: d["name"] for d in devices if isinstance(devices, list)
            and isinstance(d, dict) and isinstance(d.get("device"), str)
            and isinstance(d.get("name"), str)}
