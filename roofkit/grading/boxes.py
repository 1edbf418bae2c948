"""The answers a student typed into a release's answer boxes, as the notebook they handed in saved them.

An answer box (:func:`roofkit.course.quiz.ask`) is a widget: what it holds lives in the kernel and in
JupyterLab, not in a cell. JupyterLab writes every widget's state into the notebook's metadata when it saves
(``saveState``, on in the course's ``jupyterlab-settings/overrides.json``), so the box's answer travels with
the file. The grader reads it here and judges that text itself, exactly as if it had been typed into the answer
cell; nothing else of the saved state (the box's verdict, its colour) is believed.

Each box carries the classes ``roofkit-answer``, ``roofkit-q-<question id>`` and ``roofkit-p-<digest of the
numbers it was asked with>`` (:data:`~roofkit.course.quiz.BOX_CLASS`). A notebook saved by an editor that keeps
no widget state still shows that a box was there (a widget view in the ``ask`` cell's outputs); the grader then
says the box's answer was not saved, instead of a bare "not answered".

Everything here is the student's file: sizes are bounded and odd shapes are skipped, never trusted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ..course import quiz

__all__ = ["Boxes", "read", "STATE_MIME", "VIEW_MIME"]

STATE_MIME = "application/vnd.jupyter.widget-state+json"
VIEW_MIME = "application/vnd.jupyter.widget-view+json"
MAX_MODELS = 20_000  # widget models looked at; a real lesson saves a few hundred
MAX_ANSWER = 2_000  # characters kept of one box's answer (the judge refuses longer ones as too long anyway)
_ASK = re.compile(r"""\bask\(\s*(['"])([^'"\n]{1,200})\1""")


@dataclass
class Boxes:
    answers: dict[str, str] = field(default_factory=dict)  # question id -> the box's answer as typed
    params: dict[str, str] = field(default_factory=dict)  # question id -> digest of the numbers the box asked with
    unsaved: set[str] = field(default_factory=set)  # questions whose box shows in the outputs, with no saved state
    notes: list[str] = field(default_factory=list)


def _classes(state: dict) -> tuple[str | None, str | None]:
    """(question id, numbers digest) of an answer box's state, or (None, None) for any other widget."""
    classes = state.get("_dom_classes")
    if not isinstance(classes, list) or quiz.BOX_CLASS not in classes:
        return None, None
    qid = next((c[len(quiz.BOX_ID_PREFIX):] for c in classes
                if isinstance(c, str) and c.startswith(quiz.BOX_ID_PREFIX)), None)
    digest = next((c[len(quiz.BOX_PARAMS_PREFIX):] for c in classes
                   if isinstance(c, str) and c.startswith(quiz.BOX_PARAMS_PREFIX)), None)
    return qid, digest


def _value(model: str, state: dict) -> str | None:
    """What a Text or Dropdown box holds, as text (None: another kind of widget, or a value of the wrong type)."""
    if model == "TextModel":
        value = state.get("value", "")
        return value[:MAX_ANSWER + 1] if isinstance(value, str) else None
    if model == "DropdownModel":
        index, labels = state.get("index"), state.get("_options_labels")
        if index is None:
            return ""
        if isinstance(index, int) and not isinstance(index, bool) and isinstance(labels, list) \
                and 0 <= index < len(labels) and isinstance(labels[index], str):
            return labels[index][:MAX_ANSWER + 1]
    return None


def _saved_state(parsed: dict) -> dict:
    metadata = parsed.get("metadata")
    widgets = metadata.get("widgets") if isinstance(metadata, dict) else None
    saved = widgets.get(STATE_MIME) if isinstance(widgets, dict) else None
    state = saved.get("state") if isinstance(saved, dict) else None
    return state if isinstance(state, dict) else {}


def _asked_with_views(parsed: dict) -> dict[str, set[str]]:
    """question id -> the widget models its ``ask`` cell's saved outputs show."""
    found: dict[str, set[str]] = {}
    for cell in parsed.get("cells") or []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(s for s in source if isinstance(s, str)) if isinstance(source, list) else source
        asked = [m[2] for m in _ASK.finditer(source)] if isinstance(source, str) else []
        views = set()
        for output in cell.get("outputs") or []:
            data = output.get("data") if isinstance(output, dict) else None
            view = data.get(VIEW_MIME) if isinstance(data, dict) else None
            if isinstance(view, dict) and isinstance(view.get("model_id"), str):
                views.add(view["model_id"])
        for qid in asked:
            found.setdefault(qid, set()).update(views)
    return found


def read(data: bytes | dict) -> Boxes:
    """The box answers saved in a notebook (its bytes, or the JSON already parsed); never raises on odd input."""
    boxes = Boxes()
    try:
        parsed = json.loads(data.decode("utf-8", errors="replace")) if isinstance(data, bytes) else data
    except (ValueError, RecursionError):
        return boxes
    if not isinstance(parsed, dict):
        return boxes
    state = _saved_state(parsed)
    several = set()
    for count, (model_id, model) in enumerate(state.items()):
        if count >= MAX_MODELS:
            boxes.notes.append(f"the notebook saves more than {MAX_MODELS} widgets: only the first were read")
            break
        if not isinstance(model, dict) or not isinstance(model.get("state"), dict):
            continue
        qid, digest = _classes(model["state"])
        value = _value(str(model.get("model_name")), model["state"]) if qid else None
        if value is None or not value.strip():
            continue
        if qid in boxes.answers and boxes.answers[qid] != value:
            several.add(qid)
        boxes.answers[qid] = value  # widgets are saved in the order they were made: the last is the newest
        if digest:
            boxes.params[qid] = digest
    boxes.notes += [f"{qid}: the notebook saved several answer boxes with different answers; the last one counts"
                    for qid in sorted(several)]
    for qid, views in _asked_with_views(parsed).items():
        if views and not views & set(state) and qid not in boxes.answers:
            boxes.unsaved.add(qid)
    return boxes
