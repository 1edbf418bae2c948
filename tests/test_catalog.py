"""roofkit.catalog: how every catalog (accelerators, models, links) finds an entry and refuses a name twice."""

from dataclasses import dataclass

import pytest

from roofkit.catalogs import hardware, links, models
from roofkit.catalogs.lookup import Catalog, check_table, normalize
from roofkit.errors import InvalidValue, UnknownName

from helpers import scratch_hardware_catalog


@dataclass(frozen=True)
class Entry:
    key: str
    name: str
    aliases: tuple[str, ...] = ()


class UnknownEntry(UnknownName):
    kind = "entry"


def make(*entries):
    return Catalog(Entry, lambda: list(entries), UnknownEntry, "entry")


def test_any_spelling_finds_the_entry():
    cat = make(Entry("h100", "H100 SXM", ("hopper",)), Entry("a100", "A100 SXM"))
    for spelling in ("h100", "H100", "H100 SXM", "h100-sxm", "H100_SXM", "Hopper"):
        assert cat.get(spelling).key == "h100"
    assert cat.keys() == ["h100", "a100"]
    assert [e.key for e in cat.entries()] == ["h100", "a100"]
    entry = cat.entries()[1]
    assert cat.get(entry) is entry


def test_normalize():
    assert normalize(" GB200 nvl-72_x ") == "gb200nvl72x"


def test_an_unknown_name_suggests_the_closest():
    cat = make(Entry("h100", "H100 SXM"), Entry("a100", "A100 SXM"))
    with pytest.raises(UnknownEntry, match=r"Unknown entry 'h10'\. Did you mean 'h100'.*Expected one of: a100, h100"):
        cat.get("h10")
    with pytest.raises(UnknownEntry, match="Unknown entry 7"):
        cat.get(7)


def test_a_name_given_to_two_entries_is_refused_when_read():
    cat = make(Entry("a", "Alpha", ("shared",)), Entry("b", "Beta", ("Shared",)))
    with pytest.raises(InvalidValue, match="the name 'Shared' already belongs to the entry 'a'"):
        cat.get("a")


def test_add_refuses_a_taken_name_unless_replace():
    cat = make(Entry("a", "Alpha"))
    with pytest.raises(InvalidValue, match="'alpha' already belongs to the entry 'a'.*or pass replace=True"):
        cat.add(Entry("b", "Beta", ("alpha",)))
    assert cat.keys() == ["a"] and cat.get("alpha").key == "a"  # nothing half-added
    with pytest.raises(UnknownEntry):
        cat.get("beta")
    cat.add(Entry("b", "Beta", ("alpha",)), replace=True)
    assert cat.get("alpha").key == "b" and cat.keys() == ["a", "b"]


def test_snapshot_and_restore():
    cat = make(Entry("a", "Alpha"))
    saved = cat.snapshot()
    cat.add(Entry("b", "Beta"))
    cat.restore(saved)
    assert cat.keys() == ["a"]
    with pytest.raises(UnknownEntry):
        cat.get("beta")


def test_the_three_catalogs_use_it():
    assert hardware.get("H100 SXM") is hardware.get("h100") is hardware.get("h100-sxm")
    assert models.get("Llama 3 8B") is models.get("llama-3-8b")
    assert links.get(links.names()[0]) is links.catalog()[0]


@pytest.mark.parametrize("catalog, spelling, key", [
    (hardware, "H800", "h800"), (hardware, "h100_nvl", "h100-nvl"), (hardware, "H100 PCIe 94GB", "h100-nvl"),
    (links, "H800 NVLink", "nvlink4-h800"), (links, "HGX H800", "hgx-h800"),
    (links, "h100-nvl-bridge", "h100-nvl-bridge"), (links, "H100 NVL NVLink", "h100-nvl-bridge")])
def test_the_h100_variants_are_found_in_every_catalog_that_has_them(catalog, spelling, key):
    assert catalog.get(spelling).key == key


def test_the_variants_names_stay_their_own():
    # the H800's and the NVL's spellings do not take an H100's, nor the other way round
    assert hardware.get("H100").key == "h100-sxm" and hardware.get("H100 PCIe").key == "h100-pcie"
    assert links.get("NVLink 4").key == "nvlink4" and links.get("HGX H100").key == "hgx-h100"
    assert links.get("HGX H800").over == "nvlink4-h800" != links.get("HGX H100").over


def test_register_refuses_an_accelerators_name_unless_replace():
    entry = {"name": "Mine", "aliases": ["H100"], "source": "a test", "peak_tflops": {"fp32": 1}, "bandwidth_tb_s": 0.1}
    with scratch_hardware_catalog():
        owner = hardware.get("H100").key
        with pytest.raises(InvalidValue, match=f"'H100' already belongs to the accelerator '{owner}'"):
            hardware.register(entry, key="mine")
        assert hardware.get("H100").key == owner and "mine" not in hardware.names()
        hardware.register(entry, key="mine", replace=True)
        assert hardware.get("H100").key == "mine"
    assert hardware.get("H100").key == owner and "mine" not in hardware.names()


def test_check_table_names_unknown_and_missing_fields_and_a_missing_source():
    known = ("name", "source", "layers")
    check_table("model 'x'", {"name": "X", "source": "a paper", "layers": 2}, known, ("layers",))
    with pytest.raises(InvalidValue, match=r"model 'x': unknown field\(s\) \['layrs'\]; expected some of"):
        check_table("model 'x'", {"layrs": 2, "source": "s"}, known)
    with pytest.raises(InvalidValue, match=r"model 'x': needs layers\."):
        check_table("model 'x'", {"source": "s"}, known, ("layers",))
    with pytest.raises(InvalidValue, match=r"model 'x': needs a source"):
        check_table("model 'x'", {"layers": 2}, known, ("layers",))
    with pytest.raises(InvalidValue, match=r"accelerator 'mine': needs a source"):
        hardware.register({"name": "Mine", "peak_tflops": {"fp32": 1}, "bandwidth_tb_s": 0.1}, key="mine")
