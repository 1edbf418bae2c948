"""Expert parallelism: a mixture of experts spread over GPUs, the all-to-alls it costs, and its grouped GEMMs.

Each MoE layer routes every token to ``top_k`` of its experts. With the experts
spread over GPUs, each GPU sends its tokens' activations to the GPUs that hold
their experts (dispatch) and gets the results back (combine): two all-to-alls
in the forward pass, two in the backward (the scaling book, gpus.md, "Expert
Parallelism"; DeepSeek-V3, arXiv:2412.19437, section 3.2.2). Unlike tensor
parallelism's all-reduces, they grow with k, and across nodes they leave
through the NICs.

**Where the experts live** (Megatron-Core's "MoE parallel folding",
NVIDIA/Megatron-LM ``megatron/core/transformer/moe/README.md`` and
``megatron/core/parallel_state.py``): attention runs on TP x CP x DP ranks,
the experts on ETP x EP x EDP ranks of the same GPUs of a pipeline stage,
ETP innermost. Each expert is split over ``etp`` GPUs (expert tensor
parallelism, by default the TP degree; 1 keeps whole experts on a GPU), the
experts over ``ep`` groups of them, and the ``edp`` = tp cp dp / (ep etp)
ranks left hold the same experts and reduce their gradients together. A layout
is valid iff ep x etp divides tp x cp x dp (:func:`check`).

**What each GPU dispatches** (Megatron-Core's ``alltoall`` token dispatcher,
``MoEAlltoAllTokenDispatcher`` in ``megatron/core/transformer/moe/token_dispatcher.py``):
with sequence parallelism each TP rank holds 1/tp of the micro-batch's tokens
(1/cp of them with context parallelism) and dispatches those, top_k rows each
(:func:`dispatch_tokens`); with etp > 1 the rows an expert's GPUs received are
all-gathered over its ETP group before the GEMMs and reduce-scattered after.
Megatron-Core refuses to train a mixture of experts with TP but without
sequence parallelism (``MoELayer.forward`` raises), and so does roofkit.

Around each all-to-all that dispatcher also copies the rows in HBM: it
permutes them into expert order before the dispatch, sorts the rows received
by local expert after it, and undoes both around the combine
(:func:`permutation_bytes`); the estimate charges those copies with the
all-to-alls, at the calibrated HBM rate and per-kernel floor.

**How the rows travel** (:func:`copies`): NCCL's all-to-all sends every
(token, expert) row on its own. DeepEP (deepseek-ai/DeepEP; DeepSeek-V3,
section 3.2.2) sends a token once to each node it goes to, over InfiniBand to
the GPU with the same index there, then forwards it over NVLink to each GPU
that holds one of its experts; DeepSeek's node-limited routing (section 2.1.2)
sends each token to at most ``max_nodes`` nodes (4 of them), and its dispatch
travels in FP8 with one FP32 scale per 128 elements, its combine in BF16
(section 3.3). Under uniform routing a token's k experts land on
:func:`expected_hits` distinct nodes (and GPUs); the bound takes the least a
router could achieve under the same constraints (:func:`least_copies`): the
token's own GPU and node first, so no layout's traffic is over-charged.

**The experts' GEMMs** run as one grouped GEMM per GPU, one group per local
expert with the tokens routed to it. With few tokens per expert such a kernel
reaches less of the matmul rate (:func:`grouped_gemm_share`, from the grouped
GEMMs DeepGEMM published: ``data/grouped_gemm.toml``), the busiest GPU doing
``moe_imbalance`` x the mean's work (:func:`roofkit.steptime.grouped_gemm_time`,
forward, backward and recomputed); the estimate uses both, the bound keeps the
datasheet roof and a perfect balance.
"""

from __future__ import annotations

import math
import tomllib
from functools import cache
from importlib import resources

from ... import dtypes
from ...errors import InvalidValue
from ...units import nonnegative, positive, whole
from .. import comms
from .. import recipe as recipes
from .fabric import span

__all__ = ["A2A_PER_LAYER", "DISPATCHERS", "DISPATCH_DTYPES", "SCALE_BLOCK", "expert_all_to_all",
           "all_to_all_bytes", "ep_choices", "check", "options", "expert_dp", "dispatch_tokens", "tokens_per_expert",
           "bytes_per_element", "expected_hits", "least_copies", "copies", "dispatch_time", "grouped_gemm_points",
           "grouped_gemm_share", "permutation_bytes", "permutation_time", "ESTIMATE_FIGURES"]

A2A_PER_LAYER = 4  # dispatch and combine, forward and backward
DISPATCHERS = ("alltoall", "deepep")  # Megatron-Core's NCCL all-to-all; DeepEP's two stages, once per node
DISPATCH_DTYPES = ("bf16", "fp8")
# an FP8 dispatch is scaled as DeepSeek-V3 scales its activations (section 3.3.2: an FP32 scale per 1 x 128 tile),
# which is the fp8-blockwise recipe's block scaling: one home for it (roofkit.recipe)
_DISPATCH_RECIPE = recipes.get("fp8-blockwise")
SCALE_BLOCK = _DISPATCH_RECIPE.block  # elements per FP32 scale of an FP8 activation


def all_to_all_bytes(tokens, d_model, top_k, bytes_per_element=2):
    """Each GPU's send buffer for one dispatch: tokens x top_k x d_model x b."""
    return positive(tokens, "tokens") * positive(top_k, "top_k") * positive(d_model, "d_model") \
        * positive(bytes_per_element, "bytes_per_element")


def expert_all_to_all(tokens, d_model, top_k, ep, link, bytes_per_element=2, calibrated=False):
    """Seconds of the four all-to-alls of one MoE layer (dispatch and combine, forward and backward).

    >>> round(expert_all_to_all(8192, 7168, 8, 8, "hgx-h100") * 1e3, 2)      # ms, DeepSeek-V3's width, one node
    7.4
    """
    size = all_to_all_bytes(tokens, d_model, top_k, bytes_per_element)
    return A2A_PER_LAYER * comms.all_to_all(size, ep, link, calibrated=calibrated).time_s


# --- the layout: ETP x EP x EDP folded over TP x CP x DP --------------------------------------------------------


def ep_choices(model, tp, cp, dp, etp) -> list[int]:
    """The EP degrees a layout takes with this ``etp``: dividing the model's experts and tp cp dp / etp, and
    (roofkit's kernel model shards an expert layer like the rest, over the TP ranks) with tp dividing ep x etp.

    >>> ep_choices("qwen3-235b-a22b", 4, 1, 8, 1)
    [4, 8, 16, 32]
    """
    from ...catalogs import models  # deferred: keeps this module light for roofkit.parallel's import

    M = models.get(model)
    t, ranks = whole(tp, "tp"), whole(tp, "tp") * whole(cp, "cp") * whole(dp, "dp")
    r = whole(etp, "etp")
    return [e for e in range(1, ranks // r + 1)
            if (ranks // r) % e == 0 and ranks % r == 0 and M.experts % e == 0 and (e * r) % t == 0]


def check(model, tp, cp, dp, ep, etp, sequence_parallel) -> None:
    """One InvalidValue for a layout Megatron-Core (or roofkit's model of it) refuses; see the module docstring."""
    from ...catalogs import models  # deferred: keeps this module light for roofkit.parallel's import

    M = models.get(model)
    t, c, d, e, r = whole(tp, "tp"), whole(cp, "cp"), whole(dp, "dp"), whole(ep, "ep"), whole(etp, "etp")
    if not M.moe:
        if e > 1 or r != t:
            raise InvalidValue(f"ep = {e}, etp = {r}, but {M.name} has no experts: expert parallelism needs a "
                               "mixture of experts.")
        return
    if t > 1 and not sequence_parallel:
        raise InvalidValue(f"tp = {t} without sequence parallelism: Megatron-Core refuses to train a mixture of "
                           "experts so (MoELayer.forward in megatron/core/transformer/moe/moe_layer.py); pass "
                           "sequence_parallel=True (--sequence-parallel).")
    if M.experts % e:
        raise InvalidValue(f"ep = {e} does not divide {M.name}'s {M.experts} experts.")
    ranks = t * c * d
    if ranks % (e * r) or (e * r) % t:
        valid = ", ".join(map(str, ep_choices(M, t, c, d, r))) or "none"
        why = (f"must divide tp x cp x dp = {t} x {c} x {d} = {ranks}, the GPUs of a pipeline stage the experts fold "
               "over (Megatron-Core's MoE parallel folding)" if ranks % (e * r) else
               f"must be a multiple of tp = {t} (roofkit's kernel model splits an expert layer over the TP ranks)")
        raise InvalidValue(f"ep x etp = {e} x {r} = {e * r} {why}; with etp = {r} choose ep among {valid}"
                           + ("" if r == 1 else " (etp = 1 keeps whole experts on a GPU and allows more)") + ".")


# the estimate's figures a run may give in place of the fitted constants (Constants, the bound's own): what the bound
# takes instead, which values are valid, and what the figure is
ESTIMATE_FIGURES = {
    "moe_imbalance": ("is perfectly balanced (1.0)", lambda x: x >= 1,
                      "the busiest expert GPU's tokens over the mean, at least 1"),
    "moe_expert_s": ("pays no cost per expert", lambda x: 0 <= x < 0.1,
                     "seconds per local expert, MoE layer and micro-batch, from 0 (one fused grouped GEMM over every "
                     "expert) to under 0.1"),
}


def options(model, calibrated, max_nodes_per_token=None, dispatch_dtype="bf16", dispatcher="alltoall",
            moe_imbalance=None, moe_expert_s=None) -> tuple:
    """(max_nodes_per_token, dispatch_dtype, dispatcher, moe_imbalance, moe_expert_s) checked: one InvalidValue
    naming the bad value and the valid ones. ``moe_imbalance`` and ``moe_expert_s`` (the cost per local expert, MoE
    layer and micro-batch, :class:`roofkit.parallel.constants.Constants`) are the estimate's (calibrated only: the
    bound is balanced and pays no such cost)."""
    from ...catalogs import models  # deferred: keeps this module light for roofkit.parallel's import

    M = models.get(model)
    given = {"max_nodes_per_token": max_nodes_per_token is not None, "dispatch_dtype": dispatch_dtype != "bf16",
             "dispatcher": dispatcher != "alltoall", "moe_imbalance": moe_imbalance is not None,
             "moe_expert_s": moe_expert_s is not None}
    if not M.moe and any(given.values()):
        raise InvalidValue(f"{', '.join(k for k, v in given.items() if v)} describe(s) the experts' dispatch, but "
                           f"{M.name} has no experts.")
    if max_nodes_per_token is not None:
        max_nodes_per_token = whole(max_nodes_per_token, "max_nodes_per_token")
    bytes_per_element(dispatch_dtype)  # checks it
    if dispatcher not in DISPATCHERS:
        raise InvalidValue(f"dispatcher must be one of {', '.join(DISPATCHERS)}; got {dispatcher!r}.")
    for name, value in (("moe_imbalance", moe_imbalance), ("moe_expert_s", moe_expert_s)):
        if value is None:
            continue
        instead, valid, what = ESTIMATE_FIGURES[name]
        if not calibrated:
            raise InvalidValue(f"{name} = {value!r} is the estimate's: the bound {instead}; pass calibrated=True "
                               "(--calibrated) with it.")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not valid(value):
            raise InvalidValue(f"{name} is {what}; got {value!r}.")
    return max_nodes_per_token, dispatch_dtype, dispatcher, moe_imbalance, moe_expert_s


def expert_dp(tp, cp, dp, ep, etp) -> int:
    """Expert data parallelism: the ranks of a pipeline stage that hold the same experts, tp cp dp / (ep etp)
    (a fraction where ep x etp does not divide tp x cp x dp, a layout :func:`check` refuses).

    >>> expert_dp(1, 1, 128, 64, 1), expert_dp(4, 1, 8, 32, 1), expert_dp(8, 1, 4, 4, 8)   # DeepSeek-V3, ...
    (2, 1, 1)
    """
    ranks = whole(tp, "tp") * whole(cp, "cp") * whole(dp, "dp")
    group = whole(ep, "ep") * whole(etp, "etp")
    return ranks // group if ranks % group == 0 else ranks / group


def dispatch_tokens(microbatch_tokens, cp=1, tp=1, sequence_parallel=True) -> float:
    """Tokens one GPU dispatches per MoE layer and micro-batch: its own, microbatch_tokens / (cp tp).

    Megatron-Core's ``alltoall`` dispatcher routes each TP rank's slice of the
    sequence-parallel activations; without sequence parallelism the TP ranks
    would hold the same tokens, which Megatron-Core refuses for a mixture of
    experts (:func:`check`).
    """
    t = whole(tp, "tp")
    if t > 1 and not sequence_parallel:
        raise InvalidValue(f"tp = {t} without sequence parallelism: Megatron-Core refuses to train a mixture of "
                           "experts so; pass sequence_parallel=True.")
    return positive(microbatch_tokens, "microbatch_tokens") / (whole(cp, "cp") * t)


def tokens_per_expert(tokens_per_gpu, top_k, experts, ep=1, etp=1) -> float:
    """The rows one expert's grouped-GEMM group gets, balanced: each of the ep x etp GPUs its experts' group
    gathers from sends tokens_per_gpu x top_k rows, spread over the model's experts.

    >>> tokens_per_expert(4096, 8, 256, ep=64)      # DeepSeek-V3: 4,096 tokens a GPU, EP 64
    8192.0
    """
    return positive(tokens_per_gpu, "tokens_per_gpu") * positive(top_k, "top_k") * whole(ep, "ep") \
        * whole(etp, "etp") / positive(experts, "experts")


def bytes_per_element(dispatch_dtype="bf16") -> float:
    """Bytes a dispatched activation takes: BF16's 2, or FP8's 1 plus an FP32 scale per :data:`SCALE_BLOCK`.

    >>> bytes_per_element("bf16"), bytes_per_element("fp8")
    (2, 1.03125)
    """
    if dispatch_dtype not in DISPATCH_DTYPES:
        raise InvalidValue(f"dispatch_dtype must be one of {', '.join(DISPATCH_DTYPES)}; got {dispatch_dtype!r}.")
    return _DISPATCH_RECIPE.element_bytes("fp8") if dispatch_dtype == "fp8" else dtypes.bytes_per_element(dispatch_dtype)


# --- where a token's k experts are ------------------------------------------------------------------------------


def expected_hits(k, pool, per_group) -> float:
    """Expected distinct groups (nodes, GPUs) that k experts drawn uniformly from ``pool``, in groups of
    ``per_group``, fall in: (pool / per_group) (1 - C(pool - per_group, k) / C(pool, k)).

    Each group is missed when all k experts come from the other pool - per_group
    (a hypergeometric draw without replacement). Node-limited routing first
    picks M nodes and then the k experts among theirs: ``pool`` is then
    M x the experts of a node.

    >>> round(expected_hits(8, 256, 32), 3), round(expected_hits(8, 128, 32), 3)  # DeepSeek-V3: 8 nodes, or 4
    (5.295, 3.629)
    """
    k, pool, per = whole(k, "k"), whole(pool, "pool"), whole(per_group, "per_group")
    if k > pool or pool % per:
        raise InvalidValue(f"{k} experts from a pool of {pool} in groups of {per}: k must be at most the pool, "
                           "and the groups must divide it.")
    return pool // per * (1 - math.comb(pool - per, k) / math.comb(pool, k))


def least_copies(k, per_gpu, gpus_per_node, nodes, max_nodes=None) -> tuple[int, int]:
    """(network copies, NVLink copies) of one token when a router puts its k experts where they cost least.

    The token's own GPU holds ``per_gpu`` experts, its node gpus_per_node x per_gpu:
    the least traffic fills its own GPU, then its node (one NVLink copy per other
    GPU), then the fewest other nodes (one network copy each, landing on a GPU
    that keeps its experts and forwards the rest over NVLink). Every expert still
    gets the same share of the tokens (each GPU's tokens go to the same
    neighbours): it is consistent with perfect balance. Refused when ``max_nodes``
    nodes cannot hold k experts.

    >>> least_copies(8, 4, 8, 8), least_copies(8, 4, 1, 64), least_copies(8, 1, 4, 2)
    ((0, 1), (1, 0), (1, 6))
    """
    k, a = whole(k, "k"), whole(per_gpu, "per_gpu")
    g, n = whole(gpus_per_node, "gpus_per_node"), whole(nodes, "nodes")
    node = g * a
    if k > n * node:
        raise InvalidValue(f"{k} experts per token, but the expert-parallel group holds only {n * node}.")
    rest = max(0, k - node)  # experts on other nodes
    remote = math.ceil(rest / node)
    if max_nodes is not None and 1 + remote > max_nodes:
        raise InvalidValue(f"max_nodes_per_token = {max_nodes}, but {k} experts need at least {1 + remote} nodes of "
                           f"{node} experts each.")
    here = min(k, node)
    nvlink = math.ceil(here / a) - 1  # the other GPUs of its own node
    full, part = divmod(rest, node)
    nvlink += full * (g - 1) + (math.ceil(part / a) - 1 if part else 0)  # forwarded past each landing GPU
    return remote, nvlink


def copies(k, experts, ep, gpus_per_node, max_nodes=None, least=False, dispatcher="deepep") -> dict:
    """What one token's dispatch sends: network and NVLink copies, and the rows its experts' GPUs receive.

    ``ep`` ranks of the expert-parallel group, ``gpus_per_node`` of them in each
    node (:func:`roofkit.parallel.fabric.span`). ``least``: the bound
    (:func:`least_copies`). Else uniform routing, node-limited to ``max_nodes``
    nodes: ``deepep`` sends a token once to each other node it reaches,
    E[remote nodes] = E[nodes hit] (N - 1)/N (its own node is one of N alike),
    and forwards it over NVLink to each GPU hit but the sender and the GPUs it
    landed on, E[GPUs hit] (1 - 1/g) (each GPU is hit alike, and N of them are a
    sender or landing GPU); ``alltoall`` (NCCL) sends each of the k rows on its
    own, (N - 1)/N of them to other nodes and (g - 1)/(g N) to the node's other
    GPUs, however routing is limited.
    """
    k, E, e = whole(k, "k"), whole(experts, "experts"), whole(ep, "ep")
    g = whole(gpus_per_node, "gpus_per_node")
    if dispatcher not in DISPATCHERS:
        raise InvalidValue(f"dispatcher must be one of {', '.join(DISPATCHERS)}; got {dispatcher!r}.")
    per_gpu, nodes = E // e, max(1, e // g)
    if max_nodes is not None and whole(max_nodes, "max_nodes_per_token") * g * per_gpu < k:
        raise InvalidValue(f"max_nodes_per_token = {max_nodes}: {max_nodes} nodes of {g * per_gpu} experts cannot "
                           f"hold a token's {k}.")
    if least:
        network, nvlink = least_copies(k, per_gpu, g, nodes, max_nodes)
        return {"network": float(network), "nvlink": float(nvlink), "rows": float(math.ceil(k / per_gpu))}
    if dispatcher == "alltoall":
        return {"network": k * (nodes - 1) / nodes, "nvlink": k * (g - 1) / (g * nodes), "rows": float(k)}
    chosen = nodes if max_nodes is None else min(nodes, max_nodes)
    pool = chosen * g * per_gpu
    gpus_hit = expected_hits(k, pool, per_gpu)
    return {"network": expected_hits(k, pool, g * per_gpu) * (nodes - 1) / nodes,
            "nvlink": gpus_hit * (1 - 1 / g), "rows": gpus_hit}


def dispatch_time(size_network, size_nvlink, nodes, gpus_per_node, intra, inter, calibrated=False) -> float:
    """Seconds of one two-stage all-to-all: each GPU sends ``size_network`` bytes to its peers in the other
    nodes and ``size_nvlink`` bytes to the GPUs of its own node, the two stages at once (DeepEP overlaps them)."""
    out = 0.0
    if nodes > 1 and size_network > 0:
        if inter is None:
            raise InvalidValue(f"the expert-parallel group spans {nodes} nodes, and the accelerator has no "
                               "scale-out link in the catalog.")
        # an all-to-all of n GPUs sends (n - 1)/n of its buffer: the buffer whose share for others is the bytes
        out = comms.all_to_all(size_network * nodes / (nodes - 1), nodes, inter, calibrated=calibrated).time_s
    inside = 0.0
    if gpus_per_node > 1 and size_nvlink > 0:
        g = gpus_per_node
        inside = comms.all_to_all(size_nvlink * g / (g - 1), g, intra, calibrated=calibrated).time_s
    return max(out, inside)


def permutation_bytes(tokens, d_model, top_k, local_experts, dispatch_bytes=2, combine_bytes=2) -> dict:
    """HBM bytes of the row copies Megatron-Core's ``alltoall`` dispatcher runs around one dispatch and one
    combine on one GPU, balanced: {'dispatch': (bytes, kernels), 'combine': (bytes, kernels)}.

    ``MoEAlltoAllTokenDispatcher`` (NVIDIA/Megatron-LM,
    ``megatron/core/transformer/moe/token_dispatcher.py``; the copies in
    ``megatron/core/transformer/moe/moe_utils.py``): before the all-to-all,
    "Permutation 1" (``permute``) gathers each token's top_k rows in expert
    order: it reads the T tokens and writes T x top_k rows (the least, with
    Transformer Engine's fused permutation, ``moe_permute_fusion``); after it,
    "Permutation 2" (``sort_chunks_by_idxs``, only with more than one local
    expert) reorders the T x top_k rows received (balanced, as many as sent)
    by local expert: it reads and writes them. The combine undoes both:
    ``sort_chunks_by_idxs`` back, then ``unpermute`` reads the T x top_k rows
    and writes the T tokens (their weighted sum). The backward pass runs the
    same copies on the gradients (counted with the backward's dispatch and
    combine, as :data:`A2A_PER_LAYER` counts the all-to-alls).

    >>> b = permutation_bytes(4096, 2048, 8, 16)          # Qwen3-30B-A3B, 4,096 tokens a GPU, EP 8
    >>> b["dispatch"], b["combine"]
    ((419430400, 2), (419430400, 2))
    """
    T, d, k = positive(tokens, "tokens"), whole(d_model, "d_model"), whole(top_k, "top_k")
    sort = whole(local_experts, "local_experts") > 1
    out = {}
    for direction, b in (("dispatch", dispatch_bytes), ("combine", combine_bytes)):
        rows = T * k * d * positive(b, "bytes_per_element")
        one = T * d * b + rows  # permute (tokens read, rows written), or unpermute (rows read, tokens written)
        out[direction] = (one + (2 * rows if sort else 0), 2 if sort else 1)
    return out


def permutation_time(size, kernels, memory) -> float:
    """Seconds of ``kernels`` row-copy kernels moving ``size`` HBM bytes in all, ``memory`` = (bytes/s, seconds
    per kernel): the calibrated HBM bandwidth and per-kernel floor (:func:`roofkit.steptime.roofs`)."""
    bandwidth, floor = memory
    return kernels * nonnegative(floor, "floor") + positive(size, "size") / positive(bandwidth, "bandwidth")


def traffic(fabric, tokens, model, ep, etp, max_nodes=None, dispatch_dtype="bf16", dispatcher="alltoall",
            calibrated=False, memory=None) -> dict:
    """One MoE layer's expert traffic per GPU and micro-batch, by direction: seconds and bytes of one dispatch
    (in ``dispatch_dtype``), one combine (BF16), and of one all-gather + reduce-scatter pair over the ETP group.

    ``tokens``: what this GPU dispatches (:func:`dispatch_tokens`). The bound
    (``calibrated=False``) sends the least copies at the links' line rates; the
    estimate, the ``dispatcher``'s expected copies at NCCL's measured rates.
    ``memory`` (calibrated, ``alltoall`` only): (HBM bytes/s, per-kernel floor)
    to add the dispatcher's own row copies around each all-to-all
    (:func:`permutation_bytes`) to its seconds, as ``permute_s``; the bound
    leaves them out (a dispatch kernel could fuse them, as DeepEP's do).
    """
    from ...catalogs import models  # deferred: keeps this module light for roofkit.parallel's import

    M = models.get(model)
    e, r = whole(ep, "ep"), whole(etp, "etp")
    g, nodes = span(e, r, fabric.node) if e > 1 else (1, 1)
    n, d = positive(tokens, "tokens"), M.d_model
    c = copies(M.experts_per_token, M.experts, e, g, max_nodes, least=not calibrated, dispatcher=dispatcher)
    out = {"copies": c, "gpus_per_node": g, "nodes": nodes}
    for direction, b in (("dispatch", bytes_per_element(dispatch_dtype)), ("combine", bytes_per_element("bf16"))):
        network, nvlink = n * c["network"] * d * b, n * c["nvlink"] * d * b
        permute = 0.0
        if calibrated and dispatcher == "alltoall":  # NCCL's all-to-all, placed on the fabric as it is
            size = all_to_all_bytes(n, d, M.experts_per_token, b)
            seconds = fabric.time("all-to-all", size, e, r)
            if memory is not None:  # the dispatcher's permutations around it (HBM copies, not hidden)
                moved, kernels = permutation_bytes(n, d, M.experts_per_token, M.experts // e, b, b)[direction]
                permute = permutation_time(moved, kernels, memory)
        else:
            seconds = dispatch_time(network, nvlink, nodes, g, fabric.intra, fabric.inter, calibrated)
        out[direction] = {"seconds": seconds + permute, "permute_s": permute, "network_bytes": network,
                          "nvlink_bytes": nvlink}
    if r > 1:  # the rows an expert's ETP group received, gathered before its GEMMs and reduce-scattered after
        gathered = r * n * c["rows"] * d * bytes_per_element("bf16")
        seconds = fabric.time("all-gather", gathered, r, 1) + fabric.time("reduce-scatter", gathered, r, 1)
        out["etp"] = {"seconds": seconds, "bytes": gathered, "level": fabric.level(r, 1)}
    out["level"] = "inter" if nodes > 1 and c["network"] > 0 else "intra"
    return out


# --- grouped GEMMs at few tokens per expert ---------------------------------------------------------------------


@cache
def grouped_gemm_points() -> tuple[dict, tuple[tuple[float, float], ...]]:
    """(the source, ((tokens per expert, share of the large-M rate), ...)) from ``data/grouped_gemm.toml``.

    Each published shape (N, K) is divided by its own largest-M rate; the share
    at an M is the mean over the shapes published at that M.
    """
    data = tomllib.loads(resources.files("roofkit").joinpath("data/grouped_gemm.toml").read_text(encoding="utf-8"))
    rows = data["rows"]
    best = {}
    for row in rows:
        shape = (row["n"], row["k"])
        best[shape] = max(best.get(shape, 0.0), row["tflops"])
    shares = {}
    for row in rows:
        shares.setdefault(row["m"], []).append(row["tflops"] / best[(row["n"], row["k"])])
    points = tuple((float(m), sum(v) / len(v)) for m, v in sorted(shares.items()))
    return {k: v for k, v in data.items() if k != "rows"}, points


def grouped_gemm_share(tokens_per_expert) -> float:
    """The share of its large-M matmul rate a grouped GEMM reaches with ``tokens_per_expert`` rows per group.

    Linear in log2(M) between the published points (:func:`grouped_gemm_points`),
    held at the ends: 1 from the largest M up, and the smallest M's share below
    it (no published point there; the roofline's memory term, which the kernel
    model keeps, takes over at small M).

    >>> round(grouped_gemm_share(256), 3), round(grouped_gemm_share(2048), 3), grouped_gemm_share(8192)
    (0.682, 0.919, 1.0)
    """
    M = positive(tokens_per_expert, "tokens_per_expert")
    _, points = grouped_gemm_points()
    if M <= points[0][0]:
        return points[0][1]
    for (m0, s0), (m1, s1) in zip(points, points[1:]):
        if M <= m1:
            x = (math.log2(M) - math.log2(m0)) / (math.log2(m1) - math.log2(m0))
            return s0 + x * (s1 - s0)
    return points[-1][1]
