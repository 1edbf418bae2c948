"""Any model, wherever a model is taken: a catalog name, a TOML file with one table in the catalog's format, or a
Hugging Face config.json (Llama, Mistral, Mixtral, Qwen, GPT-2, GPT-NeoX, DeepSeek field names). Checked through
every command that takes one (layer, serve, parallel, train) and the Python API; a missing or unknown field is one
error that names it."""

import json

import pytest

from roofkit.perf import layertime, parallel
from roofkit.catalogs import models
from roofkit.errors import InvalidValue

from helpers import run

# Hugging Face config.json files as their repositories publish them (the fields roofkit reads, and some it ignores)
LLAMA_3_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": 4096,
              "intermediate_size": 14336, "max_position_embeddings": 8192, "num_attention_heads": 32,
              "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
              "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 128256}
GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024, "vocab_size": 50257,
        "activation_function": "gelu_new"}
NEOX_20B = {"model_type": "gpt_neox", "hidden_size": 6144, "intermediate_size": 24576, "num_attention_heads": 64,
            "num_hidden_layers": 44, "vocab_size": 50432, "max_position_embeddings": 2048, "hidden_act": "gelu_fast",
            "tie_word_embeddings": False}
MIXTRAL = {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
           "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2,
           "vocab_size": 32000, "hidden_act": "silu"}
QWEN2_7B = {"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_attention_heads": 28,
            "num_hidden_layers": 28, "num_key_value_heads": 4, "vocab_size": 152064, "hidden_act": "silu",
            "tie_word_embeddings": False}
TOML = """[my-model]
name = "My model"
layers = 32
d_model = 4096
heads = 32
kv_heads = 8
d_ff = 14336
vocab = 128256
"""


@pytest.fixture
def files(tmp_path):
    paths = {}
    for name, config in (("llama", LLAMA_3_8B), ("gpt2", GPT2), ("neox", NEOX_20B), ("mixtral", MIXTRAL),
                         ("qwen2", QWEN2_7B)):
        paths[name] = tmp_path / f"{name}-config.json"
        paths[name].write_text(json.dumps(config))
    paths["toml"] = tmp_path / "my-model.toml"
    paths["toml"].write_text(TOML)
    return paths


def test_the_three_kinds_give_the_same_model(files):
    catalog = models.get("llama-3-8b")
    for source in (files["llama"], str(files["llama"]), files["toml"]):
        m = models.get(source)
        assert (m.layers, m.d_model, m.heads, m.kv_heads, m.d_ff, m.vocab) == \
            (catalog.layers, catalog.d_model, catalog.heads, catalog.kv_heads, catalog.d_ff, catalog.vocab)
        assert m.params == catalog.params
    assert models.get(files["toml"]).key == "my-model" and models.get(files["toml"]).name == "My model"


def test_published_parameter_counts(files):
    # GPT-2 small 124M (tied embeddings, learned positions); GPT-NeoX-20B 20.6B (Black et al. 2022, Table 1);
    # Mixtral 8x7B 46.7B, 12.9B active (Mistral AI); Qwen2 7B 7.6B (Qwen2 report, Table 1)
    assert models.get(files["gpt2"]).params == pytest.approx(124.4e6, rel=0.01)
    assert models.get(files["neox"]).params == pytest.approx(20.6e9, rel=0.02)
    mixtral = models.get(files["mixtral"])
    assert mixtral.params == pytest.approx(46.7e9, rel=0.01) and mixtral.active_params == pytest.approx(12.9e9, rel=0.02)
    assert models.get(files["qwen2"]).params == pytest.approx(7.6e9, rel=0.02)


def test_deepseek_s_config_gives_the_catalog_s_deepseek_v3():
    cfg = {"model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
           "num_key_value_heads": 128, "intermediate_size": 18432, "vocab_size": 129280, "q_lora_rank": 1536,
           "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
           "n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1, "moe_intermediate_size": 2048,
           "first_k_dense_replace": 3, "tie_word_embeddings": False}
    assert models.from_hf_config(cfg).params == models.get("deepseek-v3").params


def test_the_python_api_takes_files(files):
    assert layertime.predict(files["llama"], 1, 1, 2048, "h100").time_s == \
        pytest.approx(layertime.predict("llama-3-8b", 1, 1, 2048, "h100").time_s)
    plan = parallel.plan(str(files["toml"]), "h100", 64, 64 * 8192, 8192, tp=8)
    assert plan.model == "my-model" and plan.step_time_s > 0


@pytest.mark.parametrize("which", ["llama", "toml"])
def test_every_command_takes_a_file(capsys, files, which):
    path = str(files[which])
    for argv in (["layer", "--model", path, "--batch", "1", "--seq", "1", "--kv-seq", "2048", "--hw", "h100"],
                 ["serve", "--model", path, "--hw", "h100", "--context", "4096"],
                 ["parallel", "--model", path, "--hw", "h100", "--gpus", "64", "--tp", "8",
                  "--global-batch-tokens", "512k", "--seq", "8192"],
                 ["train", "--model", path, "--tokens", "15T", "--hw", "h100", "--gpus", "1024"]):
        code, out, err = run(capsys, *argv, "--json")
        assert code == 0, (argv[0], err)
        json.loads(out)


def test_parallel_takes_moe_and_latent_attention_models(capsys, files):
    code, out, err = run(capsys, "parallel", "--model", str(files["mixtral"]), "--hw", "h100", "--gpus", "64",
                         "--ep", "8", "--global-batch-tokens", "1M", "--seq", "4096", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["ep"] == 8 and "ep" in data["communication"]
    code, out, err = run(capsys, "parallel", "--model", "deepseek-v3", "--hw", "h100", "--gpus", "2048", "--pp", "16",
                         "--ep", "64", "--zero", "1", "--global-batch-tokens", "15M", "--seq", "4096", "--calibrated",
                         "--json")
    assert code == 0, err and json.loads(out)["mfu"] > 0


@pytest.mark.parametrize("config, message", [
    ({"model_type": "llama", "hidden_size": 4096}, "missing field(s) num_hidden_layers, num_attention_heads"),
    ({"model_type": "t5", "d_model": 512}, None),  # a table in the catalog's format needs layers: named below
    ({"model_type": "bert", "hidden_size": 768}, "model_type 'bert' is not one roofkit reads"),
    (dict(LLAMA_3_8B, hidden_act="relu2"), "hidden_act 'relu2' is not one roofkit reads"),
])
def test_a_bad_config_is_one_error_naming_the_field(tmp_path, capsys, config, message):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(InvalidValue) as error:
        models.get(path)
    if message:
        assert message in str(error.value)
    code, out, err = run(capsys, "train", "--model", str(path), "--tokens", "1T")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1


def test_a_bad_toml_file_is_one_error_naming_the_field(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(TOML.replace("d_ff = 14336", "d_ff = 14336\nexperts_count = 8"))
    with pytest.raises(InvalidValue, match="unknown field.*experts_count"):
        models.get(bad)
    missing = tmp_path / "missing.toml"
    missing.write_text(TOML.replace("vocab = 128256\n", ""))
    with pytest.raises(InvalidValue, match="needs vocab"):
        models.get(missing)
    code, out, err = run(capsys, "layer", "--model", str(tmp_path / "none.toml"), "--batch", "1", "--seq", "1",
                         "--hw", "h100")
    assert code == 2 and "does not exist" in err and len(err.strip().splitlines()) == 1


def test_hugging_face_ids_stay_catalog_names():
    assert models.get("meta-llama/Meta-Llama-3-8B").key == "llama-3-8b"
    with pytest.raises(models.UnknownModel):
        models.get("meta-llama/Llama-9")
