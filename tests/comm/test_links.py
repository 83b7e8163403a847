"""Interconnect presets: links.csv and link_aliases.csv (comm/links.py)."""

import numpy as np
import pytest

from dgtraces.comm.links import get_link, links_frame


def test_links_table_is_schema_valid_and_cited():
    df = links_frame(use_store=False)
    stacks = {"10gbe-mpi", "10gbe-nccl", "25gbe-nccl", "100gbe-roce", "ib-fdr", "ib-edr",
              "ib-hdr", "ib-ndr", "pcie3", "pcie4", "pcie5", "nvlink1", "nvlink2", "nvlink3",
              "nvlink4"}
    assert stacks <= set(df["link"])
    assert set(df.loc[df["provenance"] == "measured", "link"]) == {"loopback-gloo",
                                                                   "cpu-memcpy"}
    assert (df["source"].str.len() > 20).all()
    # every assumed figure says so; no preset is silent about its alpha
    assumed = df[df["notes"].str.contains("assum", na=False)]
    assert stacks - {"10gbe-mpi"} <= set(assumed["link"])  # 10gbe-mpi is a fit
    # a stack row's bandwidth is the datasheet line rate x a cited measured efficiency
    eff = df[df["source"].str.contains("efficiency", na=False)]
    assert {"10gbe-nccl", "ib-edr", "nvlink3"} <= set(eff["link"])


def test_aliases_pick_the_documented_rows():
    from dgtraces.comm.links import link_aliases

    aliases = link_aliases()
    assert aliases["10gbe"][0] == "10gbe-nccl"
    assert get_link("10gbe") == get_link("10gbe-nccl")
    for alias, (target, why) in aliases.items():
        assert get_link(alias).name == target and why
    # NVLink rows are the aggregate per GPU, not one link
    assert get_link("nvlink2").bandwidth_gb_s > 4 * get_link("nvlink2-link").bandwidth_gb_s


def test_10gbe_row_is_the_fit_of_the_osu_log():
    from dgtraces.reference import path

    pts = []
    for line in path("bcaffe/allreduce2.log").read_text().splitlines():
        if line and not line.startswith("#"):
            _, size, us = line.replace(",", " ").split()
            pts.append((int(size), float(us)))
    a = np.array([p for p in pts if p[0] >= 12288])
    (alpha_ar, beta_ar), *_ = np.linalg.lstsq(np.c_[np.ones(len(a)), a[:, 0]], a[:, 1],
                                              rcond=None)
    row = links_frame(use_store=False).set_index("link").loc["10gbe-mpi"]
    assert row["alpha_us"] == pytest.approx(alpha_ar / 2, rel=1e-3)
    assert row["bandwidth_gb_s"] == pytest.approx(1 / beta_ar / 1e3, rel=1e-3)
