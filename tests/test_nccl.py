"""roofkit.nccl and comms as NCCL runs them: NCCL's own figures (src/graph/tuning.cc, topo.h), published nccl-tests
results the bound must never fall below, and the calibrated estimate against those same measurements."""

import json

import pytest

from roofkit.perf import comms, nccl
from roofkit.catalogs import links
from roofkit.errors import InvalidValue

from helpers import run

# Published nccl-tests results (bus bandwidth, GB/s), each a measurement the bound must not fall below:
PUBLISHED = [
    # (collective, bytes, gpus, link, busbw GB/s, source)
    ("all-reduce", 8e9, 8, "hgx-h100", 370, "scaling book, gpus.md: ring, 8 x H100, SHARP disabled"),
    ("all-reduce", 8e9, 8, "hgx-h100", 480, "scaling book, gpus.md: NVLink SHARP enabled"),
    ("all-reduce", 8e9, 8, "hgx-h100", 476, "NVIDIA/nccl-tests issue 290: one H100 node, NVLS"),
    ("all-reduce", 8e9, 8, "hgx-a100", 235, "ml-engineering, network/README.md: 8 x A100"),
]


def test_tuning_cc_figures():
    # tuning.cc (NVIDIA/nccl 5067397): hwLatencies, NVLink, ring: LL 0.6, LL128 1.9, Simple 3.4 us; network 2.7/4/14
    assert [nccl.hw_latency("nvlink", "ring", p) * 1e6 for p in nccl.PROTOCOLS] == pytest.approx([0.6, 1.9, 3.4])
    assert [nccl.hw_latency("net", "ring", p) * 1e6 for p in nccl.PROTOCOLS] == pytest.approx([2.7, 4.0, 14.0])
    assert nccl.base_latency("ring", "LL") * 1e6 == pytest.approx(6.6)
    assert nccl.protocol_share("LL") == 0.5 and nccl.protocol_share("LL128") == 0.92
    with pytest.raises(InvalidValue, match="Simple protocol only"):
        nccl.hw_latency("nvlink", "nvls", "LL")
    with pytest.raises(InvalidValue, match="unknown protocol"):
        nccl.protocol_share("LL64")


def test_nccl_s_per_link_figure_is_what_nccl_tests_measure():
    # topo.h: SM90_NVLINK_BW 20.6 GB/s per link; 18 links = 370.8 GB/s: the scaling book's "about 370"
    assert nccl.effective_bandwidth(links.get("hgx-h100")) == pytest.approx(18 * 20.6e9)
    assert nccl.effective_bandwidth(links.get("hgx-a100")) == pytest.approx(12 * 20.0e9)  # ~235 measured
    assert nccl.effective_bandwidth(links.get("ib-ndr")) == pytest.approx(47e9)  # "46-48GB/s per NIC"
    # a link without a measurement gets its kind's measured share of the line rate
    assert 0.9 < nccl.effective_bandwidth(links.get("ethernet-400g")) / 50e9 < 1


@pytest.mark.parametrize("collective, size, gpus, link, busbw, source", PUBLISHED)
def test_the_bound_is_never_below_a_published_nccl_tests_figure(collective, size, gpus, link, busbw, source):
    bound = comms.collective(collective, size, gpus, link, "auto")
    assert bound.busbw >= busbw * 1e9, source


def test_done_when_ring_370_and_auto_480_on_8_h100():
    ring = comms.all_reduce(8e9, 8, "hgx-h100", "ring", calibrated=True)
    auto = comms.all_reduce(8e9, 8, "hgx-h100", "auto", calibrated=True)
    assert ring.busbw == pytest.approx(370e9, rel=0.02) and ring.protocol == "Simple"
    assert auto.algorithm == "nvls" and auto.busbw == pytest.approx(480e9, rel=0.02)
    assert comms.all_reduce(8e9, 8, "hgx-a100", "auto", calibrated=True).busbw == pytest.approx(235e9, rel=0.05)


def test_the_cli_gives_the_same(capsys):
    base = ["comm", "all-reduce", "--bytes", "8GB", "--gpus", "8", "--link", "hgx-h100", "--calibrated", "--json"]
    code, out, err = run(capsys, *base, "--algorithm", "ring")
    ring = json.loads(out)
    assert code == 0, err
    assert ring["busbw_bytes_per_s"] == pytest.approx(370e9, rel=0.02) and ring["algorithm"] == "ring"
    code, out, _ = run(capsys, *base)
    auto = json.loads(out)
    assert auto["algorithm"] == "nvls" and auto["protocol"] == "Simple"
    assert auto["busbw_bytes_per_s"] == pytest.approx(480e9, rel=0.02)
    assert {"time_s", "algbw_bytes_per_s", "busbw_bytes_per_s", "algorithm", "protocol"} <= set(auto)
    code, out, _ = run(capsys, *base[:-1])
    assert code == 0 and "nvls" in out and "calibrated" in out


def test_the_cli_spans_nodes(capsys):
    code, out, err = run(capsys, "comm", "all-reduce", "--bytes", "1GB", "--gpus", "64", "--link", "hgx-h100",
                         "--nodes", "8", "--json")
    data = json.loads(out)
    assert code == 0, err
    assert data["nodes"] == 8 and data["inter"]["key"] == "ib-ndr" and data["algorithm"] in ("ring", "tree", "collnet")
    code, out, err = run(capsys, "comm", "all-reduce", "--bytes", "1GB", "--gpus", "64", "--link", "hgx-h100",
                         "--nodes", "4")
    assert code == 2 and "--nodes 4 x 8 GPUs" in err and len(err.strip().splitlines()) == 1


def test_protocols_trade_latency_for_bandwidth():
    tiny = comms.all_reduce(1e3, 8, "hgx-h100", calibrated=True)
    huge = comms.all_reduce(8e9, 8, "hgx-h100", calibrated=True)
    assert tiny.protocol == "LL" and huge.protocol == "Simple"
    # a forced protocol: LL carries half the bandwidth
    ll = comms.all_reduce(8e9, 8, "hgx-h100", protocol="LL")
    simple = comms.all_reduce(8e9, 8, "hgx-h100", protocol="Simple")
    assert ll.transfer_s == pytest.approx(2 * simple.transfer_s)


def test_the_bound_never_exceeds_the_estimate():
    for size in (1e2, 1e5, 1e7, 1e9, 1e10):
        for link, n in (("hgx-h100", 8), ("hgx-a100", 8), ("ib-ndr", 16), ("gb200-nvl72", 72)):
            for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
                bound = comms.collective(c, size, n, link, "auto")
                estimate = comms.collective(c, size, n, link, "auto", calibrated=True)
                assert bound.time_s <= estimate.time_s, (c, size, link)
        h_bound = comms.hierarchical("all-reduce", size, 8, 16, "hgx-h100", "ib-ndr")
        h_real = comms.hierarchical("all-reduce", size, 8, 16, "hgx-h100", "ib-ndr", calibrated=True)
        assert h_bound.time_s <= h_real.time_s


def test_nvls_and_in_network_reduction_where_the_fabric_has_them():
    with pytest.raises(InvalidValue, match="nvls algorithm needs an NVSwitch domain"):
        comms.all_reduce(1e9, 8, "hgx-a100", "nvls")
    with pytest.raises(InvalidValue, match="modelled for all-reduce only"):
        comms.collective("all-gather", 1e9, 8, "hgx-h100", "nvls")
    # InfiniBand with SHARP: the bound may reduce in the switches; the estimate keeps NCCL's default (no CollNet)
    assert comms.hierarchical("all-reduce", 1e10, 8, 32, "hgx-h100", "ib-ndr").algorithm == "collnet"
    assert comms.hierarchical("all-reduce", 1e10, 8, 32, "hgx-h100", "ib-ndr", calibrated=True).algorithm != "collnet"
    with pytest.raises(InvalidValue, match="has none"):
        comms.hierarchical("all-reduce", 1e9, 8, 4, "hgx-h100", "ethernet-400g", algorithm="collnet")


def test_existing_signatures_still_work():
    # the serving model calls these as they were: all_reduce(size, gpus, link), p2p(size, link)
    assert comms.all_reduce(16384, 8, "hgx-h100").algorithm == "ring"
    assert comms.p2p(1e6, "ib-ndr").time_s > 0
    assert comms.all_gather(1e6, 8, "hgx-h100").gpus == 8
    assert comms.collective("all-reduce", 1e9, 8, (1e-6, 1e11)).protocol is None
