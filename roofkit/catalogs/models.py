"""The model catalog: the shapes of named transformers, each number with its source.

    >>> from roofkit import models
    >>> llama = models.get("Llama-3-8B")
    >>> llama.layers, llama.d_model, llama.heads, llama.kv_heads, llama.d_ff
    (32, 4096, 32, 8, 14336)
    >>> round(llama.params / 1e9, 2)
    8.03
    >>> llama.source("d_ff")
    'Hugging Face meta-llama/Meta-Llama-3-8B, config.json, https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json'

The figures live in ``data/models.toml``; this module only reads them and
counts. Names are looked up like accelerators (:mod:`roofkit.hardware`):
case-insensitive, spaces, dashes and underscores ignored, aliases such as the
Hugging Face repository id (``"meta-llama/Llama-2-7b-hf"``); an unknown name is
an :class:`UnknownModel` error that suggests the closest ones.

Any model, not only the catalog's: :func:`get` also takes a Model, a table in
the catalog's format (a dict), or the path of a file: a TOML file holding one
table in the catalog's format (``source`` optional), or a Hugging Face
``config.json`` (Llama, Mistral, Mixtral, Qwen, GPT-2, GPT-NeoX, DeepSeek field
names, :func:`from_hf_config`). A missing or unknown field is one error that
names it.

The parameter count is computed from the shape, never stored: the weight
matrices of every layer (:func:`roofkit.formulas.transformer_layer_params`),
the embeddings, the output layer unless it is tied, and the final norm.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import tomllib
from dataclasses import dataclass, field
from importlib import resources

from .lookup import Catalog, check_table
from ..errors import InvalidValue, UnknownName
from ..units import whole

__all__ = ["Model", "UnknownModel", "get", "catalog", "names", "from_table", "from_hf_config", "load_file",
           "HF_FAMILIES"]

MLPS = ("swiglu", "gelu")
NORMS = ("rmsnorm", "layernorm")
_REQUIRED = ("layers", "d_model", "heads", "d_ff", "vocab")
# optional fields -> default; add a field here, to Model, and to data/models.toml's header
_OPTIONAL = {"kv_heads": None, "head_dim": None, "mlp": "swiglu", "norm": "rmsnorm", "bias": False,
             "tied_embeddings": False, "positions": 0, "context": None,
             # multi-head latent attention (DeepSeek-V2/V3): leave out for MHA, GQA and MQA
             "q_lora_rank": None, "kv_lora_rank": None, "qk_nope_head_dim": None, "qk_rope_head_dim": None,
             "v_head_dim": None,
             # a mixture of experts in place of the MLP, after the first dense_layers layers, in every
             # moe_layer_freq-th of them; mtp_layers multi-token prediction modules after the last layer
             "experts": 0, "experts_per_token": 0, "shared_experts": 0, "moe_d_ff": None, "dense_layers": 0,
             "moe_layer_freq": 1, "mtp_layers": 0}
_MLA = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
_TEXT = ("name", "aliases", "source", "sources", "notes")


class UnknownModel(UnknownName):
    kind = "model"


@dataclass(frozen=True)
class Model:
    """One model's shape. Sizes are counts (layers, heads) or vector widths (d_model, d_ff).

    ``kv_heads`` < ``heads`` is grouped-query attention (GQA), 1 is multi-query
    (MQA). ``sources`` maps every figure's field name to where it comes from.
    """

    key: str
    name: str
    layers: int
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    d_ff: int
    vocab: int
    mlp: str = "swiglu"
    tied_embeddings: bool = False
    aliases: tuple[str, ...] = ()
    sources: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    norm: str = "rmsnorm"
    bias: bool = False
    positions: int = 0
    context: int | None = None
    q_lora_rank: int | None = None  # MLA: the query's latent (None: a full-rank query projection)
    kv_lora_rank: int | None = None  # MLA: d_c, the latent that is cached instead of K and V
    qk_nope_head_dim: int | None = None
    qk_rope_head_dim: int | None = None  # MLA: d_h^R, the RoPE key, cached beside the latent
    v_head_dim: int | None = None
    experts: int = 0  # routed experts (0: a dense MLP in every layer)
    experts_per_token: int = 0
    shared_experts: int = 0
    moe_d_ff: int | None = None
    dense_layers: int = 0  # the first layers keep a dense MLP of width d_ff
    moe_layer_freq: int = 1  # after them, every moe_layer_freq-th layer has experts (Llama 4 Maverick: 2)
    mtp_layers: int = 0  # multi-token prediction modules (DeepSeek-V3: 1), trained with it, not in params

    @property
    def gated(self) -> bool:
        """True for a gated MLP (SwiGLU: a gate and an up projection)."""
        return self.mlp == "swiglu"

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434): a latent is cached, not K and V."""
        return self.kv_lora_rank is not None

    @property
    def moe(self) -> bool:
        """A mixture of experts in place of the MLP (after the first ``dense_layers``)."""
        return self.experts > 0

    def is_moe_layer(self, layer: int) -> bool:
        """Whether decoder layer ``layer`` (0-based) has experts: none of the first ``dense_layers``; after them
        every ``moe_layer_freq``-th, the last of each group of that many (layers k-1, 2k-1, ... past the dense
        ones: Hugging Face Llama 4's ``interleave_moe_layer_step``, Qwen's ``decoder_sparse_step``).

        >>> [get("llama-4-maverick").is_moe_layer(i) for i in range(4)]
        [False, True, False, True]
        """
        past = layer - self.dense_layers
        return self.moe and past >= 0 and (past + 1) % self.moe_layer_freq == 0

    @property
    def moe_layers(self) -> int:
        """The decoder layers with experts (0 in a dense model): every consumer counts them from here.

        >>> get("deepseek-v3").moe_layers, get("llama-4-maverick").moe_layers, get("llama-3-8b").moe_layers
        (58, 24, 0)
        """
        return (self.layers - self.dense_layers) // self.moe_layer_freq if self.moe else 0

    @property
    def mlp_width(self) -> int:
        """The MLP width one token goes through: d_ff, or in a mixture's expert layers its routed and shared
        experts together, (experts_per_token + shared_experts) x moe_d_ff."""
        if self.moe:
            return (self.experts_per_token + self.shared_experts) * self.moe_d_ff
        return self.d_ff

    @property
    def params_per_layer(self) -> int:
        """Weights of one decoder layer: attention and MLP matrices, biases, norms (layers that are all alike)."""
        from ..formulas import transformer_layer_params  # deferred: formulas imports numpy

        if self.mla or self.moe:
            raise InvalidValue(f"{self.name}'s layers differ (dense and mixture-of-experts layers, latent attention): "
                               "use params, active_params or layer_matrix_params.")
        return int(transformer_layer_params(self.d_model, self.heads, self.d_ff, gated=self.gated,
                                            kv_heads=self.kv_heads, head_dim=self.head_dim, bias=self.bias,
                                            layernorm=self.norm == "layernorm"))

    def _layers_params(self, routed: int | None = None) -> tuple[int, int]:
        """(matrix weights, norm and router vectors) of all decoder layers; ``routed`` experts per MoE layer."""
        from ..formulas import transformer_layer_params  # deferred: formulas imports numpy

        d, H, L, m = self.d_model, self.heads, self.layers, (3 if self.gated else 2)
        if not (self.mla or self.moe):  # vectors: the norms' weights (and biases, GPT-2/3)
            matrices = int(transformer_layer_params(d, H, self.d_ff, gated=self.gated, kv_heads=self.kv_heads,
                                                    head_dim=self.head_dim)) - 2 * d
            return L * matrices, L * (self.params_per_layer - matrices)
        dense_mlp = m * d * self.d_ff
        attention = sum(self.attention_matrices)
        latent_norms = ((self.q_lora_rank or 0) + self.kv_lora_rank) if self.mla else 0
        moe_layers = self.moe_layers
        experts = (self.experts if routed is None else routed) + self.shared_experts
        matrices = L * attention + (L - moe_layers) * dense_mlp + moe_layers * experts * m * d * (self.moe_d_ff or 0)
        vectors = L * (2 * d + latent_norms) + moe_layers * self.experts * d  # norms; each expert's router row
        return matrices, vectors

    @property
    def attention_matrices(self) -> tuple[int, int]:
        """One layer's attention weights: (its projections in, the output projection W^O). Latent attention
        (DeepSeek-V2, arXiv:2405.04434, section 2.1.2): W^DQ, W^UQ (and W^QR), W^DKV and W^KR, W^UK and W^UV in;
        else W^Q, W^K, W^V in."""
        from ..formulas import transformer_layer_params  # deferred: formulas imports numpy

        d, H = self.d_model, self.heads
        if self.mla:
            nope, rope, v, c_q, c = (self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim,
                                     self.q_lora_rank, self.kv_lora_rank)
            q = (d * c_q + c_q * H * (nope + rope)) if c_q else d * H * (nope + rope)
            return q + d * (c + rope) + c * H * (nope + v), H * v * d
        mlp = (3 if self.gated else 2) * d * self.d_ff
        both = int(transformer_layer_params(d, H, self.d_ff, gated=self.gated, kv_heads=self.kv_heads,
                                            head_dim=self.head_dim)) - mlp - 2 * d
        out = H * self.head_dim * d
        return both - out, out

    def _mtp_params(self, routed: int | None = None) -> int:
        """One multi-token prediction module without the embedding and output head it shares with the model
        (DeepSeek-V3, arXiv:2412.19437, section 2.2): a decoder layer like the model's last one, the projection
        M_k of [h; emb] (2d x d), and three RMSNorms (of h, of the embedding, and before the shared head)."""
        one = dataclasses.replace(self, layers=1, dense_layers=0 if self.is_moe_layer(self.layers - 1) else 1,
                                  moe_layer_freq=1)
        return sum(one._layers_params(routed)) + 2 * self.d_model ** 2 + 3 * self.d_model

    @property
    def mtp_params(self) -> int:
        """The weights the ``mtp_layers`` multi-token prediction modules add in training (the embedding and the
        output head are the model's own). DeepSeek-V3's released checkpoint also stores a copy of both in its
        MTP layer: 11.6B + 2 x 0.93B, the "14B of the Multi-Token Prediction (MTP) Module weights" of its
        685B (deepseek-ai/DeepSeek-V3, README.md). Not in :attr:`params`, which is the main model's.

        >>> round(get("deepseek-v3").mtp_params / 1e9, 1)
        11.6
        """
        if not self.mtp_layers:
            return 0
        return self.mtp_layers * self._mtp_params()

    @property
    def mtp_active_params(self) -> int:
        """The weights one token is multiplied by in the MTP modules: each one's layer (its routed experts
        only), its projection, and the shared output head a second time (Megatron-Core counts the same:
        ``num_floating_point_operations`` in megatron/training/training.py adds ``mtp_num_layers`` layers, the
        projections and one more logit pass)."""
        if not self.mtp_layers:
            return 0
        return self.mtp_layers * (self._mtp_params(self.experts_per_token if self.moe else None)
                                  + self.vocab * self.d_model)

    @property
    def layer_matrix_params(self) -> int:
        """The weights of every decoder layer's linear layers: what weight-only quantization stores in its format."""
        return self._layers_params()[0]

    @property
    def active_params(self) -> int:
        """The weights one token is multiplied by: all but the experts it is not routed to and the input
        embedding table (a lookup). DeepSeek-V3: 37B of 671B (DeepSeek-V3 report, arXiv:2412.19437)."""
        matrices, vectors = self._layers_params(self.experts_per_token if self.moe else None)
        lookups = (self.positions + (0 if self.tied_embeddings else self.vocab)) * self.d_model
        return matrices + vectors + self.embedding_params - lookups + self._final_norm

    @property
    def embedding_params(self) -> int:
        """Token embeddings, learned position embeddings, and the output layer unless it is tied."""
        tables = self.vocab * (1 if self.tied_embeddings else 2) + self.positions
        return tables * self.d_model

    @property
    def _final_norm(self) -> int:
        return self.d_model * (2 if self.norm == "layernorm" else 1)

    @property
    def params(self) -> int:
        """Total parameters: layers x params_per_layer + embeddings + the final norm (every expert counted)."""
        if self.mla or self.moe:
            return sum(self._layers_params()) + self.embedding_params + self._final_norm
        return self.layers * self.params_per_layer + self.embedding_params + self._final_norm

    def parameter_tensors(self) -> list[int]:
        """The elements of each parameter tensor, as Megatron-LM holds them: one fused QKV matrix (MLA: its
        down and up projections), the output projection, one fused gate-and-up matrix and the down matrix of
        each MLP or expert, each router, bias and norm vector on its own; then the embeddings and the final
        norm. They sum to :attr:`params`. What a framework that handles its weights tensor by tensor (ZeRO-3
        gathering each parameter) counts calls by.

        >>> len(get("gpt3-175b").parameter_tensors())   # 12 a layer x 96, 2 embeddings, the final LayerNorm
        1156
        """
        d, H, m = self.d_model, self.heads, (2 if self.gated else 1)
        q, kv = H * self.head_dim, 2 * self.kv_heads * self.head_dim
        norm = [d, d] if self.norm == "layernorm" else [d]
        if self.mla:  # DeepSeek-V2, section 2.1.2: W^DQ and W^UQ (or one W^Q), W^DKV with W^KR, W^UK with W^UV
            nope, rope, v, c_q, c = (self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim,
                                     self.q_lora_rank, self.kv_lora_rank)
            query = [d * c_q, c_q, c_q * H * (nope + rope)] if c_q else [d * H * (nope + rope)]
            attention = query + [d * (c + rope), c, c * H * (nope + v), H * v * d]
        else:
            bias = self.bias and not self.moe
            attention = [d * (q + kv), q + kv, q * d, d] if bias else [d * (q + kv), q * d]

        def mlp(width, bias):
            return [m * d * width, m * width, width * d, d] if bias else [m * d * width, width * d]

        tensors = []
        for layer in range(self.layers):
            tensors += norm + attention + norm
            if self.is_moe_layer(layer):
                tensors.append(self.experts * d)  # the router
                for _ in range(self.experts + self.shared_experts):
                    tensors += mlp(self.moe_d_ff, False)
            else:
                tensors += mlp(self.d_ff, self.bias and not (self.moe or self.mla))
        tensors.append(self.vocab * d)
        if self.positions:
            tensors.append(self.positions * d)
        if not self.tied_embeddings:
            tensors.append(self.vocab * d)
        return tensors + norm

    def source(self, figure: str) -> str:
        """Where ``figure`` ('d_ff', 'kv_heads', ...) comes from."""
        return self.sources.get(figure, self.sources.get("*", "unknown"))

    def layer_ops(self, batch, seq, kv_seq=None, dtype="bf16", fused_attention=True, causal=None,
                  weight_bytes=None, kv_bytes=None, dense=False, routing="uniform"):
        """The kernels of one decoder layer of this model (:func:`roofkit.formulas.transformer_layer_ops`).

        ``kv_seq=None`` is a prefill of ``seq`` tokens (causal unless ``causal=False``);
        ``seq=1, kv_seq=K`` is one decode step with K cached tokens. ``weight_bytes`` and
        ``kv_bytes``: a weight's and a cached element's size, when not ``dtype``'s.

        A mixture of experts runs :func:`roofkit.routing.moe_mlp_ops` in place of the MLP
        (``routing``: how the tokens spread over the experts); ``dense=True`` gives one of its
        first ``dense_layers``, which keep a dense MLP of width d_ff.

        Latent attention (DeepSeek-V2, V3) runs :func:`roofkit.formulas.latent_attention_ops` in place
        of 'qkv' and 'attn': absorbed when the step reads a cache and is not causal (decode and a
        speculative verification, as vLLM and FlashMLA run them), K and V rebuilt from the latent
        for a prefill (causal, with or without a cached prefix).
        """
        from ..formulas import latent_attention_ops, transformer_layer_ops  # deferred: formulas imports numpy
        from ..routing import moe_mlp_ops  # deferred: routing pulls in numpy (through formulas)

        if self.mla and fused_attention is not True:
            raise InvalidValue(f"{self.name}: latent attention is modelled fused only (FlashMLA's decode kernel, "
                               f"FlashAttention for its prefill); got fused_attention={fused_attention!r}.")
        if causal is None:
            causal = kv_seq is None
        ops = transformer_layer_ops(batch, seq, self.d_model, self.heads, self.d_ff, dtype, gated=self.gated,
                                    fused_attention=fused_attention, kv_seq=kv_seq, kv_heads=self.kv_heads,
                                    head_dim=self.v_head_dim if self.mla else self.head_dim, causal=causal,
                                    weight_bytes_per_element=weight_bytes, kv_bytes_per_element=kv_bytes)
        if self.mla:  # DeepSeek-V2, section 2.1.2: latent attention in place of 'qkv' and 'attn'; W^O reads H d_h^V
            latent = latent_attention_ops(batch, seq, self.d_model, self.heads, self.kv_lora_rank,
                                          self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim, dtype,
                                          self.q_lora_rank, kv_seq, causal,
                                          absorbed=kv_seq is not None and not causal,  # decode: FlashMLA, absorbed
                                          weight_bytes_per_element=weight_bytes, kv_bytes_per_element=kv_bytes)
            ops = {"norm1": ops["norm1"]} | latent | {n: c for n, c in ops.items() if n not in ("norm1", "qkv", "attn")}
        if not self.moe or dense:
            return ops
        experts = moe_mlp_ops(batch * seq, self.d_model, self.moe_d_ff or self.d_ff, self.experts,
                              self.experts_per_token, dtype, self.gated, weight_bytes, self.shared_experts, routing)
        head = {name: cost for name, cost in ops.items() if not name.startswith("mlp.") and name != "residual2"}
        return head | experts | {"residual2": ops["residual2"]}

    def to_dict(self) -> dict:
        return {
            "key": self.key, "name": self.name, "layers": self.layers, "d_model": self.d_model,
            "heads": self.heads, "kv_heads": self.kv_heads, "head_dim": self.head_dim, "d_ff": self.d_ff,
            "vocab": self.vocab, "mlp": self.mlp, "norm": self.norm, "bias": self.bias,
            "tied_embeddings": self.tied_embeddings, "positions": self.positions, "context": self.context,
            "params": self.params, "params_per_layer": None if self.mla or self.moe else self.params_per_layer,
            "active_params": self.active_params,
            **{f: getattr(self, f) for f in ("q_lora_rank", *_MLA, "experts", "experts_per_token", "shared_experts",
                                             "moe_d_ff", "dense_layers", "moe_layer_freq", "mtp_layers")},
            "moe_layers": self.moe_layers, "mtp_params": self.mtp_params,
            "aliases": list(self.aliases), "sources": dict(self.sources), "notes": list(self.notes),
        }


def _from_table(key: str, table: dict, sources: dict[str, str]) -> Model:
    where = f"model {key!r}"
    check_table(where, table, {*_REQUIRED, *_OPTIONAL, *_TEXT}, _REQUIRED)
    values = {f: whole(table[f], f"{where}: {f}", integer_only=True) for f in _REQUIRED}
    values |= {f: table.get(f, default) for f, default in _OPTIONAL.items()}
    heads = values["heads"]
    values["kv_heads"] = whole(values["kv_heads"] or heads, f"{where}: kv_heads", integer_only=True)
    if heads % values["kv_heads"]:
        raise InvalidValue(f"{where}: heads ({heads}) must be a multiple of kv_heads ({values['kv_heads']}).")
    if values["head_dim"] is None:
        if values["d_model"] % heads:
            raise InvalidValue(f"{where}: d_model ({values['d_model']}) is not a multiple of heads ({heads}); "
                               "give head_dim.")
        values["head_dim"] = values["d_model"] // heads
    values["head_dim"] = whole(values["head_dim"], f"{where}: head_dim", integer_only=True)
    for name, choices in (("mlp", MLPS), ("norm", NORMS)):
        if values[name] not in choices:
            raise InvalidValue(f"{where}: {name} = {values[name]!r}; expected one of: {', '.join(choices)}.")
    for flag in ("bias", "tied_embeddings"):
        if not isinstance(values[flag], bool):
            raise InvalidValue(f"{where}: {flag} must be true or false; got {values[flag]!r}.")
    if isinstance(values["positions"], bool) or not isinstance(values["positions"], int) or values["positions"] < 0:
        raise InvalidValue(f"{where}: positions must be a whole number >= 0; got {values['positions']!r}.")
    if values["context"] is not None:
        whole(values["context"], f"{where}: context", integer_only=True)
    given = [f for f in _MLA if values[f] is not None]
    if given and len(given) < len(_MLA):
        raise InvalidValue(f"{where}: latent attention needs all of {', '.join(_MLA)}; got only {', '.join(given)}.")
    for f in (*given, *(["q_lora_rank"] if values["q_lora_rank"] is not None else [])):
        whole(values[f], f"{where}: {f}", integer_only=True)
    if values["experts"]:
        for f in ("experts", "experts_per_token", "moe_d_ff"):
            whole(values[f], f"{where}: {f}", integer_only=True)
        if values["experts_per_token"] > values["experts"]:
            raise InvalidValue(f"{where}: experts_per_token ({values['experts_per_token']}) exceeds experts "
                               f"({values['experts']}).")
    for f in ("experts", "shared_experts", "dense_layers", "mtp_layers"):
        if isinstance(values[f], bool) or not isinstance(values[f], int) or not 0 <= values[f] <= (
                values["layers"] if f == "dense_layers" else 10**6):
            raise InvalidValue(f"{where}: {f} must be a whole number >= 0 (dense_layers at most layers); "
                               f"got {values[f]!r}.")
    whole(values["moe_layer_freq"], f"{where}: moe_layer_freq", integer_only=True)

    cite = lambda source_id: sources.get(source_id, source_id)  # noqa: E731
    cited = {"*": cite(table["source"])}
    cited |= {f: cited["*"] for f in (*_REQUIRED, *_OPTIONAL) if f in table}
    cited |= {f: cite(s) for f, s in table.get("sources", {}).items()}
    return Model(key=key, name=table.get("name", key), aliases=tuple(table.get("aliases", ())),
                 sources=cited, notes=tuple(table.get("notes", ())), **values)


def _read() -> list[Model]:
    document = tomllib.loads(resources.files("roofkit").joinpath("data/models.toml").read_text(encoding="utf-8"))
    sources = document.pop("sources", {})
    return [_from_table(key, table, sources) for key, table in document.items()]


CATALOG: Catalog[Model] = Catalog(Model, _read, UnknownModel, "model")


def get(name) -> Model:
    """The model called ``name`` (or an alias), a Model, a table (dict) or a model file; see the module's docstring.

    A name that ends in .toml or .json is read with :func:`load_file`; any other
    name is looked up in the catalog (Hugging Face ids such as
    "meta-llama/Llama-2-7b-hf" are aliases there), then, if the catalog lacks it
    and it names a file, read from that file. UnknownModel lists the closest names.
    """
    if isinstance(name, Model):
        return name
    if isinstance(name, dict):
        return from_table(name)
    if isinstance(name, os.PathLike) or (isinstance(name, str) and name.lower().endswith((".toml", ".json"))):
        return load_file(name)
    try:
        return CATALOG.get(name)
    except UnknownModel:
        if isinstance(name, str) and os.path.isfile(name):  # a file without the usual suffix
            return load_file(name)
        raise


def from_table(table: dict, key: str | None = None, source: str | None = None) -> Model:
    """A Model from one table in the catalog's format (fields of data/models.toml; ``source`` optional).

    >>> m = from_table({"layers": 2, "d_model": 64, "heads": 4, "d_ff": 256, "vocab": 1000})
    >>> m.key, m.kv_heads, m.head_dim, m.source("d_ff")
    ('custom', 4, 16, 'given as a table')
    """
    if not isinstance(table, dict):
        raise InvalidValue(f"a model table is a mapping of fields to values; got {type(table).__name__}.")
    table = dict(table)
    key = str(table.pop("key", None) or key or table.get("name") or "custom")
    table.setdefault("source", source or "given as a table")
    return _from_table(key, table, {})


def load_file(path) -> Model:
    """A Model from a file: a TOML file with one table in the catalog's format, or a Hugging Face config.json.

    The TOML file holds either one table (``[my-model]`` and its fields) or the
    fields at its top level (the key is then the file's name). A ``.json`` file
    is a Hugging Face ``config.json`` (:func:`from_hf_config`), or a table in the
    catalog's format when it has ``d_model``.
    """
    p = pathlib.Path(path)
    if not p.is_file():
        raise InvalidValue(f"model file {str(p)!r} does not exist; give a catalog name ({', '.join(names()[:4])}, "
                           f"...), a TOML file or a Hugging Face config.json.")
    text = p.read_text(encoding="utf-8")
    where = f"the file {p.name}"
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise InvalidValue(f"{where} is not valid JSON: {error.msg} (line {error.lineno}).") from None
        if not isinstance(data, dict):
            raise InvalidValue(f"{where} holds a JSON {type(data).__name__}, not an object of fields.")
        if "d_model" in data:
            return from_table(data, key=p.stem, source=f"{where}")
        return from_hf_config(data, key=p.stem, source=f"{where} (a Hugging Face config.json)")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InvalidValue(f"{where} is not valid TOML: {error}.") from None
    tables = {k: v for k, v in data.items() if isinstance(v, dict) and k != "sources"}
    if "layers" in data or not tables:
        return from_table(data, key=p.stem, source=f"{where}")
    if len(tables) != 1:
        raise InvalidValue(f"{where} holds {len(tables)} tables ({', '.join(tables)}); a model file holds one.")
    (key, table), = tables.items()
    return from_table(table, key=key, source=f"{where}")


# Hugging Face config.json field names, per family: roofkit field -> config field
_HF_COMMON = {"layers": "num_hidden_layers", "d_model": "hidden_size", "heads": "num_attention_heads",
              "kv_heads": "num_key_value_heads", "head_dim": "head_dim", "d_ff": "intermediate_size",
              "vocab": "vocab_size", "tied_embeddings": "tie_word_embeddings", "context": "max_position_embeddings"}
_HF_GPT2 = {"layers": "n_layer", "d_model": "n_embd", "heads": "n_head", "d_ff": "n_inner", "vocab": "vocab_size",
            "context": "n_positions", "tied_embeddings": "tie_word_embeddings"}
_HF_DEEPSEEK = {"q_lora_rank": "q_lora_rank", "kv_lora_rank": "kv_lora_rank", "qk_nope_head_dim": "qk_nope_head_dim",
                "qk_rope_head_dim": "qk_rope_head_dim", "v_head_dim": "v_head_dim", "experts": "n_routed_experts",
                "experts_per_token": "num_experts_per_tok", "shared_experts": "n_shared_experts",
                "moe_d_ff": "moe_intermediate_size", "dense_layers": "first_k_dense_replace",
                "mtp_layers": "num_nextn_predict_layers"}
_HF_MIXTRAL = {"experts": "num_local_experts", "experts_per_token": "num_experts_per_tok"}
_HF_QWEN_MOE = {"experts": "num_experts", "experts_per_token": "num_experts_per_tok",
                "moe_d_ff": "moe_intermediate_size", "moe_layer_freq": "decoder_sparse_step"}
# model_type -> (field names, the rest of the architecture)
HF_FAMILIES = {
    "llama": (_HF_COMMON, {"mlp": "swiglu", "norm": "rmsnorm"}),
    "mistral": (_HF_COMMON, {"mlp": "swiglu", "norm": "rmsnorm"}),
    "mixtral": (_HF_COMMON | _HF_MIXTRAL, {"mlp": "swiglu", "norm": "rmsnorm"}),
    "qwen2": (_HF_COMMON, {"mlp": "swiglu", "norm": "rmsnorm"}),
    "qwen3": (_HF_COMMON, {"mlp": "swiglu", "norm": "rmsnorm"}),
    "qwen2_moe": (_HF_COMMON | _HF_QWEN_MOE, {"mlp": "swiglu", "norm": "rmsnorm"}),
    "qwen3_moe": (_HF_COMMON | _HF_QWEN_MOE, {"mlp": "swiglu", "norm": "rmsnorm"}),
    "gpt2": (_HF_GPT2, {"mlp": "gelu", "norm": "layernorm", "bias": True}),
    "gpt_neox": (_HF_COMMON, {"mlp": "gelu", "norm": "layernorm", "bias": True}),
    "deepseek_v2": (_HF_COMMON | _HF_DEEPSEEK, {"mlp": "swiglu", "norm": "rmsnorm"}),
    "deepseek_v3": (_HF_COMMON | _HF_DEEPSEEK, {"mlp": "swiglu", "norm": "rmsnorm"}),
}
_HF_REQUIRED = ("layers", "d_model", "heads", "d_ff", "vocab")
_HF_ACTIVATIONS = {"silu": "swiglu", "swish": "swiglu", "gelu": "gelu", "gelu_new": "gelu", "gelu_fast": "gelu",
                   "gelu_pytorch_tanh": "gelu", "relu": "gelu"}


def _hf_family(config: dict) -> str:
    family = config.get("model_type")
    if family is None:
        family = "gpt2" if "n_embd" in config else "llama"
    if family not in HF_FAMILIES:
        raise InvalidValue(f"config.json: model_type {family!r} is not one roofkit reads; it reads: "
                           f"{', '.join(HF_FAMILIES)}. Or write the shape as a TOML table in the catalog's format.")
    return family


def from_hf_config(config: dict, key: str | None = None, source: str | None = None) -> Model:
    """A Model from a Hugging Face ``config.json`` (as a dict), by its ``model_type``'s field names.

    Llama, Mistral, Mixtral, Qwen (2, 3, MoE), GPT-2, GPT-NeoX and DeepSeek (V2,
    V3: latent attention, routed and shared experts). A missing field the shape
    needs, or an activation or model_type roofkit does not read, is one
    InvalidValue naming it.

    >>> m = from_hf_config({"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
    ...                     "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
    ...                     "vocab_size": 128256})
    >>> round(m.params / 1e9, 2)
    8.03
    """
    family = _hf_family(config)
    fields, arch = HF_FAMILIES[family]
    table = dict(arch)
    for ours, theirs in fields.items():
        if theirs in config and config[theirs] is not None:
            table[ours] = config[theirs]
    if family == "gpt2":
        table.setdefault("d_ff", 4 * table["d_model"] if "d_model" in table else None)
        table["positions"] = config.get("n_positions", 0)
        table.setdefault("tied_embeddings", True)
        activation = config.get("activation_function", "gelu_new")
    else:
        activation = config.get("hidden_act", "silu" if arch["mlp"] == "swiglu" else "gelu")
    if family == "gpt_neox":
        table["tied_embeddings"] = bool(config.get("tie_word_embeddings", False))
    missing = [f for f in _HF_REQUIRED if table.get(f) is None]
    if missing:
        names = [fields.get(f, f) for f in missing]
        raise InvalidValue(f"config.json ({family}): missing field(s) {', '.join(names)}, which the shape needs "
                           f"(roofkit's {', '.join(missing)}).")
    if activation not in _HF_ACTIVATIONS:
        raise InvalidValue(f"config.json ({family}): hidden_act {activation!r} is not one roofkit reads; it reads: "
                           f"{', '.join(_HF_ACTIVATIONS)}.")
    if family not in ("gpt2", "gpt_neox"):
        table["mlp"] = _HF_ACTIVATIONS[activation]
    if family.startswith("deepseek"):
        table["moe_d_ff"] = table.get("moe_d_ff")
        if table.get("q_lora_rank") is None:
            table.pop("q_lora_rank", None)
    if family in ("mixtral",):
        table["moe_d_ff"] = table["d_ff"]
    table = {k: v for k, v in table.items() if v is not None}
    name = config.get("_name_or_path") or key or family
    table.setdefault("name", str(name))
    return from_table(table, key=key or str(name), source=source or "a Hugging Face config.json")


def catalog() -> list[Model]:
    """Every model, in catalog order."""
    return CATALOG.entries()


def names() -> list[str]:
    """The catalog's keys."""
    return CATALOG.keys()
