"""Show a sympy result as typeset math in a notebook, and as plain text elsewhere.

``print(expr)`` of a sympy result gives ``Piecewise((P, B*I >= P), (B*I, True))``;
``show.math(expr, "R")`` gives the formula, rendered by MathJax in JupyterLab and
on the static site::

    from roofkit import show
    show.math(sympy.simplify(formulas.gemm(n, n, n, b).intensity), "I")
    show.math({r"\\text{FLOPs}": cost.flops, r"\\text{bytes}": cost.bytes})   # several, aligned

The output is a ``text/latex`` + ``text/plain`` display (the same bytes on every
run, so nbval can compare it). Names are LaTeX: ``"I"``, ``r"T_\\text{math}"``,
``r"\\lim_{n \\to \\infty} I"``. Outside IPython the plain text is printed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["Math", "math", "latex"]


def latex(expr: Any) -> str:
    """LaTeX for a sympy expression, or for anything sympy can read (a number, an equation)."""
    import sympy  # deferred: sympy costs ~0.25 s at import

    if isinstance(expr, str):
        expr = sympy.sympify(expr)
    return sympy.latex(expr)


def _plain_name(name: str) -> str:
    """A LaTeX name as plain text: ``T_\\text{math}`` -> ``T_math``."""
    text = re.sub(r"\\(?:text|mathrm|operatorname|mathit)\{([^{}]*)\}", r"\1", name)
    words = {"to": "->", "infty": "oo", "cdot": "*", "times": "*", "top": "T", "star": "*", "big": "", "Big": "",
             "left": "", "right": "", "quad": " ", "qquad": " "}
    text = re.sub(r"\\([A-Za-z]+)", lambda m: words.get(m[1], m[1]), text)
    text = re.sub(r"\\[,;:! ]", " ", text).replace("\\_", "_")
    return re.sub(r"\s+", " ", text.replace("{", "").replace("}", "")).strip()


class Math:
    """One formula, or several aligned ones, ready for display (a ``text/latex`` mimebundle).

    >>> import sympy
    >>> n, b = sympy.symbols("n b", positive=True)
    >>> formula = Math(2 * n / (3 * b), "I")
    >>> print(formula)
    I = 2*n/(3*b)
    >>> print(formula.to_latex())
    $$
    I = \\frac{2 n}{3 b}
    $$
    """

    def __init__(self, expr: Any, name: str | None = None):
        rows = list(expr.items()) if isinstance(expr, Mapping) else [(name, expr)]
        if not rows:
            raise ValueError("show.math needs at least one expression")
        self.rows = [(None if n is None else str(n), value) for n, value in rows]

    def _lines(self):
        import sympy  # deferred: sympy costs ~0.25 s at import

        for name, value in self.rows:
            plain = sympy.sstr(value) if not isinstance(value, str) else value
            yield name, latex(value), (plain if name is None else f"{_plain_name(name)} = {plain}")

    def to_latex(self) -> str:
        lines = list(self._lines())
        if len(lines) == 1:
            name, body, _ = lines[0]
            return f"$$\n{body if name is None else f'{name} = {body}'}\n$$"
        rows = [(f"{name} &= {body}" if name is not None else f"& {body}") for name, body, _ in lines]
        return "$$\n\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}\n$$"

    def __str__(self) -> str:
        return "\n".join(plain for _, _, plain in self._lines())

    __repr__ = __str__

    def _repr_latex_(self) -> str:
        return self.to_latex()

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/latex": self.to_latex(), "text/plain": str(self)}


def math(expr: Any, name: str | None = None) -> None:
    """Display ``name = expr`` as typeset math (or, given a mapping ``{name: expr}``, one aligned row each)."""
    from IPython.display import display  # deferred: IPython costs ~70 ms at import

    display(Math(expr, name))
