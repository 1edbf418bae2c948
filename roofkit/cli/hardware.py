"""roofkit hw list | hw show NAME: the accelerator catalog."""

from __future__ import annotations

from ._common import Parser, emit, human, table


def cmd_list(args) -> None:
    from ..catalogs import hardware  # deferred: catalogs.hardware pulls in numpy (through formulas)

    accs = hardware.catalog()
    data = {"accelerators": [{"name": a.key, "full_name": a.name, "aliases": list(a.aliases)} for a in accs]}
    lines = table([(a.key, f"{a.name}  (aliases: {', '.join(a.aliases) or '-'})") for a in accs])
    emit(args, data, lines)


def cmd_show(args) -> None:
    from ..catalogs import hardware  # deferred: catalogs.hardware pulls in numpy (through formulas)

    acc = hardware.get(args.name)
    data = acc.to_dict()
    data["name"] = acc.name
    rows = [("name", f"{acc.name} ({acc.key})"), ("bandwidth", human(acc.bandwidth, "B/s"))]
    if acc.achievable_bandwidth:
        rows.append(("bandwidth, achievable", human(acc.achievable_bandwidth, "B/s")))
    if acc.memory_bytes:
        rows.append(("memory (datasheet)", human(acc.memory_bytes, "B") + (f" {acc.memory_type}" if acc.memory_type else "")
                     + ("" if acc.usable_memory_bytes else "; memory plans use this (no total reported by the card is published)")))
    if acc.usable_memory_bytes:
        rows.append(("memory (as the card reports it)", f"{human(acc.usable_memory_bytes, 'B')} = "
                     f"{acc.usable_memory_bytes / 2**20:,.0f} MiB; memory plans use this"))
    if acc.l2_bytes:
        rows.append(("L2 / last-level cache", human(acc.l2_bytes, "B")))
    if acc.compute_units:
        rows.append((f"{acc.compute_unit_name}s", str(acc.compute_units)))
    per_unit = [(label, value) for label, value in (("registers", acc.register_file_bytes),
                                                    ("L1 + shared memory", acc.l1_shared_bytes)) if value]
    if per_unit:
        rows.append((f"per {acc.compute_unit_name}", ", ".join(f"{label} {v / 1024:g} KiB" for label, v in per_unit)))
    if acc.clocks:
        rows.append(("clocks", ", ".join(f"{name} {human(hz, 'Hz')}" for name, hz in acc.clocks.items())))
    for precision, peak in acc.peak_flops.items():
        achievable = acc.achievable_flops.get(precision)
        extra = f"   achievable {human(achievable, 'FLOP/s')} ({achievable / peak:.0%})" if achievable else ""
        rows.append((f"peak {precision} (dense)",
                     f"{human(peak, 'FLOP/s')}   ridge {acc.ridge(precision):.1f} FLOP/byte{extra}"))
    for precision, rate in acc.achievable_attention_flops.items():
        rows.append((f"fused attention {precision}, achievable", f"{human(rate, 'FLOP/s')} "
                     f"({rate / acc.peak(precision):.0%} of the datasheet peak)"))
    lines = table(rows) + ["", "sources:"]
    by_source: dict[str, list[str]] = {}
    for figure, source in acc.sources.items():
        if figure != "*":
            by_source.setdefault(source, []).append(figure)
    lines += [f"  {', '.join(figures)}: {source}" for source, figures in by_source.items()]
    lines += ["notes:"] * bool(acc.notes) + [f"  - {note}" for note in acc.notes]
    emit(args, data, lines)


def register(sub, common) -> None:
    hw = sub.add_parser("hw", help="the accelerator catalog", parents=[common])
    hw_sub = hw.add_subparsers(dest="hw_command", metavar="{list,show}", parser_class=Parser)
    hw_sub.required = True
    hw_sub.add_parser("list", help="every accelerator and its aliases", parents=[common]).set_defaults(func=cmd_list)
    show = hw_sub.add_parser("show", help="one accelerator's figures, ridge points and sources", parents=[common])
    show.add_argument("name", help="accelerator name or alias, e.g. h100, 'H100 SXM5', mi300x")
    show.set_defaults(func=cmd_show)
