"""roofkit parallel against published training runs: the bound, the calibrated estimate, leave-one-out.

    python benchmarks/published_runs.py [--write] [--quick]

Prints, for every run shipped in roofkit/data/published/:

1. the FITTING set (training.json: Megatron-LM Table 1, BLOOM 176B, Llama 3 405B;
   training_frontier.json: Megatron-Bridge 25.11 and NeMo 24.07 performance tables, FP8,
   experts, Blackwell): predicted / published step time for the bound (must be <= 1: a
   published run faster than the bound is a bug), for the calibrated estimate, and for
   the calibrated estimate refitted WITHOUT that run (leave-one-out); the matmul share
   is fitted on the dense runs only, then the cost per local expert on the mixtures of
   experts (roofkit.parallel.calibration.fit_expert_cost), each left out in turn too;
2. the HELD-OUT set (training_heldout.json: Narayanan et al. Table 2, Korthikanti et
   al. Tables 3 and 5, MT-NLG, Megatron-Core's H100 table; training_frontier_heldout.json:
   dgxc-benchmarking, DeepSeek-V3's report, torchtitan, Megatron-Core's Mixtral), which
   the fit never sees: the same ratios, summarised by era, precision and kind;
3. Llama 3 405B's three Table 4 runs as MFU, published against calibrated, in Meta's
   layout;
4. the fit with the overlap efficiency freed as well, and what it does to the held-out runs;
5. DeepSpeed's ZeRO-3 rows of Narayanan et al.'s Table 2 (held out), part by part: compute,
   traffic (each parameter gathered after a torch.cuda.synchronize(), nothing hidden), and the
   ranks' slices its list collectives handle one by one, with the estimate as a flat-buffer
   implementation would run the same layout.

``--write`` refits and writes roofkit/data/published/calibration.json (the constants
``--calibrated`` uses). ``--quick`` skips leave-one-out and the second fit.
Not a pass/fail test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from roofkit.catalogs import hardware
from roofkit.perf.parallel import calibration, plan, published, sharding

ROOT = Path(__file__).resolve().parents[1]


def ratios(runs, k):
    rows = []
    for r in runs:
        pub = published.published_step_s(r)
        bound = published.predict(r)
        cal = published.predict(r, calibrated=True, constants=k)
        rows.append({"case": r.case, "published_s": pub, "bound": bound.step_time_s / pub,
                     "calibrated": cal.step_time_s / pub, "run": r, "plan": cal})
    return rows


def summary(rows, key, label):
    values = [x[key] for x in rows]
    worst = max(values, key=lambda v: abs(math.log(v)))
    within = {lim: sum(1 / lim <= v <= lim for v in values) for lim in (1.1, 1.2, 1.25, 1.5)}
    print(f"  {label}: worst {worst:.2f}x; within 1.1x {within[1.1]}/{len(values)}, 1.2x {within[1.2]}, "
          f"1.25x {within[1.25]}, 1.5x {within[1.5]}")


GROUPS = {  # the runs by era and kind: each summarised apart
    "dense BF16, 2020-2024": lambda r: not r.frontier,
    "frontier, dense": lambda r: r.frontier and not r.model.moe,
    "frontier, FP8 and MXFP8": lambda r: r.frontier and r.dtype != "bf16",
    "frontier, mixtures of experts": lambda r: r.model.moe,
}


def groups(rows):
    """Bound and calibrated summaries of ``rows``, all together and by group."""
    summary(rows, "bound", "bound (<= 1 is a bound)")
    summary(rows, "calibrated", "calibrated")
    for label, member in GROUPS.items():
        some = [x for x in rows if member(x["run"])]
        if some and len(some) < len(rows):
            summary(some, "calibrated", f"calibrated, {label} ({len(some)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="refit and write data/published/calibration.json")
    parser.add_argument("--quick", action="store_true", help="skip leave-one-out and the two-constant fit")
    args = parser.parse_args()
    started = time.perf_counter()
    fitting, held = published.load("fitting"), published.load("held-out")
    dense = calibration.dense_fitting_runs()
    moe = calibration.moe_fitting_runs()
    k = calibration.fit_expert_cost(calibration.fit(dense))
    shipped = calibration.constants()
    print(f"fit on the {len(dense)} dense runs of the {len(fitting)} fitting runs: matmul_efficiency = {k.matmul_efficiency:.3f} "
          f"(overlap_efficiency {k.overlap_efficiency:g}, per-kernel floor from roofkit.layertime), "
          f"rms log error {k.rms_log_error:.3f}; shipped: {shipped.matmul_efficiency:.3f}")
    print(f"then on its {len(moe)} mixtures of experts: moe_expert_s = {k.moe_expert_s * 1e3:.3f} ms per local expert, "
          f"MoE layer and micro-batch; shipped: {shipped.moe_expert_s * 1e3:.3f} ms")
    if args.write:
        path = ROOT / "roofkit/data/published/calibration.json"
        path.write_text(json.dumps(k.to_dict(), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
        calibration._CACHE.clear()

    loo = {} if args.quick else {x["case"]: x for x in calibration.leave_one_out(dense)}
    loo_moe = {} if args.quick else {x["case"]: x for x in calibration.leave_one_out_experts(k)}
    print("\n== fitting set: predicted / published step time ==")
    print(f"  {'run':<54} {'published':>10} {'bound':>6} {'calib.':>7} {'LOO':>6} {'LOO k':>6}")
    rows = ratios(fitting, k)
    for x in rows:
        o, e = loo.get(x["case"]), loo_moe.get(x["case"])
        extra = f" {o['ratio']:6.2f} {o['constants']['matmul_efficiency']:6.3f}" if o else ""
        extra += f" {e['ratio']:6.2f} {e['moe_expert_s'] * 1e3:.3f} ms (experts)" if e else ""
        print(f"  {x['case'][:54]:<54} {x['published_s']:9.2f}s {x['bound']:6.2f} {x['calibrated']:7.2f}{extra}")
    groups(rows)
    if loo:
        summary([{"r": o["ratio"]} for o in loo.values()], "r", "leave-one-out, dense (matmul share refitted)")
    if loo_moe:
        summary([{"r": o["ratio"]} for o in loo_moe.values()], "r",
                "leave-one-out, mixtures of experts (cost per expert refitted)")

    print("\n== held-out set (never fitted on) ==")
    held_rows = ratios(held, k)
    for x in held_rows:
        print(f"  {x['case'][:66]:<66} {x['published_s']:9.2f}s {x['bound']:6.2f} {x['calibrated']:7.2f}")
    groups(held_rows)

    print("\n== Llama 3 405B, Table 4, in Meta's layout: MFU (Meta's FLOP count, as assumed) ==")
    for x in rows:
        r = x["run"]
        if r.case.startswith("Llama 3"):
            mfu_pub = r.assumed["published_tflops_per_gpu"] * 1e12 / hardware.get(r.hw).peak("bf16")
            print(f"  {r.case:<54} published {mfu_pub:.1%}  calibrated {mfu_pub / x['calibrated']:.1%} "
                  f"({1 / x['calibrated'] - 1:+.1%})  bound {mfu_pub / x['bound']:.1%}")

    if not args.quick:
        both = calibration.fit_expert_cost(calibration.fit(dense, free=("matmul_efficiency", "overlap_efficiency")))
        print(f"\n== fit freeing the overlap efficiency too: matmul {both.matmul_efficiency:.3f}, overlap "
              f"{both.overlap_efficiency:.3f}, rms log error {both.rms_log_error:.3f} (vs {k.rms_log_error:.3f}) ==")
        summary(ratios(fitting, both), "calibrated", "fitting set")
        summary(ratios(held, both), "calibrated", "held-out")
    zero3(held, k)
    print(f"\n({time.perf_counter() - started:.0f} s)")


def zero3(held, k):
    """DeepSpeed's ZeRO-3 of Narayanan et al.'s Table 2, part by part: what the per-rank slices of its list
    collectives add (section 5)."""
    rows = [r for r in held if r.assumed.get("gather_api") == "list"]
    if not rows:
        return
    print("\n== DeepSpeed ZeRO-3 (Narayanan et al. Table 2): the step, part by part (calibrated) ==")
    print(f"  {'run':<28} {'published':>9} {'compute':>8} {'traffic':>8} {'slices':>7} {'their time':>10} "
          f"{'calib.':>6} {'flat':>6} {'needed':>7}")
    for r in rows:
        pub = published.published_step_s(r)
        cal = published.predict(r, calibrated=True, constants=k)
        flat = plan(**(published.plan_args(r) | {"gather_api": "flat"}), calibrated=True, constants=k)
        traffic = sum(cal.communication[kind]["exposed_s"] for kind in ("dp", "zero"))
        s = cal.communication["slices"]
        needed = (pub - flat.step_time_s) / (s["calls"] * sharding.OPS_PER_SLICE)
        print(f"  {r.case.removeprefix('Narayanan et al. Table 2, ZeRO-3 ')[:28]:<28} {pub:8.1f}s "
              f"{cal.compute_s:7.1f}s {traffic:7.1f}s {s['calls'] / 1e6:6.2f}M {s['exposed_s']:9.1f}s "
              f"{cal.step_time_s / pub:6.2f} {flat.step_time_s / pub:6.2f} {needed * 1e6:5.1f}us")
    floor = cal.roofs["floor_s"]
    print(f"  traffic: the gathers and reduce-scatters at NCCL's calibrated bandwidth and latency, none hidden (each "
          "parameter's gather\n  waited on a torch.cuda.synchronize(): DeepSpeed issue 1069, pull request 1188). "
          "slices: the ranks' slices the list\n  forms of all_gather and reduce_scatter handle one by one in a step "
          "(every parameter tensor's calls x the ranks;\n  roofkit.parallel.sharding.list_slices), "
          f"{sharding.OPS_PER_SLICE} operations each at the per-kernel floor ({floor * 1e6:.1f} us, "
          "fitted on our H200's layers, not on these runs).\n  flat: the same run with one flat buffer per call "
          "(all_gather_into_tensor, DeepSpeed from v0.5.5). needed: the time\n  per operation that would give "
          "the published step exactly. Before the slices were modelled these rows came out\n  0.37 to 0.88 of "
          "the published step: their steps barely change as the GPUs double at a fixed batch, because the\n  slices "
          "grow with the GPU count as the compute per GPU shrinks.")


if __name__ == "__main__":
    main()
