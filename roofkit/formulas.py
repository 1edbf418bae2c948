"""FLOPs, bytes and arithmetic intensity of the kernels in a transformer.

    I = FLOPs / bytes                                          [FLOP/byte]

Counting conventions:

* An FMA (a*b + c) is 2 FLOPs, so a GEMM C[M,N] = A[M,K] @ B[K,N] costs 2MNK.
* Bytes are HBM traffic under the ideal traffic model: each kernel, as it is
  launched, reads every operand from HBM once and writes every output once.
  Caches, re-reads between tiles and launch overhead are ignored (the
  "idealized traffic model"; Williams, Waterman &
  Patterson, "Roofline", CACM 52(4), 2009). Two kernels that pass a tensor
  between them pay for it twice: written by one, read by the next.

Each formula is written once, with plain arithmetic, and serves three uses:

    >>> gemm(4096, 4096, 4096, "bf16").intensity          # numbers
    1365.3333333333333
    >>> import numpy as np
    >>> gemm(np.array([1, 4096]), 4096, 4096).intensity    # arrays broadcast
    array([9.99511957e-01, 1.36533333e+03])
    >>> import sympy
    >>> n, b, M = sympy.symbols("n b M", positive=True)     # symbols: the algebra
    >>> sympy.simplify(gemm(n, n, n, b).intensity)
    2*n/(3*b)
    >>> sympy.limit(gemm(M, n, n, b).intensity, n, sympy.oo)   # matmul intensity ~ batch
    2*M/b

:func:`symbolic` fills every size with its textbook letter for you:
``symbolic(gemm)`` -> ``Cost(flops=2*K*M*N, bytes=b*(K*M + K*N + M*N))``.
A numeric call never imports sympy; numbers are validated, sympy expressions pass unchecked.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, NamedTuple

import numpy as np

from . import dtypes
from .errors import InvalidValue, UnknownPrecision
from .units import is_symbolic, nonnegative, positive

__all__ = [
    "Cost", "gemm", "gemv", "batched_matmul", "gemm_padded", "elementwise", "reduction",
    "rmsnorm", "layernorm", "softmax", "attention_naive_kernels", "attention_naive",
    "attention_fused", "attention_tile_bytes", "attention_pairs", "mlp_ops", "mlp", "kv_cache_bytes",
    "latent_cache_bytes", "attention_latent", "latent_attention_ops", "transformer_layer_ops", "transformer_layer",
    "transformer_layer_params", "symbolic", "SYMBOLS", "RMSNORM_FLOPS_PER_ELEMENT", "LAYERNORM_FLOPS_PER_ELEMENT",
    "SOFTMAX_FLOPS_PER_ELEMENT", "GELU_FLOPS_PER_ELEMENT", "SILU_FLOPS_PER_ELEMENT", "FLOPS_PER_FMA",
]

# An FMA (fused multiply-add, d = a*b + c) is one instruction but two floating-point
# operations: the 2 in a GEMM's 2MNK and in a tensor core's peak.
FLOPS_PER_FMA = 2

# FLOPs per element of the non-GEMM ops. These are conventions, not measurements:
# papers and tools disagree, and PyTorch's FlopCounterMode counts all of them as 0
# (it counts only matmuls and convolutions).
RMSNORM_FLOPS_PER_ELEMENT = 4    # square, accumulate, scale by rsqrt(mean), scale by weight
LAYERNORM_FLOPS_PER_ELEMENT = 7  # accumulate mean, subtract, square, accumulate, scale, *gamma, +beta
SOFTMAX_FLOPS_PER_ELEMENT = 5    # max, subtract, exp, sum, divide
GELU_FLOPS_PER_ELEMENT = 8       # the tanh approximation (lesson 02's GELU question)
SILU_FLOPS_PER_ELEMENT = 4       # x / (1 + exp(-x)): negate, exp, add, divide


class Cost(NamedTuple):
    """What a kernel (or a sum of kernels) costs: ``flops`` [FLOP] and HBM ``bytes`` [byte].

    Costs add (``sum(ops.values())``) and scale (``3 * cost``, ``cost.scale(3)``);
    each field is a number, a numpy array or a sympy expression.
    """

    flops: Any
    bytes: Any

    __array_ufunc__ = None  # np.float64(2) * cost -> Cost.__rmul__, not an array of two numbers

    @property
    def intensity(self):
        """Arithmetic intensity I = flops / bytes, in FLOP/byte."""
        return self.flops / self.bytes

    def __add__(self, other):
        if isinstance(other, Cost):
            return Cost(self.flops + other.flops, self.bytes + other.bytes)
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self  # so that sum(costs) works
        return NotImplemented

    def scale(self, k):
        """The cost of running this kernel ``k`` times (k > 0)."""
        k = positive(k, "k")
        return Cost(k * self.flops, k * self.bytes)

    __mul__ = __rmul__ = scale

    def to_dict(self) -> dict:
        """{'flops', 'bytes', 'intensity'}; numpy scalars become Python numbers (JSON-ready)."""
        plain = lambda v: v.item() if isinstance(v, np.generic) else v  # noqa: E731
        return {"flops": plain(self.flops), "bytes": plain(self.bytes), "intensity": plain(self.intensity)}


def ridge_point(peak_flops, bandwidth):
    """I* = P / B in FLOP/byte: the intensity where the two roofs meet.

    The one home of the formula: :func:`roofkit.roofline.ridge_point` and
    :meth:`roofkit.hardware.Accelerator.ridge` are this. Not in ``__all__``,
    which lists the costs of kernels.

    >>> round(ridge_point(989e12, 3.35e12), 1)
    295.2
    """
    P, B = positive(peak_flops, "peak_flops"), positive(bandwidth, "bandwidth")
    with np.errstate(all="ignore"):
        ratio = np.divide(P, B)
    return float(ratio) if np.ndim(ratio) == 0 else ratio


def _size(value, name: str):
    """A validated positive size. Integer numpy values become float64, which cannot wrap around."""
    value = positive(value, name)
    if isinstance(value, (np.ndarray, np.generic)) and value.dtype.kind in "iu":
        return value.astype(np.float64)
    return value


def _bytes(value):
    """Bytes per element: a number, an array, a sympy expression or a precision name ('bf16')."""
    return _size(dtypes.bytes_per_element(value), "bytes_per_element")


def _storage_bytes(value, name: str):
    """Bytes per element of a stored operand (weights, a KV cache): a number, an array, sympy, or a precision name."""
    if isinstance(value, str):
        try:
            return _size(dtypes.bytes_per_element(value), name)
        except UnknownPrecision:
            raise InvalidValue(f"{name} must be a precision name ({', '.join(dtypes.PRECISIONS)}) or a finite number "
                               f"greater than 0; got {value!r}.") from None
    return _size(value, name)


def _flag(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidValue(f"{name} must be True or False; got {value!r}.")
    return bool(value)


def _ceil(x):
    """Ceiling of a number, a numpy array or a sympy expression."""
    if is_symbolic(x):
        import sympy  # deferred: sympy costs ~0.25 s at import

        return sympy.ceiling(x)
    if isinstance(x, (int, float)):
        return math.ceil(x) if math.isfinite(x) else x
    return np.ceil(x)


def _total(ops: dict[str, Cost]) -> Cost:
    return sum(ops.values())


# --- matrix products ---------------------------------------------------------


def gemm(m, n, k, bytes_per_element=2, weight_bytes_per_element=None) -> Cost:
    """C[m,n] = A[m,k] @ B[k,n], with b bytes per element.

        FLOPs = 2MNK                 (MNK multiply-adds, 2 FLOPs each)
        bytes = (MK + KN + MN) b     (read A and B once, write C once)

    Square (M = N = K = n): I = 2n/(3b), n/3 in FP16.

    ``weight_bytes_per_element`` = b_w: B is a weight matrix stored in another
    format than the activations (weight-only quantization: int8 or int4 weights,
    BF16 activations), bytes = (MK + MN) b + KN b_w. A number (with the
    format's scales counted in, see :mod:`roofkit.inference.weights`) or a
    precision name.
    """
    M, N, K, b = _size(m, "m"), _size(n, "n"), _size(k, "k"), _bytes(bytes_per_element)
    if weight_bytes_per_element is None:
        return Cost(FLOPS_PER_FMA * M * N * K, (M * K + K * N + M * N) * b)
    return Cost(FLOPS_PER_FMA * M * N * K, (M * K + M * N) * b + K * N * _storage_bytes(weight_bytes_per_element,
                                                                            "weight_bytes_per_element"))


def gemv(n, k, bytes_per_element=2) -> Cost:
    """A GEMM with M = 1, y[1,n] = x[1,k] @ W[k,n]: one decode step through a weight.

    I = 2NK / ((K + KN + N) b) -> 2/b for large N, K: about 1 FLOP/byte in BF16, memory-bound.
    """
    return gemm(1, n, k, bytes_per_element)


def batched_matmul(batch, m, n, k, bytes_per_element=2) -> Cost:
    """``batch`` independent GEMMs [m,k] @ [k,n] (torch.bmm): batch x gemm(m, n, k)."""
    return gemm(m, n, k, bytes_per_element).scale(_size(batch, "batch"))


def gemm_padded(m, n, k, tile=128):
    """FLOPs a tiled kernel executes when each dimension is padded up to a multiple of ``tile``.

        2 M'N'K',   M' = t * ceil(M / t)  (and so for N', K')

    A 130 x 130 x 130 product on 128-tiles runs 2 * 256^3 = 33,554,432 FLOPs for
    4,394,000 useful ones: MFU = HFU x 0.131. Returns FLOPs only.
    """
    t = _size(tile, "tile")
    M, N, K = (_ceil(_size(v, name) / t) * t for v, name in ((m, "m"), (n, "n"), (k, "k")))
    return gemm(M, N, K).flops


# --- elementwise ops, reductions and norms -------------------------------------


def elementwise(n, flops_per_element=1, reads=1, writes=1, bytes_per_element=2) -> Cost:
    """An op over n elements that reads ``reads`` tensors and writes ``writes`` tensors of n elements.

        FLOPs = n f,    bytes = n (r + w) b,    I = f / ((r + w) b), independent of n

    GELU in FP16 (f = 8, r = w = 1): I = 2. Vector add in FP16 (f = 1, r = 2, w = 1): I = 1/6.
    """
    N = _size(n, "n")
    f = nonnegative(flops_per_element, "flops_per_element")
    r, w = nonnegative(reads, "reads"), nonnegative(writes, "writes")
    positive(r + w, "reads + writes")
    return Cost(N * f, N * (r + w) * _bytes(bytes_per_element))


def reduction(rows, cols, bytes_per_element=2) -> Cost:
    """Sum over the last axis of a [rows, cols] tensor.

        FLOPs = R C     (one add per element)
        bytes = (R C + R) b     (read the tensor, write one value per row)
    """
    R, C, b = _size(rows, "rows"), _size(cols, "cols"), _bytes(bytes_per_element)
    return Cost(R * C, (R * C + R) * b)


def _rowwise(tokens, d, flops_per_element, weight_vectors, bytes_per_element) -> Cost:
    """Read x[T, d] and ``weight_vectors`` vectors of size d, write y[T, d]."""
    T, D, b = _size(tokens, "tokens"), _size(d, "d"), _bytes(bytes_per_element)
    return elementwise(T * D, flops_per_element, 1, 1, b) + Cost(0, weight_vectors * D * b)


def rmsnorm(tokens, d, bytes_per_element=2) -> Cost:
    """RMSNorm of T vectors of size d: y = x / rms(x) * g.

        FLOPs = 4 T d   (RMSNORM_FLOPS_PER_ELEMENT, a convention; FlopCounterMode counts 0)
        bytes = (2 T d + d) b   (read x and the weight g, write y)
    """
    return _rowwise(tokens, d, RMSNORM_FLOPS_PER_ELEMENT, 1, bytes_per_element)


def layernorm(tokens, d, bytes_per_element=2) -> Cost:
    """LayerNorm of T vectors of size d: y = (x - mean) / std * gamma + beta.

        FLOPs = 7 T d   (LAYERNORM_FLOPS_PER_ELEMENT, a convention; FlopCounterMode counts 0)
        bytes = (2 T d + 2 d) b   (read x, gamma and beta, write y)
    """
    return _rowwise(tokens, d, LAYERNORM_FLOPS_PER_ELEMENT, 2, bytes_per_element)


def softmax(rows, cols, bytes_per_element=2) -> Cost:
    """Softmax along the last axis of a [rows, cols] tensor.

        FLOPs = 5 R C   (SOFTMAX_FLOPS_PER_ELEMENT, a convention; FlopCounterMode counts 0)
        bytes = 2 R C b     (read the input, write the output): I = 5/(2b), 1.25 in BF16
    """
    R, C = _size(rows, "rows"), _size(cols, "cols")
    return elementwise(R * C, SOFTMAX_FLOPS_PER_ELEMENT, 1, 1, bytes_per_element)


# --- attention -------------------------------------------------------------------


def _attention_args(batch, heads, seq, head_dim, bytes_per_element, kv_seq, kv_heads=None):
    B, H = _size(batch, "batch"), _size(heads, "heads")
    s, d_h, b = _size(seq, "seq"), _size(head_dim, "head_dim"), _bytes(bytes_per_element)
    s_kv = s if kv_seq is None else _size(kv_seq, "kv_seq")
    KV = H if kv_heads is None else _size(kv_heads, "kv_heads")
    if not any(map(is_symbolic, (H, KV))) and np.any(np.mod(H, KV) != 0):
        raise InvalidValue(f"heads must be a multiple of kv_heads (each group of heads / kv_heads query heads "
                           f"shares one K and V head); got heads={H!r}, kv_heads={KV!r}.")
    return B, H, s, d_h, b, s_kv, KV


def attention_pairs(seq, kv_seq=None, causal=False):
    """The (query, key) pairs whose score is computed, per batch element and head.

        s s_kv                      every query sees every key
        s s_kv - s (s - 1) / 2      causal: the s queries are the last s of the s_kv positions,
                                    query i sees keys 0 .. s_kv - s + i (s (s + 1) / 2 when s = s_kv)

    One decode step (s = 1) sees the whole cache either way.
    """
    s = _size(seq, "seq")
    s_kv = s if kv_seq is None else _size(kv_seq, "kv_seq")
    if not _flag(causal, "causal"):
        return s * s_kv
    if not is_symbolic(s) and not is_symbolic(s_kv) and np.any(np.asarray(s) > np.asarray(s_kv)):
        raise InvalidValue(f"a causal attention needs seq <= kv_seq (the queries are the last seq of the "
                           f"kv_seq positions); got seq={s!r}, kv_seq={s_kv!r}.")
    return s * s_kv - s * (s - 1) / 2


def attention_naive_kernels(batch, heads, seq, head_dim, bytes_per_element=2, kv_seq=None,
                            kv_heads=None) -> dict[str, Cost]:
    """Attention as three kernels, the scores S and probabilities P going through HBM.

    Per batch element and head, with s queries, s_kv keys (default s) and head
    size d_h (decode: seq = 1, kv_seq = the context length):

        'qk'       S = Q K^T      [s, d_h] @ [d_h, s_kv]   reads Q, K; writes S (s x s_kv)
        'softmax'  P = softmax(S)                           reads S; writes P
        'pv'       O = P V        [s, s_kv] @ [s_kv, d_h]   reads P, V; writes O

    With ``kv_heads`` = H_kv < H (grouped-query attention; 1 is multi-query), the
    H query heads share H_kv K and V heads: K and V are read B H_kv s_kv d_h
    elements each, not B H s_kv d_h. The FLOPs do not change. The 1/sqrt(d_h)
    scale and any causal mask are ignored (every score is computed, then masked).
    """
    B, H, s, d_h, b, s_kv, KV = _attention_args(batch, heads, seq, head_dim, bytes_per_element, kv_seq, kv_heads)
    shared = B * KV * s_kv * d_h * b  # K (for qk) or V (for pv): read once per KV head
    per_head = lambda m, n, k: Cost(batched_matmul(B * H, m, n, k, b).flops, B * H * m * n * b)  # noqa: E731
    return {
        "qk": per_head(s, s_kv, d_h) + Cost(0, B * H * s * d_h * b + shared),       # + read Q and K
        "softmax": softmax(B * H * s, s_kv, b),
        "pv": per_head(s, d_h, s_kv) + Cost(0, B * H * s * s_kv * b + shared),      # + read P and V
    }


def attention_naive(batch, heads, seq, head_dim, bytes_per_element=2, kv_seq=None, kv_heads=None) -> Cost:
    """The sum of :func:`attention_naive_kernels`: about 4 B H s s_kv d_h FLOPs, O(s s_kv) bytes."""
    return _total(attention_naive_kernels(batch, heads, seq, head_dim, bytes_per_element, kv_seq, kv_heads))


def _floor(x):
    """Floor of a number, a numpy array or a sympy expression."""
    if is_symbolic(x):
        import sympy  # deferred: sympy costs ~0.25 s at import

        return sympy.floor(x)
    if isinstance(x, (int, float)):
        return math.floor(x) if math.isfinite(x) else x
    return np.floor(x)


def _kv_rows_read(s, s_kv, rows, causal):
    """Rows of K (and of V) one KV head streams past ``ceil(s / rows)`` query tiles of ``rows`` positions.

    Every tile reads all s_kv keys; causal, tile i reads keys up to its last query,
    s_kv - s + (i + 1) rows (the last tile: s_kv), which sums to the expression below.
    """
    tiles = _ceil(s / rows)
    if causal:
        return tiles * (s_kv - s) + rows * tiles * (tiles - 1) / 2 + s
    return tiles * s_kv


def attention_tile_bytes(rows, head_dim, bytes_per_element=2):
    """On-chip bytes of a FlashAttention tile of r query rows, one head (Dao et al. 2022, Algorithm 1).

        bytes = 4 r d_h b     the Q tile and its output accumulator, and one block of K and one of V
                              as tall as the tile, r rows of d_h elements each

    Dao et al. size the blocks from the on-chip memory M the other way round:
    M / (4 d) rows (:func:`attention_fused` with ``on_chip_bytes``). A tile of 128
    rows of d_h = 128 in BF16: 131,072 bytes (128 KiB). Grouped-query heads tiled
    together need g = H / H_kv times as much.
    """
    return 4 * _size(rows, "rows") * _size(head_dim, "head_dim") * _bytes(bytes_per_element)


def attention_fused(batch, heads, seq, head_dim, bytes_per_element=2, kv_seq=None, kv_heads=None,
                    causal=False, on_chip_bytes=None) -> Cost:
    """FlashAttention: one kernel, the s x s_kv scores stay on chip (Dao et al. 2022, arXiv:2205.14135).

        FLOPs = B H p (4 d_h + 5)           p = attention_pairs(s, s_kv, causal): the naive
                                            kernels' math (2 d_h + 5 + 2 d_h per score)

    HBM bytes, ideal (``on_chip_bytes=None``): every tensor crosses once,

        bytes = B (2 H s + 2 H_kv s_kv) d_h b    (read Q, K and V once, write O once)

    Tiled (``on_chip_bytes`` = M, the on-chip memory one tile may use): the kernel
    keeps a tile of r query positions on chip and streams K and V past it, so K and
    V are read once per query tile (the loop order of FlashAttention-2, Dao 2023,
    arXiv:2307.08691):

        r     = floor(M / (4 g d_h b))      the tile of Q, its output accumulator and one block
                                            of K and of V, r rows of d_h each, fill M (Dao et al.'s
                                            block size M / 4d); the g = H / H_kv query heads that
                                            share a K/V head are tiled together
        T_r   = ceil(s / r)                 query tiles per KV head
        n     = T_r s_kv                    rows of K (and of V) read; causal, tile i reads keys up to
                                            its last query: T_r (s_kv - s) + r T_r (T_r - 1) / 2 + s
        bytes = B (2 H s + 2 H_kv n) d_h b

    M must hold one row (4 g d_h b bytes). When a tile holds every query (M >= 4 g s d_h b),
    T_r = 1 and the count is the ideal one. For s >> r the K/V term dominates:
    bytes ~ 8 B H s s_kv d_h^2 b^2 / M, Dao et al.'s Theta(N^2 d^2 / M) HBM accesses
    (Theorem 2), and the intensity levels off near (4 d_h + 5) M / (8 d_h^2 b^2) ~ M / (2 d_h b^2)
    instead of growing with s as the ideal count's ~ s/b does. The count is an upper
    bound on HBM traffic: a re-read that the L2 cache still holds never reaches HBM.

    ``kv_heads`` = H_kv (default H): grouped-query attention reads H_kv d_h
    elements of K and of V per cached token, not H d_h. ``causal=True`` counts
    only the scores under the causal mask, which a FlashAttention kernel skips
    (about half of them for a prefill).

    Lesson 09's practice problem (s = d_h = 8192, BF16, ideal): 4 s d_h b = 5.37e8 bytes
    and I = 4.1e3, far above the ridge (a widely copied 1.1e8 bytes and I ~ 2e4 are an
    arithmetic slip).
    """
    B, H, s, d_h, b, s_kv, KV = _attention_args(batch, heads, seq, head_dim, bytes_per_element, kv_seq, kv_heads)
    causal = _flag(causal, "causal")
    if causal:
        pairs = attention_pairs(s, s_kv, True)
        flops = B * H * pairs * (4 * d_h + SOFTMAX_FLOPS_PER_ELEMENT)
    else:
        flops = attention_naive(B, H, s, d_h, b, s_kv).flops
    if on_chip_bytes is None:
        return Cost(flops, B * (2 * H * s + 2 * KV * s_kv) * d_h * b)
    M = _size(on_chip_bytes, "on_chip_bytes")
    per_row = attention_tile_bytes(1, d_h, b) * H  # / H_kv: one query position of a group's g heads
    if not any(map(is_symbolic, (M, KV, per_row))) and np.any(np.asarray(M * KV) < np.asarray(per_row)):
        raise InvalidValue(f"on_chip_bytes={M!r} cannot hold one row of a FlashAttention tile: a query row, its "
                           f"output and a row of K and of V need 4 (heads / kv_heads) head_dim b = "
                           f"{np.asarray(per_row / KV).max():g} bytes.")
    rows = _floor(M * KV / per_row)
    if not is_symbolic(rows):
        rows = np.maximum(rows, 1.0)  # M * KV >= per_row: at least one row, whatever the rounding of the division
    return Cost(flops, B * (2 * H * s + 2 * KV * _kv_rows_read(s, s_kv, rows, causal)) * d_h * b)


# --- MLP and transformer layer -----------------------------------------------------


def mlp_ops(tokens, d_model, d_ff, bytes_per_element=2, gated=False, weight_bytes_per_element=None) -> dict[str, Cost]:
    """The kernels of a transformer MLP on T tokens, d -> d_ff -> d.

        'up'    gemm(T, d_ff, d)              x @ W_up
        'gate'  gemm(T, d_ff, d)              x @ W_gate (gated only)
        'act'   GELU(up): 8 FLOPs per element, 1 read, 1 write; or, gated (SwiGLU),
                SiLU(gate) * up: 4 + 1 FLOPs per element, 2 reads, 1 write
        'down'  gemm(T, d, d_ff)              h @ W_down

    ``weight_bytes_per_element``: the weights' own size (weight-only quantization), see :func:`gemm`.
    """
    T, d, f = _size(tokens, "tokens"), _size(d_model, "d_model"), _size(d_ff, "d_ff")
    b, b_w = _bytes(bytes_per_element), weight_bytes_per_element
    ops = {"up": gemm(T, f, d, b, b_w)}
    if _flag(gated, "gated"):
        ops["gate"] = gemm(T, f, d, b, b_w)
        ops["act"] = elementwise(T * f, SILU_FLOPS_PER_ELEMENT + 1, 2, 1, b)
    else:
        ops["act"] = elementwise(T * f, GELU_FLOPS_PER_ELEMENT, 1, 1, b)
    ops["down"] = gemm(T, d, f, b, b_w)
    return ops


def mlp(tokens, d_model, d_ff, bytes_per_element=2, gated=False) -> Cost:
    """The sum of :func:`mlp_ops`."""
    return _total(mlp_ops(tokens, d_model, d_ff, bytes_per_element, gated))


def _head_sizes(d, H, kv_heads, head_dim):
    """(d_h, query width H d_h, K or V width H_kv d_h) of a layer; d_h = d / H unless given."""
    if head_dim is None:
        if not is_symbolic(d) and not is_symbolic(H) and np.any(np.mod(d, H) != 0):
            raise InvalidValue(f"d_model must be a multiple of n_heads (each head gets d_model / n_heads "
                               f"dimensions), or give head_dim; got d_model={d!r}, n_heads={H!r}.")
        d_h, q_width = d / H, d
    else:
        d_h = _size(head_dim, "head_dim")
        q_width = H * d_h
    if kv_heads is None:
        return d_h, q_width, q_width
    KV = _size(kv_heads, "kv_heads")
    if not is_symbolic(H) and not is_symbolic(KV) and np.any(np.mod(H, KV) != 0):
        raise InvalidValue(f"n_heads must be a multiple of kv_heads (each group of n_heads / kv_heads query "
                           f"heads shares one K and V head); got n_heads={H!r}, kv_heads={KV!r}.")
    return d_h, q_width, KV * d_h


def kv_cache_bytes(batch, kv_seq, kv_width, bytes_per_element=2):
    """The K and V of one layer for ``batch`` sequences of ``kv_seq`` tokens: what a KV cache holds.

        bytes = 2 B s_kv w b      (K and V: 2; w = H_kv d_h, the width of K and of V per token)

    A decode step's attention reads all of it once. Llama 2 70B (H_kv = 8 heads of
    d_h = 128, w = 1024) in BF16: 4,096 bytes per token per layer, 327,680 over its 80 layers.
    """
    B, s_kv, w = _size(batch, "batch"), _size(kv_seq, "kv_seq"), _size(kv_width, "kv_width")
    return 2 * B * s_kv * w * _bytes(bytes_per_element)


# --- multi-head latent attention (DeepSeek-V2, V3) ------------------------------------


def latent_cache_bytes(batch, kv_seq, kv_lora_rank, rope_head_dim, bytes_per_element=2):
    """Multi-head latent attention's cache of one layer (DeepSeek-V2, arXiv:2405.04434, section 2.1.2, Table 1):

        bytes = B s_kv (d_c + d_h^R) b      one latent c^KV of d_c elements and one RoPE key k^R of
                                            d_h^R per token, shared by every head

    DeepSeek-V3 (d_c = 512, d_h^R = 64) in BF16: 1,152 bytes per token and layer, where
    its 128 heads of K and V (d_h = 128) would take 65,536.

    >>> latent_cache_bytes(1, 1, 512, 64, "bf16")
    1152
    """
    B, s_kv = _size(batch, "batch"), _size(kv_seq, "kv_seq")
    d_c, d_r = _size(kv_lora_rank, "kv_lora_rank"), _size(rope_head_dim, "rope_head_dim")
    return B * s_kv * (d_c + d_r) * _bytes(bytes_per_element)


def attention_latent(batch, heads, seq, kv_lora_rank, rope_head_dim, bytes_per_element=2, kv_seq=None,
                     causal=False, kv_bytes_per_element=None) -> Cost:
    """Latent attention with the up-projections absorbed: one fused kernel over the cached latent (decode).

    DeepSeek-V2 (arXiv:2405.04434), section 2.1.2-2.1.3: W^UK can be absorbed into the query and
    W^UV into the output, so the heads attend to the cache itself. Each of the H heads has a query of
    d_c + d_h^R elements (q^C W^UK in the latent space, and its RoPE part q^R), and all of them share one
    key [c^KV; k^R] of d_c + d_h^R and one value c^KV of d_c per token: multi-query attention with one
    K/V head (FlashMLA's "MQA mode", head_dim_k = 576 and head_dim_v = 512 for DeepSeek-V3,
    github.com/deepseek-ai/FlashMLA README; vLLM's "data-movement friendly approach",
    vllm/v1/attention/backends/mla/common.py). Per batch element, with p = attention_pairs(s, s_kv, causal):

        FLOPs = B H p (2 (d_c + d_h^R) + 5 + 2 d_c)     scores over d_c + d_h^R, softmax, probabilities x c^KV
        bytes = B H s (2 d_c + d_h^R) b                 read the queries, write the outputs (d_c each)
              + latent_cache_bytes(B, s_kv, d_c, d_h^R, b_kv)     the cache, read ONCE: the latent is
                                                        both the key and the value, for every head

    ``kv_bytes_per_element`` = b_kv, the cache's own precision (default b). The cache's bytes do not
    grow with H: its intensity is about H / b_kv x 2 FLOPs per element, where a GQA cache gives H / H_kv.

    >>> c = attention_latent(1, 128, 1, 512, 64, "bf16", kv_seq=4096)
    >>> c.flops == 128 * 4096 * (2 * 576 + 5 + 2 * 512), c.bytes == 128 * (576 + 512) * 2 + 4096 * 576 * 2
    (True, True)
    """
    B, H, s, b = _size(batch, "batch"), _size(heads, "heads"), _size(seq, "seq"), _bytes(bytes_per_element)
    s_kv = s if kv_seq is None else _size(kv_seq, "kv_seq")
    d_c, d_r = _size(kv_lora_rank, "kv_lora_rank"), _size(rope_head_dim, "rope_head_dim")
    b_kv = b if kv_bytes_per_element is None else _storage_bytes(kv_bytes_per_element, "kv_bytes_per_element")
    pairs = attention_pairs(s, s_kv, _flag(causal, "causal"))
    flops = B * H * pairs * (FLOPS_PER_FMA * (d_c + d_r) + SOFTMAX_FLOPS_PER_ELEMENT + FLOPS_PER_FMA * d_c)
    return Cost(flops, B * H * s * (2 * d_c + d_r) * b + latent_cache_bytes(B, s_kv, d_c, d_r, b_kv))


def latent_attention_ops(batch, seq, d_model, n_heads, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
                         v_head_dim, bytes_per_element=2, q_lora_rank=None, kv_seq=None, causal=False,
                         absorbed=False, weight_bytes_per_element=None,
                         kv_bytes_per_element=None) -> dict[str, Cost]:
    """The kernels of multi-head latent attention on T = B s tokens, from the normed input to the heads'
    outputs (W^O, the output projection, is the layer's 'out'; DeepSeek-V2, arXiv:2405.04434, section 2.1.2,
    equations 12-19 for the query, 9-11 and 14-17 for the keys and values):

        'q.down' gemm(T, d_c', d), 'q.norm' rmsnorm(T, d_c'), 'q.up' gemm(T, H (d_h + d_h^R), d_c')
                 W^DQ, the latent's RMSNorm, W^UQ with W^QR; without a query latent (``q_lora_rank``
                 None, DeepSeek-V2-Lite) one 'q' gemm(T, H (d_h + d_h^R), d)
        'kv.down' gemm(T, d_c + d_h^R, d), 'kv.norm' rmsnorm(T, d_c)
                 W^DKV with W^KR: the latent and the RoPE key that are cached

    then, ``absorbed`` (decode; :func:`attention_latent`), the heads attend to the cached latent:

        'attn.q_absorb'  H x gemm(T, d_c, d_h)      each head's q^C through its W^UK, into the latent space
        'attn'           attention_latent(B, H, s, d_c, d_h^R, kv_seq=s_kv)
        'attn.v_absorb'  H x gemm(T, d_h^V, d_c)    each head's output through its W^UV

    or, not absorbed (prefill: vLLM's "compute friendly approach", FlashMLA's "MHA mode"), K and V
    are rebuilt from the latent of all s_kv positions and attention is ordinary:

        'attn.kv_up'     gemm(B s_kv, H (d_h + d_h^V), d_c)     W^UK and W^UV
        'attn'           attention_fused(B, H, s, (d_h + d_h^R + d_h^V) / 2, kv_seq=s_kv, causal)

    The query and key heads are d_h + d_h^R wide, the value heads d_h^V; a fused kernel's FLOPs,
    B H p (2 d_qk + 5 + 2 d_v), and bytes, B H (s + s_kv)(d_qk + d_v) b, are exactly those of
    :func:`attention_fused` with the mean head size (d_qk + d_v) / 2. A cached prefix (``kv_seq`` > ``seq``
    with ``kv_bytes_per_element``) is read from the cache at b_kv: 'attn.kv_up' reads its latent operand,
    B s_kv d_c elements, at b_kv instead of b.

    Weights are read at ``weight_bytes_per_element`` (see :func:`gemm`): the absorbed W^UK and W^UV too,
    though vLLM keeps them in BF16 (no quantized batched GEMM): fewer bytes than an engine's, as a bound's.
    """
    B, s, d = _size(batch, "batch"), _size(seq, "seq"), _size(d_model, "d_model")
    H, d_c = _size(n_heads, "n_heads"), _size(kv_lora_rank, "kv_lora_rank")
    nope, rope = _size(qk_nope_head_dim, "qk_nope_head_dim"), _size(qk_rope_head_dim, "qk_rope_head_dim")
    v, b, b_w = _size(v_head_dim, "v_head_dim"), _bytes(bytes_per_element), weight_bytes_per_element
    T = B * s
    if q_lora_rank is None:
        ops = {"q": gemm(T, H * (nope + rope), d, b, b_w)}
    else:
        c_q = _size(q_lora_rank, "q_lora_rank")
        ops = {"q.down": gemm(T, c_q, d, b, b_w), "q.norm": rmsnorm(T, c_q, b),
               "q.up": gemm(T, H * (nope + rope), c_q, b, b_w)}
    ops |= {"kv.down": gemm(T, d_c + rope, d, b, b_w), "kv.norm": rmsnorm(T, d_c, b)}
    causal = _flag(causal, "causal")
    if _flag(absorbed, "absorbed"):
        ops["attn.q_absorb"] = gemm(T, d_c, nope, b, b_w).scale(H)
        ops["attn"] = attention_latent(B, H, s, d_c, rope, b, kv_seq, causal, kv_bytes_per_element)
        ops["attn.v_absorb"] = gemm(T, v, d_c, b, b_w).scale(H)
        return ops
    s_kv = s if kv_seq is None else _size(kv_seq, "kv_seq")
    up = gemm(B * s_kv, H * (nope + v), d_c, b, b_w)
    if kv_bytes_per_element is not None and kv_seq is not None:
        b_kv = _storage_bytes(kv_bytes_per_element, "kv_bytes_per_element")
        up = up + Cost(0, B * s_kv * d_c * (b_kv - b))  # the latent operand read at b_kv, not b
    ops["attn.kv_up"] = up
    ops["attn"] = attention_fused(B, H, s, (nope + rope + v) / 2, b, kv_seq, None, causal)
    return ops


def transformer_layer_ops(batch, seq, d_model, n_heads, d_ff, bytes_per_element=2, gated=False,
                          fused_attention=True, kv_seq=None, kv_heads=None, head_dim=None,
                          causal=False, weight_bytes_per_element=None,
                          kv_bytes_per_element=None) -> dict[str, Cost]:
    """Every kernel of one pre-norm decoder layer on T = B s tokens, in order:

        'norm1'      rmsnorm(T, d)
        'qkv'        gemm(T, d + 2 H_kv d_h, d)    the Q, K and V projections in one GEMM
                                                   (3d wide without GQA: H_kv = H, d_h = d / H)
        'attn'       attention_fused(B, H, s, d_h, kv_heads=H_kv), or, unfused, the three
                     kernels 'attn.qk', 'attn.softmax', 'attn.pv' of attention_naive_kernels
        'out'        gemm(T, d, d)                 the output projection
        'residual1'  x + attn: elementwise(T d, 1 FLOP, 2 reads, 1 write)
        'norm2'      rmsnorm(T, d)
        'mlp.up', ('mlp.gate',) 'mlp.act', 'mlp.down'     mlp_ops(T, d, d_ff)
        'residual2'  x + mlp

    ``kv_heads`` (default ``n_heads``): grouped-query attention (Llama 3, Mistral)
    or multi-query (1). ``head_dim`` (default d / H): the size of a head, for
    models whose H d_h is not d; then Q is H d_h wide, and so is the input of
    the output projection. ``causal``: the fused attention counts only the scores
    under the mask (:func:`attention_pairs`); a prefill is causal.

    The weight GEMMs hold the matrix parameters of :func:`transformer_layer_params`
    (4 d^2 + 2 d d_ff without GQA, 3 d d_ff gated) and cost 2 FLOPs per
    parameter per token. For decode, pass seq=1 and kv_seq=context.

    Weight-only quantization and a KV cache in its own precision, per op:
    ``weight_bytes_per_element`` = b_w is the size of a weight in the five weight
    GEMMs (int8 or int4 weights with BF16 activations: :func:`gemm`);
    ``kv_bytes_per_element`` = b_kv is the size of a cached K or V element, which
    attention reads at b_kv instead of b when it reads a cache (``kv_seq`` given):
    its bytes change by :func:`kv_cache_bytes` at b_kv minus at b. Either left at
    None: everything at b, as before.
    """
    B, s, d = _size(batch, "batch"), _size(seq, "seq"), _size(d_model, "d_model")
    H, b = _size(n_heads, "n_heads"), _bytes(bytes_per_element)
    b_w = weight_bytes_per_element
    d_h, q_width, kv_width = _head_sizes(d, H, kv_heads, head_dim)
    T = B * s
    ops = {"norm1": rmsnorm(T, d, b), "qkv": gemm(T, q_width + 2 * kv_width, d, b, b_w)}
    if kv_bytes_per_element is not None and kv_seq is not None:
        b_kv = _storage_bytes(kv_bytes_per_element, "kv_bytes_per_element")
        cache = Cost(0, kv_cache_bytes(B, kv_seq, kv_width, b_kv) - kv_cache_bytes(B, kv_seq, kv_width, b))
    else:
        cache = None
    if _flag(fused_attention, "fused_attention"):
        ops["attn"] = attention_fused(B, H, s, d_h, b, kv_seq, kv_heads, causal)
        if cache is not None:
            ops["attn"] = ops["attn"] + cache
    else:
        _flag(causal, "causal")  # the naive kernels compute every score, then mask
        for name, cost in attention_naive_kernels(B, H, s, d_h, b, kv_seq, kv_heads).items():
            if cache is not None and name in ("qk", "pv"):  # K read by qk, V by pv: half of the cache each
                cost = cost + Cost(0, cache.bytes / 2)
            ops[f"attn.{name}"] = cost
    residual = elementwise(T * d, 1, 2, 1, b)
    ops |= {"out": gemm(T, d, q_width, b, b_w), "residual1": residual, "norm2": rmsnorm(T, d, b)}
    for name, cost in mlp_ops(T, d, d_ff, b, gated, b_w).items():
        ops[f"mlp.{name}"] = cost
    ops["residual2"] = residual
    return ops


def transformer_layer(batch, seq, d_model, n_heads, d_ff, bytes_per_element=2, gated=False,
                      fused_attention=True, kv_seq=None, kv_heads=None, head_dim=None, causal=False,
                      weight_bytes_per_element=None, kv_bytes_per_element=None) -> Cost:
    """The sum of :func:`transformer_layer_ops`."""
    return _total(transformer_layer_ops(batch, seq, d_model, n_heads, d_ff, bytes_per_element,
                                        gated, fused_attention, kv_seq, kv_heads, head_dim, causal,
                                        weight_bytes_per_element, kv_bytes_per_element))


def transformer_layer_params(d_model, n_heads, d_ff, gated=False, kv_heads=None, head_dim=None, bias=False,
                             layernorm=False):
    """Parameters of one decoder layer, the weights :func:`transformer_layer_ops` reads.

        attention   d (H d_h + 2 H_kv d_h) + H d_h d     Q, K, V and output projections
                    (4 d^2 without GQA)
        MLP         3 d d_ff gated (gate, up, down), 2 d d_ff otherwise
        biases      H d_h + 2 H_kv d_h + d  and  d_ff (2 d_ff gated) + d,  with ``bias=True`` (GPT-2/3)
        norms       2 d (two RMSNorm weights), 4 d with ``layernorm=True`` (weights and biases)

    Llama 2 7B (d = 4096, H = 32, d_ff = 11008, gated): 202,383,360 per layer.
    """
    d, H, f = _size(d_model, "d_model"), _size(n_heads, "n_heads"), _size(d_ff, "d_ff")
    _, q_width, kv_width = _head_sizes(d, H, kv_heads, head_dim)
    gated, bias, layernorm = _flag(gated, "gated"), _flag(bias, "bias"), _flag(layernorm, "layernorm")
    attention = d * (q_width + 2 * kv_width) + q_width * d
    mlp_matrices = (3 if gated else 2) * d * f
    biases = (q_width + 2 * kv_width + d) + ((2 if gated else 1) * f + d) if bias else 0
    norms = (4 if layernorm else 2) * d
    return attention + mlp_matrices + biases + norms


# --- symbolic forms ----------------------------------------------------------------

# parameter name -> the letter the math uses for it
SYMBOLS = {
    "m": "M", "n": "N", "k": "K", "batch": "B", "heads": "H", "n_heads": "H",
    "seq": "s", "kv_seq": "s_kv", "head_dim": "d_h", "kv_heads": "H_kv", "d_model": "d", "d": "d", "d_ff": "d_ff",
    "tokens": "T", "rows": "R", "cols": "C", "tile": "t", "bytes_per_element": "b",
    "flops_per_element": "f", "reads": "r", "writes": "w",
    "weight_bytes_per_element": "b_w", "kv_bytes_per_element": "b_kv", "kv_width": "w",
    "on_chip_bytes": "M",
    # multi-head latent attention, in DeepSeek-V2's letters (arXiv:2405.04434, section 2.1)
    "kv_lora_rank": "d_c", "q_lora_rank": "d_c'", "qk_nope_head_dim": "d_h", "rope_head_dim": "d_h^R",
    "qk_rope_head_dim": "d_h^R", "v_head_dim": "d_h^V",
}


def symbolic(fn, **fixed):
    """``fn`` called with a positive sympy Symbol for every size not in ``fixed``.

    Flags (``gated``) and optional sizes (``kv_seq=None``) keep their defaults
    unless fixed; a fixed value may be a number, a precision name or a sympy
    expression. Returns whatever ``fn`` returns, in symbols:

    >>> symbolic(gemm)
    Cost(flops=2*K*M*N, bytes=b*(K*M + K*N + M*N))
    >>> symbolic(elementwise, bytes_per_element="fp16").intensity    # no N left: I is independent of n
    f/(2*(r + w))
    >>> symbolic(elementwise, flops_per_element=8, reads=1, writes=1, bytes_per_element="fp16").intensity
    2
    >>> symbolic(attention_fused, batch=1, heads=1)
    Cost(flops=4*d_h*s**2 + 5*s**2, bytes=4*b*d_h*s)
    """
    import sympy  # deferred: sympy costs ~0.25 s at import

    parameters = inspect.signature(fn).parameters
    unknown = set(fixed) - set(parameters)
    if unknown:
        raise InvalidValue(f"{fn.__name__}() has no parameter {', '.join(sorted(unknown))}; "
                           f"its parameters are: {', '.join(parameters)}.")
    arguments = dict(fixed)
    for name, parameter in parameters.items():
        if name not in fixed and parameter.default is not None and not isinstance(parameter.default, bool):
            arguments[name] = sympy.Symbol(SYMBOLS.get(name, name), positive=True)
    return fn(**arguments)
