"""The set-up a new user relies on: one set of pins, mirrored for conda, and CI running the README's command."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    pins = {}
    for requirement in requirements:
        name, _, version = requirement.partition("==")
        assert version, f"{requirement!r} in pyproject.toml is not pinned with =="
        pins[name.lower().replace("_", "-")] = version
    return pins


def _environment_pins() -> dict[str, str]:
    lines = (ROOT / "environment.yml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "- pip:")
    pins = {}
    for line in lines[start + 1 :]:
        match = re.match(r"^\s+-\s+([A-Za-z0-9_.\-]+)==(\S+)\s*$", line)
        if match:
            pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


def test_every_dependency_is_pinned_once_and_conda_mirrors_it():
    pyproject, conda = _pyproject_pins(), _environment_pins()
    assert pyproject, "no dependencies found in pyproject.toml"
    assert pyproject == conda, (
        f"environment.yml drifted from pyproject.toml: only in pyproject {set(pyproject.items()) - set(conda.items())}, "
        f"only in environment.yml {set(conda.items()) - set(pyproject.items())}"
    )


def test_environment_installs_the_package_and_matches_python():
    text = (ROOT / "environment.yml").read_text()
    assert re.search(r"^\s+-\s+-e \.\s*$", text, re.M), "environment.yml must install roofkit itself (- -e .)"
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    conda_python = re.search(r"python=(\d+\.\d+)", text).group(1)
    assert requires == f">={conda_python}"


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    ci = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert "make test" in ci


def test_console_script_points_at_the_cli():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"roofkit": "roofkit.cli:main"}
