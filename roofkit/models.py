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

The parameter count is computed from the shape, never stored: the weight
matrices of every layer (:func:`roofkit.formulas.transformer_layer_params`),
the embeddings, the output layer unless it is tied, and the final norm.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources

from .catalog import Catalog, check_table
from .errors import InvalidValue, UnknownName
from .units import whole

__all__ = ["Model", "UnknownModel", "get", "catalog", "names"]

MLPS = ("swiglu", "gelu")
NORMS = ("rmsnorm", "layernorm")
_REQUIRED = ("layers", "d_model", "heads", "d_ff", "vocab")
# optional fields -> default; add a field here, to Model, and to data/models.toml's header
_OPTIONAL = {"kv_heads": None, "head_dim": None, "mlp": "swiglu", "norm": "rmsnorm", "bias": False,
             "tied_embeddings": False, "positions": 0, "context": None,
             # multi-head latent attention (DeepSeek-V2/V3): leave out for MHA, GQA and MQA
             "q_lora_rank": None, "kv_lora_rank": None, "qk_nope_head_dim": None, "qk_rope_head_dim": None,
             "v_head_dim": None,
             # a mixture of experts in place of the MLP, after the first dense_layers layers
             "experts": 0, "experts_per_token": 0, "shared_experts": 0, "moe_d_ff": None, "dense_layers": 0}
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

    @property
    def params_per_layer(self) -> int:
        """Weights of one decoder layer: attention and MLP matrices, biases, norms (layers that are all alike)."""
        from .formulas import transformer_layer_params

        if self.mla or self.moe:
            raise InvalidValue(f"{self.name}'s layers differ (dense and mixture-of-experts layers, latent attention): "
                               "use params, active_params or layer_matrix_params.")
        return int(transformer_layer_params(self.d_model, self.heads, self.d_ff, gated=self.gated,
                                            kv_heads=self.kv_heads, head_dim=self.head_dim, bias=self.bias,
                                            layernorm=self.norm == "layernorm"))

    def _layers_params(self, routed: int | None = None) -> tuple[int, int]:
        """(matrix weights, norm and router vectors) of all decoder layers; ``routed`` experts per MoE layer."""
        from .formulas import transformer_layer_params

        d, H, L, m = self.d_model, self.heads, self.layers, (3 if self.gated else 2)
        if not (self.mla or self.moe):  # vectors: the norms' weights (and biases, GPT-2/3)
            matrices = int(transformer_layer_params(d, H, self.d_ff, gated=self.gated, kv_heads=self.kv_heads,
                                                    head_dim=self.head_dim)) - 2 * d
            return L * matrices, L * (self.params_per_layer - matrices)
        dense_mlp = m * d * self.d_ff
        if self.mla:  # DeepSeek-V2, section 2.1.2: W^DQ, W^UQ (and W^QR), W^DKV and W^KR, W^UK and W^UV, W^O
            nope, rope, v, c_q, c = (self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim,
                                     self.q_lora_rank, self.kv_lora_rank)
            q = (d * c_q + c_q * H * (nope + rope)) if c_q else d * H * (nope + rope)
            attention = q + d * (c + rope) + c * H * (nope + v) + H * v * d
            latent_norms = (c_q or 0) + c
        else:
            attention = int(transformer_layer_params(d, H, self.d_ff, gated=self.gated, kv_heads=self.kv_heads,
                                                     head_dim=self.head_dim)) - dense_mlp - 2 * d
            latent_norms = 0
        moe_layers = L - self.dense_layers if self.moe else 0
        experts = (self.experts if routed is None else routed) + self.shared_experts
        matrices = L * attention + (L - moe_layers) * dense_mlp + moe_layers * experts * m * d * (self.moe_d_ff or 0)
        vectors = L * (2 * d + latent_norms) + moe_layers * self.experts * d  # norms; each expert's router row
        return matrices, vectors

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

    def source(self, figure: str) -> str:
        """Where ``figure`` ('d_ff', 'kv_heads', ...) comes from."""
        return self.sources.get(figure, self.sources.get("*", "unknown"))

    def layer_ops(self, batch, seq, kv_seq=None, dtype="bf16", fused_attention=True, causal=None,
                  weight_bytes=None, kv_bytes=None):
        """The kernels of one decoder layer of this model (:func:`roofkit.formulas.transformer_layer_ops`).

        ``kv_seq=None`` is a prefill of ``seq`` tokens (causal unless ``causal=False``);
        ``seq=1, kv_seq=K`` is one decode step with K cached tokens. ``weight_bytes`` and
        ``kv_bytes``: a weight's and a cached element's size, when not ``dtype``'s.
        """
        from .formulas import transformer_layer_ops

        if self.mla or self.moe:
            raise InvalidValue(f"{self.name}: its layers (latent attention, a mixture of experts) are not modelled op "
                               "by op; roofkit counts its parameters, its weights in memory and its KV cache "
                               "(roofkit.inference).")
        if causal is None:
            causal = kv_seq is None
        return transformer_layer_ops(batch, seq, self.d_model, self.heads, self.d_ff, dtype, gated=self.gated,
                                     fused_attention=fused_attention, kv_seq=kv_seq, kv_heads=self.kv_heads,
                                     head_dim=self.head_dim, causal=causal, weight_bytes_per_element=weight_bytes,
                                     kv_bytes_per_element=kv_bytes)

    def to_dict(self) -> dict:
        return {
            "key": self.key, "name": self.name, "layers": self.layers, "d_model": self.d_model,
            "heads": self.heads, "kv_heads": self.kv_heads, "head_dim": self.head_dim, "d_ff": self.d_ff,
            "vocab": self.vocab, "mlp": self.mlp, "norm": self.norm, "bias": self.bias,
            "tied_embeddings": self.tied_embeddings, "positions": self.positions, "context": self.context,
            "params": self.params, "params_per_layer": None if self.mla or self.moe else self.params_per_layer,
            "active_params": self.active_params,
            **{f: getattr(self, f) for f in ("q_lora_rank", *_MLA, "experts", "experts_per_token", "shared_experts",
                                             "moe_d_ff", "dense_layers")},
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
    for f in ("experts", "shared_experts", "dense_layers"):
        if isinstance(values[f], bool) or not isinstance(values[f], int) or not 0 <= values[f] <= (
                values["layers"] if f == "dense_layers" else 10**6):
            raise InvalidValue(f"{where}: {f} must be a whole number >= 0 (dense_layers at most layers); "
                               f"got {values[f]!r}.")

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


def get(name: str | Model) -> Model:
    """The model called ``name`` (or an alias); UnknownModel lists the closest names."""
    return CATALOG.get(name)


def catalog() -> list[Model]:
    """Every model, in catalog order."""
    return CATALOG.entries()


def names() -> list[str]:
    """The catalog's keys."""
    return CATALOG.keys()
