"""roofkit.comms: the α-β model against nccl-tests' bandwidth conventions, the JAX scaling book's
worked numbers, published measurements, its own sympy form, and random input."""

import math

import pytest
import sympy
from hypothesis import assume, given, settings, strategies as st

from roofkit.perf import comms
from roofkit.catalogs import links
from roofkit.errors import InvalidValue, RoofkitError

RING = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "reduce", "p2p"]


# --- nccl-tests (NVIDIA/nccl-tests, commit a0b82b2): src/*.cu, the XxxGetBw functions -----------
# A port of their arithmetic, written from their counts (count per rank, as the tests pass it),
# so that it does not share roofkit's convention for S.

def nccl_tests_bw(collective, count, typesize, sec, nranks):
    """(algBw, busBw) in bytes/s, as nccl-tests computes them (it prints them / 1e9)."""
    if collective == "all-reduce":
        base, factor = count * typesize / sec, 2 * (nranks - 1) / nranks
    elif collective in ("all-gather", "reduce-scatter"):
        base, factor = count * typesize * nranks / sec, (nranks - 1) / nranks
    elif collective == "all-to-all":
        base, factor = count * nranks * typesize / sec, (nranks - 1) / nranks
    else:  # broadcast, reduce, sendrecv
        base, factor = count * typesize / sec, 1
    return base, base * factor


@pytest.mark.parametrize("collective", RING)
@pytest.mark.parametrize("n", [2, 3, 8, 72])
def test_algbw_and_busbw_follow_nccl_tests(collective, n):
    count, typesize = 2**24, 4
    # roofkit's S: the whole array (all-reduce, broadcast), all-gather's output, reduce-scatter's
    # input, all-to-all's per-rank buffer: what nccl-tests divides by the time
    S = count * typesize * (n if collective in ("all-gather", "reduce-scatter", "all-to-all") else 1)
    r = comms.collective(collective, S, n, "hgx-b200" if n <= 8 else "gb200-nvl72")
    alg, bus = nccl_tests_bw(collective, count, typesize, r.time_s, 2 if collective == "p2p" else n)
    assert r.algbw == pytest.approx(alg) and r.busbw == pytest.approx(bus)


@pytest.mark.parametrize("collective", RING)
@pytest.mark.parametrize("n", [2, 4, 8, 64, 1000])
def test_busbw_of_a_bandwidth_bound_ring_is_the_link_bandwidth(collective, n):
    # PERFORMANCE.md: busbw "should reflect the speed of the hardware bottleneck", whatever n is
    beta = 450e9
    t = comms.time(collective, 1e9, n, alpha=0, bandwidth=beta)
    assert comms.busbw(collective, 1e9, 2 if collective == "p2p" else n, t) == pytest.approx(beta)


def test_busbw_is_the_same_formula_for_tree():
    # "this is independent of the algorithm used (ring, tree, ...)" (PERFORMANCE.md)
    tree = comms.collective("all-reduce", 1e9, 8, "hgx-h100", "tree")
    assert tree.busbw == pytest.approx(tree.algbw * 2 * 7 / 8)


def test_measured_all_reduce_is_about_80_percent_of_the_model():
    # 8 x H100, nccl-tests ring all-reduce: about 370 GB/s busbw (scaling book, gpus.md); ml-engineering
    # expects about 80% of the per-direction spec from a well-tuned fabric
    model = comms.all_reduce(16 * 2**30, 8, "hgx-h100")
    assert 0.75 < 370e9 / model.busbw < 0.9
    # 8 x A100: about 235 GB/s busbw measured (ml-engineering), against NVLink 3's 300 per direction
    assert 0.75 < 235e9 / comms.all_reduce(16 * 2**30, 8, "hgx-a100").busbw < 0.85


# --- the JAX scaling book's worked numbers (gpus.md, commit 1a55377; sharding.md; tpus.md) ------

def test_pop_quiz_1_all_gather_on_an_h100_node():
    # AllGather(bf16[1024, 16384]) on 8 x H100: "more precisely, 65us" (bandwidth term)
    S = 2 * 1024 * 16384
    assert comms.bandwidth_term("all-gather", S, 8, links.get("hgx-h100").bandwidth) == pytest.approx(65e-6, rel=0.01)


def test_quiz_2_all_gather_of_512_mb():
    # bf16[4096, 65536] gathered on 8 x H100: 536e6 x 7 / 3.6e12 = 1.04 ms
    S = 2 * 4096 * 65536
    bound = comms.all_gather(S, 8, "hgx-h100")
    assert bound.transfer_s == pytest.approx(1.04e-3, rel=0.01) and bound.time_s == pytest.approx(1.04e-3, rel=0.03)
    # "This could be latency-bound, so it may take longer than this in practice (in practice it takes about
    # 1.5ms)": the calibrated estimate, at nccl-tests' bandwidth and NCCL's latencies, lies in between
    assert bound.time_s < comms.all_gather(S, 8, "hgx-h100", calibrated=True).time_s < 1.5e-3


def test_quiz_4_two_node_all_gather_is_bound_inside_the_node():
    # "At the node level, B*7/(8*450e9) = B/514e9, while beyond B/800e9": the node level bounds it
    B = 1e9
    h = comms.hierarchical("all-gather", B, 8, 2, "hgx-h100", "ib-ndr")
    transfer = {level: c.transfer_s for level, c in h.phases}
    assert transfer["intra"] == pytest.approx(B / 514e9, rel=0.001)
    assert transfer["inter"] == pytest.approx(B / 800e9)
    assert h.time_s == pytest.approx(sum(c.latency_s for _, c in h.phases) + transfer["intra"])


def test_beyond_the_node_an_all_gather_costs_bytes_over_node_egress():
    # "T = bytes / W_node egress = bytes / 400e9" for a large H100 cluster: 8 NICs x 50 GB/s per node
    B, nodes = 1e10, 128
    h = comms.hierarchical("all-gather", B, 8, nodes, "hgx-h100", "ib-ndr")
    inter = dict(h.phases)["inter"]
    assert inter.transfer_s == pytest.approx(B / 400e9 * (nodes - 1) / nodes)


def test_sharding_pop_quiz_2_one_way_ring_on_tpu_v5e():
    # AllGather_Y over Y = 4 without a wraparound: 3 x 8.4e6 / 4.5e10 = 560 us
    S = 2 * 2048 * 8192
    assert comms.bandwidth_term("all-gather", S, 4, links.get("ici-v5e").bandwidth) == pytest.approx(560e-6, rel=0.01)


def test_throughput_bound_all_gather_does_not_depend_on_the_number_of_chips():
    # sharding.md: "the communication time depends only on the size of the array and the bandwidth"
    W, S = links.get("ici-v5p").collective_bandwidth, 1e9
    times = [comms.bandwidth_term("all-gather", S, n, W) for n in (16, 256, 4096)]
    assert times == sorted(times) and times[-1] == pytest.approx(S / W, rel=1e-3)


def test_tpu_latency_bound_below_45_kb():
    # sharding.md: with 4.5e10 one way and 1 us a hop, "any buffer under 45kB will be latency bound"
    link = links.get("ici-v5e")
    assert comms.latency_bound_size("p2p", 2, link.latency, link.bandwidth) == pytest.approx(45e3)


def test_tpu_two_port_transfer():
    # tpus.md question 5: bf16[8, 128, 8192] over both ports of a v5e: 1.7e7 / 9e10 = 188 us
    r = comms.p2p(2 * 8 * 128 * 8192, "ici-v5e")
    assert r.transfer_s == pytest.approx(188e-6, rel=0.02)


def test_all_to_all_inside_a_node():
    # gpus.md: B (N - 1) / (W N^2) for an array of B bytes spread over N GPUs
    B, N, W = 1e9, 8, 450e9
    assert comms.bandwidth_term("all-to-all", B / N, N, W) == pytest.approx(B * (N - 1) / (W * N**2))


def test_a_mesh_pair_gets_one_link_and_the_whole_platform_seven():
    # 8 x MI300X, fully connected: a send between two GPUs crosses one 64 GB/s link; an all-reduce over the 8 runs
    # on all 7 of each GPU's links (several rings at once); calibrated, AMD's 48 GB/s usable per link
    big = 8e9
    assert comms.p2p(big, "mi300x-xgmi").algbw == pytest.approx(64e9, rel=1e-3)
    two = comms.all_reduce(big, 2, "mi300x-xgmi")
    eight = comms.all_reduce(big, 8, "mi300x-xgmi")
    assert two.busbw == pytest.approx(64e9, rel=2e-3) and eight.busbw == pytest.approx(448e9, rel=2e-2)
    assert comms.all_reduce(big, 8, "mi300x-xgmi", calibrated=True).busbw == pytest.approx(7 * 48e9, rel=2e-2)
    assert comms.all_to_all(big, 4, "mi300x-xgmi").transfer_s == pytest.approx(big * 3 / 4 / (3 * 64e9))


# --- the model's own consistency -------------------------------------------------------------

@pytest.mark.parametrize("collective, algorithm", [(c, "ring") for c in RING] + [("all-reduce", "tree")])
def test_sympy_form_equals_the_numbers(collective, algorithm):
    S, n, a, b = sympy.symbols("S n alpha beta", positive=True)
    expr = comms.symbolic(collective, algorithm)
    values = {S: 3e8, n: 12, a: 2.7e-6, b: 5e10}
    assert float(expr.subs(values)) == pytest.approx(comms.time(collective, 3e8, 12, 2.7e-6, 5e10, algorithm))


def test_the_ring_all_reduce_formula():
    S, n, a, b = sympy.symbols("S n alpha beta", positive=True)
    assert sympy.simplify(comms.symbolic("all-reduce") - (2 * (n - 1) * a + 2 * (n - 1) / n * S / b)) == 0
    # an all-reduce is a reduce-scatter then an all-gather (Thakur et al. 2005)
    assert sympy.simplify(comms.symbolic("all-reduce") - comms.symbolic("reduce-scatter")
                          - comms.symbolic("all-gather")) == 0


def test_tree_beats_ring_for_small_messages_and_not_for_large():
    def gap(S, n):  # ring minus tree
        return comms.time("all-reduce", S, n, 2.7e-6, 50e9) - comms.time("all-reduce", S, n, 2.7e-6, 50e9, "tree")

    crossings = []
    for n in (16, 64, 512):
        assert gap(1e3, n) > 0  # latency-bound: log2(n) steps beat n - 1
        S = 1e3
        while gap(S, n) > 0:
            S *= 2
        crossings.append(S)  # from here on the ring's (n-1)/n wins over the tree's full S
    assert crossings == sorted(crossings) and crossings[0] < 1e9


def test_latency_bound_size_is_where_the_two_terms_meet():
    r = comms.all_reduce(1e6, 8, "hgx-h100")
    S = r.latency_bound_below_bytes
    assert comms.latency_term("all-reduce", 8, r.alpha_s) == pytest.approx(
        comms.bandwidth_term("all-reduce", S, 8, r.bandwidth_bytes_per_s))
    assert comms.all_reduce(S / 2, 8, "hgx-h100").latency_bound
    assert not comms.all_reduce(S * 2, 8, "hgx-h100").latency_bound


def test_hierarchical_phases():
    S = 1e9
    h = comms.hierarchical("all-reduce", S, 8, 4, "hgx-h100", "ib-ndr", overlap=False)
    assert [(level, c.collective, c.gpus) for level, c in h.phases] == [
        ("intra", "reduce-scatter", 8), ("inter", "all-reduce", 4), ("intra", "all-gather", 8)]
    assert dict(h.phases)["inter"].size_bytes == S / 8
    assert h.time_s == pytest.approx(sum(c.time_s for _, c in h.phases))
    assert comms.hierarchical("all-reduce", S, 8, 4, "hgx-h100", "ib-ndr").time_s < h.time_s  # overlapped
    # one GPU per node: a plain ring over the network
    flat = comms.hierarchical("all-reduce", S, 1, 16, "hgx-h100", "ib-ndr", algorithm="ring")
    assert flat.time_s == pytest.approx(comms.all_reduce(S, 16, "ib-ndr").time_s)
    assert h.to_dict()["gpus"] == 32


@pytest.mark.parametrize("overlap", [True, False])
def test_hierarchical_latency_bound_size(overlap):
    h = comms.hierarchical("all-reduce", 1e9, 8, 16, "hgx-h100", "ib-ndr", overlap=overlap, algorithm="ring")
    assert h.latency_s == pytest.approx(sum(c.latency_s for _, c in h.phases))
    assert h.latency_s + h.transfer_s == pytest.approx(h.time_s) and not h.latency_bound
    star = h.latency_bound_below_bytes
    assert h.latency_s * h.size_bytes / h.transfer_s == pytest.approx(star)
    assert comms.hierarchical("all-reduce", 1e3, 8, 16, "hgx-h100", "ib-ndr", overlap=overlap).latency_bound
    assert {"latency_s", "transfer_s", "latency_bound_below_bytes"} <= set(h.to_dict())
    # the phases' latencies add up: 7 + 30 + 7 hops, each at NCCL's latency per step of the protocol that runs it
    # (Simple, for a large buffer: 3.4 µs on NVLink, 14 µs on the network)
    assert {c.protocol for _, c in h.phases} == {"Simple"}
    assert h.latency_s == pytest.approx(14 * 3.4e-6 + 30 * 14e-6)


def test_calibrated_hierarchical_pays_nccl_s_latency_across_the_nodes():
    # NCCL's ring across nodes (tuning.cc): (n - 1 - (m - 1)) intra steps and m - 1 network steps for an
    # all-gather, each at its protocol's latency, plus the per-call base
    h = comms.hierarchical("all-gather", 1e6, 8, 16, "hgx-h100", "ib-ndr", calibrated=True)
    assert h.calibrated and h.latency_s > comms.hierarchical("all-gather", 1e6, 8, 16, "hgx-h100", "ib-ndr").latency_s
    assert h.time_s == pytest.approx(h.latency_s + h.transfer_s)


@pytest.mark.parametrize("name", ["all-gather", "reduce-scatter"])
def test_calibrated_all_gather_across_nodes_pays_a_ring_never_a_tree(name):
    # NCCL runs all-gather and reduce-scatter on rings only (tuning.cc, 2.7 to 2.18: "if (coll != ncclFuncAllReduce
    # && a != NCCL_ALGO_RING) continue"; later PAT, NVLS, CollNet, never a tree). 1 kB over 16 nodes of 8 H100s,
    # LL: base 6.6 µs, 112 steps inside the nodes at max(0.6 µs NVLink, 1 µs network overhead), 15 at 2.7 µs
    ring = 6.6 + (127 - 15) * 1.0 + 15 * 2.7
    for algorithm in ("auto", "tree", "ring"):
        h = comms.hierarchical(name, 1e3, 8, 16, "hgx-h100", "ib-ndr", algorithm=algorithm, calibrated=True)
        assert h.algorithm == "ring" and h.latency_s == pytest.approx(ring * 1e-6), algorithm


def test_a_domain_holds_only_its_gpus():
    with pytest.raises(InvalidValue, match="hgx-h100 connects at most 8 GPUs; 16 GPUs need a scale-out link"):
        comms.all_reduce(1e9, 16, "hgx-h100")
    assert comms.all_reduce(1e9, 72, "gb200-nvl72").gpus == 72


def test_a_bare_alpha_beta_pair():
    r = comms.all_reduce(1e9, 8, (1e-6, 1e11))
    assert r.link is None and r.time_s == comms.time("all-reduce", 1e9, 8, 1e-6, 1e11)
    assert r.to_dict()["link"] is None


# --- names and errors -----------------------------------------------------------------------

@pytest.mark.parametrize("spelling, name", [("allreduce", "all-reduce"), ("All_Reduce", "all-reduce"),
                                            ("AG", "all-gather"), ("alltoall", "all-to-all"),
                                            ("send-recv", "p2p"), ("Broadcast", "broadcast")])
def test_collective_names(spelling, name):
    assert comms.canonical(spelling) == name


def test_errors_name_the_bad_value_and_the_choices():
    with pytest.raises(comms.UnknownCollective) as error:
        comms.canonical("allreduc")
    assert str(error.value).startswith("Unknown collective 'allreduc'. Did you mean 'all-reduce'")
    assert "Expected one of: all-gather, all-reduce, all-to-all, broadcast, p2p, reduce, reduce-scatter." \
        in str(error.value)
    with pytest.raises(InvalidValue, match="tree algorithm is modelled for all-reduce only"):
        comms.time("all-gather", 1e6, 8, 1e-6, 1e9, "tree")
    with pytest.raises(InvalidValue, match="unknown algorithm 'rings'; expected one of: ring, tree"):
        comms.time("all-reduce", 1e6, 8, 1e-6, 1e9, "rings")
    with pytest.raises(InvalidValue, match="gpus must be a whole number of at least 2"):
        comms.all_reduce(1e6, 1, "nvlink4")
    with pytest.raises(InvalidValue, match="size must be"):
        comms.all_reduce(-5, 8, "nvlink4")


# --- fitting --------------------------------------------------------------------------------

@pytest.mark.parametrize("collective, n", [("p2p", 2), ("all-reduce", 4), ("all-gather", 8)])
def test_fit_recovers_alpha_and_beta(collective, n):
    sizes = [2**k for k in range(3, 28, 2)]
    times = [comms.time(collective, s, n, 7e-6, 3e9) for s in sizes]
    f = comms.fit(sizes, times, collective, n)
    assert f.alpha_s == pytest.approx(7e-6) and f.bandwidth_bytes_per_s == pytest.approx(3e9)
    assert f.max_error < 1e-9


def test_fit_pins_a_negative_term_at_zero():
    sizes = [1e3, 1e6, 1e9]
    f = comms.fit(sizes, [s / 1e9 for s in sizes])  # no latency at all
    assert f.alpha_s >= 0 and f.bandwidth_bytes_per_s == pytest.approx(1e9, rel=1e-6)
    flat = comms.fit(sizes, [5e-6, 5e-6, 5e-6])  # no bandwidth cost measurable
    assert flat.bandwidth_bytes_per_s == math.inf and flat.alpha_s == pytest.approx(5e-6)
    with pytest.raises(InvalidValue, match="at least two different sizes"):
        comms.fit([8, 8], [1e-6, 1e-6])


# --- any input: a result or one clear error ---------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(name=st.one_of(st.sampled_from(RING + ["allreduce", "gather"]), st.text(max_size=12)),
       size=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**15)),
       gpus=st.one_of(st.integers(-3, 300), st.floats(0, 100)),
       link=st.sampled_from([k for k in links.names()] + ["nvlnk", "ib"]),
       algorithm=st.sampled_from(["ring", "tree", "bus"]))
def test_random_input_gives_a_result_or_a_roofkit_error(name, size, gpus, link, algorithm):
    try:
        r = comms.collective(name, size, gpus, link, algorithm)
    except RoofkitError:
        return
    assert r.time_s > 0 and r.latency_s >= 0 and r.transfer_s >= 0  # a denormal size underflows to 0
    assert r.algbw == pytest.approx(r.size_bytes / r.time_s)
    assert r.busbw <= r.bandwidth_bytes_per_s * (1 + 1e-9) or r.algorithm == "tree"


@settings(max_examples=80, deadline=None)
@given(size=st.floats(1, 1e12), k=st.integers(1, 72), m=st.integers(1, 64),
       name=st.sampled_from(["all-reduce", "all-gather", "reduce-scatter", "all-to-all"]))
def test_random_hierarchies(size, k, m, name):
    assume(k * m >= 2)
    try:
        h = comms.hierarchical(name, size, k, m, "gb200-nvl72", "ib-xdr")
    except RoofkitError:
        assert name == "all-to-all"
        return
    assert h.time_s > 0 and h.gpus == k * m
