"""The question bank: one module per lesson, each registering its questions.

A question's key is a computation through roofkit over the question's
parameters (see :mod:`roofkit.quiz`); the lessons only name question ids.
Importing this package registers every lesson's questions.
"""

from __future__ import annotations

import importlib
import pkgutil

LESSON_MODULES = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("lesson_"))

for _name in LESSON_MODULES:
    importlib.import_module(f".{_name}", __name__)
