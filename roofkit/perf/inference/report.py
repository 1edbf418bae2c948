"""Tables of the serving figures, as text: what lesson 13 prints, computed here so the lesson only asks.

Each function returns a :class:`Table` (``print(table)`` shows it; ``table.rows``
holds the numbers, in SI units):

    cache_table(["llama-2-7b", "llama-3-70b", "deepseek-v3"], context=8192)
    memory_table([("llama-3-8b", "h100", 1), ("llama-3-70b", "h100", 8)], contexts=(4096, 32768))
    quantization_table("llama-3-70b", "h100", gpus=8, context=4096, batches=(1, 256))
    published_table(published.compare())          # roofkit's figures beside what engines published
"""

from __future__ import annotations

from dataclasses import dataclass

from ...catalogs import hardware, models
from . import kvcache, latency, memory, weights

__all__ = ["Table", "cache_table", "memory_table", "quantization_table", "published_table"]


@dataclass(frozen=True)
class Table:
    """Rows of numbers (``rows``: dicts) and the same as aligned text (``str(table)``)."""

    header: tuple[str, ...]
    cells: tuple[tuple[str, ...], ...]
    rows: tuple[dict, ...]

    def __str__(self) -> str:
        widths = [max(len(r[i]) for r in (self.header, *self.cells)) for i in range(len(self.header))]
        line = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        return "\n".join([line(self.header), "-" * (sum(widths) + 2 * (len(widths) - 1)), *map(line, self.cells)])

    def __repr__(self) -> str:
        return str(self)


def _short(acc) -> str:
    return acc.name.removeprefix(acc.vendor + " ")


def cache_table(names, context=8192, dtype="bf16") -> Table:
    """Per model: its attention, what one token caches, one sequence at ``context``, and its MHA twin's ratio."""
    header = ("model", "attention", "cached per token per layer", "per token", f"per {context:,}-token sequence",
              "MHA / this")
    rows, cells = [], []
    for name in names:
        m = models.get(name)
        kind = kvcache.kind(m)
        per_token = kvcache.bytes_per_token(m, dtype)
        mha = kvcache.bytes_per_token(kvcache.with_kv_heads(m, m.heads), dtype)
        what = (f"latent {m.kv_lora_rank} + RoPE key {m.qk_rope_head_dim}" if m.mla
                else f"K, V: {m.kv_heads} head{'s' if m.kv_heads > 1 else ''} of {m.head_dim}")
        row = {"model": m.key, "kind": kind, "bytes_per_token": per_token,
               "bytes_per_sequence": per_token * context, "mha_ratio": mha / per_token}
        rows.append(row)
        cells.append((m.name, kind, what, f"{per_token / 1e3:.4g} kB", f"{per_token * context / 1e9:.4g} GB",
                      f"{mha / per_token:.3g}x"))
    return Table(header, tuple(cells), tuple(rows))


def memory_table(setups, contexts=(4096, 32768), weights_dtype="bf16", kv_dtype="bf16",
                 reserve=None, engine=None) -> Table:
    """Per (model, accelerator, GPUs): the weights, and the largest batch at each context (or the verdict)."""
    header = ("model", "GPUs", "memory less reserve", "weights",
              *(f"largest batch at {c:,}" for c in contexts))
    rows, cells = [], []
    for name, hw, gpus in setups:
        m, acc = models.get(name), hardware.get(hw)
        plans = [memory.plan(m, acc, gpus, c, 1, weights_dtype, kv_dtype, reserve, engine=engine) for c in contexts]
        p = plans[0]
        batches = [str(q.max_batch) if q.weights_fit else f"no: {q.min_gpus} GPUs at least" for q in plans]
        rows.append({"model": m.key, "hw": acc.key, "gpus": gpus, "weights_bytes": p.weights_bytes,
                     "usable_bytes": p.capacity_bytes - p.reserve_bytes,
                     "max_batch": {c: q.max_batch for c, q in zip(contexts, plans)}})
        cells.append((m.name, f"{gpus} x {_short(acc)}", f"{(p.capacity_bytes - p.reserve_bytes) / 1e9:.4g} GB",
                      f"{p.weights_bytes / 1e9:.4g} GB", *batches))
    return Table(header, tuple(cells), tuple(rows))


def quantization_table(model, hw, gpus=1, context=4096, batches=(1, 256), formats=("bf16", "fp8", "int8", "int4"),
                       dtype="bf16") -> Table:
    """Per weight format: bytes per weight, the weights, the largest batch, and TPOT and tokens/s at ``batches``."""
    header = ("weights", "bytes per weight", "weights", "largest batch",
              *(f"TPOT at {b}" for b in batches), *(f"tokens/s at {b}" for b in batches))
    rows, cells = [], []
    for fmt in formats:
        p = memory.plan(model, hw, gpus, context, 1, fmt, dtype)
        times = [latency.tpot(model, hw, b, context, gpus=gpus, dtype=dtype, weights_dtype=fmt) for b in batches]
        per = weights.weight_format(fmt).bytes_per_weight
        rows.append({"weights_dtype": fmt, "bytes_per_weight": per, "weights_bytes": p.weights_bytes,
                     "max_batch": p.max_batch, "tpot_s": dict(zip(batches, times))})
        cells.append((fmt.upper(), f"{per:.4g}", f"{p.weights_bytes / 1e9:.4g} GB", str(p.max_batch),
                      *(f"{t * 1e3:.3g} ms" for t in times), *(f"{b / t:.4g}" for b, t in zip(batches, times))))
    return Table(header, tuple(cells), tuple(rows))


def published_table(rows) -> Table:
    """Rows of :func:`roofkit.inference.published.compare`: the published figure, the bound and the calibrated
    estimate beside it, each with its speed (above 1: faster than published)."""
    header = ("run", "published", "bound", "speed", "calibrated", "speed")
    cells, kept = [], []
    for r in rows:
        unit = (lambda x: f"{x:,.0f} tok/s") if r["kind"] == "throughput" else (lambda x: f"{x * 1e3:.1f} ms")
        what = (f"{r['model']} on {r['gpus']} x {r['hw']}, {r['isl']:,} in / {r['osl']:,} out" if r["kind"] ==
                "throughput" else f"{r['model']} on {r['gpus']} x {r['hw']}, first token of {r['isl']:,}")
        estimate = r.get("calibrated")
        cells.append((what, unit(r["published"]), unit(r["bound"]), f"{r['bound_speed']:.2f}",
                      "-" if estimate is None else unit(estimate),
                      "-" if estimate is None else f"{r['calibrated_speed']:.2f}"))
        kept.append(dict(r))
    return Table(header, tuple(cells), tuple(kept))
