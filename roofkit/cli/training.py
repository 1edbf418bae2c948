"""roofkit train | roofkit mfu: training compute, GPU-hours, time and cost; utilization from a throughput."""

from __future__ import annotations

from ..errors import InvalidValue
from ._common import emit, number, size, table


def _params(args):
    """N from --params, or from --model (a catalog name or a model file; a mixture of experts: its active weights)."""
    from ..catalogs import models  # deferred: loaded only when this command runs

    if (args.params is None) == (args.model is None):
        raise InvalidValue("give either --params N or --model NAME|FILE (not both): the parameters of 6ND.")
    if args.params is not None:
        return args.params
    m = models.get(args.model)
    return m.active_params if m.moe else m.params


def cmd_train(args) -> None:
    from ..perf import training  # deferred: perf.training imports numpy

    est = training.estimate(_params(args), args.tokens, hw=args.hw, dtype=args.dtype, mfu=args.mfu,
                            gpus=args.gpus, usd_per_gpu_hour=args.usd_per_gpu_hour)
    data = est.to_dict()
    rows = [("training FLOPs (6ND)", f"{data['flops']:.3e}")]
    labels = [("gpu_hours", "GPU-hours", lambda v: f"{v:.3e}"),
              ("wall_clock_hours", "wall clock", lambda v: f"{v:,.0f} h ({data['wall_clock_days']:.1f} days)"),
              ("cost_usd", "cost", lambda v: f"${v:,.0f}")]
    rows += [(label, fmt(data[key])) for key, label, fmt in labels if data.get(key) is not None]
    if not args.hw:
        rows.append(("", "add --hw NAME (and --gpus, --usd-per-gpu-hour) for GPU-hours, time and cost"))
    emit(args, data, table(rows))


def cmd_mfu(args) -> None:
    from ..perf import training  # deferred: perf.training imports numpy

    report = training.mfu_report(args.params, args.tokens_per_s, args.gpus, args.hw, args.dtype)
    rows = [("MFU", f"{report['mfu']:.1%}"), ("plausible", "yes" if report["plausible"] else "no")]
    if report.get("warning"):
        rows.append(("warning", report["warning"]))
    emit(args, report, table(rows))


def register(sub, common) -> None:
    train = sub.add_parser("train", help="training compute (6ND), GPU-hours, time and cost", parents=[common])
    train.add_argument("--params", type=size("params"), help="parameters N, e.g. 70B (or --model)")
    train.add_argument("--model", help="a model whose parameters are N: a catalog name, a TOML file or a Hugging Face "
                                       "config.json (a mixture of experts counts its active parameters)")
    train.add_argument("--tokens", required=True, type=size("tokens"), help="training tokens D, e.g. 15T")
    train.add_argument("--hw", help="accelerator name, e.g. h100")
    train.add_argument("--dtype", default="bf16", help="training precision (default bf16)")
    train.add_argument("--mfu", type=number("mfu"), default=0.4, help="assumed MFU as a fraction (default 0.4)")
    train.add_argument("--gpus", type=size("gpus"), help="number of accelerators")
    train.add_argument("--usd-per-gpu-hour", type=number("usd-per-gpu-hour"), help="price per GPU-hour in USD")
    train.set_defaults(func=cmd_train)

    mfu = sub.add_parser("mfu", help="model FLOPs utilization from a training throughput", parents=[common])
    mfu.add_argument("--params", required=True, type=size("params"), help="parameters N, e.g. 70B")
    mfu.add_argument("--tokens-per-s", required=True, type=size("tokens-per-s"), help="tokens/s across all GPUs")
    mfu.add_argument("--gpus", required=True, type=size("gpus"))
    mfu.add_argument("--hw", required=True, help="accelerator name, e.g. h100")
    mfu.add_argument("--dtype", default="bf16", help="training precision (default bf16)")
    mfu.set_defaults(func=cmd_mfu)
