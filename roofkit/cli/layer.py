"""roofkit layer: one decoder layer of a named model, op by op, predicted on an accelerator."""

from __future__ import annotations

from ..errors import InvalidValue
from ._common import count, emit, human


def _phase(t) -> str:
    if t.kv_seq is None:
        return f"prefill of {t.seq} tokens (causal), batch {t.batch}"
    if t.seq == 1:
        return f"decode step, batch {t.batch}, {t.kv_seq} cached tokens"
    return f"{t.seq} new tokens against {t.kv_seq} cached, batch {t.batch}"


def cmd_layer(args) -> None:
    from ..catalogs import hardware, models  # deferred: catalogs.hardware pulls in numpy (through formulas)
    from ..perf import layertime  # deferred: perf.layertime pulls in numpy (through formulas)

    if args.profile and not args.calibrated:
        raise InvalidValue("--profile PATH gives the calibration: use it with --calibrated.")
    calibration = layertime.calibrate(args.profile, hw=args.hw) if args.profile else None
    t = layertime.predict(args.model, args.batch, args.seq, args.kv_seq, args.hw, args.dtype,
                          calibrated=args.calibrated, calibration=calibration)
    model, acc = models.get(args.model), hardware.get(args.hw)
    data = t.to_dict() | {"model_name": model.name, "accelerator_name": acc.name}
    if calibration is not None:
        data["calibration"] = calibration.to_dict()

    lines = [f"{model.name}, one decoder layer: {_phase(t)}, on {acc.name}, {t.dtype}"]
    if t.calibrated:
        attention = f" (attention {human(t.attention_flops, 'FLOP/s')})" if t.attention_flops else ""
        lines.append(f"calibrated: achievable roofs {human(t.peak_flops, 'FLOP/s')}{attention} and "
                     f"{human(t.bandwidth, 'B/s')}, a floor of {t.floor_s * 1e6:.3g} µs per kernel, the {t.kernels} "
                     "kernels eager PyTorch runs")
    else:
        lines.append(f"roofline sum, one kernel per op, datasheet roofs {human(t.peak_flops, 'FLOP/s')} and "
                     f"{human(t.bandwidth, 'B/s')}")
    rows = [(op.name, human(op.flops, "FLOP"), human(op.bytes, "B"), human(op.time_s, "s"),
             op.bound + (f" ({op.kernels} kernels)" if op.kernels > 1 else "")) for op in t.ops]
    rows.append(("layer", human(sum(op.flops for op in t.ops), "FLOP"), human(sum(op.bytes for op in t.ops), "B"),
                 human(t.time_s, "s"), ""))
    header = ("op", "FLOPs", "bytes", "time", "bound")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(5)]
    fmt = lambda r: "  ".join(c.ljust(w) if i in (0, 4) else c.rjust(w)  # noqa: E731
                              for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    lines += ["", fmt(header), *map(fmt, rows[:-1]), "-" * (sum(widths) + 8), fmt(rows[-1])]
    if t.fused_s is not None:
        lines.append(f"one kernel per op (fused) at the same roofs and floor: {human(t.fused_s, 's')}; "
                     f"fusing would save {human(t.time_s - t.fused_s, 's')}")
    lines += [f"note: {n}" for n in t.notes]
    emit(args, data, lines)


def register(sub, common) -> None:
    layer = sub.add_parser("layer", help="predict one decoder layer of a named model, op by op", parents=[common])
    layer.add_argument("--model", required=True, help="model name, e.g. llama-3-8b (see roofkit.models.names())")
    layer.add_argument("--batch", required=True, type=count("batch"), help="sequences in the batch")
    layer.add_argument("--seq", required=True, type=count("seq"),
                       help="new tokens per sequence: the prompt for a prefill, 1 for a decode step")
    layer.add_argument("--kv-seq", type=count("kv-seq"), dest="kv_seq",
                       help="tokens in the KV cache (decode); without it, a causal prefill of --seq tokens")
    layer.add_argument("--hw", required=True, help="accelerator name, e.g. h200")
    layer.add_argument("--dtype", default="bf16", help="precision of weights and activations (default bf16)")
    layer.add_argument("--calibrated", action="store_true",
                       help="achievable roofs, the per-kernel floor and the kernels eager PyTorch runs "
                            "(fitted on the H200 dataset shipped with roofkit, or on --profile)")
    layer.add_argument("--profile", metavar="PATH",
                       help="with --calibrated: a layers dataset measured by `roofkit measure --save PATH` on a GPU "
                            "(or a layers.json, or its folder)")
    layer.set_defaults(func=cmd_layer)
