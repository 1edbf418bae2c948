"""The ``roofkit`` command: a thin layer over the Python API, one module per command group.

Every command prints a readable answer, or one JSON object with ``--json``
(accepted anywhere on the line). A user error prints one line naming the bad
value and the valid choices and exits with status 2; there is never a
traceback for a mistake in the input.

    roofkit hw list
    roofkit hw show h100 --json
    roofkit cost gemm --m 4096 --n 4096 --k 4096 --dtype bf16 --hw h100
    roofkit cost elementwise --n 1e8 --flops-per-element 8 --reads 1 --writes 1 --dtype fp16 --hw h100
    roofkit layer --model llama-3-8b --batch 1 --seq 1 --kv-seq 8192 --hw h200 --dtype bf16 --calibrated
    roofkit train --params 70B --tokens 15T --hw h100 --dtype bf16 --mfu 0.4 --gpus 8192 --usd-per-gpu-hour 2
    roofkit mfu --params 70B --tokens-per-s 3000 --gpus 1 --hw h100 --dtype bf16
    roofkit comm all-reduce --bytes 1GB --gpus 8 --link hgx-h100
    roofkit parallel --model llama-3-70b --hw h100 --gpus 1024 --tp 8 --pp 4 --zero 1 --global-batch-tokens 4M --seq 8192
    roofkit serve --model llama-3-70b --hw h100 --gpus 8 --context 8192 --batch 64 --weights-dtype int4
    roofkit format bfloat16
    roofkit measure --quick --save my-machine.json
    roofkit measure --comms comms.png --quick
    roofkit quiz check l03.ridge-bf16 "295 FLOP/byte"     (exit 0 right, 1 wrong, 2 unreadable)
    roofkit quiz hint l03.ridge-bf16 2
    roofkit assign 00 --name hw1 --roster roster.csv --secret-file course-secret.txt --out release/hw1
    roofkit grade submissions/hw1 --assignment release/hw1 --secret-file course-secret.txt --out grades/hw1

A command group is a module here with a ``register(subparsers, common)``
function; add a module and list it in ``_GROUPS``.
"""

from __future__ import annotations

import importlib
import sys

from .. import __version__
from ..errors import RoofkitError
from ._common import EXIT_USAGE, Parser, human, json_flag, one_line

__all__ = ["main", "build_parser", "human", "EXIT_USAGE"]

# the order in which commands appear in `roofkit --help`
_GROUPS = ("hardware", "cost", "layer", "serve", "training", "comm", "parallel", "formats", "measure", "quiz", "course", "classroom")


def build_parser() -> Parser:
    common = json_flag()
    parser = Parser(prog="roofkit", description="Performance modeling for GPUs: FLOPs, bytes, rooflines, "
                    "precision, MFU and training cost.", parents=[common])

    parser.add_argument("--version", action="version", version=f"roofkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for group in _GROUPS:
        importlib.import_module(f".{group}", __name__).register(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version, or a usage error already printed in one line
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    try:
        args.func(args)
    except RoofkitError as error:
        print(f"roofkit: error: {one_line(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as stop:  # a command's own failure status (build --check, a wrong quiz answer)
        return stop.code if isinstance(stop.code, int) else 1
    except BrokenPipeError:  # `roofkit hw list | head`
        return 0
    except KeyboardInterrupt:
        print("roofkit: interrupted", file=sys.stderr)
        return 130
    return 0
