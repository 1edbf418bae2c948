"""The KV cache: what a sequence keeps in memory per token, for MHA, GQA, MQA and latent attention.

To make token t + 1, attention needs the keys and values of tokens 1 .. t in
every layer. A server computes them once, during the prompt's prefill and then
one token per decode step, and keeps them: the KV cache. Per token:

    bytes per token = 2 · L · H_kv · d_h · b          (K and V; L layers; H_kv K/V heads of d_h; b bytes each)

* multi-head attention (MHA), H_kv = H: Llama 2 7B and 13B, GPT-3;
* grouped-query attention (GQA), 1 < H_kv < H, each K/V head shared by a group
  of H / H_kv query heads (Ainslie et al. 2023, arXiv:2305.13245): Llama 2 70B,
  Llama 3, Mistral 7B;
* multi-query attention (MQA), H_kv = 1 (Shazeer 2019, arXiv:1911.02150);
* multi-head latent attention (MLA; DeepSeek-V2, arXiv:2405.04434, Table 1)
  caches, per token and layer, one latent of d_c elements from which every
  head's K and V are rebuilt, and one RoPE key of d_h^R elements shared by the heads:

      bytes per token = L · (d_c + d_h^R) · b

Per sequence the cache grows with the context s, for a batch with the number
of sequences B: bytes = B · s · (bytes per token). The cache's precision b is
its own (``dtype``), independent of the weights' (an FP8 cache beside BF16 weights).

    >>> bytes_per_token("llama-2-70b")            # 2 x 80 layers x 8 heads x 128 x 2 bytes
    327680
    >>> bytes_per_token("llama-2-7b") // bytes_per_token("llama-3-8b")   # MHA vs GQA (32 vs 8 K/V heads)
    4
    >>> bytes_per_token("deepseek-v3")            # 61 layers x (512 + 64) x 2 bytes
    70272
    >>> round(bytes_per_sequence("llama-3-70b", 8192) / 1e9, 2)     # GB at an 8,192-token context
    2.68
"""

from __future__ import annotations

import dataclasses

from ... import dtypes, formulas
from ...catalogs import models
from ...errors import InvalidValue
from ...units import positive

__all__ = ["kind", "group_size", "bytes_per_layer", "bytes_per_token", "bytes_per_sequence", "batch_bytes",
           "latent_cache_bytes", "with_kv_heads", "symbolic", "KINDS"]

KINDS = ("MHA", "GQA", "MQA", "MLA")


def kind(model) -> str:
    """'MHA', 'GQA', 'MQA' or 'MLA': how the model's attention keeps K and V."""
    m = models.get(model)
    if m.mla:
        return "MLA"
    return "MHA" if m.kv_heads == m.heads else "MQA" if m.kv_heads == 1 else "GQA"


def group_size(model) -> int:
    """Query heads per cached K/V head: H / H_kv (1 for MHA, H for MQA and for MLA's shared latent).

    In a decode step this is attention's arithmetic intensity in BF16, about
    2 FLOPs per cached element read: the group's heads reuse each K and V element.
    """
    m = models.get(model)
    return m.heads if m.mla else m.heads // m.kv_heads


# MLA's cache of one layer, B s_kv (d_c + d_h^R) b (DeepSeek-V2, Table 1), numbers or sympy symbols: its one
# home is roofkit.formulas, where the absorbed decode attention that reads it (formulas.attention_latent) counts it
latent_cache_bytes = formulas.latent_cache_bytes


def bytes_per_layer(model, dtype="bf16"):
    """One token of one sequence in one layer, in bytes (``dtype``: a precision name or bytes per element)."""
    m = models.get(model)
    b = dtypes.bytes_per_element(dtype)
    if m.mla:
        return latent_cache_bytes(1, 1, m.kv_lora_rank, m.qk_rope_head_dim, b)
    return formulas.kv_cache_bytes(1, 1, m.kv_heads * m.head_dim, b)


def bytes_per_token(model, dtype="bf16"):
    """One token of one sequence, every layer: the figure people quote as "KV cache per token"."""
    m = models.get(model)
    return m.layers * bytes_per_layer(m, dtype)


def _tokens(value, name):
    n = positive(value, name)
    if n != int(n):
        raise InvalidValue(f"{name} must be a whole number of tokens; got {value!r}.")
    return int(n)


def bytes_per_sequence(model, context, dtype="bf16"):
    """One sequence of ``context`` tokens (prompt and generated tokens together)."""
    return _tokens(context, "context") * bytes_per_token(model, dtype)


def batch_bytes(model, batch, context, dtype="bf16"):
    """``batch`` sequences of ``context`` tokens each."""
    return _tokens(batch, "batch") * bytes_per_sequence(model, context, dtype)


def with_kv_heads(model, kv_heads) -> models.Model:
    """The same model with ``kv_heads`` K/V heads and ordinary attention: a what-if for comparisons.

    ``with_kv_heads(m, m.heads)`` is its MHA twin, 1 its MQA twin. The parameter
    count changes with the K and V projections; nothing else does.
    """
    m = models.get(model)
    kv = _tokens(kv_heads, "kv_heads")
    if m.heads % kv:
        raise InvalidValue(f"kv_heads must divide the {m.heads} query heads of {m.name}; got {kv_heads!r}.")
    return dataclasses.replace(m, kv_heads=kv, q_lora_rank=None, kv_lora_rank=None, qk_nope_head_dim=None,
                               qk_rope_head_dim=None, v_head_dim=None, experts=0, experts_per_token=0,
                               shared_experts=0, moe_d_ff=None, dense_layers=0,
                               name=f"{m.name} with {kv} K/V head{'s' if kv > 1 else ''}")


def symbolic() -> dict:
    """The two formulas in sympy, from the functions above: {'attention': ..., 'latent': ...} (bytes per sequence).

    Symbols: L layers, s tokens, H_kv K/V heads, d_h head size, d_c latent, d_h^R RoPE key, b bytes.
    """
    import sympy  # deferred: sympy costs ~0.25 s at import

    L, s, H_kv, d_h, d_c, d_r, b = sympy.symbols("L s H_kv d_h d_c d_h^R b", positive=True)
    return {"attention": L * formulas.kv_cache_bytes(1, s, H_kv * d_h, b),
            "latent": L * latent_cache_bytes(1, s, d_c, d_r, b)}
