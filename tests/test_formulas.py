"""Tests of roofkit.formulas against independent oracles.

The oracles: sympy sums and brute-force element counting (FLOPs and distinct
elements touched), the published numbers of the course's seeds (with the ones
they got wrong corrected, and said so), the accelerator catalog for
classification, and PyTorch's FlopCounterMode where torch is installed.
"""

from __future__ import annotations

import doctest
import inspect
import itertools
import json
import math
import random
import subprocess
import sys

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from roofkit import formulas
from roofkit.catalogs import hardware
from roofkit.errors import InvalidValue, RoofkitError, UnknownPrecision
from roofkit.formulas import (Cost, attention_fused, attention_naive, attention_naive_kernels, batched_matmul,
    elementwise, gemm, gemm_padded, gemv, layernorm, mlp, mlp_ops, reduction, rmsnorm, softmax, symbolic,
    transformer_layer, transformer_layer_ops)

# Every public cost function, found from __all__, so that a new formula is covered by
# the generic tests below without anyone adding it to a list.
COST_FUNCTIONS = [
    getattr(formulas, name) for name in formulas.__all__
    if inspect.isfunction(getattr(formulas, name)) and name != "symbolic"
]
IDS = [fn.__name__ for fn in COST_FUNCTIONS]

# The weight GEMMs of a layer and every matmul of it (what FlopCounterMode counts).
WEIGHT_GEMMS = {"qkv", "out", "mlp.up", "mlp.gate", "mlp.down"}
MATMULS = WEIGHT_GEMMS | {"attn.qk", "attn.pv"}

H100_BF16_RIDGE = hardware.get("h100").ridge("bf16")


def pos(name: str):
    return sympy.Symbol(name, positive=True)


def _params(fn):
    return inspect.signature(fn).parameters


def _is_flag(parameter) -> bool:
    return isinstance(parameter.default, bool)


def _flag_variants(fn):
    """Every combination of fn's True/False parameters, as keyword dicts."""
    flags = [name for name, p in _params(fn).items() if _is_flag(p)]
    return [dict(zip(flags, values)) for values in itertools.product([False, True], repeat=len(flags))]


def _is_optional(parameter) -> bool:
    """A size whose default None means "the usual value" (kv_seq = seq, kv_heads = heads, head_dim = d/H)."""
    return parameter.default is None


def _optional(fn) -> list[str]:
    return [name for name, p in _params(fn).items() if _is_optional(p)]


def _valid_point(fn, rng: random.Random, with_optional: bool) -> dict:
    """Random valid arguments for fn, by parameter name (exact Python numbers).

    Optional sizes are left out unless ``with_optional``; then kv_seq >= seq (a causal
    attention needs it) and kv_heads divides the number of query heads.
    """
    point = {}
    for name, parameter in _params(fn).items():
        if _is_flag(parameter) or (_is_optional(parameter) and not with_optional):
            continue
        if name == "bytes_per_element":
            point[name] = rng.choice([0.5, 1, 2, 4])
        elif name == "flops_per_element":
            point[name] = rng.randint(0, 10)
        elif name == "reads":
            point[name] = rng.randint(1, 3)
        elif name == "writes":
            point[name] = rng.randint(0, 2)
        elif name == "tile":
            point[name] = rng.choice([16, 64, 128])
        else:
            point[name] = rng.randint(1, 5000)
    if "n_heads" in point:
        point["n_heads"] = rng.randint(1, 64)
        point["d_model"] = point["n_heads"] * rng.randint(1, 200)
    if "kv_seq" in point and "seq" in point:
        point["kv_seq"] = point["seq"] + rng.randint(0, 5000)
    if "kv_heads" in point:
        heads = point.get("heads", point.get("n_heads"))
        point["kv_heads"] = rng.choice([k for k in range(1, heads + 1) if heads % k == 0])
    if "on_chip_bytes" in point:  # room for 1 to 3000 rows of a FlashAttention tile
        group = point["heads"] // point.get("kv_heads", point["heads"])
        point["on_chip_bytes"] = (formulas.attention_tile_bytes(1, point["head_dim"], point["bytes_per_element"])
                                  * group * rng.randint(1, 3000))
    return point


def _leaves(result) -> list:
    """The numbers inside a result: a Cost's flops, bytes and intensity, a dict's costs, or a scalar."""
    if isinstance(result, Cost):
        return [result.flops, result.bytes, result.intensity]
    if isinstance(result, dict):
        return [leaf for cost in result.values() for leaf in _leaves(cost)]
    return [result]


# --- independent derivations ------------------------------------------------------


def test_gemm_flops_equal_a_sympy_sum_of_one_fma_per_index_triple():
    M, N, K, i, j, l = (pos(x) for x in "MNKijl")
    fmas = sympy.summation(2, (l, 0, K - 1), (j, 0, N - 1), (i, 0, M - 1))
    assert sympy.simplify(fmas - gemm(M, N, K).flops) == 0


def test_attention_flops_equal_a_sympy_sum_over_both_matmuls():
    B, H, s, t, d, b_, h, i, j, e = (pos(x) for x in ["B", "H", "s", "t", "d", "b_", "h", "i", "j", "e"])
    # S[b,h,i,j] = sum_e Q[b,h,i,e] K[b,h,j,e];  O[b,h,i,e] = sum_j P[b,h,i,j] V[b,h,j,e]
    one_matmul = sympy.summation(2, (e, 0, d - 1), (j, 0, t - 1), (i, 0, s - 1), (h, 0, H - 1), (b_, 0, B - 1))
    kernels = attention_naive_kernels(B, H, s, d, 2, kv_seq=t)
    assert sympy.simplify(kernels["qk"].flops - one_matmul) == 0
    assert sympy.simplify(kernels["pv"].flops - one_matmul) == 0


def _count_einsum(spec: str, sizes: dict[str, int]):
    """Brute force: walk every index point of 'ab,bc->ac', count one FMA each, and the distinct
    elements of each operand that the walk touches."""
    inputs, output = spec.split("->")
    operands = [*inputs.split(","), output]
    letters = sorted(set(spec) - set(",->"))
    touched = [set() for _ in operands]
    fmas = 0
    for point in itertools.product(*(range(sizes[x]) for x in letters)):
        where = dict(zip(letters, point))
        fmas += 1
        for seen, operand in zip(touched, operands):
            seen.add(tuple(where[x] for x in operand))
    return 2 * fmas, sum(len(seen) for seen in touched)


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (2, 3, 5), (7, 1, 4), (1, 6, 6), (5, 5, 5)])
@pytest.mark.parametrize("b", [1, 2, 4])
def test_gemm_bytes_count_each_distinct_element_of_a_b_c_once(m, n, k, b):
    flops, elements = _count_einsum("ik,kj->ij", {"i": m, "j": n, "k": k})
    assert gemm(m, n, k, b) == Cost(flops, elements * b)


@pytest.mark.parametrize("batch,m,n,k", [(3, 2, 4, 5), (1, 1, 3, 2), (4, 3, 3, 3)])
def test_batched_matmul_counts_like_bmm(batch, m, n, k):
    flops, elements = _count_einsum("zik,zkj->zij", {"z": batch, "i": m, "j": n, "k": k})
    assert batched_matmul(batch, m, n, k, 2) == Cost(flops, 2 * elements)


@pytest.mark.parametrize("B,H,s,t,d", [(1, 1, 3, 3, 2), (2, 3, 2, 5, 4), (1, 2, 1, 6, 3)])
def test_attention_traffic_counts_distinct_elements_per_kernel(B, H, s, t, d):
    sizes = {"b": B, "h": H, "i": s, "j": t, "e": d}
    kernels = attention_naive_kernels(B, H, s, d, 2, kv_seq=t)
    for name, spec in [("qk", "bhie,bhje->bhij"), ("pv", "bhij,bhje->bhie")]:
        flops, elements = _count_einsum(spec, sizes)
        assert kernels[name] == Cost(flops, 2 * elements), name
    # softmax and the fused kernel: count the distinct elements of S, P (and Q, K, V, O)
    S = len(set(itertools.product(range(B), range(H), range(s), range(t))))
    assert kernels["softmax"].bytes == 2 * (S + S)  # read S, write P
    q = len(set(itertools.product(range(B), range(H), range(s), range(d))))
    kv = len(set(itertools.product(range(B), range(H), range(t), range(d))))
    fused = attention_fused(B, H, s, d, 2, kv_seq=t)
    assert fused.bytes == 2 * (q + kv + kv + q)  # read Q, K, V; write O
    assert fused.flops == attention_naive(B, H, s, d, 2, kv_seq=t).flops


def test_square_gemm_intensity_is_2n_over_3b_and_grows_with_batch():
    n, b, M = pos("n"), pos("b"), pos("M")
    assert sympy.simplify(gemm(n, n, n, b).intensity - 2 * n / (3 * b)) == 0
    assert sympy.simplify(gemm(n, n, n, 2).intensity - n / 3) == 0  # seed 004: N/3 in FP16
    # a weight matrix applied to M tokens: intensity -> 2M/b for large weights ("intensity ~ batch")
    assert sympy.limit(gemm(M, n, n, b).intensity, n, sympy.oo) == 2 * M / b


def test_elementwise_intensities_do_not_depend_on_n():
    n = pos("n")
    assert elementwise(n, 8, 1, 1, "fp16").intensity == 2  # GELU quiz (seed 000)
    assert elementwise(n, 1, 2, 1, "fp16").intensity == sympy.Rational(1, 6)  # vector add (seed 004)
    assert sympy.simplify(softmax(pos("R"), pos("C"), pos("b")).intensity - sympy.Rational(5, 2) / pos("b")) == 0


def test_naive_attention_is_memory_bound_at_real_head_sizes_and_fused_is_not():
    s, d_h, b = pos("s"), pos("d_h"), pos("b")
    # Unfused, the O(s^2) score traffic dominates: I -> (4 d_h + 5) / (4 b) as s grows ...
    naive_limit = sympy.limit(attention_naive(1, 1, s, d_h, b).intensity, s, sympy.oo)
    assert sympy.simplify(naive_limit - (4 * d_h + 5) / (4 * b)) == 0
    assert float(naive_limit.subs({d_h: 128, b: 2})) < H100_BF16_RIDGE  # 64.6: memory-bound
    # ... while fused, I grows linearly with s.
    fused_slope = sympy.limit(attention_fused(1, 1, s, d_h, b).intensity / s, s, sympy.oo)
    assert sympy.simplify(fused_slope - (4 * d_h + 5) / (4 * d_h * b)) == 0
    assert attention_fused(1, 64, 8192, 128, "bf16").intensity > H100_BF16_RIDGE


# --- symbolic form == numeric form, for every formula -------------------------------


@pytest.mark.parametrize("fn", COST_FUNCTIONS, ids=IDS)
def test_symbolic_form_equals_numeric_form_at_random_points(fn):
    rng = random.Random(f"symbolic-{fn.__name__}")
    for flags in _flag_variants(fn):
        for with_optional in ([False, True] if _optional(fn) else [False]):
            fixed = dict(flags, **({name: pos(formulas.SYMBOLS[name]) for name in _optional(fn)}
                                   if with_optional else {}))
            sym = _leaves(symbolic(fn, **fixed))
            for _ in range(4):
                point = _valid_point(fn, rng, with_optional)
                subs = {pos(formulas.SYMBOLS[name]): sympy.nsimplify(value) for name, value in point.items()}
                numeric = _leaves(fn(**point, **flags))
                assert len(sym) == len(numeric)
                for s_leaf, n_leaf in zip(sym, numeric):
                    exact = sympy.sympify(s_leaf).xreplace(subs)
                    assert exact.free_symbols == set(), (fn.__name__, s_leaf)
                    assert math.isclose(float(exact), float(n_leaf), rel_tol=1e-12), (fn.__name__, flags, point)


@pytest.mark.parametrize("fn", COST_FUNCTIONS, ids=IDS)
def test_numpy_arrays_broadcast_like_scalar_calls(fn):
    rng = random.Random(f"numpy-{fn.__name__}")
    sizes = [name for name, p in _params(fn).items() if not _is_flag(p) and not _is_optional(p)]
    with_optional = len(sizes) < 2  # attention_pairs(seq, kv_seq): broadcast the optional one too
    if with_optional:
        sizes += _optional(fn)
    first, second = sizes[0], sizes[1]
    for flags in _flag_variants(fn):
        points = [_valid_point(fn, rng, with_optional) for _ in range(3)]
        if {first, second} == {"d_model", "n_heads"}:  # any d_model of one point must fit any n_heads of another
            for p in points:
                p["n_heads"], p["d_model"] = rng.choice([1, 2, 4]), 4 * rng.randint(1, 200)
        if {first, second} == {"seq", "kv_seq"}:  # causal: every kv_seq >= every seq
            for p in points:
                p["seq"], p["kv_seq"] = rng.randint(1, 100), rng.randint(100, 5000)
        column = np.array([p[first] for p in points]).reshape(3, 1)
        row = np.array([p[second] for p in points]).reshape(1, 3)
        result = fn(**dict(points[0], **{first: column, second: row}), **flags)
        for leaf in _leaves(result):
            assert np.shape(np.broadcast_to(leaf, (3, 3))) == (3, 3)
        for i, j in itertools.product(range(3), repeat=2):
            scalar = fn(**dict(points[0], **{first: points[i][first], second: points[j][second]}), **flags)
            for a_leaf, s_leaf in zip(_leaves(result), _leaves(scalar)):
                assert np.broadcast_to(a_leaf, (3, 3))[i, j] == pytest.approx(s_leaf, rel=1e-12)


def test_integer_arrays_cannot_wrap_around():
    big = np.array([2**21], dtype=np.int64)  # 2 * (2^21)^3 = 2^64 would wrap in int64
    assert gemm(big, big, big).flops[0] == 2.0**64


def test_numeric_calls_never_import_sympy():
    code = ("import sys, numpy as np; from roofkit import formulas as f; "
            "f.transformer_layer(8, 4096, 8192, 64, 28672, 'bf16', gated=True); "
            "f.gemm_padded(np.array([130.0]), 130, 130); f.attention_naive(1, 8, 4096, 128); "
            "assert 'sympy' not in sys.modules, 'sympy was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# --- published numbers ------------------------------------------------------------------


def test_gemm_4096_bf16_is_compute_bound_on_h100():
    cost = gemm(4096, 4096, 4096, "bf16")
    assert cost.intensity == pytest.approx(4096 / 3)  # 1365.33 (seeds 000 and 003)
    assert cost.intensity > H100_BF16_RIDGE


def test_gemv_decode_step_is_about_one_flop_per_byte():
    # 2*4096^2 FLOPs over (4096 + 4096^2 + 4096) * 2 bytes = 0.9995 (seed 000). Seed 003's
    # 4096/(1+4096+4096) ~ 0.5 divides a FLOP count by an element count: it is wrong.
    cost = gemv(4096, 4096, "bf16")
    assert cost.intensity == pytest.approx(0.9995, abs=1e-4)
    assert cost.intensity != pytest.approx(0.5, abs=0.1)
    assert cost.intensity < H100_BF16_RIDGE
    assert cost == gemm(1, 4096, 4096, 2)


@pytest.mark.parametrize("n", [1, 1000, 2**30, 7.5e12])
def test_gelu_and_vector_add_intensities_for_any_n(n):
    assert elementwise(n, 8, 1, 1, "fp16").intensity == pytest.approx(2)
    assert elementwise(n, 1, 2, 1, "fp16").intensity == pytest.approx(1 / 6)


def test_padded_130_matmul_on_128_tiles():
    useful, executed = gemm(130, 130, 130).flops, gemm_padded(130, 130, 130, tile=128)
    assert (useful, executed) == (4_394_000, 33_554_432)  # seed 004
    assert useful / executed == pytest.approx(0.131, abs=5e-4)  # MFU = HFU x 0.131


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 10**5), st.integers(1, 10**5), st.integers(1, 10**5), st.sampled_from([8, 64, 128]))
def test_padding_never_removes_work_and_adds_none_on_whole_tiles(m, n, k, tile):
    executed = gemm_padded(m, n, k, tile)
    assert executed >= gemm(m, n, k).flops
    assert gemm_padded(m * tile, n * tile, k * tile, tile) == gemm(m * tile, n * tile, k * tile).flops


def test_mlp_up_projection_of_practice_problem_1():
    d = s = 8192
    up = mlp_ops(s, d, 4 * d, "bf16")["up"]
    assert up == gemm(s, 4 * d, d, 2)
    assert up.flops == pytest.approx(4.4e12, rel=0.01)
    assert up.bytes == pytest.approx(1.2e9, rel=0.01)
    assert up.intensity == pytest.approx(3641, abs=1)  # the seed's "about 3,600"
    assert up.intensity > H100_BF16_RIDGE


def test_attention_of_practice_problem_1():
    s = d = 8192  # one head of size d_model, BF16 (seed 000, practice problem 1)
    kernels = attention_naive_kernels(1, 1, s, d, "bf16")
    naive, fused = attention_naive(1, 1, s, d, "bf16"), attention_fused(1, 1, s, d, "bf16")
    assert naive.flops == fused.flops == pytest.approx(4 * s**2 * d, rel=1e-3)  # ~2.2e12
    assert naive.flops == pytest.approx(2.2e12, rel=0.01)
    # (b) naive: the softmax kernel reads S and writes P, 5 FLOPs per 4 bytes: on the memory roof,
    assert kernels["softmax"].intensity == 1.25
    assert kernels["softmax"].intensity < H100_BF16_RIDGE
    # while the block as a whole, with d_h = 8192, averages about 2e3 (s/4 + 5/16 exactly).
    assert naive.intensity == pytest.approx(s / 4 + 5 / 16)
    assert naive.intensity == pytest.approx(2e3, rel=0.05)
    # Between the kernels, S and P each go through HBM twice (written, then read): 4 s^2 b bytes.
    assert naive.bytes - fused.bytes == 4 * s**2 * 2
    # (c) fused: read Q, K, V, write O: 4 s d b = 536,870,912 bytes, so I ~ s/b ~ 4.1e3.
    # The seed says 4*8192*8192*2 ~ 1.1e8 bytes and I ~ 2e4: that product is 5.37e8, and the
    # traffic falls 2x here (1.07e9 -> 5.37e8 bytes), not the seed's ~4x.
    assert fused.bytes == 4 * s * d * 2 == 536_870_912
    assert fused.bytes != pytest.approx(1.1e8, rel=0.2)
    assert fused.intensity == pytest.approx(4096.625)
    assert fused.intensity != pytest.approx(2e4, rel=0.5)
    assert naive.bytes / fused.bytes == 2
    assert kernels["softmax"].intensity < H100_BF16_RIDGE < naive.intensity < fused.intensity


def test_attention_decode_reads_the_kv_cache():
    context, heads, d_h = 4096, 32, 128
    fused = attention_fused(1, heads, 1, d_h, "bf16", kv_seq=context)
    # q and o (one token each) plus K and V of the whole context, every head
    assert fused.bytes == heads * (2 * 1 + 2 * context) * d_h * 2
    assert fused.intensity < 1.1  # ~1 FLOP/byte: decode attention is memory-bound
    kernels = attention_naive_kernels(1, heads, 1, d_h, "bf16", kv_seq=context)
    assert kernels["softmax"] == softmax(heads, context, "bf16")


# --- MLP and transformer layer ---------------------------------------------------------------


def _independent_weight_count(d, d_ff, gated):
    shapes = [(d, d)] * 4 + [(d, d_ff)] * (3 if gated else 2)  # Wq, Wk, Wv, Wo; W_up, (W_gate,) W_down
    return sum(rows * cols for rows, cols in shapes)


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("fused_attention", [False, True])
@pytest.mark.parametrize("B,s,d,H,d_ff", [(1, 8192, 8192, 1, 32768), (4, 2048, 4096, 32, 11008), (2, 3, 8, 2, 24)])
def test_layer_gemms_cost_2_flops_per_weight_per_token(B, s, d, H, d_ff, gated, fused_attention):
    ops = transformer_layer_ops(B, s, d, H, d_ff, "bf16", gated, fused_attention)
    gemm_flops = sum(ops[name].flops for name in WEIGHT_GEMMS if name in ops)
    assert gemm_flops / (2 * B * s) == _independent_weight_count(d, d_ff, gated)
    assert transformer_layer(B, s, d, H, d_ff, "bf16", gated, fused_attention) == sum(ops.values())


def test_layer_weight_count_symbolically():
    B, s, d, H, d_ff = (pos(x) for x in ["B", "s", "d", "H", "d_ff"])
    for gated, per_layer in [(False, 4 * d**2 + 2 * d * d_ff), (True, 4 * d**2 + 3 * d * d_ff)]:
        ops = transformer_layer_ops(B, s, d, H, d_ff, pos("b"), gated=gated)
        flops = sum(ops[name].flops for name in WEIGHT_GEMMS if name in ops)
        assert sympy.simplify(flops / (2 * B * s) - per_layer) == 0


def test_layer_ops_come_in_order():
    plain = ["norm1", "qkv", "attn", "out", "residual1", "norm2", "mlp.up", "mlp.act", "mlp.down", "residual2"]
    assert list(transformer_layer_ops(1, 16, 64, 4, 256)) == plain
    unfused = list(transformer_layer_ops(1, 16, 64, 4, 256, gated=True, fused_attention=False))
    assert unfused == ["norm1", "qkv", "attn.qk", "attn.softmax", "attn.pv", "out", "residual1", "norm2",
                       "mlp.up", "mlp.gate", "mlp.act", "mlp.down", "residual2"]
    assert list(mlp_ops(16, 64, 256, gated=True)) == ["up", "gate", "act", "down"]


def test_layer_ops_are_the_module_s_own_kernels():
    T, d, H, d_ff = 2 * 16, 64, 4, 256
    ops = transformer_layer_ops(2, 16, d, H, d_ff, "fp8", fused_attention=False)
    assert ops["norm1"] == ops["norm2"] == rmsnorm(T, d, 1)
    assert ops["qkv"] == gemm(T, 3 * d, d, 1)
    assert ops["attn.softmax"] == softmax(2 * H * 16, 16, 1)
    assert ops["residual1"] == ops["residual2"] == elementwise(T * d, 1, 2, 1, 1)
    assert mlp(T, d, d_ff, 1) == sum(mlp_ops(T, d, d_ff, 1).values())


def test_mlp_activation_traffic():
    T, d, d_ff = 32, 64, 256
    # GELU(h): read h [T, d_ff], write a [T, d_ff]
    assert mlp_ops(T, d, d_ff, 2)["act"] == Cost(formulas.GELU_FLOPS_PER_ELEMENT * T * d_ff, 2 * T * d_ff * 2)
    # SwiGLU: read gate and up [T, d_ff] each, write a: SiLU plus one multiply per element
    assert mlp_ops(T, d, d_ff, 2, gated=True)["act"] == Cost(
        (formulas.SILU_FLOPS_PER_ELEMENT + 1) * T * d_ff, 3 * T * d_ff * 2)


def test_decode_layer_weight_gemms_are_gemvs():
    ops = transformer_layer_ops(1, 1, 4096, 32, 11008, "bf16", gated=True, kv_seq=4096)
    assert ops["qkv"] == gemv(3 * 4096, 4096, "bf16")
    assert ops["mlp.down"] == gemv(4096, 11008, "bf16")
    assert all(ops[name].intensity < 1.01 for name in WEIGHT_GEMMS)


@pytest.mark.parametrize("B,H,s,t,d_h", [(1, 1, 8, 8, 4), (2, 8, 512, 512, 64), (1, 32, 1, 4096, 128)])
def test_fusing_attention_saves_exactly_the_score_traffic(B, H, s, t, d_h):
    naive = attention_naive(B, H, s, d_h, "bf16", kv_seq=t)
    fused = attention_fused(B, H, s, d_h, "bf16", kv_seq=t)
    assert fused.flops == naive.flops
    assert naive.bytes - fused.bytes == 4 * B * H * s * t * 2  # S: write + read; P: write + read


def test_norm_and_reduction_traffic():
    assert rmsnorm(10, 64, 2) == Cost(4 * 640, (640 + 64 + 640) * 2)
    assert layernorm(10, 64, 2) == Cost(7 * 640, (640 + 2 * 64 + 640) * 2)
    assert reduction(10, 64, 4) == Cost(640, (640 + 10) * 4)
    assert softmax(10, 64, "bf16") == elementwise(640, formulas.SOFTMAX_FLOPS_PER_ELEMENT, 1, 1, 2)


# --- Cost ----------------------------------------------------------------------------------


def test_cost_adds_scales_and_serializes():
    a, b = Cost(2, 6), Cost(4, 2)
    assert a + b == Cost(6, 8) and sum([a, b]) == Cost(6, 8)
    assert 3 * a == a * 3 == a.scale(3) == Cost(6, 18)
    assert np.float64(2) * a == Cost(4, 12)  # not numpy's array([4, 12])
    assert pos("x") * a == Cost(2 * pos("x"), 6 * pos("x"))
    assert a.intensity == pytest.approx(1 / 3)
    d = gemm(np.int64(2), np.int64(3), 4).to_dict()
    assert json.loads(json.dumps(d)) == {"flops": 48.0, "bytes": 52.0, "intensity": 48 / 52}
    with pytest.raises(TypeError):
        a + 1
    with pytest.raises(InvalidValue, match=r"^k must be a finite number greater than 0; got -1"):
        a.scale(-1)


def test_docstring_examples_run():
    result = doctest.testmod(formulas, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 5 and result.failed == 0


# --- bad input ------------------------------------------------------------------------------


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("call,error,message", [
    (lambda: gemm(0, 1, 1), InvalidValue, r"^m must be a finite number greater than 0; got 0\."),
    (lambda: gemm(1, -3, 1), InvalidValue, r"^n must be .*; got -3\."),
    (lambda: gemm(1, 1, NAN), InvalidValue, r"^k must be .*; got nan\."),
    (lambda: gemm(1, 1, INF), InvalidValue, r"^k must be .*; got inf\."),
    (lambda: gemm("4096", 1, 1), InvalidValue, r"^m must be .*; got '4096' \(str\)\."),
    (lambda: gemm(True, 1, 1), InvalidValue, r"^m must be .*; got True\."),
    (lambda: gemm(np.array([8, 0]), 1, 1), InvalidValue, r"^m must be .*; got 0 among the values\."),
    (lambda: gemm(1, 1, 1, "fp7"), UnknownPrecision, r"^Unknown precision 'fp7'\..*Expected one of: bf16"),
    (lambda: gemm(1, 1, 1, 0), InvalidValue, r"^bytes_per_element must be"),
    (lambda: elementwise(10, reads=0, writes=0), InvalidValue, r"^reads \+ writes must be .*; got 0\."),
    (lambda: elementwise(10, flops_per_element=-1), InvalidValue, r"^flops_per_element must be"),
    (lambda: attention_fused(1, 1, 8, 8, kv_seq=0), InvalidValue, r"^kv_seq must be"),
    (lambda: transformer_layer(1, 1, 100, 3, 400), InvalidValue,
     r"^d_model must be a multiple of n_heads .*; got d_model=100, n_heads=3\."),
    (lambda: mlp_ops(1, 8, 32, gated="yes"), InvalidValue, r"^gated must be True or False; got 'yes'\."),
    (lambda: transformer_layer_ops(1, 1, 8, 2, 32, fused_attention=1), InvalidValue, r"^fused_attention must be True"),
    (lambda: gemm_padded(1, 1, 1, tile=0), InvalidValue, r"^tile must be"),
    (lambda: symbolic(gemm, q=1), InvalidValue, r"^gemm\(\) has no parameter q; its parameters are: m, n, k"),
])
def test_bad_input_raises_a_message_that_names_it(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("fn", COST_FUNCTIONS, ids=IDS)
@pytest.mark.parametrize("bad", [-1, 0.0, NAN, INF, "64", None, True, [64]])
def test_every_argument_of_every_formula_is_checked(fn, bad):
    point = _valid_point(fn, random.Random(fn.__name__), with_optional=True)
    for name in point:
        if bad == 0.0 and name in {"flops_per_element", "reads", "writes"}:
            continue  # 0 FLOPs (a copy), 0 reads (a fill) and 0 writes are real kernels
        if _is_optional(_params(fn)[name]) and bad is None:
            continue  # None means "the usual value": kv_seq = seq, kv_heads = heads
        if name == "bytes_per_element" and isinstance(bad, str):
            with pytest.raises(UnknownPrecision, match=r"^Unknown precision '64'\. Did you mean 'fp64'\?"):
                fn(**dict(point, **{name: bad}))
            continue
        with pytest.raises(InvalidValue, match=rf"^{name} must be") as raised:
            fn(**dict(point, **{name: bad}))
        assert repr(bad) in str(raised.value) or "(list)" in str(raised.value)


_anything = st.one_of(
    st.floats(), st.integers(-(2**63), 2**63), st.booleans(), st.none(), st.text(max_size=4),
)


@pytest.mark.parametrize("fn", COST_FUNCTIONS, ids=IDS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_random_input_raises_nothing_but_roofkit_errors(fn, data):
    arguments = {name: data.draw(_anything, label=name) for name in _params(fn)}
    try:
        result = fn(**arguments)
    except RoofkitError:
        return
    assert isinstance(result, (Cost, dict, int, float))


@pytest.mark.parametrize("fn", COST_FUNCTIONS, ids=IDS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_valid_input_gives_finite_positive_costs(fn, data):
    size = st.one_of(st.integers(1, 2**40), st.floats(1e-3, 1e9))
    arguments = {}
    for name, parameter in _params(fn).items():
        if _is_flag(parameter):
            arguments[name] = data.draw(st.booleans(), label=name)
        elif name == "bytes_per_element":
            arguments[name] = data.draw(st.one_of(st.sampled_from(["fp32", "bf16", "e4m3", "fp4"]), size), label=name)
        else:
            arguments[name] = data.draw(size, label=name)
    if "n_heads" in arguments:
        arguments["n_heads"] = data.draw(st.integers(1, 128), label="n_heads")
        arguments["d_model"] = arguments["n_heads"] * data.draw(st.integers(1, 256), label="head_dim")
    if "kv_heads" in arguments:  # a divisor of the query heads
        name = "heads" if "heads" in arguments else "n_heads"
        arguments[name] = data.draw(st.integers(1, 128), label=name)
        divisors = [k for k in range(1, arguments[name] + 1) if arguments[name] % k == 0]
        arguments["kv_heads"] = data.draw(st.sampled_from(divisors), label="kv_heads")
    if "kv_seq" in arguments and "seq" in arguments:  # causal needs kv_seq >= seq
        arguments["kv_seq"] = arguments["seq"] + data.draw(size, label="kv_seq - seq")
    if "on_chip_bytes" in arguments:  # room for at least one row of a FlashAttention tile
        group = arguments["heads"] // arguments["kv_heads"]
        row = formulas.attention_tile_bytes(1, arguments["head_dim"], arguments["bytes_per_element"]) * group
        arguments["on_chip_bytes"] = row * data.draw(st.integers(1, 10**6), label="tile rows")
    for leaf in _leaves(fn(**arguments)):
        assert math.isfinite(leaf) and leaf > 0


# --- PyTorch's FlopCounterMode as an oracle -----------------------------------------------------


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _torch_flops(torch, run) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        run()
    return counter.get_total_flops()


@pytest.mark.torch
@pytest.mark.parametrize("m,n,k", [(1024, 1024, 1024), (1, 4096, 4096), (130, 130, 130), (8192, 32768, 8192), (3, 5, 7)])
def test_torch_counts_matmul_and_linear_like_gemm(torch, m, n, k):
    # meta tensors: FlopCounterMode reads the shapes and nothing is computed
    a = torch.empty(m, k, device="meta", dtype=torch.bfloat16)
    b = torch.empty(k, n, device="meta", dtype=torch.bfloat16)
    weight = torch.empty(n, k, device="meta", dtype=torch.bfloat16)  # nn.Linear stores W as [out, in]
    assert _torch_flops(torch, lambda: a @ b) == gemm(m, n, k).flops
    assert _torch_flops(torch, lambda: torch.nn.functional.linear(a, weight)) == gemm(m, n, k).flops


@pytest.mark.torch
@pytest.mark.parametrize("batch,m,n,k", [(8, 128, 64, 32), (96, 1, 4096, 128)])
def test_torch_counts_bmm_like_batched_matmul(torch, batch, m, n, k):
    a = torch.empty(batch, m, k, device="meta")
    b = torch.empty(batch, k, n, device="meta")
    assert _torch_flops(torch, lambda: torch.bmm(a, b)) == batched_matmul(batch, m, n, k).flops


@pytest.mark.torch
@pytest.mark.parametrize("B,H,s,t,d_h", [(2, 4, 16, 16, 8), (1, 32, 1, 4096, 128), (3, 2, 64, 24, 32)])
def test_torch_counts_sdpa_as_the_two_attention_matmuls(torch, B, H, s, t, d_h):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.empty(B, H, s, d_h, device="meta")
    k, v = torch.empty(B, H, t, d_h, device="meta"), torch.empty(B, H, t, d_h, device="meta")
    kernels = attention_naive_kernels(B, H, s, d_h, kv_seq=t)
    # The math backend runs sdpa as two bmm's, which FlopCounterMode counts; the softmax counts 0.
    # (PyTorch's CPU flash kernel has no FLOP formula registered and would count 0.)
    with sdpa_kernel(SDPBackend.MATH):
        counted = _torch_flops(torch, lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v))
    assert counted == kernels["qk"].flops + kernels["pv"].flops


@pytest.mark.torch
@pytest.mark.parametrize("gated", [False, True])
def test_torch_counts_a_whole_layer_as_its_matmuls(torch, gated):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    F = torch.nn.functional
    B, s, d, H, d_ff = 2, 16, 64, 4, 160
    linear = lambda n_in, n_out: torch.nn.Linear(n_in, n_out, bias=False)  # noqa: E731
    weights = torch.nn.ModuleDict({"qkv": linear(d, 3 * d), "out": linear(d, d), "up": linear(d, d_ff),
                                   "down": linear(d_ff, d), **({"gate": linear(d, d_ff)} if gated else {})})
    assert sum(p.numel() for p in weights.parameters()) == _independent_weight_count(d, d_ff, gated)

    def layer(x):
        q, k, v = weights["qkv"](F.rms_norm(x, (d,))).split(d, dim=-1)
        heads = lambda t: t.view(B, s, H, d // H).transpose(1, 2)  # noqa: E731
        o = F.scaled_dot_product_attention(heads(q), heads(k), heads(v))
        x = x + weights["out"](o.transpose(1, 2).reshape(B, s, d))
        h = F.rms_norm(x, (d,))
        a = F.silu(weights["gate"](h)) * weights["up"](h) if gated else F.gelu(weights["up"](h))
        return x + weights["down"](a)

    x = torch.randn(B, s, d)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        counted = _torch_flops(torch, lambda: layer(x))
    ops = transformer_layer_ops(B, s, d, H, d_ff, "fp32", gated=gated, fused_attention=False)
    assert counted == sum(ops[name].flops for name in MATMULS if name in ops)
    # norms, softmax, activation and residual adds are conventions FlopCounterMode leaves out
    assert counted < transformer_layer(B, s, d, H, d_ff, "fp32", gated=gated).flops


# --- grouped-query and multi-query attention (kv_heads) ----------------------------------------------


def _gqa_attention_count(B, H, KV, s, t, d):
    """Brute force: walk S = Q K^T and O = P V with query head h reading K/V head h // (H / KV);
    count 2 FLOPs per multiply-add and the distinct elements of each tensor touched."""
    group = H // KV
    q, k, v, scores, o = set(), set(), set(), set(), set()
    fmas = 0
    for b, h, i, j, e in itertools.product(range(B), range(H), range(s), range(t), range(d)):
        fmas += 2  # one in QK^T, one in PV
        q.add((b, h, i, e)), k.add((b, h // group, j, e)), v.add((b, h // group, j, e))
        scores.add((b, h, i, j)), o.add((b, h, i, e))
    return 2 * fmas, len(q), len(k), len(v), len(scores), len(o)


@pytest.mark.parametrize("B,H,KV,s,t,d", [(1, 4, 2, 2, 3, 2), (2, 6, 3, 1, 5, 2), (1, 4, 1, 3, 3, 2), (1, 2, 2, 2, 4, 3)])
def test_gqa_attention_counts_distinct_elements(B, H, KV, s, t, d):
    flops, q, k, v, scores, o = _gqa_attention_count(B, H, KV, s, t, d)
    kernels = attention_naive_kernels(B, H, s, d, 2, kv_seq=t, kv_heads=KV)
    assert kernels["qk"].flops + kernels["pv"].flops == flops
    assert kernels["qk"].bytes == 2 * (q + k + scores)  # read Q, K; write S
    assert kernels["pv"].bytes == 2 * (scores + v + o)  # read P, V; write O
    fused = attention_fused(B, H, s, d, 2, kv_seq=t, kv_heads=KV)
    assert fused.bytes == 2 * (q + k + v + o) and fused.flops == attention_naive(B, H, s, d, 2, t).flops


def test_decode_reads_kv_heads_times_head_dim_per_cached_token():
    # one more token of cache costs K and V of KV heads: 2 KV d_h b bytes per sequence
    B, H, KV, d_h = 4, 32, 8, 128
    step = [attention_fused(B, H, 1, d_h, "bf16", kv_seq=n, kv_heads=KV).bytes for n in (4096, 4097)]
    assert step[1] - step[0] == B * 2 * KV * d_h * 2
    mha = [attention_fused(B, H, 1, d_h, "bf16", kv_seq=n).bytes for n in (4096, 4097)]
    assert (mha[1] - mha[0]) / (step[1] - step[0]) == H / KV  # GQA's cache traffic is H/KV times smaller
    mqa = attention_fused(B, H, 1, d_h, "bf16", kv_seq=4096, kv_heads=1)
    assert mqa.flops == attention_fused(B, H, 1, d_h, "bf16", kv_seq=4096).flops  # same math, less traffic


def test_qkv_projection_is_d_plus_2_kv_head_dim_wide():
    # Llama 3 8B: d = 4096, 32 query heads, 8 KV heads of 128: Q 4096 + K 1024 + V 1024 = 6144
    ops = transformer_layer_ops(2, 16, 4096, 32, 14336, "bf16", gated=True, kv_heads=8)
    assert ops["qkv"] == gemm(32, 6144, 4096, "bf16")
    assert ops["out"] == gemm(32, 4096, 4096, "bf16")
    assert ops["attn"] == attention_fused(2, 32, 16, 128, "bf16", kv_heads=8)
    # an explicit head_dim whose H d_h is not d: Q and the output projection are H d_h wide
    wide = transformer_layer_ops(1, 4, 64, 4, 256, kv_heads=2, head_dim=32)
    assert wide["qkv"] == gemm(4, 4 * 32 + 2 * 2 * 32, 64) and wide["out"] == gemm(4, 64, 4 * 32)


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("fused_attention", [False, True])
def test_kv_heads_default_is_multi_head(gated, fused_attention):
    for kv_seq in (None, 3000):
        default = transformer_layer_ops(2, 64, 512, 8, 2048, "bf16", gated, fused_attention, kv_seq)
        explicit = transformer_layer_ops(2, 64, 512, 8, 2048, "bf16", gated, fused_attention, kv_seq, kv_heads=8,
                                         head_dim=64)
        assert default == explicit


def test_gqa_layer_weights_symbolically():
    d, H, KV, d_ff, s = pos("d"), pos("H"), pos("H_kv"), pos("d_ff"), pos("s")
    d_h = d / H
    per_layer = d * (d + 2 * KV * d_h) + d * d + 3 * d * d_ff  # Q, K, V, O and the gated MLP
    ops = transformer_layer_ops(1, s, d, H, d_ff, 2, gated=True, kv_heads=KV)
    flops = sum(ops[name].flops for name in WEIGHT_GEMMS)
    assert sympy.simplify(flops / (2 * s) - per_layer) == 0
    params = formulas.transformer_layer_params(d, H, d_ff, gated=True, kv_heads=KV)
    assert sympy.simplify(params - per_layer - 2 * d) == 0  # plus the two norm weights


def test_layer_params_of_llama_2_7b():
    assert formulas.transformer_layer_params(4096, 32, 11008, gated=True) == 202_383_360


# --- causal attention ---------------------------------------------------------------------------------


@pytest.mark.parametrize("s,t", [(1, 1), (1, 9), (4, 4), (3, 7), (6, 6)])
def test_causal_pairs_count_the_unmasked_scores(s, t):
    # the s queries are positions t - s ... t - 1; query i sees keys 0 .. t - s + i
    unmasked = sum(1 for i in range(s) for j in range(t) if j <= t - s + i)
    assert formulas.attention_pairs(s, t, causal=True) == unmasked
    assert formulas.attention_pairs(s, t) == s * t


def test_causal_fused_attention_counts_half_the_scores():
    full = attention_fused(2, 8, 2048, 128, "bf16")
    causal = attention_fused(2, 8, 2048, 128, "bf16", causal=True)
    assert causal.bytes == full.bytes  # Q, K, V and O move all the same
    assert causal.flops / full.flops == pytest.approx(2049 / 4096)
    # a decode step sees the whole cache, causal or not
    assert attention_fused(1, 8, 1, 64, kv_seq=100, causal=True) == attention_fused(1, 8, 1, 64, kv_seq=100)
    ops = transformer_layer_ops(1, 512, 4096, 32, 14336, gated=True, kv_heads=8, causal=True)
    assert ops["attn"] == attention_fused(1, 32, 512, 128, 2, kv_heads=8, causal=True)


@pytest.mark.parametrize("call, message", [
    (lambda: attention_fused(1, 32, 8, 128, kv_heads=5), r"^heads must be a multiple of kv_heads .*heads=32, kv_heads=5"),
    (lambda: transformer_layer_ops(1, 8, 4096, 32, 100, kv_heads=3), r"^n_heads must be a multiple of kv_heads"),
    (lambda: attention_fused(1, 4, 8, 16, kv_seq=4, causal=True), r"^a causal attention needs seq <= kv_seq"),
    (lambda: attention_fused(1, 4, 8, 16, causal="yes"), r"^causal must be True or False"),
    (lambda: transformer_layer(1, 1, 100, 3, 400, head_dim=0), r"^head_dim must be"),
])
def test_gqa_bad_input(call, message):
    with pytest.raises(InvalidValue, match=message):
        call()


@pytest.mark.torch
@pytest.mark.parametrize("B,H,KV,s,t,d_h", [(2, 8, 2, 16, 16, 8), (1, 32, 8, 1, 4096, 128), (3, 4, 1, 5, 7, 16)])
def test_torch_counts_gqa_sdpa_as_the_two_attention_matmuls(torch, B, H, KV, s, t, d_h):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.empty(B, H, s, d_h, device="meta")
    k, v = torch.empty(B, KV, t, d_h, device="meta"), torch.empty(B, KV, t, d_h, device="meta")
    kernels = attention_naive_kernels(B, H, s, d_h, kv_seq=t, kv_heads=KV)
    with sdpa_kernel(SDPBackend.MATH):
        counted = _torch_flops(torch, lambda: torch.nn.functional.scaled_dot_product_attention(
            q, k, v, enable_gqa=True))
    assert counted == kernels["qk"].flops + kernels["pv"].flops


@pytest.mark.torch
def test_torch_counts_a_gqa_layer_as_its_matmuls(torch):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    F = torch.nn.functional
    B, s, d, H, KV, d_ff = 2, 16, 64, 8, 2, 160
    d_h = d // H
    linear = lambda n_in, n_out: torch.nn.Linear(n_in, n_out, bias=False)  # noqa: E731
    w = torch.nn.ModuleDict({"qkv": linear(d, d + 2 * KV * d_h), "out": linear(d, d), "up": linear(d, d_ff),
                             "gate": linear(d, d_ff), "down": linear(d_ff, d)})
    assert sum(p.numel() for p in w.parameters()) == formulas.transformer_layer_params(
        d, H, d_ff, gated=True, kv_heads=KV) - 2 * d

    def layer(x):
        q, k, v = w["qkv"](F.rms_norm(x, (d,))).split([d, KV * d_h, KV * d_h], dim=-1)
        heads = lambda t, n: t.view(B, s, n, d_h).transpose(1, 2)  # noqa: E731
        o = F.scaled_dot_product_attention(heads(q, H), heads(k, KV), heads(v, KV), is_causal=True, enable_gqa=True)
        x = x + w["out"](o.transpose(1, 2).reshape(B, s, d))
        h = F.rms_norm(x, (d,))
        return x + w["down"](F.silu(w["gate"](h)) * w["up"](h))

    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        counted = _torch_flops(torch, lambda: layer(torch.randn(B, s, d)))
    # the math backend computes every score and then masks: the naive kernels' count
    ops = transformer_layer_ops(B, s, d, H, d_ff, "fp32", gated=True, fused_attention=False, kv_heads=KV)
    assert counted == sum(ops[name].flops for name in MATMULS)


# --- FlashAttention's tiles: K and V once per query tile (Dao et al. 2022, Theorem 2) ----------------


def _tiled_bytes_by_walking_the_tiles(B, H, KV, s, t, d, b, rows, causal):
    """Bytes of a tiled FlashAttention counted tile by tile: every tile of ``rows`` query positions
    (the g = H / KV heads of a group together) reads the K and V rows it needs; Q read, O written once."""
    kv_rows = 0
    for start in range(0, s, rows):
        last = min(start + rows, s) - 1                 # the tile's last query, at position t - s + last
        kv_rows += (t - s + last + 1) if causal else t  # keys 0 .. t - s + last, or all of them
    return B * (2 * H * s * d + 2 * KV * kv_rows * d) * b


@pytest.mark.parametrize("B,H,KV,s,t,d,rows", [(1, 1, 1, 10, 10, 4, 3), (2, 4, 4, 17, 17, 8, 5), (1, 8, 2, 9, 30, 16, 2),
                                               (1, 2, 1, 64, 64, 8, 64), (3, 6, 3, 33, 40, 4, 7), (1, 1, 1, 1, 50, 8, 4)])
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_flash_attention_counts_what_the_tiles_read(B, H, KV, s, t, d, rows, causal):
    b = 2
    M = formulas.attention_tile_bytes(rows, d, b) * (H // KV)  # exactly ``rows`` positions of g heads per tile
    tiled = attention_fused(B, H, s, d, b, kv_seq=t, kv_heads=KV, causal=causal, on_chip_bytes=M)
    assert tiled.bytes == _tiled_bytes_by_walking_the_tiles(B, H, KV, s, t, d, b, rows, causal)
    assert tiled.flops == attention_fused(B, H, s, d, b, kv_seq=t, kv_heads=KV, causal=causal).flops
    # a little more room that does not make a whole extra row changes nothing
    assert attention_fused(B, H, s, d, b, kv_seq=t, kv_heads=KV, causal=causal, on_chip_bytes=M + 1) == tiled


def test_one_tile_for_every_query_is_the_ideal_count():
    for s, d in [(8192, 8192), (8192, 128), (1000, 64)]:
        ideal = attention_fused(1, 1, s, d, "bf16")
        for M in (formulas.attention_tile_bytes(s, d, "bf16"), 10 * formulas.attention_tile_bytes(s, d, "bf16")):
            assert attention_fused(1, 1, s, d, "bf16", on_chip_bytes=M) == ideal
        assert attention_fused(1, 1, s, d, "bf16", on_chip_bytes=formulas.attention_tile_bytes(s - 1, d, 2)).bytes \
            > ideal.bytes


def test_tiled_traffic_is_theta_n2_d2_over_m_and_its_intensity_levels_off():
    d, b = 128, 2
    M = formulas.attention_tile_bytes(128, d, b)  # a 128-row tile: 128 KiB
    big = [attention_fused(1, 1, s, d, b, on_chip_bytes=M) for s in (2**18, 2**19)]
    assert big[1].bytes / big[0].bytes == pytest.approx(4, rel=0.01)  # bytes ~ s^2 ...
    half_m = attention_fused(1, 1, 2**19, d, b, on_chip_bytes=M // 2)
    assert half_m.bytes / big[1].bytes == pytest.approx(2, rel=0.01)  # ... ~ 1 / M ...
    double_d = attention_fused(1, 1, 2**19, 2 * d, b, on_chip_bytes=M)
    assert double_d.bytes / big[1].bytes == pytest.approx(4, rel=0.01)  # ... ~ d^2 (Theorem 2: N^2 d^2 / M)
    # the intensity tends to (4 d + 5) r / (2 d b) with r = M / (4 d b) rows, instead of growing like s / b
    plateau = (4 * d + 5) * 128 / (2 * d * b)
    assert big[1].intensity == pytest.approx(plateau, rel=0.002)
    assert attention_fused(1, 1, 2**19, d, b).intensity > 1000 * plateau
    s, M_ = pos("s"), pos("M")
    limit = sympy.limit(symbolic(attention_fused, batch=1, heads=1, head_dim=d, bytes_per_element=b,
                                 on_chip_bytes=M_).intensity, s, sympy.oo)
    assert sympy.simplify(limit - sympy.Rational(4 * d + 5, 2 * d * b) * sympy.floor(M_ / (4 * d * b))) == 0


def test_causal_tiles_skip_the_tiles_above_the_diagonal():
    full = attention_fused(1, 8, 2**16, 128, "bf16", on_chip_bytes=formulas.attention_tile_bytes(128, 128, 2))
    causal = attention_fused(1, 8, 2**16, 128, "bf16", causal=True,
                             on_chip_bytes=formulas.attention_tile_bytes(128, 128, 2))
    assert causal.bytes / full.bytes == pytest.approx(0.5, rel=0.01)
    assert causal.intensity == pytest.approx(full.intensity, rel=0.01)  # half the math, half the reads


@pytest.mark.parametrize("call, message", [
    (lambda: attention_fused(1, 1, 8, 128, "bf16", on_chip_bytes=1023), r"^on_chip_bytes=1023 cannot hold one row"),
    (lambda: attention_fused(1, 8, 8, 128, "bf16", kv_heads=2, on_chip_bytes=2048),
     r"cannot hold one row .* = 4096 bytes"),
    (lambda: attention_fused(1, 1, 8, 128, on_chip_bytes=0), r"^on_chip_bytes must be"),
    (lambda: formulas.attention_tile_bytes(-1, 128), r"^rows must be"),
])
def test_tiled_flash_attention_bad_input(call, message):
    with pytest.raises(InvalidValue, match=message):
        call()


def test_a_latent_cache_read_at_fewer_bytes_lowers_only_the_latent_operand():
    """Prefill over a cached prefix: W^UK and W^UV multiply the latent of every position, read from an FP8 cache
    at 1 byte instead of the activations' 2; the weights and the output keep theirs (a regression: the RoPE key,
    which this GEMM does not read, was once taken off too, and bytes went negative)."""
    B, s, s_kv, d_c, rope, H, nope, v = 2, 16, 64, 512, 64, 4, 128, 128
    plain = formulas.latent_attention_ops(B, s, 1024, H, d_c, nope, rope, v, 2, kv_seq=s_kv)["attn.kv_up"]
    fp8 = formulas.latent_attention_ops(B, s, 1024, H, d_c, nope, rope, v, 2, kv_seq=s_kv,
                                        kv_bytes_per_element=1)["attn.kv_up"]
    assert plain.bytes - fp8.bytes == B * s_kv * d_c * (2 - 1)
    assert fp8.flops == plain.flops and fp8.bytes > 0
