"""roofkit format NAME: a number format's layout, range and epsilon."""

from __future__ import annotations

from ._common import emit, table


def cmd_format(args) -> None:
    from ..perf import precision  # deferred: perf.precision imports numpy

    fmt = precision.get(args.name)
    data = fmt.to_dict()
    rows = [(k, f"{v:.6g}" if isinstance(v, float) else str(v)) for k, v in data.items()]
    emit(args, data, table(rows))


def register(sub, common) -> None:
    fmt = sub.add_parser("format", help="a number format's layout, range and epsilon", parents=[common])
    fmt.add_argument("name", help="bfloat16, float16, float8_e4m3fn, e5m2, fp4, int8 ...")
    fmt.set_defaults(func=cmd_format)
