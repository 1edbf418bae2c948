"""roofkit comm COLLECTIVE: the time, algorithm bandwidth and bus bandwidth of a collective, as NCCL runs it."""

from __future__ import annotations

import argparse
import re

from ..errors import InvalidValue, RoofkitError
from ..units import size
from ._common import count, emit, human, table

_WITH_UNIT = re.compile(r"^\s*([0-9.]+(?:e[-+]?\d+)?)\s*([kmgtp])(i?)b\s*$", re.I)


def _bytes(text):
    """An argparse type: '1e9', '256M' (x1e6), '1GB' (x1e9) or '1GiB' (x2**30) -> bytes."""
    match = _WITH_UNIT.match(text)
    try:
        if match:
            number, prefix, binary = match.groups()
            base = 1024 if binary else 1000
            return size(float(number) * base ** ("kmgtp".index(prefix.lower()) + 1), "bytes")
        return size(text, "bytes")
    except (RoofkitError, ValueError):
        raise argparse.ArgumentTypeError(f"bytes must be a size such as 4096, 1e9, 256M, 1GB or 1GiB; "
                                         f"got {text!r}.") from None


def _link_row(link, used) -> tuple[str, str]:
    return ("link", f"{link.name}: quoted {link.quoted:g} {link.quoted_unit} {link.scope}, {link.direction} "
                    f"-> {human(used, 'B/s')} per direction per GPU")


def _mode(calibrated: bool, custom: bool = False) -> tuple[str, str]:
    if custom:  # an engine's one-shot or two-shot kernel: not NCCL's
        return ("mode", "calibrated: a round as measured on vLLM's kernels, the bandwidth nccl-tests measures on "
                        "the link" if calibrated else "bound: line rate, the link's least latency per round "
                                                      "(no real run is faster)")
    return ("mode", "calibrated: NCCL's latencies, the bandwidth nccl-tests measures on the link" if calibrated
            else "bound: line rate, NCCL's per-step latency only (no real run is faster)")


def _hierarchical(args) -> None:
    from ..perf import comms  # deferred: loaded only when this command runs
    from ..catalogs import links  # deferred: loaded only when this command runs

    intra, inter = links.get(args.link), links.get(args.inter)
    node = intra.gpus
    if node is None:
        domains = ", ".join(x.key for x in links.catalog() if x.gpus and x.role == "scale-up")
        raise InvalidValue(f"--link {intra.key} has no fixed number of GPUs per node; with --inter choose a "
                           f"domain: {domains}.")
    if args.gpus % node:
        raise InvalidValue(f"--gpus {args.gpus} is not a whole number of {intra.key} nodes of {node} GPUs.")
    if args.nodes is not None and args.nodes * node != args.gpus:
        raise InvalidValue(f"--nodes {args.nodes} x {node} GPUs per {intra.key} node is not --gpus {args.gpus}.")
    algorithm = args.algorithm if args.algorithm in ("auto", "ring", "tree") else "auto"
    result = comms.hierarchical(args.collective, args.bytes, node, args.gpus // node, intra, inter,
                                algorithm=algorithm, calibrated=args.calibrated)
    data = result.to_dict() | {
        "link": intra.to_dict() | {"bandwidth_used_bytes_per_s": intra.collective_bandwidth},
        "inter": inter.to_dict() | {"bandwidth_used_bytes_per_s": inter.collective_bandwidth},
        "protocol": None}
    rows = [("collective", f"{result.collective}, {args.gpus} GPUs = {result.nodes} nodes x {node}, hierarchical, "
                           f"{result.algorithm} between the nodes"),
            _mode(args.calibrated), _link_row(intra, intra.collective_bandwidth),
            ("between nodes", _link_row(inter, inter.collective_bandwidth)[1])]
    rows += [(f"  {level}: {p.collective}", f"{human(p.time_s, 's')} over {p.gpus} GPUs ({p.algorithm}, "
                                            f"{p.protocol or '-'})") for level, p in result.phases]
    rows += [("time", human(result.time_s, "s")), ("algbw", human(result.algbw, "B/s")),
             ("busbw", human(result.busbw, "B/s"))]
    emit(args, data, table(rows))


def cmd_comm(args) -> None:
    from ..perf import comms  # deferred: loaded only when this command runs
    from ..catalogs import links  # deferred: loaded only when this command runs

    if args.nodes is not None and args.inter is None:
        link = links.get(args.link)
        if link.gpus is None:
            raise InvalidValue(f"--nodes needs --link to be a node's domain (its GPUs per node) and --inter LINK "
                               f"between the nodes; {link.key} is not a domain.")
        args.inter = _network(link)
    if args.inter:
        return _hierarchical(args)
    result = comms.collective(args.collective, args.bytes, args.gpus, args.link, args.algorithm,
                              calibrated=args.calibrated)
    rows = [("collective", f"{result.collective}, {human(result.size_bytes, 'B')}, {result.gpus} GPUs: "
                           f"{result.algorithm}, protocol {result.protocol or '-'}"),
            _mode(args.calibrated, result.algorithm in comms.CUSTOM),
            _link_row(result.link, result.bandwidth_bytes_per_s),
            ("time", f"{human(result.time_s, 's')} = latency {human(result.latency_s, 's')} "
                     f"+ transfer {human(result.transfer_s, 's')}"),
            ("algbw", f"{human(result.algbw, 'B/s')}  (bytes / time)"),
            ("busbw", f"{human(result.busbw, 'B/s')}  (nccl-tests: comparable with the link's per-direction figure)"),
            ("latency-bound", f"{'yes' if result.latency_bound else 'no'}; below "
                              f"{human(result.latency_bound_below_bytes, 'B')} it would be")]
    emit(args, result.to_dict(), table(rows))


def _network(link) -> str:
    """The first scale-out network of an accelerator that has ``link`` (for --nodes without --inter)."""
    from ..catalogs import hardware, links  # deferred: catalogs.hardware pulls in numpy (through formulas)

    for acc in hardware.catalog():
        have = [x.key for x in links.for_accelerator(acc)]
        if link.key in have:
            net = links.scale_out(acc)
            if net is not None:
                return net.key
    raise InvalidValue(f"no network between {link.key} nodes in the catalog: pass --inter LINK.")


def register(sub, common) -> None:
    comm = sub.add_parser("comm", help="time, algbw and busbw of a collective on a link, as NCCL runs it",
                          parents=[common])
    comm.add_argument("collective", help="all-reduce, all-gather, reduce-scatter, all-to-all, broadcast, reduce, p2p")
    comm.add_argument("--bytes", required=True, type=_bytes,
                      help="buffer size as nccl-tests counts it: 1e9, 256M, 1GB, 1GiB")
    comm.add_argument("--gpus", required=True, type=count("gpus"), help="GPUs taking part")
    comm.add_argument("--link", required=True, help="a link from the catalog: hgx-h100, nvlink4, ib-ndr, pcie5, ...")
    comm.add_argument("--nodes", type=count("nodes"),
                      help="the GPUs span this many nodes of --link (a domain); --inter sets the network "
                           "(default: the accelerator's first)")
    comm.add_argument("--algorithm", choices=("auto", "ring", "tree", "nvls", "one-shot", "two-shot", "fastest"),
                      default="auto",
                      help="NCCL's algorithm: auto (default: the fastest, as NCCL's tuner picks), ring, tree, "
                           "nvls (NVLink SHARP); or a serving engine's own all-reduce kernel over NVLink: one-shot "
                           "(one round, each GPU reads every peer's buffer), two-shot (reduce-scatter and "
                           "all-gather, two rounds); fastest: any of them")
    comm.add_argument("--calibrated", action="store_true",
                      help="NCCL's latencies and measured bandwidth (an estimate) instead of the bound")
    comm.add_argument("--inter", metavar="LINK", help="hierarchical: --link inside each node, this link between nodes")
    comm.set_defaults(func=cmd_comm)
