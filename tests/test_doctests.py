"""Every docstring example in roofkit runs and prints what it says (einops-style executable docs)."""

import doctest
import importlib
import pkgutil

import pytest

import roofkit
from roofkit import hardware

MODULES = sorted(m.name for m in pkgutil.walk_packages(roofkit.__path__, "roofkit."))


@pytest.fixture(autouse=True)
def restore_catalog():
    """hardware.register's example adds a 'laptop'; keep it out of the other tests."""
    catalog, index = dict(hardware._load()), dict(hardware._index)
    yield
    hardware._catalog.clear()
    hardware._catalog.update(catalog)
    hardware._index.clear()
    hardware._index.update(index)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
