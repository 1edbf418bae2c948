"""Where a parallel layout turns communication-bound: the scaling book's two rooflines.

* data parallelism hides its gradient traffic behind the backward pass above a
  critical batch per GPU (:func:`dp_critical_batch`);
* tensor parallelism keeps its activation traffic below its MLP matmuls up to a
  critical degree (:func:`tp_critical_degree`).

Austin et al., *How to Scale Your Model*, training.md and gpus.md.
"""

from __future__ import annotations

from ...units import is_symbolic, positive
from .. import comms

__all__ = ["dp_critical_batch", "tp_critical_degree", "MLP_MATMULS"]

MLP_MATMULS = {True: 3, False: 2}  # gated (SwiGLU: gate, up, down), plain (up, down)


def dp_critical_batch(gpus, peak_flops, bandwidth, grad_bytes=2):
    """Tokens per GPU below which data parallelism's gradient all-reduce outlasts the backward pass.

    Backward: 4 N B / C seconds for B tokens per GPU. Ring all-reduce of N
    gradients of b bytes: f(n) N b / W, f(n) = 2(n - 1)/n. Equal at

        B* = f(n) b C / (4 W)   ->  C / W for bf16 gradients and many GPUs

    (the scaling book, gpus.md: 990e12 / 450e9 = 2200 tokens per GPU as n grows;
    f(8) = 7/4 makes it 7/8 of that inside one 8-GPU node). The α term is left
    out: gradient buckets are large.

    >>> from roofkit import hardware, links
    >>> C, W = hardware.get("h100").peak("bf16"), links.get("nvlink4").bandwidth
    >>> round(dp_critical_batch(8, C, W))      # tokens per GPU, data parallel on 8 H100s
    1923
    """
    from .. import training  # deferred: perf.training imports numpy

    n = gpus if is_symbolic(gpus) else max(2, gpus)
    f = comms.volume("all-reduce", n)
    return f * positive(grad_bytes, "grad_bytes") * positive(peak_flops, "peak_flops") \
        / (training.BACKWARD_FLOPS_PER_PARAM_TOKEN * positive(bandwidth, "bandwidth"))


def tp_critical_degree(d_ff, peak_flops, bandwidth, gated=False):
    """TP degree Y above which a layer's activation traffic outlasts its MLP matmuls: Y* = (k/2) F W / C.

    With Megatron's split each of the Y GPUs does 1/Y of the MLP's k matmuls of
    B D F multiply-adds (k = 2 for a plain MLP, 3 for SwiGLU): 2 k B D F / Y FLOPs
    in the forward pass, while 4 B D bytes of BF16 activations are all-gathered
    and reduce-scattered (or all-reduced) at W bytes/s. Equal at

        Y* = (k / 2) F W / C       F W / C for a plain MLP (4BDF/Y FLOPs), 1.5 F W / C for SwiGLU (6BDF/Y)

    whatever B and D (the scaling book, training.md, "Tensor Parallelism": F > Y C / W).

    >>> from roofkit import hardware, links
    >>> C, W = hardware.get("h100").peak("bf16"), links.get("nvlink4").bandwidth
    >>> round(tp_critical_degree(28672, C, W), 1), round(tp_critical_degree(28672, C, W, gated=True), 1)
    (13.0, 19.6)
    """
    k = MLP_MATMULS[bool(gated)]
    return k * positive(d_ff, "d_ff") * positive(bandwidth, "bandwidth") / (2 * positive(peak_flops, "peak_flops"))
