"""dgtraces import nccl-tests: header -> workers/GPU, table -> comm rows, alpha-beta fits."""

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from dgtraces.cli import main
from dgtraces.errors import DgtracesError
from dgtraces.importers import nccl_tests
from dgtraces.reference.devices import device_key
from tests.paths import FIXTURES

FIX = FIXTURES / "nccl_tests"
AR = FIX / "all_reduce_perf_8xh100.log"
AG = FIX / "ag_2nodes.log"


def test_all_reduce_log_current_format():
    res = nccl_tests.import_log(AR)
    assert (res.collective, res.ranks, res.hosts) == ("allreduce", 8, 1)
    # h100-80gb-hbm3, or h100 once a datasheet row for it ships
    assert res.gpu == "NVIDIA H100 80GB HBM3" and res.device == device_key(res.gpu)
    assert res.device.startswith("h100")
    comm = res.comm
    assert len(comm) == 2 * 28 and set(comm["workers"]) == {8}
    assert set(comm["backend"]) == {"nccl"}
    assert set(comm["interconnect"]) == {f"{res.device}-x8-intra-node"}
    assert set(comm["n"]) == {20}
    first = comm.iloc[0]
    assert (first.message_bytes, first.time_ms) == (8, pytest.approx(0.0282))
    assert comm["source"].str.contains("; in-place;").sum() == 28
    fits = res.comm_fits
    assert len(fits) == 2 and set(fits["provenance"]) == {"reconstructed"}
    for f in fits.itertuples():  # the generator's line: alpha 28 us + 1.5/2 us noise, 170 GB/s
        assert 26 < f.alpha_us < 32 and 150 < f.bandwidth_gb_s < 190 and f.r2 > 0.99
        assert (f.min_bytes, f.max_bytes, f.n_points) == (8, 2 ** 30, 28)


def test_older_format_two_hosts_collective_inferred_from_columns():
    # no <name>_perf anywhere: busbw/algbw 0.75 for 4 ranks and redop none -> allgather
    res = nccl_tests.import_log(AG)
    assert res.collective == "allgather" and res.collective_how.startswith("inferred")
    res = nccl_tests.import_log(AG, collective="allgather", interconnect="ib-hdr")
    assert res.collective_how == "given"
    assert (res.ranks, res.hosts) == (4, 2) and res.device.startswith("a100")
    assert set(res.comm["interconnect"]) == {"ib-hdr"} and set(res.comm["n"]) == {50}
    assert res.comm["message_bytes"].max() == 268435456
    assert all(20 < f.bandwidth_gb_s < 24.5 for f in res.comm_fits.itertuples())


def test_wrong_results_and_broken_lines(tmp_path):
    text = AR.read_text().splitlines()
    bad = tmp_path / "all_reduce_perf_bad.log"
    i = next(k for k, line in enumerate(text) if line.strip().startswith("1024 "))
    cells = text[i].split()
    cells[-1] = "3"
    bad.write_text("\n".join(text[:i] + ["  ".join(cells)] + text[i + 1:]) + "\n")
    with pytest.raises(DgtracesError) as exc:
        nccl_tests.import_log(bad)
    assert exc.value.code == "PLAUSIBILITY" and exc.value.failures[0].row == i + 1
    bad.write_text("\n".join(text[:i] + [text[i][:40]] + text[i + 1:]) + "\n")
    with pytest.raises(DgtracesError) as exc:
        nccl_tests.import_log(bad)
    assert exc.value.code == "BAD_FILE" and exc.value.failures[0].row == i + 1
    empty = tmp_path / "all_reduce_perf_empty.log"
    empty.write_text("# nothing here\n")
    with pytest.raises(DgtracesError) as exc:
        nccl_tests.import_log(empty)
    assert exc.value.code == "BAD_FILE"


def test_cli_writes_comm_and_fits_csv(tmp_path):
    out = tmp_path / "nccl"
    res = CliRunner().invoke(main, ["import", "nccl-tests", str(AR), str(AG), "--out",
                                    str(out)])
    assert res.exit_code == 0, res.output
    comm = pd.read_csv(out / "comm.csv")
    fits = pd.read_csv(out / "comm_fits.csv")
    assert len(comm) == 2 * 28 + 2 * 10 and len(fits) == 4
    assert set(fits["workers"]) == {8, 4} and set(fits["backend"]) == {"nccl"}
    res = CliRunner().invoke(main, ["validate", str(out / "comm.csv"),
                                    str(out / "comm_fits.csv")])
    assert res.exit_code == 0, res.output


def test_device_keys_from_gpu_names():
    known = {"v100": {"memory_gb": "16"}, "h200": {}, "a100": {"memory_gb": "80"},
             "a100-pcie": {}}
    assert device_key("Tesla V100-SXM2-16GB", known) == "v100"
    assert device_key("NVIDIA H200", known) == "h200"
    assert device_key("NVIDIA A100-SXM4-80GB", known) == "a100"
    assert device_key("NVIDIA A100-SXM4-40GB", known) == "a100-sxm4-40gb"  # other memory
    assert device_key("NVIDIA A100 PCIe", known) == "a100-pcie"  # longest match
    assert device_key("NVIDIA GeForce RTX 3090", known) == "rtx-3090"
    assert device_key("NVIDIA H2000", known) == "h2000"  # no prefix match without a dash


def _renamed(tmp_path, text: str, name: str) -> Path:
    path = tmp_path / name
    path.write_text(text.replace("all_reduce_perf", "a_benchmark"))
    return path


def test_collective_inferred_or_refused_naming_the_columns(tmp_path):
    text = AR.read_text()
    unnamed = _renamed(tmp_path, text, "run.log")  # 8 ranks, busbw/algbw 1.75: all-reduce
    assert "_perf" not in unnamed.read_text()
    res = nccl_tests.import_log(unnamed)
    assert res.collective == "allreduce" and "busbw/algbw 1.750" in res.collective_how
    # 2 ranks, older format (no root), redop sum: all-reduce and reduce both give ratio 1
    two = "\n".join(line for line in AG.read_text().splitlines()
                     if "Rank  2" not in line and "Rank  3" not in line)
    two = two.replace(" none ", "  sum ").replace("0.27  0e+00", "0.35  0e+00")
    lines = []
    for line in two.splitlines():
        cells = line.split()
        if cells and cells[0].isdigit():
            cells[6] = cells[5]  # busbw = algbw
            line = "  ".join(cells)
        lines.append(line)
    amb = tmp_path / "two.log"
    amb.write_text("\n".join(lines) + "\n")
    with pytest.raises(DgtracesError) as exc:
        nccl_tests.import_log(amb)
    assert exc.value.code == "BAD_INPUT"
    assert exc.value.failures[0].column == "busbw/algbw, redop"
    assert exc.value.failures[0].found == "allreduce, reduce"
    assert nccl_tests.import_log(amb, collective="reduce").collective == "reduce"


@pytest.mark.parametrize("log", [AR, AG])
def test_a_log_cut_at_a_line_boundary_is_refused(tmp_path, log):
    # #25 Bad input: the header's sweep (minBytes, maxBytes, step) says where the table ends
    lines = log.read_text().splitlines()
    table = [k for k, line in enumerate(lines) if line.strip()[:1].isdigit()]
    assert nccl_tests.import_log(log).comm["message_bytes"].max() > 0  # whole log: accepted
    for cut_at in (table[-1], table[len(table) // 2]):
        cut = tmp_path / log.name
        cut.write_text("\n".join(lines[:cut_at]) + "\n")
        with pytest.raises(DgtracesError) as exc:
            nccl_tests.import_log(cut)
        assert exc.value.code == "BAD_FILE" and exc.value.failures[0].row == cut_at
    # sizes rounded down by nccl-tests (all_gather over 3 ranks: 134217720 for 128 MiB) are
    # not a truncation; the size before is
    head = "# nThread 1 nGpus 3 minBytes 8 maxBytes 134217728 step: 2(factor) iters: 20"
    for size, refused in ((134217720, False), (67108860, True), (134217728, False)):
        if refused:
            with pytest.raises(DgtracesError):
                nccl_tests.check_complete(_block(head, 3, size), "x.log")
        else:
            nccl_tests.check_complete(_block(head, 3, size), "x.log")
    # a complete log whose maxBytes nccl-tests lowered to fit the GPUs' memory (it says so)
    lines = AR.read_text().splitlines()
    lines[1] = lines[1].replace("maxBytes 1073741824", "maxBytes 8589934592")
    lines.insert(2, "#\n# Reducing maxBytes to 1200000000 due to memory limitation")
    reduced = tmp_path / "reduced.log"
    reduced.write_text("\n".join(lines) + "\n")
    assert nccl_tests.import_log(reduced).comm["message_bytes"].max() == 1073741824
    cut = [k for k, line in enumerate(lines) if line.strip()[:1].isdigit()][-1]
    reduced.write_text("\n".join(lines[:cut]) + "\n")
    with pytest.raises(DgtracesError) as exc:  # still refused when cut before the new end
        nccl_tests.import_log(reduced)
    assert exc.value.code == "BAD_FILE"
    step = "# nThread 1 nGpus 2 minBytes 1000 maxBytes 5500 step: 1000(bytes) iters: 20"
    nccl_tests.check_complete(_block(step, 2, 5000), "x.log")
    with pytest.raises(DgtracesError):
        nccl_tests.check_complete(_block(step, 2, 4000), "x.log")


def _block(header: str, ranks: int, size: int):
    """A block of ``ranks`` rank lines whose table's one row (line 9) has ``size``."""
    block = nccl_tests.Block(1, header=header, ranks=[(r, "h", "g") for r in range(ranks)])
    block.lines.append(9)
    block.sizes.append(size)
    for times in block.times_us:
        times.append(1.0)
    return block


def test_a_log_of_another_nccl_tests_binary_is_not_read_as_all_gather(tmp_path):
    # #25 item 4: an alltoall_perf log has all_gather's columns (busbw/algbw (P-1)/P, redop
    # none); its name says what it is: import refuses it, validate-comm models all-to-all
    from dgtraces.evaluation.comm import LogCluster, validate

    a2a = tmp_path / "run.log"
    a2a.write_text("$ mpirun -np 4 ./build/alltoall_perf -b 1K -e 256M -f 4 -g 1\n"
                   + AG.read_text())
    with pytest.raises(DgtracesError) as exc:
        nccl_tests.import_log(a2a)
    assert exc.value.code == "BAD_INPUT" and exc.value.failures[0].found == "alltoall"
    (log,) = validate([str(a2a)], LogCluster(None, None, "nvlink3", "ib-hdr")).logs
    assert log.collective == "alltoall"
    sr = tmp_path / "sendrecv_perf.log"
    sr.write_text(AG.read_text())
    with pytest.raises(DgtracesError) as exc:
        validate([str(sr)], LogCluster(None, None, "nvlink3"))
    assert exc.value.code == "BAD_INPUT"
    assert nccl_tests.import_log(AG).collective == "allgather"  # unnamed: from the columns
