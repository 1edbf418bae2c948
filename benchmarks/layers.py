"""How well does roofkit predict a whole decoder layer on a real GPU? The per-case table.

    python benchmarks/layers.py [--profile PATH] [--hw NAME]

Not a pass/fail test: it prints figures. Target (issues 11 and 18): `roofkit layer
--calibrated` within 15% of the measured `layer_s` on every case of the
dataset, with attention at its own achievable rate, and it holds for cases the fit did not see (leave-one-out, and the
eager layers of compiled.json that the fit never used).

Default: the H200 dataset shipped with roofkit (one card, 2026-11-30,
PyTorch 2.11, CUDA events, L2 flushed). With --profile: a dataset measured by
`roofkit measure --save PATH` on your GPU.
"""

from __future__ import annotations

import argparse

from roofkit.perf import layertime
from roofkit.measure import layers

TARGET = 0.15


def us(seconds: float) -> str:
    return f"{seconds * 1e6:9.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", help="a layers dataset (default: the shipped H200 one)")
    parser.add_argument("--hw", help="the catalog accelerator of the dataset (default: from the dataset)")
    args = parser.parse_args()

    data = layers.load_layers(args.profile)
    cal = layertime.calibrate(data, args.hw)
    print(f"{data.device}, {data.date}, PyTorch {data.torch}: {len(data.cases)} layers ({data.source})")
    print(f"achievable roofs: {cal.peak('bf16') / 1e12:.1f} TFLOP/s bf16 matmul, "
          f"{cal.attention_peak('bf16') / 1e12:.1f} TFLOP/s bf16 fused attention, {cal.bandwidth / 1e12:.3f} TB/s; "
          f"fitted floor t0 = {cal.floor_s * 1e6:.2f} µs per kernel")
    print(f"  ({cal.source.split('; ')[-1]})")
    launch = data.launch
    if launch:
        print("launch figures: " + ", ".join(f"{k} {v * 1e6:.2f} µs" for k, v in launch.items()))

    print("\nper case (µs; ratio = predicted / measured)")
    header = (f"{'case':44s} {'measured':>9s} {'datasheet':>9s} {'ratio':>6s} {'achiev.':>9s} {'ratio':>6s} "
              f"{'calibr.':>9s} {'ratio':>6s}")
    print(header)
    print("-" * len(header))
    rows = layertime.compare(data, cal, args.hw)
    for r in rows:
        print(f"{r['label']:44s} {us(r['measured_s'])} {us(r['plain_s'])} {r['plain_ratio']:6.3f} "
              f"{us(r['achievable_roofline_s'])} {r['achievable_ratio']:6.3f} {us(r['calibrated_s'])} "
              f"{r['calibrated_ratio']:6.3f}")
    worst = max(abs(r["calibrated_ratio"] - 1) for r in rows)
    print(f"datasheet = plain roofline sum of the ideal kernels at datasheet roofs; achiev. = the same at the "
          f"achievable roofs;\ncalibr. = eager kernels, achievable roofs, floor. Worst calibrated error: {worst:.1%} "
          f"({'within' if worst < TARGET else 'OUTSIDE'} the {TARGET:.0%} target)")

    print("\nleave-one-out: the floor refitted without each case, then that case predicted (the attention rate stays: "
          "on the shipped H200 it is the 8 x 2048 prefill's attention op timed alone)")
    loo = layertime.leave_one_out(data, args.hw)
    for r in loo:
        print(f"{r['label']:44s} t0 {r['floor_s'] * 1e6:5.2f} µs   predicted {us(r['predicted_s'])}   "
              f"measured {us(r['measured_s'])}   ratio {r['ratio']:6.3f}")
    worst = max(abs(r["ratio"] - 1) for r in loo)
    floors = [r["floor_s"] for r in loo]
    print(f"worst leave-one-out error {worst:.1%}; t0 between {min(floors) * 1e6:.2f} and {max(floors) * 1e6:.2f} µs")

    if args.profile is None:
        print("\ncases the fit never saw: compiled.json's eager layers (Llama 3 8B as one function)")
        for case in layers.shipped("compiled.json")["cases"]:
            kv_seq = None if case["seq"] > 1 else case["kv_seq"]
            t = layertime.predict(case["model"], case["batch"], case["seq"], kv_seq, "h200", calibrated=True,
                                  calibration=cal)
            print(f"{case['model']} batch {case['batch']:>3} seq {case['seq']:>4} kv_seq {case['kv_seq']:>4}:  "
                  f"eager {us(case['eager_s'])}  predicted {us(t.time_s)}  ratio {t.time_s / case['eager_s']:6.3f}"
                  f"   | one kernel per op {us(t.fused_s)}, torch.compile measured {us(case['compiled_default_s'])}")

    check = layertime.gemm_bandwidth_check(data, args.hw)
    print("\ndecode GEMMs (batch 1), timed alone: "
          f"{check['measured_fraction']:.0%} of the copy bandwidth measured; the floor alone predicts "
          f"{check['floor_predicted_fraction']:.0%}; an op timed alone costs {check['alone_extra_s'] * 1e6:.1f} µs "
          "more than in the layer (median, decode)")
    print(f"a bandwidth of their own, fitted with the floor on the whole layers: {check['factor']:.2f} x copy, "
          f"t0 {check['floor_s'] * 1e6:.2f} µs, RMS error {check['rms_error']:.1%} (floor alone: "
          f"{check['floor_only_rms_error']:.1%}), worst {check['max_error']:.1%} ({check['floor_only_max_error']:.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
