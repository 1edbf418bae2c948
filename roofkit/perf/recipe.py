"""Precision recipes: which precision each family of a training step's kernels runs in, and what its casts cost.

Mixed-precision training does not run a whole step in one precision. FP8
training as NVIDIA's Transformer Engine (TE) and torchao run it keeps the
weights' master copy and the optimizer in FP32, attention, softmax, norms and
activations in BF16, and runs only the GEMMs of the linear layers in FP8:
their forward GEMM (fprop), the gradient of their input (dgrad) and of their
weight (wgrad). DeepSeek-V3 (arXiv:2412.19437, section 3.3.1) keeps the same
parts in their original precision: "the embedding module, the output head, MoE
gating modules, normalization operators, and attention operators". A
:class:`Recipe` says, family by family, what each runs in:

    linear, dgrad, wgrad    the linear layers' three GEMMs (QKV, output projection, MLP, experts)
    attention               the attention core's forward (FlashAttention), attention_backward its backward
    head                    the output layer's GEMM (vocabulary logits)
    router                  a mixture of experts' gating GEMM
    base                    everything else: norms, activations, residuals, softmax, cross-entropy,
                            and the outputs the GEMMs write
    dp_grad_dtype           the gradients reduced over the data-parallel ranks (exposed, for the
                            communication model)
    dispatch_dtype          a mixture of experts' token dispatch (exposed, likewise)

An operand of a GEMM whose precision is not the base one is cast first, and
the cast is a kernel of its own (``cast.*`` in :mod:`roofkit.steptime`): it
reads the BF16 tensor (2 bytes an element) and writes the low-precision copy
in both orientations, row-wise and transposed (the FP8 GEMMs of Hopper take
both operands K-major, so dgrad and wgrad need the transposed copies; TE's
fused cast-transpose writes both in one pass; the block-scaled formats scale
each orientation on its own and TE quantizes both from the BF16 tensor, see
``MXFP8BlockScaling`` in TE's ``transformer_engine/common/recipe/__init__.py``).
Block-scaled formats also write one scale per block (:meth:`Recipe.element_bytes`).
Where the scale comes from (:attr:`Recipe.scaling`):

* ``delayed``: from an amax history of earlier steps (TE's ``DelayedScaling``:
  ``amax_history_len=1024``, ``amax_compute_algo='max'``); the cast records the
  tensor's amax as it goes: one read.
* ``current``: from this tensor's own amax, computed first: an extra read of the
  BF16 tensor, a kernel ``cast.*.amax`` (TE's ``Float8CurrentScaling``; TE's docs,
  "FP8 Delayed Scaling": current scaling "requires two tensor reads per
  quantization: one to compute amax, one to cast"). NVFP4's per-tensor FP32 scale
  is a current one too.
* ``block``: each block's scale is its own, found as the block is cast (MXFP8: an E8M0 byte per 32
  values; DeepSeek-V3's fine-grained FP8: an FP32 scale per 1 x 128 tile); no extra read.

The named recipes (:data:`RECIPES`):

    name           GEMMs of linear layers   attention (fwd / bwd)  head, router, rest  scales
    bf16, fp16, fp32  all kernels in that precision (what ``dtype`` alone always meant)
    fp8            FP8 (E4M3 fwd, E5M2 grad)  BF16 / BF16          BF16                per tensor, delayed
    fp8-current    FP8                        BF16 / BF16          BF16                per tensor, current
    fp8-attention  FP8                        FP8 / BF16           BF16                per tensor, delayed
    fp8-blockwise  FP8 (E4M3)                 BF16 / BF16          BF16                1 FP32 per 128
    mxfp8          FP8 (E4M3)                 BF16 / BF16          BF16                1 E8M0 byte per 32
    nvfp4          FP4 (E2M1)                 BF16 / BF16          BF16                1 E4M3 byte per 16
                                                                                       + 1 FP32 per tensor

``fp8`` is TE's default recipe where MXFP8 is not supported (Hopper, Ada):
``get_default_fp8_recipe()`` in TE's ``transformer_engine/pytorch/quantization.py``
returns ``DelayedScaling()`` there, ``MXFP8BlockScaling()`` on Blackwell (pass
``recipe='mxfp8'`` for it). ``dtype='fp8'`` means this recipe, not every kernel
in FP8. ``fp8-attention`` adds FlashAttention-3's FP8 forward (Shah et al.
2024, arXiv:2407.08608, section 3.3; its backward stays BF16; TE's
``fp8_dpa``). ``fp8-blockwise`` is DeepSeek-V3's (arXiv:2412.19437, section
3.3.2: 1 x 128 tiles of activations and gradients, 128 x 128 blocks of weights,
each scale its own; counted here at one FP32 scale per 128 values throughout),
TE's ``Float8BlockScaling``; its tokens are dispatched to the experts in FP8
(section 3.3.3). ``mxfp8`` and ``nvfp4`` need tensor cores that apply block
scales, which came with Blackwell (TE's ``check_mxfp8_support`` and
``check_nvfp4_support``: compute capability 10.0); the catalog records no MX
rate, so roofkit lets them run on the parts whose catalog entry has an FP4
peak (the parts with Blackwell's block-scaled tensor cores), at the FP8 and FP4
rates. ``nvfp4`` follows TE's ``NVFP4BlockScaling`` and NVIDIA's NVFP4
pretraining recipe (arXiv:2509.25149): the three GEMMs in NVFP4, 16-value
blocks with an E4M3 scale and one FP32 scale per tensor (random Hadamard
transforms of wgrad's operands and stochastic rounding of the gradients are
folded into the casts, not costed apart); the paper also keeps a few linear
layers in BF16 ("selective high-precision layers"), which roofkit does not
model: ``nvfp4`` is optimistic there.

    >>> r = get("fp8")
    >>> r.linear, r.attention, r.head, r.scaling
    ('fp8', 'bf16', 'bf16', 'delayed')
    >>> from_dtype("fp8") == r, from_dtype("bf16").uniform
    (True, True)
    >>> get("mxfp8").element_bytes("fp8")            # 1 byte + 1 E8M0 scale per 32 values
    1.03125
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .. import dtypes
from ..errors import InvalidValue, UnknownPrecision

__all__ = ["Recipe", "RECIPES", "NAMES", "FAMILIES", "get", "from_dtype", "resolve", "supported", "from_run"]

# The kernel families a recipe gives a precision to (see the module's docstring), and the two communication dtypes.
FAMILIES = ("linear", "dgrad", "wgrad", "attention", "attention_backward", "head", "router", "base")
ORIENTATIONS = 2  # a cast writes the row-wise copy and the transposed (column-wise) one: dgrad and wgrad read it
_COMM_FLOATS = ("bf16", "fp16", "fp32")
_WORDS = {"linear": "the linear layers' forward GEMMs", "dgrad": "their input gradients (dgrad)",
          "wgrad": "their weight gradients (wgrad)", "attention": "attention's forward",
          "attention_backward": "attention's backward", "head": "the output layer", "router": "the router",
          "base": "norms and activations"}  # what gradients travel in when a uniform recipe computes in them


@dataclass(frozen=True)
class Recipe:
    """The precision of each kernel family of a training step, and how the low-precision operands are scaled."""

    name: str
    base: str = "bf16"  # norms, activations, residuals, softmax, cross-entropy, and what GEMMs write
    linear: str = "bf16"  # the linear layers' forward GEMMs (fprop)
    dgrad: str = "bf16"  # their input gradients
    wgrad: str = "bf16"  # their weight gradients
    attention: str = "bf16"  # the attention core's forward
    attention_backward: str = "bf16"
    head: str = "bf16"  # the output layer's GEMM
    router: str = "bf16"  # a mixture of experts' gating GEMM
    scaling: str | None = None  # "delayed", "current" or "block": where a low-precision operand's scale comes from
    block: int | None = None  # values per block scale (block-scaled formats)
    scale_dtype: str | None = None  # the block scales' format (one byte: E8M0 or E4M3, both "fp8" here)
    tensor_amax: bool = False  # a per-tensor scale from this tensor's own amax: one more read of it before the cast
    needs: tuple = ()  # peaks the part must have beyond the GEMMs' own (block-scaled tensor cores: "fp4")
    dp_grad_dtype: str = "bf16"  # gradients reduced over the data-parallel ranks
    dispatch_dtype: str = "bf16"  # a mixture of experts' tokens sent to their experts
    master_dtype: str = "fp32"  # the optimizer's copy of the weights and its moments
    description: str = ""
    source: str = ""

    @property
    def precisions(self) -> dict[str, str]:
        """{family: precision} for the kernel families and the two communication dtypes."""
        return {f: getattr(self, f) for f in FAMILIES} | {"dp_grad": self.dp_grad_dtype,
                                                          "dispatch": self.dispatch_dtype}

    @property
    def uniform(self) -> bool:
        """Every kernel in the base precision (no casts): what ``dtype`` alone meant before recipes."""
        return all(getattr(self, f) == self.base for f in FAMILIES)

    @property
    def compute_precisions(self) -> list[str]:
        """The precisions the step's kernels run in, the base one first."""
        return list(dict.fromkeys(getattr(self, f) for f in ("base", *FAMILIES)))

    def families_in(self, precision: str) -> list[str]:
        """The kernel families this recipe runs in ``precision``."""
        return [f for f in FAMILIES if f != "base" and getattr(self, f) == precision]

    def describe(self, precision: str) -> str:
        """The kernels this recipe runs in ``precision``, in words (for errors and help).

        >>> get("fp8-attention").describe("fp8")
        "the linear layers' GEMMs (forward, dgrad, wgrad) and attention's forward"
        """
        families = self.families_in(precision)
        words = []
        if {"linear", "dgrad", "wgrad"} <= set(families):
            words.append("the linear layers' GEMMs (forward, dgrad, wgrad)")
            families = [f for f in families if f not in ("linear", "dgrad", "wgrad")]
        words += [_WORDS[f] for f in families]
        return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)

    def element_bytes(self, precision: str) -> float:
        """Bytes an element of a tensor in ``precision`` takes under this recipe, its block scale counted in."""
        size = dtypes.bytes_per_element(precision)
        if precision != self.base and self.block:
            size += dtypes.bytes_per_element(self.scale_dtype) / self.block
        return size

    @property
    def mfu_peak_precision(self) -> str:
        """The peak MFU is counted against: that of the precision the linear layers' GEMMs run in (FP8 for
        the FP8 recipes). Against the BF16 peak, an FP8 bound would print an MFU above 1, and MFU would no
        longer say how much of the hardware the step uses (torchtitan counts BF16's; NVIDIA's NeMo and
        Megatron-Bridge pages print model TFLOP/s per GPU and leave the peak to the reader)."""
        return self.linear

    def to_dict(self) -> dict:
        return asdict(self) | {"precisions": self.precisions, "uniform": self.uniform}


def _uniform(precision: str) -> Recipe:
    key = dtypes.canonical(precision)
    comm = key if key in _COMM_FLOATS else "bf16"
    return Recipe(key, **{f: key for f in FAMILIES}, dp_grad_dtype=comm, dispatch_dtype=comm, master_dtype="fp32",
                  description=f"every kernel in {key}", source="roofkit: one precision for every kernel")


_TE = "NVIDIA Transformer Engine, transformer_engine/common/recipe/__init__.py"
_LOW = dict(base="bf16", attention="bf16", attention_backward="bf16", head="bf16", router="bf16")

RECIPES: dict[str, Recipe] = {r.name: r for r in [
    _uniform("bf16"), _uniform("fp16"), _uniform("fp32"),
    Recipe("fp8", linear="fp8", dgrad="fp8", wgrad="fp8", scaling="delayed", **_LOW,
           description="Transformer Engine's default FP8 recipe (Hopper, Ada): the linear layers' GEMMs in FP8 "
                       "(E4M3 forward, E5M2 gradients), per-tensor scales from an amax history; the rest BF16",
           source=f"{_TE} (DelayedScaling); get_default_fp8_recipe() in transformer_engine/pytorch/quantization.py; "
                  "Micikevicius et al. 2022, arXiv:2209.05433; DeepSeek-V3, arXiv:2412.19437, section 3.3.1"),
    Recipe("fp8-current", linear="fp8", dgrad="fp8", wgrad="fp8", scaling="current", tensor_amax=True, **_LOW,
           description="FP8 linear GEMMs with per-tensor scales from each tensor's own amax (one more read of it)",
           source=f"{_TE} (Float8CurrentScaling); torchao.float8's tensorwise recipe scales the same way"),
    Recipe("fp8-attention", linear="fp8", dgrad="fp8", wgrad="fp8", scaling="delayed",
           **(_LOW | {"attention": "fp8"}),
           description="the fp8 recipe plus FlashAttention-3's FP8 forward attention (its backward in BF16)",
           source=f"{_TE} (DelayedScaling, fp8_dpa); Shah et al. 2024, FlashAttention-3, arXiv:2407.08608, "
                  "section 3.3"),
    Recipe("fp8-blockwise", linear="fp8", dgrad="fp8", wgrad="fp8", scaling="block", block=128, scale_dtype="fp32",
           dispatch_dtype="fp8", **_LOW,
           description="DeepSeek-V3's fine-grained FP8: the linear layers' GEMMs in E4M3 with one FP32 scale per "
                       "1 x 128 tile (128 x 128 block of a weight); tokens dispatched to the experts in FP8",
           source=f"{_TE} (Float8BlockScaling); DeepSeek-V3, arXiv:2412.19437, sections 3.3.2 and 3.3.3"),
    Recipe("mxfp8", linear="fp8", dgrad="fp8", wgrad="fp8", scaling="block", block=32, scale_dtype="fp8",
           needs=("fp4",), **_LOW,
           description="MXFP8 (Blackwell): the linear layers' GEMMs in E4M3 with one E8M0 scale per 32 values",
           source=f"{_TE} (MXFP8BlockScaling); OCP Microscaling Formats (MX) v1.0"),
    Recipe("nvfp4", linear="fp4", dgrad="fp4", wgrad="fp4", scaling="block", block=16, scale_dtype="fp8",
           tensor_amax=True, **_LOW,
           description="NVFP4 (Blackwell): the linear layers' GEMMs in E2M1 with one E4M3 scale per 16 values and "
                       "one FP32 scale per tensor",
           source=f"{_TE} (NVFP4BlockScaling); NVIDIA, Pretraining Large Language Models with NVFP4, "
                  "arXiv:2509.25149"),
]}
NAMES = tuple(RECIPES)


def get(recipe) -> Recipe:
    """A recipe by name (:data:`NAMES`), a Recipe as it is, or a precision name: every kernel in it, except
    'fp8' (and its spellings), which is Transformer Engine's recipe."""
    if isinstance(recipe, Recipe):
        return recipe
    if isinstance(recipe, str) and recipe.strip().lower() in RECIPES:
        return RECIPES[recipe.strip().lower()]
    try:
        return from_dtype(recipe)
    except UnknownPrecision:
        raise InvalidValue(f"unknown precision recipe {recipe!r}; the recipes are: {', '.join(NAMES)} "
                           "(or a precision name for every kernel in it).") from None


def from_dtype(dtype) -> Recipe:
    """What ``dtype`` alone means: 'fp8' is Transformer Engine's default recipe; any other precision runs
    every kernel in it, as before recipes existed."""
    key = dtypes.canonical(dtype)
    return RECIPES["fp8"] if key == "fp8" else RECIPES.get(key) or _uniform(key)


def resolve(dtype="bf16", recipe=None) -> Recipe:
    """The recipe of ``dtype`` and ``recipe`` together: ``recipe`` wins; a ``dtype`` other than the default
    'bf16' must then be its base precision or its linear layers' (``dtype='fp8', recipe='fp8-current'``);
    ``recipe`` None: :func:`from_dtype`."""
    if recipe is None:
        return from_dtype(dtype)
    r = get(recipe)
    key = dtypes.canonical(dtype)
    if key not in ("bf16", r.base, r.linear):
        raise InvalidValue(f"dtype {dtype!r} disagrees with recipe {r.name!r}, which runs the linear layers' GEMMs "
                           f"in {r.linear} and the rest in {r.base}: pass dtype={r.linear!r}, or leave it out.")
    return r


def supported(acc, calibrated: bool = False) -> list[str]:
    """The named recipes ``acc`` (a catalog Accelerator) can run: a peak for every precision they compute in
    (an achievable one too, ``calibrated``), and what their block scales need."""
    def has(p):
        return p in acc.peak_flops and (not calibrated or acc.has_achievable(p))
    return [n for n, r in RECIPES.items() if all(has(p) for p in r.compute_precisions)
            and all(p in acc.peak_flops for p in r.needs)]


# a published run's ``dtype`` and ``fp8_recipe`` (roofkit/data/published/README.md, "New keys") -> the recipe
_RUN_RECIPES = {("fp8", "delayed"): "fp8", ("fp8", "current"): "fp8-current", ("fp8", "blockwise"): "fp8-blockwise",
                ("mxfp8", "mxfp8"): "mxfp8", ("mxfp8", None): "mxfp8", ("nvfp4", None): "nvfp4"}


def from_run(dtype="bf16", fp8_recipe=None) -> Recipe:
    """The recipe of a published run from its ``dtype`` and ``fp8_recipe`` keys (data/published/README.md).

    >>> from_run("fp8", "current").name, from_run("bf16").name, from_run("mxfp8", "mxfp8").name
    ('fp8-current', 'bf16', 'mxfp8')
    """
    key = (str(dtype).lower(), None if fp8_recipe is None else str(fp8_recipe).lower())
    if key in _RUN_RECIPES:
        return RECIPES[_RUN_RECIPES[key]]
    if key[1] is None:
        return from_dtype(dtype)
    raise InvalidValue(f"a run's dtype {dtype!r} with fp8_recipe {fp8_recipe!r} names no recipe; known pairs: "
                       f"{', '.join(f'{d}/{r}' for d, r in _RUN_RECIPES)}.")
