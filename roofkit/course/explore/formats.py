"""The number-format explorer: type a value, see it stored in every format.

    format_explorer(value=0.1, formats=None)

shows a text box for the value and, under it, one row per format: the bit
pattern of the stored value (sign, exponent and mantissa in three colours),
the value the format actually holds, and the relative error

    |stored - value| / |value|

Every row is a real cast (:func:`roofkit.precision.decode`: numpy for
FP64/FP32/FP16, ml_dtypes for BF16, FP8 and FP4, bit arithmetic for TF32),
so what you see is what the hardware type stores: 0.1 in BF16 is
0.10009765625, 1e9 in FP8 E4M3 is NaN and in FP8 E5M2 is inf. The text box
takes numbers ("0.1", "1e9", "-6.5") and small expressions of them
("2**-7", "1/3"); anything else shows a message instead of the table.

It also prints the table for its starting value as text, so a rendered
notebook, a terminal or a test sees the same rows as the widget.
:func:`format_rows` gives the rows as data and :func:`format_table` the text,
without any widget:

    >>> print(format_table(1.0, ["fp16", "bf16"]))
    1 stored in each format
      format  sign  exponent  mantissa    stored value  relative error  note
      FP16    0     01111     0000000000  1             0
      BF16    0     01111111  0000000     1             0
"""

from __future__ import annotations

import ast
import html
import math
import operator

import ipywidgets as w

from ...perf import precision
from ...errors import InvalidValue, RoofkitError
from ...plots import style

__all__ = ["format_explorer", "format_rows", "format_table", "parse_value"]

# the names people use for the formats, in the table
_LABELS = {
    "float64": "FP64", "float32": "FP32", "tensorfloat32": "TF32", "float16": "FP16", "bfloat16": "BF16",
    "float8_e4m3fn": "FP8 E4M3", "float8_e5m2": "FP8 E5M2",
    "float8_e4m3fnuz": "FP8 E4M3 fnuz", "float8_e5m2fnuz": "FP8 E5M2 fnuz",
    "float4_e2m1fn": "FP4 E2M1", "int8": "INT8",
}
# the formats the explorer shows unless told otherwise: all of roofkit's but FP64
DEFAULT_FORMATS = tuple(name for name in precision.names() if name != "float64")
_COLOURS = {"sign": style.PALETTE["red"], "exponent": style.PALETTE["blue"], "mantissa": style.PALETTE["green"]}
_HEADER = ("format", "sign", "exponent", "mantissa", "stored value", "relative error", "note")

# --- reading a value -----------------------------------------------------------------------

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.Div: operator.truediv, ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos}
_WORDS = {"inf": math.inf, "infinity": math.inf, "nan": math.nan}


def _evaluate(node):
    """A number from a tiny arithmetic expression tree: numbers, + - * / ** and parentheses only."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name) and node.id.lower() in _WORDS:
        return _WORDS[node.id.lower()]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 4096:
            raise OverflowError  # 2**100000 would take a while as an integer
        return _OPERATORS[type(node.op)](left, right)
    raise ValueError


def parse_value(value) -> float:
    """``value`` as a float: a number, or text such as '0.1', '1e9', '-6.5', '2**-7', '1/3', 'inf'.

    Anything else raises InvalidValue naming what was typed.

        >>> parse_value("2**-7")
        0.0078125
    """
    if isinstance(value, str):
        text = value.strip().replace("^", "**").replace("−", "-")
        try:
            number = float(text)
        except ValueError:
            try:
                number = float(_evaluate(ast.parse(text, mode="eval").body))
            except (SyntaxError, ValueError, TypeError, ZeroDivisionError, OverflowError, RecursionError):
                raise InvalidValue(
                    f"cannot read {value!r} as a number; type one such as 0.1, 1e9, -6.5, 2**-7 or 1/3."
                ) from None
    else:
        if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
            raise InvalidValue(f"value must be a number such as 0.1 or a text such as '2**-7'; got {value!r}.")
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            raise InvalidValue(f"value must be a real number; got {value!r}.") from None
    return number


# --- the rows ------------------------------------------------------------------------------


def _note(x: float, d: dict, fmt: precision.Format) -> str:
    """What happened to x on its way into fmt, in a few words ('' when nothing special)."""
    if math.isnan(x):
        return "NaN stays NaN" if d["nan"] else f"no NaN in {_LABELS[fmt.name]}"
    if math.isinf(x):
        return "inf stays inf" if d["inf"] else ("inf becomes NaN" if d["nan"] else "saturated: no inf")
    if d["nan"]:
        return "overflow: NaN (no inf)"
    if d["inf"]:
        return "overflow: inf"
    if abs(x) > fmt.max and abs(d["value"]) == fmt.max:
        return "saturated at the largest magnitude"
    if d["zero"] and x != 0:
        return "rounds to 0" if fmt.kind == "int" else "underflow: 0"
    if d["subnormal"]:
        return "subnormal: fewer bits"
    return ""


def format_rows(value, formats=None) -> list[dict]:
    """One row per format for ``value``: the real cast, taken apart.

    Each row has ``format`` (ml_dtypes name), ``label`` ('BF16'), ``sign``,
    ``exponent`` and ``mantissa`` (strings of 0 and 1; INT8 has no exponent
    field and shows its 7 value bits as the mantissa), ``value`` (the stored
    value, a float, or None where the format cannot hold the input at all:
    NaN in INT8), ``relative_error`` |stored - value| / |value| (None where
    undefined) and a ``note``. ``formats`` defaults to every format but FP64.
    """
    x = parse_value(value)
    rows = []
    for fmt in [precision.get(f) for f in (DEFAULT_FORMATS if formats is None else formats)]:
        row = {"format": fmt.name, "label": _LABELS.get(fmt.name, fmt.name)}
        try:
            d = precision.decode(x, fmt)
        except InvalidValue:  # int8 has no NaN
            rows.append(row | {"sign": "", "exponent": "", "mantissa": "", "value": None,
                               "relative_error": None, "note": _note(x, {"nan": False, "inf": False}, fmt)})
            continue
        error = d["relative_error"]
        rows.append(row | {
            "sign": str(d["sign"]), "exponent": d["exponent_bits"], "mantissa": d["mantissa_bits"],
            "value": d["value"], "relative_error": None if math.isnan(error) else error,
            "note": _note(x, d, fmt),
        })
    return rows


def _number(v) -> str:
    if v is None:
        return "-"
    if math.isnan(v) or math.isinf(v):
        return str(v)
    return f"{v:.10g}"


def _error(e) -> str:
    if e is None:
        return "-"
    if e == 0:
        return "0"
    return "inf" if math.isinf(e) else f"{e:.2e}"


def _cells(row: dict) -> list[str]:
    return [row["label"], row["sign"] or "-", row["exponent"] or "-", row["mantissa"] or "-",
            _number(row["value"]), _error(row["relative_error"]), row["note"]]


def format_table(value, formats=None) -> str:
    """The rows of :func:`format_rows` as a plain-text table (deterministic: no widget, no timing)."""
    x = parse_value(value)
    rows = [_cells(r) for r in format_rows(x, formats)]
    widths = [max(len(c) for c in column) for column in zip(_HEADER, *rows)]
    line = lambda cells: "  " + "  ".join(c.ljust(n) for c, n in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([f"{_number(x)} stored in each format", line(_HEADER), *(line(r) for r in rows)])


def _html(value, formats) -> str:
    x = parse_value(value)
    bits = lambda text, part: f"<span style='color:{_COLOURS[part]}'>{text}</span>" if text else ""  # noqa: E731
    body = []
    for row in format_rows(x, formats):
        pattern = " ".join(p for p in (bits(row["sign"], "sign"), bits(row["exponent"], "exponent"),
                                       bits(row["mantissa"], "mantissa")) if p) or "-"
        cells = [f"<b>{html.escape(row['label'])}</b>", f"<code>{pattern}</code>",
                 html.escape(_number(row["value"])), html.escape(_error(row["relative_error"])),
                 html.escape(row["note"])]
        body.append("<tr>" + "".join(f"<td style='padding:1px 10px 1px 0'>{c}</td>" for c in cells) + "</tr>")
    legend = " ".join(bits(part, part) for part in ("sign", "exponent", "mantissa"))
    head = "".join(f"<th style='text-align:left;padding-right:10px'>{h}</th>"
                   for h in ("format", f"bits ({legend})", "stored value", "relative error", "note"))
    return (f"<div><b>{html.escape(_number(x))}</b> stored in each format</div>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")


# --- the widget ------------------------------------------------------------------------------


class FormatExplorer(w.VBox):
    """The explorer's box. Its plain-text form is one line, not the widget tree, so a
    notebook rendered without widgets shows the printed table and this line."""

    def __repr__(self):
        return "format explorer (widgets: run the notebook live to type other values)"


def format_explorer(value=0.1, formats=None):
    """A text box for a value and a table of that value in every format; prints the table as text.

    Returns the widget (an ipywidgets VBox): ``.text`` is the text box,
    ``.table`` the HTML table (CSS class ``roofkit-formats``), ``.message`` where
    a value that cannot be read is explained (the table then keeps the last
    value that could). Setting ``.text.value``, in the notebook or in code,
    updates the table. A starting value or a format name roofkit does not know
    raises InvalidValue / UnknownPrecision at once.
    """
    formats = None if formats is None else [precision.get(f).name for f in formats]
    x = parse_value(value)
    print(format_table(x, formats))

    text = w.Text(value=str(value), description="value", placeholder="0.1, 1e9, 2**-7 ...",
                  continuous_update=True)
    table = w.HTML(value=_html(x, formats))
    table.add_class("roofkit-formats")
    message = w.HTML(value="")

    def update(change):
        try:
            table.value = _html(change["new"], formats)
            message.value = ""
        except RoofkitError as error:
            message.value = f"<span style='color:{style.HTML['error']}'>{html.escape(str(error))}</span>"

    text.observe(update, names="value")
    explorer = FormatExplorer([text, message, table])
    explorer.text, explorer.table, explorer.message = text, table, message
    return explorer
