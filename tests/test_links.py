"""roofkit.links: every figure sourced, every convention explicit, per-direction bandwidth checked
against published figures that do not come from the entry's own quoted number."""

import tomllib
from importlib import resources

import pytest
from hypothesis import given, settings, strategies as st

from roofkit.catalogs import hardware, links, nccl_tuning
from roofkit.perf import nccl
from roofkit.errors import InvalidValue, RoofkitError


def document():
    return tomllib.loads(resources.files("roofkit").joinpath("data/links.toml").read_text(encoding="utf-8"))


ALL = [link.key for link in links.catalog()]


# --- sources and conventions ---------------------------------------------------------------


@pytest.mark.parametrize("key", ALL)
def test_every_figure_has_a_cited_source(key):
    link = links.get(key)
    cited = set(document()["sources"].values()) | {nccl_tuning.SOURCE + " (hwLatencies, ring, LL)"}
    for figure in ("quoted", "latency_us", "*"):
        assert link.source(figure) in cited, (key, figure)


@pytest.mark.parametrize("key", [k for k in links.names() if nccl_tuning.link_class(links.get(k).kind)])
def test_a_link_nccl_runs_on_takes_its_latency_from_nccl_s_table_typed_once(key):
    link = links.get(key)
    assert "latency_us" not in document()[key], f"{key}: latency_us has its home in data/nccl.toml"
    assert link.latency == nccl.hw_latency(nccl.link_class(link), "ring", "LL")
    assert link.source("latency_us").startswith(nccl_tuning.SOURCE)


def test_a_latency_typed_twice_is_refused():
    table = dict(document()["nvlink4"], latency_us=0.6)
    with pytest.raises(InvalidValue, match="one home"):
        links._from_table("nvlink4", table, document()["sources"])


def test_every_source_id_is_defined_and_used():
    doc = document()
    used = set()
    for key, table in doc.items():
        if key not in ("sources", "accelerators"):
            used |= {table["source"], *table.get("sources", {}).values(), table.get("cross_check", table["source"])}
    assert used == set(doc["sources"])


def test_nvidia_figures_are_cross_checked():
    for key in ("nvlink3", "nvlink4", "nvlink5", "pcie4", "pcie5", "ib-hdr", "ib-ndr", "ib-xdr", "hgx-h100"):
        assert links.get(key).source("cross_check") != links.get(key).source("quoted"), key


@pytest.mark.parametrize("key", ALL)
def test_every_figure_says_its_direction_and_scope(key):
    link = links.get(key)
    assert link.direction in links.DIRECTIONS and link.scope in links.SCOPES and link.quoted_unit in links.UNITS
    assert link.both_directions == 2 * link.bandwidth
    data = link.to_dict()
    assert data["bandwidth_convention"].startswith("per direction")
    assert data["quoted"] == link.quoted and data["direction"] == link.direction


# --- per direction, against independent published figures --------------------------------

# ml-engineering network/README.md, NVLink table: unidirectional GB/s per GPU (not NVIDIA's
# duplex figure, which is what the catalog quotes); and the scaling book's links x per-link rate.
@pytest.mark.parametrize("key, unidirectional_gb_s, links_per_gpu, gb_s_per_link", [
    ("nvlink3", 300, 12, 25), ("nvlink4", 450, 18, 25), ("nvlink5", 900, 18, 50)])
def test_nvlink_per_direction(key, unidirectional_gb_s, links_per_gpu, gb_s_per_link):
    link = links.get(key)
    assert link.bandwidth == unidirectional_gb_s * 1e9
    assert link.links == links_per_gpu and link.bandwidth == links_per_gpu * gb_s_per_link * 1e9
    assert link.direction == "both directions"  # NVIDIA's headline: the trap this catalog exists for


@pytest.mark.parametrize("key, gt_s", [("pcie4", 16), ("pcie5", 32)])
def test_pcie_per_direction_from_the_transfer_rate(key, gt_s):
    # PCI-SIG: 16 lanes x GT/s, 128b/130b encoding, 8 bits a byte
    assert links.get(key).bandwidth == pytest.approx(16 * gt_s * 1e9 * 128 / 130 / 8, rel=2e-3)


@pytest.mark.parametrize("key, gbit_per_lane", [("ib-hdr", 50), ("ib-ndr", 100), ("ib-xdr", 200)])
def test_infiniband_port_from_its_lanes(key, gbit_per_lane):
    # IBTA (via ml-engineering's InfiniBand table): a 4x port of lanes at the generation's rate
    assert links.get(key).bandwidth == 4 * gbit_per_lane * 1e9 / 8


@pytest.mark.parametrize("key", ["hgx-a100", "hgx-h100", "hgx-b200", "gb200-nvl72"])
def test_a_domain_gives_each_gpu_its_own_nvlink(key):
    domain = links.get(key)
    assert domain.scope == "aggregate" and domain.gpus in (8, 72)
    # the aggregate is gpus x the per-GPU figure, both directions: 130 TB/s for NVL72 is rounded
    assert domain.bandwidth == pytest.approx(links.get(domain.over).bandwidth, rel=0.01)


def test_scaling_book_node_sizes():
    # gpus.md: NVLink domains of 8 (HGX) and 72 (GB200 NVL72)
    assert [links.get(k).gpus for k in ("hgx-a100", "hgx-h100", "hgx-b200", "gb200-nvl72")] == [8, 8, 8, 72]


# tpus.md (scaling book, commit 54e2c43): ICI per link, bidirectional column; pod shapes
@pytest.mark.parametrize("key, bidi, neighbours, pod", [
    ("ici-v4", 9e10, 6, 16 * 16 * 16), ("ici-v5e", 9e10, 4, 16 * 16),
    ("ici-v5p", 1.8e11, 6, 16 * 20 * 28), ("ici-v6e", 1.8e11, 4, 16 * 16)])
def test_tpu_ici(key, bidi, neighbours, pod):
    link = links.get(key)
    assert link.collective_bandwidth == bidi and link.bandwidth == bidi / 2
    assert link.links == neighbours and link.gpus == pod


def test_mi300x_mesh_per_link_from_its_lanes():
    # AMD CDNA 3 white paper: 7 x16 Infinity Fabric links per MI300X at 32 Gb/s a lane, 896 GB/s per GPU with
    # both directions added; AMD's ROCm blog states the per-link rating itself: 64 GB/s
    mesh = links.get("mi300x-xgmi")
    per_link = 16 * 32e9 / 8
    assert mesh.mesh and mesh.links == 7 and mesh.gpus == 8 and mesh.role == "scale-up"
    assert mesh.bandwidth == 7 * per_link == 448e9 and mesh.both_directions == 896e9
    assert mesh.source("cross_check") != mesh.source("quoted")


@pytest.mark.parametrize("gpus, used_links", [(2, 1), (3, 2), (4, 3), (8, 7)])
def test_a_mesh_gives_a_group_only_the_links_to_its_members(gpus, used_links):
    # no switch: a GPU reaches each peer over its own link, so n GPUs use n - 1 of each GPU's 7 links;
    # through an NVSwitch every group gets the GPU's whole bandwidth
    mesh, switch = links.get("mi300x-xgmi"), links.get("hgx-h100")
    assert mesh.group_bandwidth(gpus) == used_links * 64e9
    assert switch.group_bandwidth(gpus) == switch.collective_bandwidth == 450e9


def test_latencies_grow_from_nvlink_to_the_network():
    nvlink, pcie, ib = links.get("nvlink4").latency, links.get("pcie5").latency, links.get("ib-ndr").latency
    assert 0 < nvlink < pcie < ib < 1e-4


def test_vendor_headline_is_twice_what_one_gpu_sends():
    # NVIDIA: 900 GB/s per H100; ml-engineering measured 396 GB/s one way on H200 (88% of 450, not 44% of 900)
    nvlink = links.get("nvlink4")
    assert nvlink.quoted * links.UNITS[nvlink.quoted_unit] == 900e9
    assert 0.8 < 396e9 / nvlink.bandwidth < 0.95


# --- which links an accelerator has -------------------------------------------------------


def test_the_accelerator_map_uses_catalog_keys():
    for hw_key, keys in document()["accelerators"].items():
        assert hardware.get(hw_key).key == hw_key
        assert [x.key for x in links.for_accelerator(hw_key)] == keys


@pytest.mark.parametrize("hw, up, out", [
    ("h100", "hgx-h100", "ib-ndr"), ("H200", "hgx-h100", "ib-ndr"), ("a100", "hgx-a100", "ib-hdr"),
    ("b200", "hgx-b200", "ib-ndr"), ("gb200", "gb200-nvl72", "ib-ndr"), ("tpu v5p", "ici-v5p", None),
    ("l4", None, None), ("mi300x", "mi300x-xgmi", None)])
def test_scale_up_and_scale_out(hw, up, out):
    assert (links.scale_up(hw).key if links.scale_up(hw) else None) == up
    assert (links.scale_out(hw).key if links.scale_out(hw) else None) == out


def test_an_accelerator_without_the_link_says_which_it_has():
    with pytest.raises(links.MissingLink) as error:
        links.check("h100", "ici-v5p")
    assert str(error.value) == ("NVIDIA H100 SXM5 80GB has no link 'ici-v5p'. "
                                "Its links: hgx-h100, nvlink4, pcie5, ib-ndr, ethernet-400g.")
    assert isinstance(error.value, LookupError) and isinstance(error.value, RoofkitError)
    assert links.check("H100 SXM5", "NDR").key == "ib-ndr"
    with pytest.raises(links.MissingLink, match="Its links: none in the catalog"):
        links.check("mi325x", "pcie5")


# --- lookup --------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["nvlink4", "NVLink 4", "nvlink-4.0", "NVLINK_4", "nvlink gen4"])
def test_lookup_ignores_case_spaces_dashes_and_underscores(spelling):
    assert links.get(spelling).key == "nvlink4"


def test_aliases():
    assert links.get("DGX H100").key == links.get("hgx h200").key == "hgx-h100"
    assert links.get("400GbE").key == "ethernet-400g" and links.get("ConnectX-7").key == "ib-ndr"


def test_unknown_link_suggests_the_closest():
    with pytest.raises(links.UnknownLink) as error:
        links.get("nvlnk4")
    message = str(error.value)
    assert message.startswith("Unknown link 'nvlnk4'. Did you mean 'nvlink4'")
    assert "Expected one of: ethernet-400g" in message
    assert isinstance(error.value, LookupError) and isinstance(error.value, RoofkitError)


@pytest.mark.parametrize("args, message", [
    ((900, "GiB/s", "both directions", "per GPU"), "unknown bandwidth unit"),
    ((900, "GB/s", "duplex", "per GPU"), "unknown direction"),
    ((900, "GB/s", "both directions", "per rack"), "unknown scope"),
    ((7.2, "TB/s", "both directions", "aggregate"), "needs the number of GPUs"),
    ((-1, "GB/s", "per direction", "per GPU"), "quoted bandwidth must be"),
])
def test_per_direction_refuses_bad_conventions(args, message):
    with pytest.raises(InvalidValue, match=message):
        links.per_direction(*args)


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.sampled_from(ALL), st.text(max_size=20), st.integers(), st.none()))
def test_any_name_gives_a_link_or_a_roofkit_error(name):
    try:
        link = links.get(name)
    except RoofkitError:
        return
    assert link.bandwidth > 0 and link.latency > 0
