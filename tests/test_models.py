"""The model catalog: every shape sourced, found by any common spelling, counted right.

The oracles: the parameter counts the model publishers print (Hugging Face
model pages, rounded there to three significant figures; the GPT-3 paper), an
inventory of the weight tensors of each model typed here from the
architecture (not from roofkit's formula), and PyTorch modules built on the
meta device where torch is installed.
"""

import json
import tomllib
from importlib import resources

import pytest

import roofkit
from roofkit import formulas
from roofkit.catalogs import models
from roofkit.errors import InvalidValue, RoofkitError, UnknownName
from roofkit.catalogs.models import UnknownModel

DOCUMENT = tomllib.loads(resources.files("roofkit").joinpath("data/models.toml").read_text("utf-8"))
CITATIONS = DOCUMENT.pop("sources")
BUILT_IN = list(DOCUMENT)

# Published parameter counts, to the precision they are published at.
PUBLISHED = [
    ("llama-2-7b", 6.74e9),      # Hugging Face, meta-llama/Llama-2-7b-hf: "6.74B params"
    ("llama-2-13b", 13.0e9),     # Hugging Face, meta-llama/Llama-2-13b-hf: "13B params"
    ("llama-2-70b", 69.0e9),     # Hugging Face, meta-llama/Llama-2-70b-hf: "69B params"
    ("llama-3-8b", 8.03e9),      # Hugging Face, meta-llama/Meta-Llama-3-8B: "8.03B params"
    ("llama-3-70b", 70.6e9),     # Hugging Face, meta-llama/Meta-Llama-3-70B: "70.6B params"
    ("llama-3.1-405b", 406e9),   # Hugging Face, meta-llama/Llama-3.1-405B: "406B params"
    ("mistral-7b", 7.24e9),      # Hugging Face, mistralai/Mistral-7B-v0.1: "7.24B params"
    ("gpt-3-175b", 175e9),       # Brown et al. 2020, Table 2.1: 175.0B
    ("deepseek-v2", 236e9),      # DeepSeek-V2, arXiv:2405.04434, section 3.1.2: 236B total
    ("deepseek-v3", 671e9),      # DeepSeek-V3, arXiv:2412.19437, section 4.2: 671B total
]


def _three_figures(x: float) -> float:
    return float(f"{x:.3g}")


@pytest.mark.parametrize("key, published", PUBLISHED)
def test_parameter_count_matches_the_published_one(key, published):
    assert _three_figures(models.get(key).params) == published


def _inventory(m) -> int:
    """Every weight tensor of the model, by its shape: the Hugging Face Llama/Mistral layout, or GPT-2/3's."""
    d, dh = m.d_model, m.head_dim
    tensors = [(m.vocab, d)]  # token embeddings
    if m.positions:
        tensors.append((m.positions, d))
    per_layer = [(m.heads * dh, d), (m.kv_heads * dh, d), (m.kv_heads * dh, d), (d, m.heads * dh)]  # q, k, v, o
    if m.kv_lora_rank:  # DeepSeek's modeling code: q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa,
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim  # kv_a_layernorm, kv_b_proj, o_proj
        per_layer = [(m.q_lora_rank, d), (m.q_lora_rank,), (m.heads * qk, m.q_lora_rank),
                     (m.kv_lora_rank + m.qk_rope_head_dim, d), (m.kv_lora_rank,),
                     (m.heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank), (d, m.heads * m.v_head_dim)]
    dense_mlp = [(m.d_ff, d), (d, m.d_ff)] + ([(m.d_ff, d)] if m.mlp == "swiglu" else [])  # up, down, gate
    norm_vectors = 2 if m.norm == "layernorm" else 1
    per_layer += [(d,)] * (2 * norm_vectors)  # two norms per layer
    if m.bias:
        per_layer += [(m.heads * dh,), (m.kv_heads * dh,), (m.kv_heads * dh,), (d,), (m.d_ff,), (d,)]
    expert = [(m.moe_d_ff, d), (d, m.moe_d_ff), (m.moe_d_ff, d)] if m.experts else []
    moe_mlp = expert * (m.experts + m.shared_experts) + [(m.experts, d)]  # the experts and the router
    for layer in range(m.layers):  # Hugging Face Llama 4: feed_forward is the MoE where (i + 1) % step == 0
        moe = m.experts and layer >= m.dense_layers and (layer - m.dense_layers + 1) % m.moe_layer_freq == 0
        tensors += per_layer + (moe_mlp if moe else dense_mlp)
    tensors += [(d,)] * norm_vectors  # the final norm
    if not m.tied_embeddings:
        tensors.append((m.vocab, d))  # the output layer
    total = 0
    for shape in tensors:
        size = 1
        for n in shape:
            size *= n
        total += size
    return total


@pytest.mark.parametrize("key", BUILT_IN)
def test_parameter_count_equals_an_inventory_of_the_weights(key):
    m = models.get(key)
    assert m.params == _inventory(m)
    if m.mla or m.moe:
        return
    assert m.params == m.layers * m.params_per_layer + m.embedding_params + m.d_model * (2 if m.norm == "layernorm" else 1)


@pytest.mark.parametrize("key", BUILT_IN)
def test_parameter_tensors_add_up_to_the_parameters(key):
    m = models.get(key)
    tensors = m.parameter_tensors()
    assert sum(tensors) == m.params and all(x > 0 for x in tensors)
    norms = 2 if m.norm == "layernorm" else 1
    per_layer = 4 + 2 * norms + (4 if m.bias else 0)  # Megatron-LM's fused QKV and gate-and-up: 4 matrices
    tables = 1 + (m.positions > 0) + (not m.tied_embeddings)
    if not (m.mla or m.moe):
        assert len(tensors) == m.layers * per_layer + tables + norms
    else:  # every routed and shared expert holds two matrices, each MoE layer a router
        assert len(tensors) > m.moe_layers * (2 * (m.experts + m.shared_experts) + 1)


def test_parameter_tensors_of_a_gpt_as_megatron_lm_holds_them():
    # GPT-3 175B (Brown et al. 2020), a layer in Megatron-LM's order: LayerNorm (weight, bias), QKV [3d, d] and its
    # bias, the projection and its bias, LayerNorm, the MLP's two matrices and their biases; then a tied embedding,
    # the positions and the final LayerNorm
    m = models.get("gpt-3-175b")
    d = m.d_model
    assert m.parameter_tensors()[:12] == [d, d, 3 * d * d, 3 * d, d * d, d, d, d, 4 * d * d, 4 * d, 4 * d * d, d]
    assert m.parameter_tensors()[-4:] == [m.vocab * d, 2048 * d, d, d]


def test_exact_counts_of_the_llama_family():
    # the counts in the safetensors index of each Hugging Face repository
    assert models.get("llama-2-7b").params == 6_738_415_616
    assert models.get("llama-3-8b").params == 8_030_261_248
    assert models.get("mistral-7b").params == 7_241_732_096


@pytest.mark.parametrize("key", BUILT_IN)
def test_layer_weight_gemms_read_the_layer_s_matrices(key):
    m = models.get(key)
    if m.mla:  # DeepSeek's latent attention, op by op: tests/test_mla_serving.py
        return
    ops = m.layer_ops(batch=2, seq=3)
    if m.moe:  # the 6 tokens' GEMMs: attention, the router, the k routed experts and the shared ones
        names = ("qkv", "out", "moe.router", "moe.up", "moe.gate", "moe.down", "shared.up", "shared.gate",
                 "shared.down")
        attention = m.d_model * (m.heads + 2 * m.kv_heads) * m.head_dim + m.heads * m.head_dim * m.d_model
        experts = (m.experts_per_token + m.shared_experts) * (3 if m.gated else 2) * m.d_model * m.moe_d_ff
        assert sum(ops[n].flops for n in names if n in ops) == 2 * 6 * (attention + experts + m.experts * m.d_model)
        return
    gemm_flops = sum(ops[n].flops for n in ("qkv", "out", "mlp.up", "mlp.gate", "mlp.down") if n in ops)
    vectors = (4 if m.norm == "layernorm" else 2) * m.d_model
    biases = (m.heads + 2 * m.kv_heads) * m.head_dim + 2 * m.d_model + m.d_ff * (2 if m.gated else 1) if m.bias else 0
    assert gemm_flops == 2 * 6 * (m.params_per_layer - vectors - biases)  # 2 FLOPs per weight per token


@pytest.mark.torch
@pytest.mark.parametrize("key", ["llama-3-8b", "llama-2-7b", "mistral-7b"])
def test_torch_modules_on_the_meta_device_have_as_many_parameters(key):
    torch = pytest.importorskip("torch")
    m = models.get(key)
    linear = lambda i, o: torch.nn.Linear(i, o, bias=False, device="meta")  # noqa: E731
    layer = torch.nn.ModuleList([
        linear(m.d_model, m.heads * m.head_dim), linear(m.d_model, m.kv_heads * m.head_dim),
        linear(m.d_model, m.kv_heads * m.head_dim), linear(m.heads * m.head_dim, m.d_model),
        linear(m.d_model, m.d_ff), linear(m.d_model, m.d_ff), linear(m.d_ff, m.d_model),
        torch.nn.RMSNorm(m.d_model, device="meta"), torch.nn.RMSNorm(m.d_model, device="meta")])
    assert sum(p.numel() for p in layer.parameters()) == m.params_per_layer


# --- shapes and sources ---------------------------------------------------------------------------


@pytest.mark.parametrize("key, layers, d, heads, kv, d_ff, vocab", [
    # typed from each config.json (Hugging Face) or paper, as cited in the catalog
    ("llama-2-7b", 32, 4096, 32, 32, 11008, 32000),
    ("llama-2-13b", 40, 5120, 40, 40, 13824, 32000),
    ("llama-2-70b", 80, 8192, 64, 8, 28672, 32000),
    ("llama-3-8b", 32, 4096, 32, 8, 14336, 128256),
    ("llama-3-70b", 80, 8192, 64, 8, 28672, 128256),
    ("llama-3.1-405b", 126, 16384, 128, 8, 53248, 128256),
    ("mistral-7b", 32, 4096, 32, 8, 14336, 32000),
    ("gpt-3-175b", 96, 12288, 96, 96, 4 * 12288, 50257),
])
def test_shapes(key, layers, d, heads, kv, d_ff, vocab):
    m = models.get(key)
    assert (m.layers, m.d_model, m.heads, m.kv_heads, m.d_ff, m.vocab) == (layers, d, heads, kv, d_ff, vocab)
    assert m.head_dim == 128


def test_the_dataset_s_shapes_are_in_the_catalog():
    from roofkit.measure.layers import load_layers

    for case in load_layers().cases:
        m = models.get(case.model)
        assert (m.d_model, m.heads, m.kv_heads, m.d_ff, m.head_dim) == (case.d, case.H, case.KV, case.ff, case.head_dim)


@pytest.mark.parametrize("key", BUILT_IN)
def test_every_figure_has_a_cited_source(key):
    m = models.get(key)
    for figure in ("layers", "d_model", "heads", "kv_heads", "head_dim", "d_ff", "vocab", "mlp", "tied_embeddings"):
        source = m.source(figure)
        assert source in CITATIONS.values(), f"{key}: {figure} cites {source!r}"
        assert " " in source and source not in CITATIONS


def test_every_source_id_is_defined_and_used():
    used = set()
    for key, table in DOCUMENT.items():
        for source_id in [table["source"], *table.get("sources", {}).values()]:
            assert source_id in CITATIONS, f"{key} uses undefined source {source_id!r}"
            used.add(source_id)
    assert used == set(CITATIONS)


def test_figures_from_another_source_say_so():
    gpt3 = models.get("gpt-3")
    assert gpt3.source("vocab").startswith("Radford et al.") and gpt3.source("d_model").startswith("Brown et al.")
    assert models.get("mistral-7b").source("context").startswith("Jiang et al.")


def test_gqa_and_mqa_shapes():
    assert models.get("llama-2-7b").kv_heads == models.get("llama-2-7b").heads  # multi-head
    llama3 = models.get("llama-3-8b")
    assert llama3.heads // llama3.kv_heads == 4
    # the QKV projection is d + 2 KV d_h wide
    assert llama3.layer_ops(1, 1)["qkv"] == formulas.gemm(1, 4096 + 2 * 8 * 128, 4096)


# --- names ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["llama-3-8b", "Llama-3-8B", "llama 3 8b", "LLAMA_3_8B", "llama3-8b",
                                      "meta-llama/Meta-Llama-3-8B", "Llama 3 8B"])
def test_lookup_ignores_case_spaces_dashes_and_underscores(spelling):
    assert models.get(spelling).key == "llama-3-8b"


def test_lookup_like_hw():
    assert roofkit.model("gpt3") is models.get("gpt-3-175b")
    assert models.get(models.get("mistral-7b")) is models.get("mistral-7b")
    assert models.names() == [m.key for m in models.catalog()] == BUILT_IN
    assert "models" in dir(roofkit)


def test_no_alias_points_at_two_models():
    for key in BUILT_IN:
        m = models.get(key)
        for spelling in (m.key, m.name, *m.aliases):
            assert models.get(spelling).key == key


def test_unknown_model_suggests_the_closest():
    with pytest.raises(UnknownModel) as raised:
        models.get("llama-2-8b")
    message = str(raised.value)
    assert message.startswith("Unknown model 'llama-2-8b'. Did you mean 'llama-3-8b'")
    assert "Expected one of: deepseek-v2, deepseek-v3, gpt-3-175b, llama-2-13b" in message
    assert isinstance(raised.value, (UnknownName, LookupError, RoofkitError))
    with pytest.raises(UnknownModel, match="Unknown model 42"):
        models.get(42)


def test_model_is_frozen_and_serializes():
    m = models.get("llama-3-8b")
    with pytest.raises(AttributeError):
        m.layers = 1
    data = json.loads(json.dumps(m.to_dict()))
    assert data["params"] == m.params and data["kv_heads"] == 8 and data["mlp"] == "swiglu"
    assert data["sources"]["d_ff"].startswith("Hugging Face")


@pytest.mark.parametrize("change, message", [
    ({"colour": "red"}, r"unknown field\(s\) \['colour'\]"),
    ({"source": None}, "needs a source"),
    ({"layers": None}, "needs layers"),
    ({"heads": 32, "kv_heads": 5}, r"heads \(32\) must be a multiple of kv_heads \(5\)"),
    ({"d_model": 100, "heads": 3}, "give head_dim"),
    ({"mlp": "relu"}, r"mlp = 'relu'; expected one of: swiglu, gelu"),
    ({"layers": 0}, "layers must be a whole number of at least 1; got 0"),
    ({"tied_embeddings": "yes"}, "tied_embeddings must be true or false"),
    ({"positions": -1}, "positions must be a whole number >= 0"),
])
def test_bad_catalog_tables_are_refused(change, message):
    table = {"name": "x", "source": "a paper", "layers": 2, "d_model": 64, "heads": 4, "d_ff": 256, "vocab": 100}
    table = {k: v for k, v in (table | change).items() if v is not None}
    with pytest.raises(InvalidValue, match=message):
        models._from_table("x", table, {})


@pytest.mark.parametrize("key, active", [("deepseek-v2", 21e9), ("deepseek-v3", 37e9)])
def test_activated_parameters_of_the_mixtures_of_experts(key, active):
    # the papers' "activated per token" (DeepSeek-V2 section 3.1.2, DeepSeek-V3 section 4.2), to two figures
    assert float(f"{models.get(key).active_params:.2g}") == active


def test_latent_attention_needs_all_its_sizes():
    table = {"name": "x", "source": "a paper", "layers": 2, "d_model": 64, "heads": 4, "d_ff": 256, "vocab": 100,
             "kv_lora_rank": 32}
    with pytest.raises(InvalidValue, match="latent attention needs all of"):
        models._from_table("x", table, {})
