"""roofkit measure: this machine's roofline, real kernels on it, and how well the roofline predicted them."""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidValue
from ._common import emit


def cmd_measure(args) -> None:
    from .. import measure  # deferred: measure pulls in numpy (through formulas)

    if args.comms:  # processes exchanging messages instead of the roofline
        from ..measure.comms import cli_run  # deferred: measure.comms pulls in numpy (through formulas)

        return emit(args, *cli_run(args.quick, args.comms if isinstance(args.comms, str) else None, args.save))
    if args.save and not Path(args.save).resolve().parent.is_dir():  # fail before a minute of measuring
        raise InvalidValue(f"--save: the folder of {args.save!r} does not exist.")
    profile = measure.run(quick=args.quick, threads=args.threads, progress=not getattr(args, "json", False))
    lines = [profile.report()]
    if args.save:
        profile.save(args.save)
        lines.append(f"saved to {args.save}; in Python: roofkit.measure.load_profile({args.save!r})")
    emit(args, profile.to_dict(), lines)


def register(sub, common) -> None:
    measure = sub.add_parser("measure", help="measure this machine's roofline, kernels and prediction errors",
                             parents=[common])
    measure.add_argument("--quick", action="store_true", help="fewer sizes and runs: seconds instead of a minute")
    measure.add_argument("--save", metavar="PATH", help="write the profile as JSON (load it with measure.load_profile)")
    measure.add_argument("--threads", type=int, help="CPU threads to use (default: all available)")
    measure.add_argument("--comms", nargs="?", const=True, metavar="PLOT.png",
                         help="measure point-to-point and all-reduce between processes, fit alpha and beta; "
                              "save the plot to PLOT.png if given")
    measure.set_defaults(func=cmd_measure)
