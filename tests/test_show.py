"""`show.math` displays a sympy result as typeset math (text/latex) with a readable plain-text fallback."""

from __future__ import annotations

import subprocess
import sys

import sympy

from roofkit.course import show


def test_a_piecewise_result_becomes_latex_not_its_python_repr():
    F, I, P, B = sympy.symbols("F I P B", positive=True)
    best = sympy.Piecewise((P, F / P >= F / (B * I)), (B * I, True))
    bundle = show.Math(best, r"R_\text{best}")._repr_mimebundle_()
    assert set(bundle) == {"text/latex", "text/plain"}
    latex = bundle["text/latex"]
    assert latex.startswith("$$") and latex.endswith("$$")
    assert r"\begin{cases}" in latex and "Piecewise" not in latex
    assert bundle["text/plain"].startswith("R_best = Piecewise(")


def test_several_formulas_are_aligned_and_the_output_is_deterministic():
    n, b = sympy.symbols("n b", positive=True)
    rows = {"F": 2 * n**3, "Q": 3 * b * n**2, r"\lim_{n \to \infty} I": sympy.oo}
    first = show.Math(rows)._repr_mimebundle_()
    assert first == show.Math(dict(rows))._repr_mimebundle_()  # nbval compares the stored output byte for byte
    assert r"\begin{aligned}" in first["text/latex"] and r"F &= 2 n^{3}" in first["text/latex"]
    assert first["text/plain"].splitlines() == ["F = 2*n**3", "Q = 3*b*n**2", "lim_n -> oo I = oo"]


def test_numbers_and_equations_are_accepted():
    assert show.Math(sympy.Rational(1, 6), "I").to_latex() == "$$\nI = \\frac{1}{6}\n$$"
    assert show.Math(sympy.Eq(sympy.Symbol("C"), 6 * sympy.Symbol("N"))).to_latex() == "$$\nC = 6 N\n$$"
    assert str(show.Math(2, "x")) == "x = 2"


def test_math_displays_one_latex_output_in_a_kernel_and_plain_text_elsewhere():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    captured = []
    shell.display_pub.publish = lambda data, metadata=None, **kwargs: captured.append(data)
    try:
        show.math(sympy.Symbol("n") / 3, r"I_\text{FP16}")
    finally:
        InteractiveShell.clear_instance()
    assert len(captured) == 1 and captured[0]["text/latex"] == "$$\nI_\\text{FP16} = \\frac{n}{3}\n$$"
    script = "import sympy; from roofkit import show; show.math(sympy.Symbol('n') / 3, r'I_\\text{FP16}')"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "I_FP16 = n/3"


def test_importing_roofkit_does_not_import_sympy_or_ipython():
    script = "import sys, roofkit, roofkit.show; print('sympy' in sys.modules, 'IPython' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
