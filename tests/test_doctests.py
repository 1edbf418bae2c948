"""Every docstring example in roofkit runs and prints what it says (einops-style executable docs)."""

import doctest
import importlib
import pkgutil

import pytest

import roofkit

from helpers import scratch_hardware_catalog

MODULES = sorted(m.name for m in pkgutil.walk_packages(roofkit.__path__, "roofkit."))


@pytest.fixture(autouse=True)
def restore_catalog():
    """hardware.register's example adds a 'laptop'; keep it out of the other tests."""
    with scratch_hardware_catalog():
        yield


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
