"""Tally of the attack classes the hardening tests try (issue #14): class -> [tried, refused].

Tests call :func:`record` once per attempt; conftest prints the table at the end of a run
(under pytest-xdist, after adding up every worker's tally with :func:`merge`)."""

TALLY: dict[str, list[int]] = {}


def record(attack_class: str, refused: bool) -> None:
    row = TALLY.setdefault(attack_class, [0, 0])
    row[0] += 1
    row[1] += bool(refused)


def refused(call, code: str, attack_class: str):
    """Run ``call``, which must raise a DgtracesError coded ``code``; record the attempt under
    ``attack_class`` (refused = that code) and return the error."""
    import pytest

    from dgtraces.errors import DgtracesError

    with pytest.raises(DgtracesError) as exc:
        call()
    record(attack_class, exc.value.code == code)
    assert exc.value.code == code, exc.value.report()
    return exc.value


def merge(other: dict[str, list[int]]) -> None:
    """Add another process's tally (an xdist worker's) to this one."""
    for name, (tried, refused) in other.items():
        row = TALLY.setdefault(name, [0, 0])
        row[0] += tried
        row[1] += refused


def lines() -> list[str]:
    return [f"{name:<34} tried {t:3d}  refused {r:3d}" for name, (t, r) in sorted(TALLY.items())]
