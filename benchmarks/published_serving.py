"""How close is `roofkit serve` to what serving engines published? Every row, both modes.

    python benchmarks/published_serving.py            (--write: refit t_step and store it in
                                                        roofkit/data/published/serving_calibration.json)

Not a pass/fail test: it prints figures. Targets (issue 20):

* the fitting set (roofkit/data/published/serving.json: TensorRT-LLM's Llama 3.1 8B
  throughput on an H100, and its first-token times for Llama 2 7B on an H100 and an
  A100): the bound never slower than published, `--calibrated` within 1.2x;
* the held-out set (roofkit/data/published/serving_heldout.json, never fitted on:
  other models, mixtures of experts among them, GPUs, tensor-parallel layouts and
  engines, and other people's runs of them: Azure's benchmarking guide on H100s, H200s
  and MI300Xs): the bound never loses;
  calibrated throughput within 1.3x on most rows and 1.6x on all; first-token time
  within 1.5x;
* the frontier rows (roofkit/data/published/serving_frontier.json, the split the
  estimate's mechanisms were developed on, and serving_frontier_heldout.json, which
  checks them: TensorRT-LLM in NVFP4 on B200 and GB200 and in FP8 on Hopper, mixtures
  of experts with attention data parallelism and expert parallelism, DeepSeek-R1):
  the bound never loses; the estimate's share within 1.25x and its worst ratio are
  printed. t_step is fitted on serving.json alone;
* every held-out row together (serving_heldout.json and serving_frontier_heldout.json,
  issue 30): the calibrated throughput within 1.25x on 80% of them, none beyond 1.6x.

"speed" is predicted over published for tokens/s, published over predicted for a
time: above 1 the prediction is the faster one, which a bound must be.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from roofkit.catalogs import links
from roofkit.catalogs.hardware import NoAchievableFigure
from roofkit.perf.inference import engine, published


def _row(run):
    bound = published.predict(run)
    try:
        estimate = published.predict(run, True)
    except NoAchievableFigure:
        estimate = None
    notes = []
    if run.tp > 1 and links.scale_up(run.hw) is None:
        notes.append("no scale-up link in the catalog: its all-reduces are not counted")
    if run.attention_dp:
        notes.append(f"attention data-parallel, ep {run.ep or 1}")
    if estimate is None:
        notes.append("no achievable figures in the catalog: bound only")
    return bound, estimate, notes


def _fmt(run, value):
    if value is None:
        return "-"
    return f"{value:,.0f}" if run.kind == "throughput" else f"{value * 1e3:.1f} ms"


def table(runs, title):
    print(f"\n{title}")
    header = f"{'case':70s} {'published':>10s} {'bound':>10s} {'speed':>6s} {'calibr.':>10s} {'speed':>6s}"
    print(header)
    print("-" * len(header))
    out = []
    for run in runs:
        bound, estimate, notes = _row(run)
        b = published.speed(run, bound)
        c = None if estimate is None else published.speed(run, estimate)
        out.append((run, b, c, notes))
        print(f"{run.case[:70]:70s} {_fmt(run, run.published):>10s} {_fmt(run, bound):>10s} {b:6.2f} "
              f"{_fmt(run, estimate):>10s} {'-' if c is None else f'{c:.2f}':>6s}"
              + (f"  ({'; '.join(notes)})" if notes else ""))
    return out


def summary(rows, label, targets):
    bound_min = min(b for _, b, _, _ in rows)
    print(f"{label}: the bound is never slower than published: {'yes' if bound_min >= 1 else 'NO'} "
          f"(least speed {bound_min:.2f})")
    for kind, limits in targets.items():
        chosen = [c for run, _, c, _ in rows if run.kind == kind and c is not None]
        if not chosen:
            continue
        off = [max(c, 1 / c) for c in chosen]
        parts = [f"{sum(x <= limit for x in off)}/{len(off)} within {limit}x" for limit in limits]
        print(f"  calibrated {kind}: {', '.join(parts)}; worst {max(off):.2f}x, median "
              f"{sorted(off)[len(off) // 2]:.2f}x, geometric mean of speed "
              f"{math.exp(sum(math.log(c) for c in chosen) / len(chosen)):.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="refit t_step and write data/published/"
                                                             "serving_calibration.json")
    if parser.parse_args().write:
        fitted = published.fit()
        path = Path(__file__).resolve().parents[1] / "roofkit" / engine.CALIBRATION_FILE
        path.write_text(json.dumps({"step_s": fitted.step_s, "runs": fitted.runs, "source": fitted.source},
                                   indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path}: t_step = {fitted.step_s * 1e3:.3f} ms")
        engine._DEFAULT.clear()
    cal = engine.default()
    print(f"calibration: t0 = {cal.floor_s * 1e6:.2f} µs per kernel (lesson 11's H200 layers), t_step = "
          f"{cal.step_s * 1e3:.3f} ms per step, fitted on {cal.runs} published runs")
    fitted = table(published.runs(), "fitting set (serving.json)")
    summary(fitted, "fitting set", {"throughput": (1.2,), "ttft": (1.2,)})
    held = table(published.heldout(), "held-out set (serving_heldout.json, never fitted on)")
    summary(held, "held-out set", {"throughput": (1.25, 1.3, 1.6), "ttft": (1.25, 1.5)})
    for engine_name in sorted({run.engine for run, *_ in held}):
        summary([r for r in held if r[0].engine == engine_name], f"  of which {engine_name}",
                {"throughput": (1.25, 1.3, 1.6), "ttft": (1.25, 1.5)})
    every_held = list(held)
    for name, title in (("frontier", "frontier rows (serving_frontier.json: FP4 on B200 and GB200, v1.0 era)"),
                        ("frontier_heldout", "frontier held-out rows (serving_frontier_heldout.json: DEP layouts, "
                                             "DeepSeek-R1, Hopper FP8)")):
        rows = table(published.SETS[name](), title)
        summary(rows, name.replace("_", " "), {"throughput": (1.25, 1.5, 2.0)})
        for model in sorted({run.model for run, *_ in rows}):
            summary([r for r in rows if r[0].model == model], f"  of which {model}", {"throughput": (1.25, 1.5, 2.0)})
        every_held += rows if name == "frontier_heldout" else []
    print("\nevery held-out row (serving_heldout.json and serving_frontier_heldout.json)")
    summary(every_held, "every held-out row", {"throughput": (1.25, 1.6), "ttft": (1.25, 1.6)})
    beyond = [(run, c) for run, _, c, _ in every_held if c is not None and max(c, 1 / c) > 1.6]
    for run, c in sorted(beyond, key=lambda x: -max(x[1], 1 / x[1])):
        print(f"  beyond 1.6x: {run.case[:80]} ({c:.2f})")
    preempted(published.heldout())
    return 0


def preempted(runs):
    """The calibrated rows whose engine preempts: its cache, what it recomputes, and the figure without it."""
    print("\nrows whose engine preempts and recomputes (calibrated; the bound counts no preemption)")
    for run in runs:
        o = published.preempted(run)
        if o is not None and o.recompute_tokens:
            print(f"  {run.case[:60]:60s} cache {o.cache_tokens / 1e6:.2f}M tokens for {o.requests:,} x "
                  f"{run.isl + run.osl:,}; recomputes {o.recompute_tokens / 1e6:.2f}M tokens ({o.recompute_s:.0f} s): "
                  f"{o.tokens_per_s:,.0f} tokens/s, {o.steady.tokens_per_s:,.0f} without ({run.published:,.0f} "
                  f"published)")


if __name__ == "__main__":
    raise SystemExit(main())
