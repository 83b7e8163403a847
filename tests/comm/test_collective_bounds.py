"""``collective`` bounds (issue #36, lows): a size that is not a whole number of float
elements was rounded down silently in the row's count (1001 B -> 250 elements, timed as 1001
B), and the rank count was unbounded (10**12 ranks took); NCCL's ``nranks`` is a C int."""

import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.comm.collective_time import parse_sizes, predict_collective
from dgtraces.comm.nccl import MAX_RANKS, PLAUSIBLE_RANKS
from dgtraces.errors import DgtracesError
from tests.attack_tally import record


@pytest.mark.parametrize("sizes", ["1001", "7", "8,1002", "0.5KiB,1.001KiB"])
def test_a_size_of_no_whole_float_elements_is_refused(sizes):
    with pytest.raises(DgtracesError) as exc:
        parse_sizes(sizes)
    record("silent --sizes rounding", exc.value.code == "BAD_INPUT")
    assert exc.value.code == "BAD_INPUT" and exc.value.failures[0].column == "sizes"


def test_whole_float_sizes_and_the_printed_count():
    assert parse_sizes("8,1.5K,1MiB") == (8, 1536, 1 << 20)
    out = CliRunner().invoke(main, ["collective", "--sizes", "1.5K", "--workers", "2",
                                    "--gpus-per-node", "2"]).output
    row = next(line.split() for line in out.splitlines() if line.strip().startswith("1536"))
    assert row[:3] == ["1536", "384", "float"]  # bytes = count x 4, nothing dropped


@pytest.mark.parametrize("workers, gpus", [(10 ** 12, 8), (MAX_RANKS + 1, 1), (8, 10 ** 12)])
def test_unbounded_ranks_are_refused(workers, gpus):
    with pytest.raises(DgtracesError) as exc:
        predict_collective("allreduce", [1 << 20], workers=workers, gpus_per_node=gpus,
                           intra="nvlink3", inter="ib-hdr")
    record("unbounded ranks", exc.value.code == "BAD_INPUT")
    assert exc.value.code == "BAD_INPUT"


def test_the_largest_plausible_rank_count_is_modelled_and_more_is_plausibility():
    """Acceptance review #26: 10**9 ranks (125 M nodes) were modelled; the bound is
    PLAUSIBLE_RANKS (about ten times the largest GPU cluster), below NCCL's C int."""
    res = predict_collective("allreduce", [1 << 20], workers=PLAUSIBLE_RANKS,
                             gpus_per_node=8, intra="nvlink3", inter="ib-hdr")
    assert res.rows[0].time_us > 0
    for workers in (PLAUSIBLE_RANKS + 8, 10 ** 9, MAX_RANKS - MAX_RANKS % 8):
        with pytest.raises(DgtracesError) as exc:
            predict_collective("allreduce", [1 << 20], workers=workers, gpus_per_node=8,
                               intra="nvlink3", inter="ib-hdr")
        assert exc.value.code == "PLAUSIBILITY" and exc.value.failures[0].column == "workers"
    from dgtraces.predict import Cluster

    with pytest.raises(DgtracesError) as exc:
        Cluster(10 ** 9, 8)
    assert exc.value.code == "PLAUSIBILITY"
