"""The library's layout (docs/architecture.md): no import circle, no import upward, every old public name kept.

Every module under roofkit/ is parsed with ``ast``: each ``import`` and ``from ... import`` statement counts,
at the top of a module or inside a function, with relative imports resolved. The layers and what each may import
are read from the table in docs/architecture.md, so that the document and the code cannot drift apart.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import io
import re
import tokenize
import types
from pathlib import Path
from typing import Callable

import pytest

import roofkit

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
NONE = ("—", "-", "nothing", "")


# --- the checker -----------------------------------------------------------------------------------------------


def modules(package: Path, name: str = "roofkit") -> dict[str, tuple[Path, bool]]:
    """Every module of ``package``: dotted name -> (its file, whether it is a package's __init__)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = (name, *path.relative_to(package).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def resolve(target: str, known, home: Callable[[str], str | None] = lambda name: None) -> str | None:
    """The module a dotted import name loads: the longest known prefix (``pkg.mod.func`` -> ``pkg.mod``).

    ``home`` maps a public name (relative to the root package) to its module's home (roofkit.home).
    """
    root = target.partition(".")[0]
    while target:
        if target in known:
            return target
        if "." in target:
            where = home(target.partition(".")[2])
            if where and f"{root}.{where}" in known:
                return f"{root}.{where}"
        target = target.rpartition(".")[0]
    return None


def imported(module: str, path: Path, is_package: bool) -> list[tuple[str, int]]:
    """The dotted names ``module``'s import statements name, anywhere in it, with their line numbers.

    ``from pkg import x`` names ``pkg.x``: the module pkg.x where there is one, else pkg (x is its attribute).
    """
    package = module if is_package else module.rpartition(".")[0]
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                base = node.module
            names += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return names


def graph(found: dict[str, tuple[Path, bool]], home=lambda name: None) -> dict[str, dict[str, int]]:
    """module -> {module it imports: first line}, among ``found`` only (the standard library and others left out)."""
    edges: dict[str, dict[str, int]] = {}
    for module, (path, is_package) in found.items():
        edges[module] = {}
        for name, line in sorted(imported(module, path, is_package), key=lambda item: item[1]):
            target = resolve(name, found, home)
            if target is not None and target != module:
                edges[module].setdefault(target, line)
    return edges


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The import circles: each set of modules that import one another, directly or not (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def table_rows(text: str, header: list[str]) -> list[list[str]]:
    """The rows (each a list of its cells) of the Markdown table in ``text`` whose header reads ``header``."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if [c.lower() for c in _cells(line)] == header), None)
    if start is None:
        raise AssertionError(f"no '| {' | '.join(header)} |' table in the document")
    rows = []
    for line in lines[start + 2:]:
        if not line.strip().startswith("|"):
            break
        rows.append(_cells(line))
    return rows


def read_layers(text: str) -> dict[str, tuple[list[str], list[str]]]:
    """The layer table of docs/architecture.md: layer -> (what it holds, the layers it may import).

    The table is the one whose header reads ``| layer | holds | may import |``; ``holds`` names folders
    (``catalogs/``), modules (``units``) or the package's own ``__init__.py``, each in backticks.
    """
    layers = {}
    for name, holds, may in table_rows(text, ["layer", "holds", "may import"]):
        allowed = [] if may.lower() in NONE else [m.strip() for m in may.split(",")]
        layers[name.strip("*")] = (re.findall(r"`([^`]+)`", holds), allowed)
    return layers


def layer_of(module: str, layers, root: str = "roofkit") -> list[str]:
    """The layers whose ``holds`` cover ``module`` (exactly one, in a table that is right)."""
    rest = module[len(root) + 1:] if module != root else ""
    found = []
    for name, (holds, _) in layers.items():
        for entry in holds:
            if entry == "__init__.py" and not rest:
                found.append(name)
            elif entry.endswith("/") and rest and (rest + ".").startswith(entry[:-1].replace("/", ".") + "."):
                found.append(name)
            elif rest and rest == entry:
                found.append(name)
    return found


def upward(edges, layers, root: str = "roofkit") -> list[str]:
    """Each import that its layer may not make: 'a (layer) imports b (layer), line n'."""
    bad = []
    for a, targets in sorted(edges.items()):
        (la,) = layer_of(a, layers, root)
        for b, line in sorted(targets.items()):
            (lb,) = layer_of(b, layers, root)
            if lb != la and lb not in layers[la][1]:
                bad.append(f"{a} ({la}) imports {b} ({lb}), line {line}")
    return bad


def alias_mismatches(public: dict[str, str], root: str = "roofkit") -> list[str]:
    """Each public name that does not import as its home's module object."""
    bad = []
    for name, where in sorted(public.items()):
        old, new = importlib.import_module(f"{root}.{name}"), importlib.import_module(f"{root}.{where}")
        if old is not new:
            bad.append(f"{root}.{name} is not {root}.{where}")
    return bad


# --- the library as it is --------------------------------------------------------------------------------------

FOUND = modules(ROOT / "roofkit")
EDGES = graph(FOUND, roofkit.home)
LAYERS = read_layers(DOC.read_text(encoding="utf-8"))


def test_no_import_circle():
    found = cycles(EDGES)
    assert not found, "import circles (each line: modules that import one another):\n" + "\n".join(
        ", ".join(group) for group in found)


def test_every_module_is_in_exactly_one_layer_of_the_document():
    for name, (_, allowed) in LAYERS.items():
        assert set(allowed) <= set(LAYERS), f"{name} may import {allowed}: not all are layers of {DOC.name}"
    wrong = {m: layer_of(m, LAYERS) for m in FOUND if len(layer_of(m, LAYERS)) != 1}
    assert not wrong, f"modules in no layer or in several (docs/architecture.md's table): {wrong}"


def test_every_import_respects_the_layers():
    bad = upward(EDGES, LAYERS)
    assert not bad, "imports the layer table of docs/architecture.md does not allow:\n" + "\n".join(bad)


def test_the_graph_sees_imports_inside_functions():
    """The known import inside a function of the course's reader (the catalog, for 'H100s') is an edge."""
    assert "roofkit.catalogs.hardware" in EDGES["roofkit.course.answers"]
    assert "roofkit.formulas" in EDGES["roofkit.perf.roofline"] and "roofkit.errors" in EDGES["roofkit.units"]


# --- old public names ------------------------------------------------------------------------------------------


def test_every_public_name_is_its_home():
    assert not alias_mismatches(roofkit.PUBLIC)
    for name, where in roofkit.PUBLIC.items():
        if "." not in name:
            assert getattr(roofkit, name) is importlib.import_module(f"roofkit.{where}"), name


def test_the_question_banks_keep_their_names():
    banks = sorted(m for m in FOUND if m.startswith("roofkit.course.bank.lesson_"))
    assert len(banks) >= 15
    for module in banks:
        public = module.replace(".bank.", ".", 1)
        assert importlib.import_module(public) is importlib.import_module(module), public


def test_a_child_of_a_public_package_is_its_home():
    from roofkit.inference import kvcache, plot  # the serving plot moved out of inference/, to plots/

    assert kvcache is importlib.import_module("roofkit.perf.inference.kvcache")
    assert plot is importlib.import_module("roofkit.plots.serving")
    assert importlib.import_module("roofkit.parallel.calibration") is importlib.import_module(
        "roofkit.perf.parallel.calibration")


def test_the_names_of_the_issue_and_the_moved_formula():
    from roofkit.quiz import check

    assert callable(roofkit.hw) and roofkit.hw("h100").ridge("bf16") > 0 and roofkit.model("llama-3-8b").params
    assert check is importlib.import_module("roofkit.course.quiz").check
    assert roofkit.roofline.ridge_point is roofkit.formulas.ridge_point  # one formula, two names
    assert roofkit.hardware.get("h100").ridge("bf16") == roofkit.formulas.ridge_point(
        roofkit.hardware.get("h100").peak("bf16"), roofkit.hardware.get("h100").memory_bandwidth())


def _documented_imports() -> list[tuple[str, str]]:
    """(file, statement) for each roofkit import in README.md, docs/ and the lessons, as a learner runs it."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "lessons").glob("*.md"))]:
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if not re.match(r"\s*(from roofkit[\w.]* import |import roofkit)", line):
                continue
            statement = line.strip()
            j = i
            while statement.count("(") > statement.count(")") and j + 1 < len(lines):
                j += 1
                statement += " " + lines[j].strip()
            found.append((path.name, statement.split("#")[0].strip()))
    return found


DOCUMENTED = _documented_imports()


def test_the_lessons_and_the_readme_import_roofkit():
    assert len(DOCUMENTED) > 40 and any("plots_kernels" in s for _, s in DOCUMENTED)


@pytest.mark.parametrize("where, statement", sorted(set(DOCUMENTED)))
def test_every_documented_import_runs_and_gives_the_home(where, statement):
    node = ast.parse(statement).body[0]
    if isinstance(node, ast.Import):
        for alias in node.names:
            importlib.import_module(alias.name)
        return
    source = importlib.import_module(node.module)
    for alias in node.names:
        if hasattr(source, alias.name):
            value = getattr(source, alias.name)
        else:
            value = importlib.import_module(f"{node.module}.{alias.name}")
        home = roofkit.home(f"{node.module}.{alias.name}"[len("roofkit."):])
        if home is not None and isinstance(value, types.ModuleType):  # an old module name: its home's module
            assert value is importlib.import_module(f"roofkit.{home}"), f"{where}: {statement}"


def test_every_roofkit_attribute_the_readme_uses_exists():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    used = set(re.findall(r"\broofkit\.([a-z_][a-z0-9_]*)\b(?!/)", text)) - {"py", "toml", "json", "egg"}
    missing = sorted(name for name in used if not hasattr(roofkit, name)
                     and importlib.util.find_spec(f"roofkit.{name}") is None)
    assert not missing, missing


# --- each check can fail ---------------------------------------------------------------------------------------

FAKE_DOC = """
| layer | holds | may import |
| --- | --- | --- |
| base | `__init__.py`, `low/` | — |
| top | `high/`, `cli` | base |
"""


def _fake_package(tmp_path: Path, upward_import: str) -> dict[str, tuple[Path, bool]]:
    package = tmp_path / "pkg"
    for folder in ("low", "high"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("", encoding="utf-8")
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "low" / "a.py").write_text(f"import os\n\n\ndef f():\n    {upward_import}\n", encoding="utf-8")
    (package / "high" / "b.py").write_text("from ..low import a\nfrom pkg.low.a import f\n", encoding="utf-8")
    (package / "cli.py").write_text("from .high import b\n", encoding="utf-8")
    return modules(package, "pkg")


def test_the_checker_finds_a_circle_through_an_import_inside_a_function(tmp_path):
    found = _fake_package(tmp_path, "from ..high import b  # upward, and a circle")
    edges = graph(found)
    assert edges["pkg.low.a"] == {"pkg.high.b": 5} and edges["pkg.high.b"] == {"pkg.low.a": 1}
    assert cycles(edges) == [["pkg.high.b", "pkg.low.a"]]
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_the_checker_finds_an_upward_import(tmp_path):
    layers = read_layers(FAKE_DOC)
    assert layers == {"base": (["__init__.py", "low/"], []), "top": (["high/", "cli"], ["base"])}
    edges = graph(_fake_package(tmp_path, "import pkg.cli"))
    assert upward(edges, layers, "pkg") == ["pkg.low.a (base) imports pkg.cli (top), line 5"]
    assert cycles(edges) == [["pkg.cli", "pkg.high.b", "pkg.low.a"]]
    clean = graph(_fake_package(tmp_path / "clean", "import os"))
    assert upward(clean, layers, "pkg") == [] and cycles(clean) == []


def test_the_checker_finds_a_module_no_layer_holds():
    layers = read_layers(FAKE_DOC)
    assert layer_of("pkg.low.a", layers, "pkg") == ["base"] and layer_of("pkg", layers, "pkg") == ["base"]
    assert layer_of("pkg.elsewhere", layers, "pkg") == [] and layer_of("pkg.cli", layers, "pkg") == ["top"]
    with pytest.raises(AssertionError, match="no '| layer"):
        read_layers("| a | b |\n| --- | --- |\n")


def test_the_checker_finds_a_public_name_that_is_not_its_home():
    assert alias_mismatches({"roofline": "plots.roofline"}) == []
    assert alias_mismatches({"roofline": "perf.fusion"}) == ["roofkit.roofline is not roofkit.perf.fusion"]
    assert resolve("roofkit.inference.kvcache.kv_bytes", FOUND, roofkit.home) == "roofkit.perf.inference.kvcache"


# --- imports inside functions ----------------------------------------------------------------------------------


def uncommented_imports(path: Path, root: Path = ROOT) -> list[str]:
    """Each import statement inside a function of ``path`` with no comment on its lines: 'file:line: statement'.

    An import belongs at the top of its module; one inside a function says why on its own line
    (``import sympy  # deferred: sympy costs ~0.25 s at import``), as docs/architecture.md asks.
    """
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    commented = {token.start[0] for token in tokenize.generate_tokens(io.StringIO(text).readline)
                 if token.type == tokenize.COMMENT}
    found = set()
    for function in ast.walk(ast.parse(text, str(path))):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and \
                        not commented & set(range(node.lineno, node.end_lineno + 1)):
                    found.add((node.lineno, lines[node.lineno - 1].strip()))
    where = path.relative_to(root) if path.is_relative_to(root) else path
    return [f"{where}:{line}: {statement}" for line, statement in sorted(found)]


def test_every_import_inside_a_function_says_why():
    bad = [entry for path, _ in FOUND.values() for entry in uncommented_imports(path)]
    assert not bad, ("imports inside functions without a comment saying why (move each to the top of its module, "
                     "or say why it waits: docs/architecture.md):\n" + "\n".join(bad))


def test_the_checker_finds_an_import_inside_a_function_without_a_comment(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import os\n\n\ndef f():\n    import json\n    import re  # deferred: a reason\n"
                      "    from math import (\n        pi,  # the only name\n    )\n    return json, re, pi\n\n\n"
                      "g = lambda: __import__('os')\n", encoding="utf-8")
    assert uncommented_imports(source, tmp_path) == ["m.py:5: import json"]


# --- the name-to-file table ------------------------------------------------------------------------------------


def read_name_table(text: str) -> dict[str, str]:
    """The table of docs/architecture.md whose header reads ``| public name | file |``: name -> file.

    Each cell's first backticked text counts: ``roofkit.hw(name)`` is ``roofkit.hw``, and a note after the file
    is left out.
    """
    table = {}
    for cells in table_rows(text, ["public name", "file"]):
        name, where = (re.search(r"`([^`(]+)", cell).group(1) for cell in cells[:2])
        table[name] = where
    return table


def expected_names(public: dict[str, str], prefixes: dict[str, str], found, root: str = "roofkit") -> dict[str, str]:
    """Every public name -> the file that defines it: each name of ``public``, each child module of a public
    package (not a private one, _name), each prefix (``lesson_NN``), and ``hw`` and ``model``."""
    files = {module: path.relative_to(ROOT).as_posix() for module, (path, _) in found.items()}
    names = {}
    for name, where in public.items():
        home = f"{root}.{where}"
        names[f"{root}.{name}"] = files[home]
        if found[home][1]:  # a package: its children follow it
            for module in sorted(found):
                child = module[len(home) + 1:]
                if module.startswith(home + ".") and "." not in child and not child.startswith("_") \
                        and f"{name}.{child}" not in public:
                    names[f"{root}.{name}.{child}"] = files[module]
    for prefix, target in prefixes.items():
        names[f"{root}.{prefix}NN"] = f"{root}/{target.replace('.', '/')}NN.py"
    names[f"{root}.hw"] = names[f"{root}.model"] = files[root]
    return names


def name_table_mismatches(table: dict[str, str], expected: dict[str, str]) -> list[str]:
    """Each public name the table leaves out, gives the wrong file, or has that is no public name."""
    bad = [f"{name}: missing (its file: {where})" for name, where in expected.items() if name not in table]
    bad += [f"{name}: {table[name]}, not {where}" for name, where in expected.items()
            if name in table and table[name] != where]
    bad += [f"{name}: no public name" for name in table if name not in expected]
    return bad


def test_the_document_gives_every_public_name_its_file():
    table = read_name_table(DOC.read_text(encoding="utf-8"))
    expected = expected_names(roofkit.PUBLIC, roofkit.PUBLIC_PREFIXES, FOUND)
    bad = name_table_mismatches(table, expected)
    assert not bad, "docs/architecture.md's table of public names and files is out of date:\n" + "\n".join(bad)
    for name, where in table.items():
        if "NN" in where:  # a prefix: every lesson's bank is there
            banks = sorted(ROOT.glob(where.replace("NN", "[0-9][0-9]")))
            assert banks and all(roofkit.home(f"{name[len('roofkit.'):].replace('NN', p.stem[-2:])}")
                                 == f"course.bank.{p.stem}" for p in banks), name
        else:
            assert (ROOT / where).is_file(), f"{name}: {where} does not exist"
    assert roofkit.hw.__module__ == roofkit.model.__module__ == "roofkit"
    assert roofkit.home("inference.kvcache") == "perf.inference.kvcache"
    assert table["roofkit.inference.kvcache"] == "roofkit/perf/inference/kvcache.py"


def test_the_checker_finds_a_stale_name_table():
    doc = ("| public name | file |\n| --- | --- |\n| `roofkit.hw(name)` | `roofkit/__init__.py` (a note) |\n"
           "| `roofkit.gone` | `roofkit/gone.py` |\n")
    table = read_name_table(doc)
    assert table == {"roofkit.hw": "roofkit/__init__.py", "roofkit.gone": "roofkit/gone.py"}
    expected = {"roofkit.hw": "roofkit/__init__.py", "roofkit.links": "roofkit/catalogs/links.py"}
    assert name_table_mismatches(table, expected) == ["roofkit.links: missing (its file: roofkit/catalogs/links.py)",
                                                      "roofkit.gone: no public name"]
    assert name_table_mismatches({**table, "roofkit.links": "roofkit/links.py"}, expected)[0] == \
        "roofkit.links: roofkit/links.py, not roofkit/catalogs/links.py"
    with pytest.raises(AssertionError, match="no '| public name"):
        read_name_table("| a | b |\n| --- | --- |\n")


@pytest.mark.parametrize("script", sorted((ROOT / "benchmarks").glob("*.py")), ids=lambda p: p.name)
def test_every_benchmark_script_compiles(script):
    # the benchmarks print the figures the closing notes report; no test runs them whole (they take minutes), so a
    # script broken by an edit would otherwise go unseen until someone reran it
    compile(script.read_text(encoding="utf-8"), str(script), "exec")
