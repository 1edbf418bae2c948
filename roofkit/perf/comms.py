"""Collectives with the α-β (latency-bandwidth) model, and as NCCL runs them: time, algorithm and bus bandwidth.

Each of n GPUs sends in ``steps`` rounds; a round costs α (latency: software,
switches, wires), and the bytes each GPU sends cost 1/β a byte::

    T = steps(n) · α + f(n) · S / β                                        [s]

S is the size of the whole buffer in bytes, as nccl-tests counts it (the
all-reduced array; all-gather's OUTPUT; reduce-scatter's INPUT; all-to-all's
per-GPU send buffer). β is a link's bandwidth per direction, one GPU
(:attr:`roofkit.links.Link.bandwidth`), α its latency per hop.

    collective       algorithm   steps(n)        f(n)          bus factor
    all-reduce       ring        2(n-1)          2(n-1)/n      2(n-1)/n
    all-reduce       tree        2 ceil(log2 n)  2             2(n-1)/n
    all-reduce       nvls        1               1             2(n-1)/n
    all-reduce       one-shot    1               n-1           2(n-1)/n
    all-reduce       two-shot    2               2(n-1)/n      2(n-1)/n
    all-gather       ring        n-1             (n-1)/n       (n-1)/n
    reduce-scatter   ring        n-1             (n-1)/n       (n-1)/n
    all-to-all       pairwise    n-1             (n-1)/n       (n-1)/n
    broadcast        pipeline    n-1             1             1
    reduce           pipeline    n-1             1             1
    p2p (send/recv)  -           1               1             1

Ring algorithms: Thakur, Rabenseifner and Gropp, "Optimization of Collective
Communication Operations in MPICH" (IJHPCA 19(1), 2005); pipelined two-tree
all-reduce, as in NCCL's double binary trees: Sanders, Speck and Träff,
"Two-tree algorithms for full bandwidth broadcast, reduction and scan"
(Parallel Computing 35(12), 2009). NVLS is NVLink SHARP (NCCL's ``nvls``: the
NVSwitch adds the buffers, each GPU sends its own once). One-shot and two-shot
are the serving engines' own all-reduce kernels over NVLink peer memory, not
NCCL's (:func:`engine_algorithm`):

* **one-shot** (vLLM ``cross_device_reduce_1stage``, vllm-project/vllm
  ``csrc/custom_all_reduce.cuh``, pull request 2192; TensorRT-LLM ``ONESHOT``,
  NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/kernels/customAllReduceKernels.cu``):
  after one barrier round (each GPU writes a flag into every peer), each GPU
  loads the whole S-byte buffer of each of its n - 1 peers and adds them
  locally. Its link carries (n - 1) S bytes in, and each of its own bytes is
  read n - 1 times: f = n - 1, n/2 times the ring's 2(n - 1)/n, in one round
  instead of 2(n - 1). It wins while the rounds cost more than the bytes.
* **two-shot** (vLLM ``cross_device_reduce_2stage``, TensorRT-LLM ``TWOSHOT``):
  a reduce-scatter (each GPU loads its 1/n slice from the n - 1 peers:
  (n - 1)/n S), a barrier, an all-gather (it loads the n - 1 reduced slices:
  (n - 1)/n S): the ring's 2(n - 1)/n S in 2 rounds instead of 2(n - 1).

The bus factor is nccl-tests'
(doc/PERFORMANCE.md): algbw = S / t, busbw = algbw x bus factor, so that for a
bandwidth-bound ring busbw equals the link's β whatever n is.

Every formula is written once and works on numbers and on sympy symbols:

    >>> from roofkit import comms, links
    >>> node = links.get("hgx-h100")                                   # 8 H100s on NVSwitch
    >>> t = comms.time("all-reduce", 1e9, 8, node.latency, node.bandwidth)
    >>> round(t * 1e3, 3)                                              # ms for 1 GB
    3.897
    >>> import sympy
    >>> S, n, a, b = sympy.symbols("S n alpha beta", positive=True)
    >>> comms.time("all-reduce", S, n, a, b)
    S*(2*n - 2)/(beta*n) + alpha*(2*n - 2)

With a catalog link, :func:`collective` runs the collective as NCCL does
(:mod:`roofkit.nccl`): an algorithm (ring, tree, NVLink SHARP) and a protocol
(LL, LL128, Simple), each with its latency per step and its share of the link.
The default is a bound (the line rate, no per-call overhead); ``calibrated=True``
is NCCL's own estimate with the bandwidth nccl-tests measures:

    >>> r = comms.collective("all-reduce", 1e9, 8, "hgx-h100")
    >>> r.protocol, round(r.busbw / 1e9, 1), r.latency_bound
    ('Simple', 444.6, False)
    >>> ring = comms.collective("all-reduce", 8e9, 8, "hgx-h100", calibrated=True)
    >>> auto = comms.collective("all-reduce", 8e9, 8, "hgx-h100", "auto", calibrated=True)
    >>> round(ring.busbw / 1e9), auto.algorithm, round(auto.busbw / 1e9)      # nccl-tests: about 370 and 480
    (370, 'nvls', 480)
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass, field

from ..catalogs import links
from ..errors import InvalidValue, UnknownName
from ..units import is_symbolic, nonnegative, positive, whole
from . import nccl

__all__ = ["COLLECTIVES", "ALGORITHMS", "CUSTOM", "SERVING_ENGINES", "UnknownCollective", "canonical", "steps",
           "volume", "bus_factor", "time", "latency_term", "bandwidth_term", "algbw", "busbw", "latency_bound_size",
           "symbolic", "Collective", "collective", "all_reduce", "all_gather", "reduce_scatter", "all_to_all",
           "broadcast", "p2p", "serving_engine", "engine_algorithm", "tensor_parallel_all_reduce",
           "custom_round_latency",
           "Hierarchical", "hierarchical", "Fit", "fit"]

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "reduce", "p2p")
# what steps() and volume() count; collective() also takes "auto" (NCCL's tuner) and "fastest" (any of them)
ALGORITHMS = ("ring", "tree", "nvls", "one-shot", "two-shot")
CUSTOM = ("one-shot", "two-shot")  # the serving engines' own all-reduce kernels over NVLink peer memory, not NCCL's
SERVING_ENGINES = ("vllm", "tensorrt-llm", "sglang")  # whose rule picks a tensor-parallel all-reduce (engine_algorithm)
_ALIASES = {
    "allreduce": "all-reduce", "ar": "all-reduce", "allgather": "all-gather", "ag": "all-gather",
    "reducescatter": "reduce-scatter", "rs": "reduce-scatter", "alltoall": "all-to-all", "a2a": "all-to-all",
    "bcast": "broadcast", "sendrecv": "p2p", "send": "p2p", "pointtopoint": "p2p", "p2p": "p2p",
}


class UnknownCollective(UnknownName):
    kind = "collective"


def _key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum() or ch == "2")


_NAMES = {_key(c): c for c in COLLECTIVES} | _ALIASES  # every spelling's key -> its collective


def canonical(name: str) -> str:
    """'allreduce', 'all_reduce', 'AR' -> 'all-reduce'; UnknownCollective for anything else."""
    if isinstance(name, str):
        if name in COLLECTIVES:  # the common case, at no cost
            return name
        key = _key(name)
        if key in _NAMES:
            return _NAMES[key]
    raise UnknownCollective(name, COLLECTIVES, {alias: c for alias, c in _ALIASES.items()})


def _algorithm(collective: str, algorithm: str) -> str:
    if algorithm not in ALGORITHMS:
        raise InvalidValue(f"unknown algorithm {algorithm!r}; expected one of: {', '.join(ALGORITHMS)}.")
    if algorithm != "ring" and collective != "all-reduce":
        raise InvalidValue(f"the {algorithm} algorithm is modelled for all-reduce only (NCCL's double binary trees, "
                           f"NVLink SHARP, the engines' one-shot and two-shot kernels); {collective} uses algorithm "
                           "'ring'.")
    return algorithm


def _gpus(n, name: str = "gpus"):
    """A whole number of GPUs, at least 2 (a collective over one GPU costs nothing); symbols pass."""
    if is_symbolic(n):
        return n
    positive(n, name)
    if float(n) != int(n) or n < 2:
        raise InvalidValue(f"{name} must be a whole number of at least 2 for a collective; got {n!r}.")
    return int(n)


def _ceil_log2(n):
    if is_symbolic(n):
        import sympy  # deferred: sympy costs ~0.25 s at import

        return sympy.ceiling(sympy.log(n, 2))
    return math.ceil(math.log2(n))


def steps(collective: str, n, algorithm: str = "ring"):
    """Rounds of messages one GPU goes through: the multiplier of α."""
    c = canonical(collective)
    algorithm = _algorithm(c, algorithm)
    n = _gpus(n)
    if c == "p2p":
        return 1
    if c == "all-reduce":
        return {"tree": 2 * _ceil_log2(n), "nvls": 1, "one-shot": 1, "two-shot": 2}.get(algorithm, 2 * (n - 1))
    return n - 1


def volume(collective: str, n, algorithm: str = "ring"):
    """f(n): bytes each GPU sends, as a multiple of S (the multiplier of S/β)."""
    c = canonical(collective)
    algorithm = _algorithm(c, algorithm)
    n = _gpus(n)
    if c == "all-reduce":
        return {"tree": 2, "nvls": 1, "one-shot": n - 1}.get(algorithm, 2 * (n - 1) / n)  # two-shot: the ring's
    if c in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n
    return 1


def bus_factor(collective: str, n):
    """nccl-tests' busbw / algbw (doc/PERFORMANCE.md): the same for every algorithm."""
    c = canonical(collective)
    n = _gpus(n)
    if c == "all-reduce":
        return 2 * (n - 1) / n
    if c in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n
    return 1


def latency_term(collective: str, n, alpha, algorithm: str = "ring"):
    """steps(n) · α: what the collective costs however small the message."""
    return steps(collective, n, algorithm) * _nonneg(alpha, "alpha")


def bandwidth_term(collective: str, size, n, bandwidth, algorithm: str = "ring"):
    """f(n) · S / β: what the bytes cost however fast the hops."""
    return volume(collective, n, algorithm) * positive(size, "size") / positive(bandwidth, "bandwidth")


def time(collective: str, size, n, alpha, bandwidth, algorithm: str = "ring"):
    """T = steps(n)·α + f(n)·S/β, in seconds (size S in bytes, α in s, β in bytes/s per direction)."""
    return latency_term(collective, n, alpha, algorithm) + bandwidth_term(collective, size, n, bandwidth, algorithm)


def algbw(size, seconds):
    """Algorithm bandwidth S / t (nccl-tests), bytes/s."""
    return positive(size, "size") / positive(seconds, "seconds")


def busbw(collective: str, size, n, seconds):
    """Bus bandwidth: algbw x the collective's bus factor (nccl-tests), bytes/s."""
    return algbw(size, seconds) * bus_factor(collective, n)


def latency_bound_size(collective: str, n, alpha, bandwidth, algorithm: str = "ring"):
    """S* = steps·α·β / f: below this many bytes the α term is the larger one (latency-bound)."""
    return steps(collective, n, algorithm) * _nonneg(alpha, "alpha") * positive(bandwidth, "bandwidth") \
        / volume(collective, n, algorithm)


def symbolic(collective: str, algorithm: str = "ring"):
    """T in the symbols S, n, α, β: ``symbolic("all-gather")`` -> ``S*(n - 1)/(beta*n) + alpha*(n - 1)``."""
    import sympy  # deferred: sympy costs ~0.25 s at import

    S, n, a, b = sympy.symbols("S n alpha beta", positive=True)
    return time(collective, S, n, a, b, algorithm)


def _nonneg(value, name):
    return nonnegative(value, name)


# --- with a catalog link: the algorithms and protocols NCCL runs ------------------------


@dataclass(frozen=True)
class Collective:
    """One collective on one link: its time split into latency and transfer, its bandwidths, and how it ran.

    ``algorithm`` and ``protocol`` are the ones chosen (NCCL's names: ring, tree,
    nvls; LL, LL128, Simple); ``calibrated`` says whether the figures are NCCL's
    and the measured bandwidth (an estimate) or the bound.
    """

    collective: str
    algorithm: str
    size_bytes: float
    gpus: int
    link: object  # a roofkit.links.Link, or None for a bare (alpha, bandwidth)
    alpha_s: float
    bandwidth_bytes_per_s: float  # per direction, the β used (with the protocol's share)
    latency_s: float
    transfer_s: float
    time_s: float
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    latency_bound_below_bytes: float
    protocol: str | None = None
    calibrated: bool = False

    @property
    def latency_bound(self) -> bool:
        """True when the latency terms exceed the transfer."""
        return self.latency_s > self.transfer_s

    @property
    def algbw(self) -> float:
        return self.algbw_bytes_per_s

    @property
    def busbw(self) -> float:
        return self.busbw_bytes_per_s

    def to_dict(self) -> dict:
        link = None
        if self.link is not None:
            link = self.link.to_dict() | {"bandwidth_used_bytes_per_s": self.bandwidth_bytes_per_s}
        return {"collective": self.collective, "algorithm": self.algorithm, "protocol": self.protocol,
                "calibrated": self.calibrated, "bytes": self.size_bytes,
                "gpus": self.gpus, "time_s": self.time_s, "latency_s": self.latency_s,
                "transfer_s": self.transfer_s, "algbw_bytes_per_s": self.algbw_bytes_per_s,
                "busbw_bytes_per_s": self.busbw_bytes_per_s, "latency_bound": self.latency_bound,
                "latency_bound_below_bytes": self.latency_bound_below_bytes, "alpha_s": self.alpha_s,
                "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s, "link": link}


def _link_figures(link, gpus):
    """(Link or None, α, β) from a catalog name or Link, or a pair (alpha_s, bandwidth_bytes_per_s)."""
    if isinstance(link, tuple) and len(link) == 2:
        return None, float(_nonneg(link[0], "alpha")), float(positive(link[1], "bandwidth"))

    chosen = links.get(link)
    if chosen.gpus is not None and gpus > chosen.gpus:
        raise InvalidValue(f"{chosen.key} connects at most {chosen.gpus} GPUs; {gpus} GPUs need a scale-out link "
                           f"between nodes: use comms.hierarchical (CLI: --inter LINK).")
    return chosen, chosen.latency, chosen.group_bandwidth(gpus)


def _flag(value, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidValue(f"{name} must be True or False; got {value!r}.")
    return value


def _peer(link) -> bool:
    """True for a link whose GPUs load and store each other's memory directly (NVLink, NVSwitch, Infinity Fabric):
    what the engines' one-shot and two-shot kernels need."""
    return link is not None and nccl.link_class(link) == "nvlink"


def _candidates(c: str, algorithm: str, link, calibrated: bool, protocol: str | None = None) -> list[str]:
    """The algorithms to try: the one asked for; (auto) every one NCCL could run here; (fastest) those and the
    engines' one-shot and two-shot kernels where the link lets GPUs read each other's memory."""
    nvls = c == "all-reduce" and link is not None and nccl.nvls_capable(link) and \
        (not calibrated or nccl.nvls_bandwidth(link) is not None)
    if algorithm in ("auto", "fastest"):
        tried = ["ring"] + (["tree"] if c == "all-reduce" else []) + (["nvls"] if nvls else [])
        if algorithm == "fastest" and c == "all-reduce" and _peer(link) and protocol is None:
            tried += list(CUSTOM)
        return tried
    algorithm = _algorithm(c, algorithm)
    if algorithm == "nvls" and not nvls:
        what = "has no NVLink SHARP" if link is None or not nccl.nvls_capable(link) else \
            "has no measured NVLS bandwidth to calibrate with"
        raise InvalidValue(f"the nvls algorithm needs an NVSwitch domain that reduces in the switch; "
                           f"{getattr(link, 'key', 'this link')} {what}. Choose ring or tree (or auto).")
    if algorithm in CUSTOM:
        if not _peer(link):
            raise InvalidValue(f"the {algorithm} all-reduce reads the other GPUs' memory over NVLink, NVSwitch or "
                               f"Infinity Fabric; {getattr(link, 'key', 'this link')} is not one of them. Choose "
                               "ring or tree (or auto).")
        if protocol is not None:
            raise InvalidValue(f"{algorithm} is a serving engine's kernel, not NCCL's: it has no protocol "
                               f"({', '.join(nccl.PROTOCOLS)}); give protocol None.")
    return [algorithm]


def _nccl_time(c: str, S: float, n: int, link, algorithm: str, protocol: str, calibrated: bool):
    """(α per step, β used, latency, transfer) of one algorithm and protocol on a catalog link (NCCL's model)."""
    kind = nccl.link_class(link)
    share = nccl.protocol_share(protocol)
    f = volume(c, n, algorithm)
    if algorithm == "nvls":
        beta = nccl.nvls_bandwidth(link) if calibrated else link.group_bandwidth(n)
    else:
        beta = (nccl.effective_bandwidth(link, n) if calibrated else link.group_bandwidth(n)) * share
        if calibrated and algorithm == "tree":
            beta *= nccl.TREE_BANDWIDTH_SHARE
    alpha = nccl.hw_latency(kind, algorithm, protocol)
    if not calibrated:  # the bound: NCCL's per-step latency, no per-call overhead, ideal trees
        return alpha, beta, steps(c, n, algorithm) * alpha, f * S / beta
    hops = steps(c, n, algorithm)
    if algorithm == "tree" and link.gpus is not None:  # inside a node NCCL's tree is a chain
        hops = 2 * (n - 1)
    if algorithm == "ring" and kind == "net" and protocol == "Simple" and c == "all-reduce":
        alpha *= nccl.RING_PLATEAU
    return alpha, beta, nccl.base_latency(algorithm, protocol) + hops * alpha, f * S / beta


def _custom_time(c: str, S: float, n: int, link, algorithm: str, calibrated: bool):
    """(α per round, β used, latency, transfer) of an engine's one-shot or two-shot kernel on a catalog link.

    The bound: each round at the link's α (NCCL's least latency per step on its class, the LL protocol's), the
    bytes at its line rate. Calibrated: the round latency measured on vLLM's kernels
    (:func:`custom_round_latency`), the bytes at the bandwidth nccl-tests measures on the link.
    """
    if calibrated:
        alpha, beta = custom_round_latency(), nccl.effective_bandwidth(link, n)
    else:
        alpha, beta = link.latency, link.group_bandwidth(n)
    return alpha, beta, latency_term(c, n, alpha, algorithm), bandwidth_term(c, S, n, beta, algorithm)


@functools.cache
def custom_round_latency() -> float:
    """Seconds one round of an engine's one-shot or two-shot all-reduce costs: a barrier and a kernel's start.

    NCCL's tables have no figure for them, so it comes from measurements of vLLM's
    own kernels (``data/nccl.toml``, ``[custom_all_reduce]``: H100s over NVSwitch,
    vllm-project/vllm pull request 24111). Each measured time t of a buffer of S bytes
    is rounds x α + f S / β with β the bandwidth nccl-tests measures on that link
    (:func:`roofkit.nccl.effective_bandwidth`); α is the median of
    (t - f S / β) / rounds over the points.
    """
    table = nccl.custom_all_reduce_measurements()
    link = links.get(table["link"])
    alphas = []
    for gpus, algorithm, size, seconds in table["measured"]:
        a = _algorithm("all-reduce", algorithm)
        if a not in CUSTOM:
            raise InvalidValue(f"data/nccl.toml [custom_all_reduce]: {a!r} is not one of {', '.join(CUSTOM)}.")
        transfer = bandwidth_term("all-reduce", size, gpus, nccl.effective_bandwidth(link, gpus), a)
        alphas.append((seconds - transfer) / steps("all-reduce", gpus, a))
    return float(statistics.median(alphas))


def collective(name: str, size, gpus, link, algorithm: str = "ring", protocol: str | None = None,
               calibrated: bool = False) -> Collective:
    """``name`` ('all-reduce', ...) of ``size`` bytes over ``gpus`` GPUs on ``link``.

    ``link`` is a catalog name or :class:`roofkit.links.Link`, or a pair
    ``(alpha_s, bandwidth_bytes_per_s)`` for the plain α-β model. p2p ignores
    ``gpus`` beyond checking it.

    On a catalog link the collective runs as NCCL runs it (:mod:`roofkit.nccl`):
    ``algorithm`` is 'ring', 'tree' or 'nvls' (NVLink SHARP, all-reduce on an
    NVSwitch domain that has it), or 'auto' for the fastest at this size, as
    NCCL's tuner picks; ``protocol`` is 'LL', 'LL128' or 'Simple', or None for the
    fastest. Each (algorithm, protocol) pair pays its own latency and its own
    bandwidth, and the least total wins, as in NCCL's tuner (NVIDIA/nccl
    ``src/graph/tuning.cc``, ``ncclTopoGetAlgoTime``). An all-reduce also takes
    the engines' 'one-shot' and 'two-shot' kernels (no protocol), on a link whose
    GPUs read each other's memory, and 'fastest': every algorithm above, the
    least time. The default is a bound: the link's line rate (times the
    protocol's share), NCCL's per-step latency, nothing else. ``calibrated=True``
    is an estimate: NCCL's latencies with its per-call base and the bandwidth
    nccl-tests measures on the link (:func:`roofkit.nccl.effective_bandwidth`).

    >>> [collective("all-reduce", 16384, 8, "hgx-h100", a).algorithm for a in ("auto", "fastest")]
    ['tree', 'one-shot']
    """
    c = canonical(name)
    n = 2 if c == "p2p" else _gpus(gpus)
    S = float(positive(size, "size"))
    calibrated = _flag(calibrated, "calibrated")
    chosen, alpha, beta = _link_figures(link, n)
    if chosen is None or nccl.link_class(chosen) is None:  # the plain α-β model (a pair, or a TPU's ICI)
        if algorithm in ("auto", "fastest"):
            algorithm = "ring"
        if _algorithm(c, algorithm) == "nvls":
            raise InvalidValue("the nvls algorithm needs an NVSwitch domain from the link catalog.")
        if algorithm in CUSTOM and chosen is not None:
            raise InvalidValue(f"the {algorithm} all-reduce reads the other GPUs' memory over NVLink, NVSwitch or "
                               f"Infinity Fabric; {chosen.key} is not one of them. Choose ring or tree.")
        if protocol is not None:
            raise InvalidValue("a protocol (LL, LL128, Simple) is NCCL's: give a catalog link, not a bare (α, β).")
        if calibrated and chosen is not None:
            beta = nccl.effective_bandwidth(chosen, n) * chosen.ring_links
        lat, transfer = latency_term(c, n, alpha, algorithm), bandwidth_term(c, S, n, beta, algorithm)
        best = (algorithm, None, alpha, beta, lat, transfer)
    else:
        if protocol is not None and protocol not in nccl.PROTOCOLS:
            raise InvalidValue(f"unknown protocol {protocol!r}; expected one of: {', '.join(nccl.PROTOCOLS)}.")
        best = None
        for a in _candidates(c, algorithm, chosen, calibrated, protocol):
            if a in CUSTOM:  # one pair: the kernel has no protocol
                pairs = [(None, _custom_time(c, S, n, chosen, a, calibrated))]
            else:
                tried = []
                for p in ([protocol] if protocol is not None else nccl.protocols(a)):
                    if p not in nccl.protocols(a):
                        if algorithm not in ("auto", "fastest"):
                            raise InvalidValue(f"NCCL runs {a} with the Simple protocol only; got {p!r}.")
                        continue
                    tried.append(p)
                pairs = [(p, _nccl_time(c, S, n, chosen, a, p, calibrated)) for p in tried]
            for p, figures in pairs:  # each pair pays its own latency and its own bandwidth
                if best is None or sum(figures[2:]) < sum(best[4:]):
                    best = (a, p, *figures)
        if best is None:
            raise InvalidValue(f"no algorithm runs {c} with protocol {protocol!r}; try protocol None.")
    a, p, alpha, beta, lat, transfer = best
    t = lat + transfer
    return Collective(collective=c, algorithm=a, size_bytes=S, gpus=n, link=chosen, alpha_s=alpha,
                      bandwidth_bytes_per_s=beta, latency_s=lat, transfer_s=transfer, time_s=t,
                      algbw_bytes_per_s=algbw(S, t), busbw_bytes_per_s=busbw(c, S, n, t),
                      latency_bound_below_bytes=lat * beta / volume(c, n, a), protocol=p, calibrated=calibrated)


# --- the all-reduce of tensor parallelism in a serving engine ---------------------------

# Each engine's own rule (software defaults, typed once, here): which all-reduce it runs for a buffer of
# S bytes over n GPUs of one NVLink domain.
_VLLM_CUSTOM_MAX = 8192 * 1024  # vLLM CustomAllreduce(max_size=8192 * 1024): NCCL at and above it
_VLLM_CUSTOM_GPUS = (2, 4, 6, 8)  # CustomAllreduce._SUPPORTED_WORLD_SIZES
_VLLM_ONE_SHOT_BELOW = ((4, 512 * 1024), (8, 256 * 1024))  # (up to n GPUs, one-shot below S bytes)
_TRTLLM_WORKSPACE = ((2, 16 * 1000 * 1000), (8, 8 * 1000 * 1000))  # (up to n GPUs, custom kernels up to S bytes)
_TRTLLM_ONE_SHOT_BELOW = ((2, math.inf), (4, 1000 * 1000), (8, 500 * 1000))  # (up to n GPUs, one-shot below S)


def _first(table, n):
    """The value of the first (up to n GPUs, value) row that holds ``n``; None past the last."""
    return next((value for most, value in table if n <= most), None)


def engine_algorithm(engine: str, size, gpus, link) -> str:
    """The all-reduce ``engine`` runs for ``size`` bytes over ``gpus`` GPUs of ``link``: 'one-shot', 'two-shot',
    or 'auto' (it calls NCCL, whose tuner picks).

    * vLLM (vllm-project/vllm ``vllm/distributed/device_communicators/custom_all_reduce.py``,
      ``CustomAllreduce``: 2, 4, 6 or 8 GPUs that all reach each other over NVLink, buffers
      under ``max_size`` = 8 MiB; ``csrc/custom_all_reduce.cuh``, ``CustomAllreduce::allreduce``:
      2 GPUs one-shot, else one-shot below 512 KiB on up to 4 GPUs and below 256 KiB on up to
      8, two-shot above); NCCL otherwise. SGLang runs the same kernels and rule (its
      ``custom_all_reduce.py`` is vLLM's).
    * TensorRT-LLM (NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/plugins/ncclPlugin/allreducePlugin.cpp``,
      ``AllreducePlugin::selectImplementation``; ``cpp/tensorrt_llm/common/customAllReduceUtils.h``,
      ``getMaxRequiredWorkspaceSize``; ``AllreducePlugin::isCustomAllReduceSupported``: an even
      number of GPUs, at most ``MAX_RANKS_PER_NODE`` = 8): GPUs over NVLink, buffers up to
      16 MB on 2 GPUs and 8 MB on more; 2 GPUs one-shot, up to 4 one-shot below 1 MB, more
      one-shot below 500 kB, two-shot above; NCCL otherwise.

    >>> [engine_algorithm("vllm", s, 8, "hgx-h100") for s in (16 * 2**10, 2**20, 16 * 2**20)]
    ['one-shot', 'two-shot', 'auto']
    """
    name = serving_engine(engine)
    S, n = float(positive(size, "size")), _gpus(gpus)
    chosen = links.get(link)
    if not _peer(chosen) or (chosen.gpus is not None and n > chosen.gpus):
        return "auto"
    if name in ("vllm", "sglang"):
        if n not in _VLLM_CUSTOM_GPUS or S >= _VLLM_CUSTOM_MAX:
            return "auto"
        below = math.inf if n == 2 else _first(_VLLM_ONE_SHOT_BELOW, n)
    else:
        workspace = _first(_TRTLLM_WORKSPACE, n)
        if n % 2 or workspace is None or S > workspace:
            return "auto"
        below = _first(_TRTLLM_ONE_SHOT_BELOW, n)
    return "one-shot" if S < below else "two-shot"


def serving_engine(name) -> str:
    """'vLLM', 'TensorRT-LLM v0.5', 'trtllm', 'SGLang' -> 'vllm', 'tensorrt-llm', 'sglang'; InvalidValue for anything
    else, naming the choices. A published row's engine may carry a version or a platform after a space."""
    if isinstance(name, str) and name.strip():
        head = name.strip().lower().split()[0].replace("_", "-")
        key = {"trtllm": "tensorrt-llm", "trt-llm": "tensorrt-llm", "tensorrtllm": "tensorrt-llm"}.get(head, head)
        if key in SERVING_ENGINES:
            return key
    raise InvalidValue(f"unknown serving engine {name!r}; expected one of: {', '.join(SERVING_ENGINES)}.")


def tensor_parallel_all_reduce(size, gpus, link, calibrated: bool = False, engine: str = "vllm") -> Collective:
    """The all-reduce of a tensor-parallel step: ``size`` bytes of activations over ``gpus`` GPUs of ``link``.

    The bound: the fastest algorithm any engine runs on that link (``fastest``: NCCL's
    ring, tree and NVLS, the engines' one-shot and two-shot kernels), each at its best.
    Calibrated: the algorithm ``engine`` picks at this size (:func:`engine_algorithm`),
    at NCCL's measured figures or the engines' measured round latency.

    >>> round(tensor_parallel_all_reduce(16 * 2**10, 8, "hgx-h100").time_s * 1e6, 2)     # µs: one round
    0.85
    """
    if not _flag(calibrated, "calibrated"):
        serving_engine(engine)
        return collective("all-reduce", size, gpus, link, "fastest")
    return collective("all-reduce", size, gpus, link, engine_algorithm(engine, size, gpus, link), calibrated=True)


def all_reduce(size, gpus, link, algorithm: str = "ring", protocol: str | None = None,
               calibrated: bool = False) -> Collective:
    return collective("all-reduce", size, gpus, link, algorithm, protocol, calibrated)


def all_gather(size, gpus, link, calibrated: bool = False) -> Collective:
    """``size`` is the gathered (output) buffer, as nccl-tests counts it."""
    return collective("all-gather", size, gpus, link, calibrated=calibrated)


def reduce_scatter(size, gpus, link, calibrated: bool = False) -> Collective:
    """``size`` is the input buffer (each GPU keeps size / gpus of the result)."""
    return collective("reduce-scatter", size, gpus, link, calibrated=calibrated)


def all_to_all(size, gpus, link, calibrated: bool = False) -> Collective:
    """``size`` is each GPU's send buffer; it keeps 1/gpus and sends the rest."""
    return collective("all-to-all", size, gpus, link, calibrated=calibrated)


def broadcast(size, gpus, link, calibrated: bool = False) -> Collective:
    return collective("broadcast", size, gpus, link, calibrated=calibrated)


def p2p(size, link, calibrated: bool = False) -> Collective:
    """One send from one GPU to another: α + S/β."""
    return collective("p2p", size, 2, link, calibrated=calibrated)


# --- hierarchical: NVLink inside a node, the network between nodes ---------------------

_PHASES = {
    # collective -> [(phase, level, size divisor: 1 for S, "k" for S/k)]
    "all-reduce": [("reduce-scatter", "intra", 1), ("all-reduce", "inter", "k"), ("all-gather", "intra", 1)],
    "all-gather": [("all-gather", "inter", "k"), ("all-gather", "intra", 1)],
    "reduce-scatter": [("reduce-scatter", "intra", 1), ("reduce-scatter", "inter", "k")],
}


@dataclass(frozen=True)
class Hierarchical:
    """A collective over nodes x gpus_per_node GPUs, in phases; ``time_s`` sums or overlaps them."""

    collective: str
    size_bytes: float
    gpus_per_node: int
    nodes: int
    overlap: bool
    phases: list = field(default_factory=list)  # [(level, Collective)]
    time_s: float = 0.0
    algorithm: str = "ring"  # the algorithm between the nodes: ring, tree, or collnet (in-network reduction)
    calibrated: bool = False
    latency: float | None = None  # calibrated: NCCL's latency of the whole collective across nodes

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def latency_s(self) -> float:
        """What the collective costs however small the message: the phases' latencies added (bound), or NCCL's
        latency of the whole ring or tree across the nodes (calibrated)."""
        return self.latency if self.latency is not None else sum(p.latency_s for _, p in self.phases)

    @property
    def transfer_s(self) -> float:
        """The rest of ``time_s``: the bytes, on the busier link (or on both in turn without overlap)."""
        return self.time_s - self.latency_s

    @property
    def latency_bound(self) -> bool:
        return self.latency_s > self.transfer_s

    @property
    def latency_bound_below_bytes(self) -> float:
        """The size at which the latency terms equal the transfer (the transfer grows in proportion to S)."""
        return self.latency_s * self.size_bytes / self.transfer_s

    @property
    def algbw(self) -> float:
        return algbw(self.size_bytes, self.time_s)

    @property
    def busbw(self) -> float:
        return busbw(self.collective, self.size_bytes, self.gpus, self.time_s)

    def to_dict(self) -> dict:
        return {"collective": self.collective, "algorithm": self.algorithm, "calibrated": self.calibrated,
                "bytes": self.size_bytes, "gpus": self.gpus,
                "gpus_per_node": self.gpus_per_node, "nodes": self.nodes, "overlap": self.overlap,
                "time_s": self.time_s, "latency_s": self.latency_s, "transfer_s": self.transfer_s,
                "latency_bound": self.latency_bound, "latency_bound_below_bytes": self.latency_bound_below_bytes,
                "algbw_bytes_per_s": self.algbw, "busbw_bytes_per_s": self.busbw,
                "phases": [{"level": level, **c.to_dict()} for level, c in self.phases]}


def _in_network(size: float, nodes: int, inter) -> Collective:
    """An all-reduce that the network's switches compute (SHARP, NCCL's CollNet): each GPU sends its share once."""
    link = links.get(inter)
    alpha = nccl.hw_latency("net", "collnet", "Simple")
    transfer = size / link.collective_bandwidth
    return Collective(collective="all-reduce", algorithm="collnet", size_bytes=size, gpus=nodes, link=link,
                      alpha_s=alpha, bandwidth_bytes_per_s=link.collective_bandwidth, latency_s=alpha,
                      transfer_s=transfer, time_s=alpha + transfer, algbw_bytes_per_s=algbw(size, alpha + transfer),
                      busbw_bytes_per_s=busbw("all-reduce", size, nodes, alpha + transfer),
                      latency_bound_below_bytes=alpha * link.collective_bandwidth, protocol="Simple")


def hierarchical(name: str, size, gpus_per_node, nodes, intra, inter, overlap: bool = True,
                 algorithm: str = "auto", calibrated: bool = False) -> Hierarchical:
    """All-reduce, all-gather or reduce-scatter over ``nodes`` x ``gpus_per_node`` GPUs, one NIC per GPU.

    All-reduce of S bytes: reduce-scatter S inside each node (``intra``, k GPUs),
    all-reduce the S/k each GPU now holds with the GPUs of the same rank in the
    other m nodes (``inter``: each GPU over its own NIC), all-gather S inside the
    node. All-gather and reduce-scatter are the two halves. ``overlap=True``
    pipelines the phases, as NCCL does with chunks: the latencies add, and the
    busier of the two links sets the rest (the scaling book's max over the
    levels of the network, gpus.md). ``overlap=False`` runs them one after the
    other.

    ``algorithm`` is the all-reduce between the nodes: 'ring', 'tree' (log2 of the
    nodes in latency), 'collnet' (the switches reduce: InfiniBand SHARP, where
    the network has it) or 'auto', the fastest. With ``calibrated=True`` every
    phase is NCCL's estimate (:func:`collective`), and 'auto' leaves out CollNet,
    which NCCL uses only with its plugin. All-gather and reduce-scatter run on a
    ring whatever ``algorithm`` says, with a ring's latency: NCCL has no tree for
    them (tuning.cc).
    """
    c = canonical(name)
    if c not in _PHASES:
        raise InvalidValue(f"hierarchical {c} is not modelled; choose one of: {', '.join(_PHASES)}.")
    choices = ("auto", "ring", "tree", "collnet")
    if algorithm not in choices:
        raise InvalidValue(f"unknown algorithm {algorithm!r} between nodes; expected one of: {', '.join(choices)}.")
    k, m = whole(gpus_per_node, "gpus_per_node"), whole(nodes, "nodes")
    if k * m < 2:
        raise InvalidValue(f"a collective needs at least 2 GPUs; got {k} x {m}.")
    calibrated = _flag(calibrated, "calibrated")
    S = float(positive(size, "size"))
    job = _HierarchicalJob(c, S, k, m, intra, inter, overlap, calibrated)
    if c != "all-reduce" and algorithm == "tree":  # NCCL runs all-gather and reduce-scatter on rings only
        algorithm = "ring"  # (tuning.cc, 2.7 to 2.18; later PAT, NVLS, CollNet, never a tree): its latency too
    if algorithm == "auto":
        results = {a: _hierarchical_timed(job, a) for a in _hierarchical_tried(c, inter, calibrated)}
        algorithm = min(results, key=lambda a: results[a][1])
        phases, t, latency = results[algorithm]
    else:
        phases, t, latency = _hierarchical_timed(job, algorithm)
    return Hierarchical(c, S, k, m, bool(overlap), phases, t, algorithm, calibrated, latency)


@dataclass(frozen=True)
class _HierarchicalJob:
    """hierarchical()'s arguments, checked: the collective, its bytes, k GPUs a node, m nodes, the links."""

    c: str
    S: float
    k: int
    m: int
    intra: object
    inter: object
    overlap: object
    calibrated: bool


def _hierarchical_tried(c: str, inter, calibrated: bool) -> list[str]:
    """The algorithms between the nodes that 'auto' chooses from: CollNet only in the bound, on a network with it."""
    return ["ring"] + (["tree"] if c == "all-reduce" else []) + \
        (["collnet"] if c == "all-reduce" and not calibrated and nccl.in_network_reduction(links.get(inter))
         else [])


def _hierarchical_inter_phase(job: _HierarchicalJob, phase: str, part: float, a: str,
                              protocol: str | None = None) -> Collective:
    """One phase between the nodes, with algorithm ``a`` (a tree only for an all-reduce) and ``protocol``."""
    if a == "collnet":
        if phase != "all-reduce" or not nccl.in_network_reduction(links.get(job.inter)):
            raise InvalidValue(f"collnet (in-network reduction) is an all-reduce on a network whose switches "
                               f"reduce; {getattr(links.get(job.inter), 'key', job.inter)} has none.")
        return _in_network(part, job.m, job.inter)
    if a == "tree" and phase != "all-reduce":
        a = "ring"
    return collective(phase, part, job.m, job.inter, a, protocol=protocol, calibrated=job.calibrated)


def _hierarchical_run(job: _HierarchicalJob, a: str, protocol: str | None = None) -> tuple[list, float]:
    """The phases, inside the nodes and between them, and their time: pipelined (overlap) or one after the other.

    ``protocol``: every phase runs it (None: each phase its fastest)."""
    c, S, k, m = job.c, job.S, job.k, job.m
    phases = []
    for phase, level, divisor in _PHASES[c]:
        group = k if level == "intra" else m
        if group < 2:
            continue
        part = S / k if divisor == "k" else S
        if level == "intra":
            phases.append((level, collective(phase, part, group, job.intra, protocol=protocol,
                                             calibrated=job.calibrated)))
        else:
            phases.append((level, _hierarchical_inter_phase(job, phase, part, a, protocol)))
    if job.overlap:  # the phases on one link still take turns; the two links work at once
        busy = {level: sum(p.transfer_s for lv, p in phases if lv == level) for level, _ in phases}
        return phases, sum(p.latency_s for _, p in phases) + max(busy.values())
    return phases, sum(p.time_s for _, p in phases)


def _hierarchical_nccl_latency(job: _HierarchicalJob, a: str, phases, proto: str) -> float:
    """NCCL's latency of the whole collective across nodes with protocol ``proto`` (tuning.cc), in place of the
    phases' own."""
    c, k, m = job.c, job.k, job.m
    if a == "collnet":
        return sum(p.latency_s for _, p in phases)
    kind_intra = nccl.link_class(links.get(job.intra)) or "nvlink"
    steps_all = 2 * (k * m - 1) if c == "all-reduce" else k * m - 1
    inter_steps = 2 * (m - 1) if c == "all-reduce" else m - 1
    net_overhead = 1e-6 * (3 if proto == "Simple" else 1)  # tuning.cc: getNetOverhead, x3 for Simple
    intra_lat = max(nccl.hw_latency(kind_intra, a, proto), net_overhead)
    inter_lat = nccl.hw_latency("net", a, proto) * (nccl.RING_PLATEAU if a == "ring" and proto == "Simple"
                                                    and c == "all-reduce" else 1)
    if a == "tree":
        lat = 2 * ((k - 1) * intra_lat + math.ceil(math.log2(m)) * inter_lat)
    else:
        lat = (steps_all - inter_steps) * intra_lat + inter_steps * inter_lat
    return lat + nccl.base_latency(a, proto)


def _hierarchical_timed(job: _HierarchicalJob, a: str):
    """(phases, time, NCCL's latency or None) with algorithm ``a``.

    The bound: each phase at its best, their latencies added. Calibrated, as NCCL's tuner
    does (``ncclTopoGetAlgoTime``, NVIDIA/nccl ``src/graph/tuning.cc``): one protocol for the
    whole collective, which pays that protocol's latency of the whole ring or tree across
    the nodes and that protocol's bandwidth in every phase; the protocol with the least total
    wins. So the total is never below one of its own phases.
    """
    if not job.calibrated:
        phases, t = _hierarchical_run(job, a)
        return phases, t, None
    best = None
    for proto in (("Simple",) if a == "collnet" else nccl.protocols(a)):
        phases, t = _hierarchical_run(job, a, None if a == "collnet" else proto)
        latency = _hierarchical_nccl_latency(job, a, phases, proto)
        t += latency - sum(p.latency_s for _, p in phases)
        if best is None or t < best[1]:
            best = (phases, t, latency)
    return best


# --- fitting α and β to measurements ---------------------------------------------------


@dataclass(frozen=True)
class Fit:
    """α and β fitted to measured (size, time) points of one collective, and how well they fit."""

    collective: str
    gpus: int
    alpha_s: float
    bandwidth_bytes_per_s: float
    sizes: list
    times: list
    predicted: list

    @property
    def errors(self) -> list:
        """(predicted - measured) / measured, point by point."""
        return [(p - t) / t for p, t in zip(self.predicted, self.times)]

    @property
    def median_error(self) -> float:
        return statistics.median(abs(e) for e in self.errors)

    @property
    def max_error(self) -> float:
        return max(abs(e) for e in self.errors)

    def to_dict(self) -> dict:
        return {"collective": self.collective, "gpus": self.gpus, "alpha_s": self.alpha_s,
                "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s, "sizes": list(self.sizes),
                "times_s": list(self.times), "predicted_s": list(self.predicted),
                "median_error": self.median_error, "max_error": self.max_error}


def fit(sizes, times, collective: str = "p2p", gpus=2, algorithm: str = "ring") -> Fit:
    """α and β of T = steps·α + f·S/β, fitted to measured times by least squares on relative error.

    Each point is weighted by 1/t, so a 10 µs message counts as much as a 10 ms
    one. Neither α nor 1/β may come out negative: if one would, it is pinned at
    0 and the other refitted (β = inf means no measurable bandwidth cost).
    """
    import numpy as np  # deferred: numpy costs ~80 ms at import

    c = canonical(collective)
    n = 2 if c == "p2p" else _gpus(gpus)
    S = np.asarray([float(positive(s, "size")) for s in sizes])
    t = np.asarray([float(positive(x, "time")) for x in times])
    if len(S) != len(t) or len(S) < 2 or len(set(S)) < 2:
        raise InvalidValue("fit needs at least two different sizes, each with one time.")
    a_col, b_col = steps(c, n, algorithm) / t, volume(c, n, algorithm) * S / t  # columns of A / t
    (alpha, inv_beta), *_ = np.linalg.lstsq(np.column_stack([a_col, b_col]), np.ones_like(t), rcond=None)
    if alpha < 0:
        alpha, inv_beta = 0.0, float(b_col @ np.ones_like(t) / (b_col @ b_col))
    if inv_beta <= 0:
        alpha, inv_beta = float(a_col @ np.ones_like(t) / (a_col @ a_col)), 0.0
    beta = math.inf if inv_beta <= 0 else 1 / inv_beta
    predicted = [float(steps(c, n, algorithm) * alpha + volume(c, n, algorithm) * s * inv_beta) for s in S]
    return Fit(c, n, float(alpha), float(beta), [float(s) for s in S], [float(x) for x in t], predicted)
