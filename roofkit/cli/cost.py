"""roofkit cost gemm | cost elementwise: FLOPs, bytes and intensity of a kernel, placed on a roofline."""

from __future__ import annotations

import argparse

from ._common import Parser, emit, human, number, size, table


def _output(args, cost) -> None:
    data = {"flops": float(cost.flops), "bytes": float(cost.bytes), "intensity": float(cost.intensity)}
    rows = [("FLOPs", human(data["flops"], "FLOP")), ("bytes moved", human(data["bytes"], "B")),
            ("intensity", f"{data['intensity']:.4g} FLOP/byte")]
    if args.hw:
        from ..perf.roofline import analyze  # deferred: perf.roofline imports numpy

        placed = analyze(cost, args.hw, args.dtype)
        data.update(
            accelerator=placed.accelerator,
            precision=placed.precision,
            ridge=placed.ridge,
            bound=placed.bound,
            attainable_flops_per_s=placed.attainable_flops_per_s,
            time_s=placed.time_s,
            time_upper_s=placed.time_upper_s,
        )
        rows += [
            ("on", f"{placed.accelerator}, {placed.precision}"),
            ("ridge point", f"{placed.ridge:.4g} FLOP/byte"),
            ("bound", f"{placed.bound}-bound"),
            ("attainable", human(placed.attainable_flops_per_s, "FLOP/s")),
            ("time (roofline)", f"{human(placed.time_s, 's')}  (no overlap: {human(placed.time_upper_s, 's')})"),
        ]
    emit(args, data, table(rows))


def cmd_gemm(args) -> None:
    from .. import formulas  # deferred: formulas imports numpy

    _output(args, formulas.gemm(args.m, args.n, args.k, args.dtype))


def cmd_elementwise(args) -> None:
    from .. import formulas  # deferred: formulas imports numpy

    _output(args, formulas.elementwise(args.n, args.flops_per_element, args.reads, args.writes, args.dtype))


def register(sub, common) -> None:
    cost = sub.add_parser("cost", help="FLOPs, bytes and intensity of a kernel", parents=[common])
    cost_sub = cost.add_subparsers(dest="cost_command", metavar="{gemm,elementwise}", parser_class=Parser)
    cost_sub.required = True
    placement = argparse.ArgumentParser(add_help=False)
    placement.add_argument("--dtype", default="bf16", help="precision: fp64 fp32 tf32 fp16 bf16 fp8 int8 fp4 (default bf16)")
    placement.add_argument("--hw", help="place the kernel on this accelerator's roofline")
    gemm = cost_sub.add_parser("gemm", help="C[m,n] = A[m,k] @ B[k,n]", parents=[common, placement])
    for dim in "mnk":
        gemm.add_argument(f"--{dim}", required=True, type=size(dim), help=f"size {dim.upper()} (4096, 4e9, 70B ...)")
    gemm.set_defaults(func=cmd_gemm)
    elem = cost_sub.add_parser("elementwise", help="an elementwise op over n elements", parents=[common, placement])
    elem.add_argument("--n", required=True, type=size("n"), help="number of elements")
    elem.add_argument("--flops-per-element", type=number("flops-per-element"), default=1.0)
    elem.add_argument("--reads", type=number("reads"), default=1.0, help="tensors read (default 1)")
    elem.add_argument("--writes", type=number("writes"), default=1.0, help="tensors written (default 1)")
    elem.set_defaults(func=cmd_elementwise)
