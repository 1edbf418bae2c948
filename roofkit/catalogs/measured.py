"""The measured layers shipped with roofkit (``roofkit/data/measured/``), and the format ``roofkit measure`` writes.

A dataset is whole decoder layers timed on one GPU, op by op and whole: the
data :mod:`roofkit.layertime` is calibrated on. The format is the one of
``roofkit/data/measured/h200-2026-11-30/layers.json`` (one H200, 2026-11-30,
PyTorch 2.11, CUDA events, L2 flushed before each run):

    {"device", "torch", "date", "method",
     "launch": {host_per_launch_s, gpu_stream_per_kernel_s, single_kernel_event_s, graph_per_kernel_s},
     "cases": [{model, d, H, KV, ff, head_dim, batch, seq, kv_seq, causal,
                ops_s: {norm1, qkv, attn, out, residual1, norm2, mlp.up, mlp.gate, mlp.act, mlp.down, residual2},
                layer_s, layer_graph_s, layer_wall_s}],
     "roofs": {peak_flops_per_s: {bf16: ...}, bandwidth_bytes_per_s}, "catalog": "h200",   (optional)
     "attention": {label, dtype, flops, time_s},   (optional: one large causal SDPA, timed alone)
     "training": [{model, d, H, KV, ff, head_dim, batch, seq, forward_s, forward_backward_s}]}  (optional)

    >>> data = load_layers()                      # the H200 dataset shipped with roofkit
    >>> data.device, len(data.cases)
    ('NVIDIA H200', 9)

Reading a dataset is here, beside the other sourced data, so that the models
(:mod:`roofkit.layertime`, :mod:`roofkit.steptime`) can use it; measuring one
through PyTorch is :mod:`roofkit.measure.layers`, which exports these names too.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

from ..errors import InvalidValue
from ..units import whole

__all__ = ["LayerCase", "LayerDataset", "TrainingCase", "load_layers", "shipped", "SHIPPED", "OPS"]

SHIPPED = "h200-2026-11-30"  # the folder under roofkit/data/measured/
OPS = ("norm1", "qkv", "attn", "out", "residual1", "norm2", "mlp.up", "mlp.gate", "mlp.act", "mlp.down", "residual2")
_LAUNCH = ("host_per_launch_s", "gpu_stream_per_kernel_s", "single_kernel_event_s", "graph_per_kernel_s")


_SHAPE = ("d", "H", "KV", "ff", "head_dim", "batch", "seq")


def _seconds(value, where: str, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise InvalidValue(f"{where}: {name} must be a time in seconds greater than 0; got {value!r}.")


@dataclass(frozen=True)
class _Measured:
    """A layer's shape and the batch and sequence it was timed at: what every measured case has."""

    model: str
    d: int
    H: int
    KV: int
    ff: int
    head_dim: int
    batch: int
    seq: int

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def _checked(cls, data: dict, where: str, required, integers=(), times=()):
        """The case in ``data`` (missing fields, whole numbers and times checked), else one clear error."""
        missing = [k for k in required if k not in data]
        if missing:
            raise InvalidValue(f"{where} lacks {', '.join(missing)} (see roofkit.measure.layers for the format).")
        fields = {k: data.get(k) for k in cls.__dataclass_fields__}
        for k in (*_SHAPE, *integers):
            whole(fields[k], f"{where}: {k}", integer_only=True)
        for k in times:
            if fields[k] is not None:
                _seconds(fields[k], where, k)
        return fields


@dataclass(frozen=True)
class LayerCase(_Measured):
    """One layer measured: its shape, its batch and sequence, each op's time and the whole layer's (s)."""

    kv_seq: int
    causal: bool
    ops_s: dict[str, float]
    layer_s: float
    layer_graph_s: float | None = None
    layer_wall_s: float | None = None

    @property
    def decode(self) -> bool:
        """One new token per sequence against a cache (not causal); else a causal prefill."""
        return not self.causal

    @property
    def label(self) -> str:
        if self.decode:
            return f"{self.model} decode, batch {self.batch}, {self.kv_seq} cached"
        return f"{self.model} prefill, {'' if self.batch == 1 else f'{self.batch} x '}{self.seq} tokens"

    @classmethod
    def from_dict(cls, data: dict, where: str = "case") -> "LayerCase":
        fields = cls._checked(data, where, ("model", *_SHAPE, "kv_seq", "causal", "ops_s", "layer_s"),
                              integers=("kv_seq",), times=("layer_s", "layer_graph_s", "layer_wall_s"))
        if not isinstance(fields["ops_s"], dict):
            raise InvalidValue(f"{where}: ops_s must map op names to seconds.")
        return cls(**fields)


@dataclass(frozen=True)
class TrainingCase(_Measured):
    """One layer timed as training runs it: forward alone, and forward plus backward (s)."""

    forward_s: float
    forward_backward_s: float

    @property
    def backward_s(self) -> float:
        return self.forward_backward_s - self.forward_s

    @property
    def label(self) -> str:
        return f"{self.model} training, {'' if self.batch == 1 else f'{self.batch} x '}{self.seq} tokens"

    @classmethod
    def from_dict(cls, data: dict, where: str = "training case") -> "TrainingCase":
        return cls(**cls._checked(data, where, tuple(cls.__dataclass_fields__), times=("forward_s", "forward_backward_s")))


@dataclass
class LayerDataset:
    """A set of measured layers on one device, with its launch figures and (when known) its achievable roofs."""

    device: str
    cases: list[LayerCase]
    launch: dict[str, float] = field(default_factory=dict)
    torch: str = ""
    date: str = ""
    method: str = ""
    roofs: dict | None = None  # {"peak_flops_per_s": {precision: FLOP/s}, "bandwidth_bytes_per_s": B/s}
    catalog: str | None = None  # the catalog key of the device, when one matches
    source: str = ""  # where this dataset was read from
    attention: dict | None = None  # one large causal attention timed alone: {label, dtype, flops, time_s}
    training: list[TrainingCase] = field(default_factory=list)  # forward and backward, as training runs them

    def to_dict(self) -> dict:
        """The layers.json format (``source`` left out: it says where a file was read from)."""
        data = {"device": self.device, "torch": self.torch, "date": self.date, "method": self.method,
                "launch": dict(self.launch), "cases": [c.to_dict() for c in self.cases]}
        if self.roofs:
            data["roofs"] = self.roofs
        if self.catalog:
            data["catalog"] = self.catalog
        if self.attention:
            data["attention"] = self.attention
        if self.training:
            data["training"] = [c.to_dict() for c in self.training]
        return data

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        try:
            path.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")
        except OSError as error:
            raise InvalidValue(f"cannot write the layers to {str(path)!r}: {error.strerror or error}.") from None
        return path


def shipped(file: str = "layers.json", name: str = SHIPPED):
    """A file of a dataset shipped with roofkit, parsed if it is JSON (``oracle.json``, ``compiled.json``, ...)."""
    folder = resources.files("roofkit").joinpath("data", "measured", name)
    if not folder.is_dir():
        raise InvalidValue(f"No shipped dataset {name!r}; roofkit ships: {SHIPPED}.")
    target = folder.joinpath(file)
    if not target.is_file():
        have = sorted(p.name for p in folder.iterdir())
        raise InvalidValue(f"The dataset {name!r} has no file {file!r}; it has: {', '.join(have)}.")
    text = target.read_text(encoding="utf-8")
    return json.loads(text) if file.endswith(".json") else text


def _from_document(data: dict, source: str, extras: tuple = (None, None)) -> LayerDataset:
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list) or not data["cases"]:
        raise InvalidValue(f"{source} is not a layers dataset (expected a JSON object with a list of \"cases\", "
                           "as in roofkit/data/measured/h200-2026-11-30/layers.json).")
    cases = [LayerCase.from_dict(c, f"{source}: case {i}") for i, c in enumerate(data["cases"])]
    launch = {k: v for k, v in (data.get("launch") or {}).items() if k in _LAUNCH}
    training = data.get("training") or []
    if not isinstance(training, list):
        raise InvalidValue(f"{source}: \"training\" must be a list of cases.")
    return LayerDataset(device=str(data.get("device", "unknown GPU")), cases=cases, launch=launch,
                        torch=str(data.get("torch", "")), date=str(data.get("date", "")),
                        method=str(data.get("method", "")), roofs=data.get("roofs") or extras[0],
                        catalog=data.get("catalog") or extras[1], source=source,
                        attention=_attention(data.get("attention"), source),
                        training=[TrainingCase.from_dict(c, f"{source}: training case {i}")
                                  for i, c in enumerate(training)])


def _attention(block, source: str) -> dict | None:
    """The dataset's large attention kernel timed alone, checked: FLOPs and seconds above 0."""
    if block is None:
        return None
    ok = isinstance(block, dict) and all(
        isinstance(block.get(k), (int, float)) and not isinstance(block.get(k), bool) and block[k] > 0
        for k in ("flops", "time_s"))
    if not ok:
        raise InvalidValue(f"{source}: attention must hold flops and time_s, both numbers above 0; got {block!r}.")
    return dict(block)


def _profile_extras(profile: dict) -> tuple[dict | None, str | None]:
    """(the GPU roofs, the catalog key) of a roofkit profile, where it has them."""
    gpu = profile.get("gpu") if isinstance(profile, dict) else None
    if not gpu or "peak_flops_per_s" not in gpu or "bandwidth_bytes_per_s" not in gpu:
        return None, None
    roofs = {"peak_flops_per_s": dict(gpu["peak_flops_per_s"]), "bandwidth_bytes_per_s": gpu["bandwidth_bytes_per_s"]}
    return roofs, gpu.get("catalog")


def load_layers(source=None) -> LayerDataset:
    """A layers dataset: the shipped H200 one (``None``), a path, or a dict.

    A path may be a layers.json file, a folder holding layers.json (and
    measure.json, whose GPU roofs come along), or a profile saved by
    ``roofkit measure --save`` on a GPU (its ``gpu.layers``).
    """
    if source is None:
        return _from_document(shipped("layers.json"), f"roofkit's {SHIPPED} dataset",
                              _profile_extras(shipped("measure.json")))
    if isinstance(source, LayerDataset):
        return source
    if isinstance(source, dict):
        return _from_profile_or_layers(source, "the given dict")
    path = Path(source)
    extras = (None, None)
    if path.is_dir():
        if (path / "measure.json").is_file():
            extras = _profile_extras(_read_json(path / "measure.json"))
        path = path / "layers.json"
    dataset = _from_profile_or_layers(_read_json(path), str(path))
    if dataset.roofs is None:
        dataset.roofs, dataset.catalog = extras[0], dataset.catalog or extras[1]
    return dataset


def _from_profile_or_layers(data, source: str) -> LayerDataset:
    if isinstance(data, dict) and "roofkit_profile" in data:
        gpu = data.get("gpu") or {}
        if not gpu.get("layers"):
            raise InvalidValue(f"{source} is a roofkit profile without measured layers (it needs a GPU run: "
                               "`roofkit measure --save PATH` on a machine where PyTorch sees a CUDA device).")
        return _from_document(gpu["layers"], source, _profile_extras(data))
    return _from_document(data, source)


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidValue(f"No layers dataset at {str(path)!r}; write one with `roofkit measure --save PATH` "
                           "on a GPU.") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InvalidValue(f"{str(path)!r} is not valid JSON: {error}.") from None
