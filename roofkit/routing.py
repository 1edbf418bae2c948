"""How a mixture of experts' tokens reach its experts, and the kernels of its MLP.

Each token of a mixture-of-experts layer goes to k of its E experts (a router scores
them; Shazeer et al. 2017, Fedus et al. 2022). Its FLOPs are those of the k experts it
reaches; the weights a step reads are those of every expert any of its tokens reach, so a
small batch reads a few experts and a large one all of them (:func:`experts_touched`).
:func:`moe_mlp_ops` gives the layer's MLP kernels in the form of
:func:`roofkit.formulas.mlp_ops`, for :meth:`roofkit.models.Model.layer_ops`.

    >>> round(experts_touched(1, 128, 8)), round(experts_touched(64, 128, 8)), round(experts_touched(4096, 128, 8))
    (8, 126, 128)
"""

from __future__ import annotations

from . import formulas
from .errors import InvalidValue
from .formulas import _bytes as storage, _size as size  # the formulas' own checks of a size and a precision

__all__ = ["ROUTINGS", "experts_touched", "moe_mlp_ops"]


ROUTINGS = ("uniform", "concentrated")  # how a batch's tokens spread over the experts (see experts_touched)


def experts_touched(tokens, experts, top_k, routing="uniform"):
    """How many of E experts T tokens reach when each token goes to k of them.

    ``uniform``: every token picks its k independently, each expert with chance k / E (a
    balanced router), so an expert is missed by all T with chance (1 - k/E)^T:

        E (1 - (1 - k / E)^T)          k for one token, all E for many

    ``concentrated``: every token picks the same k, the fewest weights a step can read (a
    bound: no routing reads fewer).
    """
    T, E, k = size(tokens, "tokens"), size(experts, "experts"), size(top_k, "top_k")
    if k > E:
        raise InvalidValue(f"top_k ({k}) must be at most the experts ({E}).")
    if routing == "concentrated":
        return k
    if routing != "uniform":
        raise InvalidValue(f"routing must be one of {', '.join(ROUTINGS)}; got {routing!r}.")
    return E * (1 - (1 - k / E) ** T)


def moe_mlp_ops(tokens, d_model, d_ff, experts, top_k, bytes_per_element=2, gated=True,
                weight_bytes_per_element=None, shared=0, routing="uniform") -> dict[str, formulas.Cost]:
    """The kernels of a mixture-of-experts MLP on T tokens, each routed to k of E experts of width d_ff:

        'moe.router'   gemm(T, E, d)                 a score per expert
        'moe.up', ('moe.gate',), 'moe.act', 'moe.down'
                       the MLP's kernels on the T k routed rows (grouped GEMMs), reading the
                       weights of the u experts the rows reach (:func:`experts_touched`) once each
        'moe.combine'  each token's k outputs, weighted and summed: k FLOPs per element
        'shared.*'     ``shared`` experts every token goes through: an MLP of width shared x d_ff

    FLOPs are 2 per active parameter per token; the bytes are the touched experts' weights,
    so a small batch reads few experts and a large one all of them.
    """
    T, d, f = size(tokens, "tokens"), size(d_model, "d_model"), size(d_ff, "d_ff")
    b, b_w = storage(bytes_per_element), weight_bytes_per_element
    k = size(top_k, "top_k")
    u = experts_touched(T, experts, k, routing)
    w = storage(b_w) if b_w is not None else b
    ops = {"moe.router": formulas.gemm(T, experts, d, b)}
    for name, cost in formulas.mlp_ops(T * k, d, f, b, gated, b_w).items():  # one expert's weights counted by mlp_ops
        extra = (u - 1) * d * f * w if name != "act" else 0
        ops[f"moe.{name}"] = cost + formulas.Cost(0, extra)
    ops["moe.combine"] = formulas.Cost(T * d * k, T * d * (k + 1) * b)
    if shared:
        for name, cost in formulas.mlp_ops(T, d, shared * f, b, gated, b_w).items():
            ops[f"shared.{name}"] = cost
    return ops
