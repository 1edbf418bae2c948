"""What a stored notebook output is, and when two runs of a cell count as the same.

A solution notebook keeps its outputs in git, so they must be the same bytes
each time an unchanged lesson is built, and a change that moves any of them,
a figure's pixels included, must be seen. Three rules make that so:

* **static outputs** (:func:`static`): a widget is stored as its fallback (the
  text and the starting picture every explorer and question box carries), never
  as a view of a model that exists only in the kernel that ran it. Its random
  model id, and the widget state a notebook client saves beside it, would change
  on every run, and JupyterLab could not show it anyway once the kernel is gone
  ("Error displaying widget: model not found"). The kernel's version
  (``language_info.version``) is left out too: it is the builder's, not the lesson's.
* **what is compared** (:func:`comparable`): what nbval compares (streams joined
  by name; each output's data by MIME type; no metadata, execution counts or
  widget views), after the course's sanitizing patterns (``nbval_sanitize.cfg``:
  memory addresses, figures measured on this machine written ``~N``), with
  each figure replaced by the SHA-256 of its bytes, so two figures are the same
  when their bytes are (matplotlib's Agg writes the same bytes for the same pixels).
* **measured cells**, whose outputs measure the machine that runs them (source
  starting ``# NBVAL_IGNORE_OUTPUT``, or tagged ``nbval-ignore-output``: nbval's
  two spellings), are never compared.

    >>> out = {"output_type": "stream", "name": "stdout", "text": "0x7f3a at ~12.5 GB/s\\n"}
    >>> comparable([out], [(re.compile(r"0x[0-9a-f]+"), "0xADDRESS"), (re.compile(r"~[0-9.]+"), "~N")])
    [('stream', 'stdout', '0xADDRESS at ~N GB/s\\n')]
"""

from __future__ import annotations

import configparser
import copy
import hashlib
import json
import re
from pathlib import Path

__all__ = ["WIDGET_MIME", "IGNORED", "static", "comparable", "read_sanitize", "measured", "differences"]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
IGNORED, IGNORED_TAG = "# NBVAL_IGNORE_OUTPUT", "nbval-ignore-output"
_IMAGES = ("image/png", "image/jpeg")


def static(nb):
    """A copy of ``nb`` whose widget outputs are their fallbacks (text, picture), without widget state or the
    kernel's version: what a page without a live kernel can show, the same bytes on every run."""
    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)
    nb.metadata.get("language_info", {}).pop("version", None)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            output.get("data", {}).pop(WIDGET_MIME, None)
    return nb


def read_sanitize(path: str | Path) -> list[tuple[re.Pattern, str]]:
    """The (regex, replacement) pairs of an nbval sanitize file (sections with ``regex`` and ``replace``);
    none when the file does not exist."""
    path = Path(path)
    if not path.exists():
        return []
    parser = configparser.ConfigParser()
    parser.read(path, encoding="utf-8")
    return [(re.compile(parser[s]["regex"]), parser[s]["replace"]) for s in parser.sections()]


def _clean(text: str, patterns) -> str:
    for regex, replacement in patterns:
        text = regex.sub(replacement, text)
    return text


def _value(mime: str, value, patterns) -> str:
    if isinstance(value, dict):  # a JSON output: its keys in one order
        return _clean(json.dumps(value, sort_keys=True), patterns)
    text = value if isinstance(value, str) else "".join(value) if isinstance(value, list) else repr(value)
    if mime in _IMAGES:
        return "sha256:" + hashlib.sha256(text.encode("ascii", "replace")).hexdigest()
    return _clean(text, patterns)


def comparable(outputs: list, patterns=()) -> list[tuple]:
    """A cell's outputs as nbval compares them, figures by their hash: streams joined per name, then each
    other output's data per MIME type (widget views left out), every text sanitized by ``patterns``."""
    streams: dict[str, str] = {}
    rest = []
    for output in outputs:
        if output.get("output_type") == "stream":
            text = output.get("text", "")
            streams[output["name"]] = streams.get(output["name"], "") + ("".join(text) if isinstance(text, list)
                                                                         else text)
            continue
        if output.get("output_type") == "error":
            rest.append(("error", output.get("ename", ""), _clean(output.get("evalue", ""), patterns)))
            continue
        data = output.get("data", {})
        rest += [(mime, _value(mime, data[mime], patterns)) for mime in sorted(data) if mime != WIDGET_MIME]
    return [("stream", name, _clean(text, patterns)) for name, text in streams.items()] + rest


def measured(cell) -> bool:
    """True for a cell whose outputs measure the machine that runs it (``# NBVAL_IGNORE_OUTPUT`` or its tag)."""
    source = cell.get("source", "")
    return (("".join(source) if isinstance(source, list) else source).lstrip().startswith(IGNORED)
            or IGNORED_TAG in cell.get("metadata", {}).get("tags", []))


def differences(stored, fresh, patterns=()) -> list[str]:
    """Where ``fresh`` (a notebook just run) shows other outputs than ``stored``, cell by cell: one line each,
    naming the cell and what changed ('cell 12 (03-041): image/png'); empty when none did."""
    found = []
    stored_cells = {c.get("id"): c for c in stored.cells}
    for index, cell in enumerate(fresh.cells):
        if cell.cell_type != "code" or measured(cell):
            continue
        old = stored_cells.get(cell.get("id"))
        before = comparable(old.get("outputs", []), patterns) if old is not None else None
        after = comparable(cell.get("outputs", []), patterns)
        if before != after:
            kinds = sorted({str(x[0]) if x[0] != "stream" else f"stream {x[1]}" for x in
                            set(before or []) ^ set(after)}) or ["the order of its outputs"]
            found.append(f"cell {index} ({cell.get('id')}): {', '.join(kinds)}")
    return found
