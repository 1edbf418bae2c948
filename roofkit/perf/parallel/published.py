"""Published training runs: what real systems measured, in roofkit's terms, to check the step model against.

Two sets ship with roofkit (``data/published/``, with their README), each in two
files, the dense BF16 runs of 2020-2024 and the frontier runs of 2024-2025 (FP8,
mixtures of experts, Blackwell):

* the fitting set, ``training.json`` (Megatron-LM's Table 1, BLOOM 176B, Llama 3
  405B's Table 4) and ``training_frontier.json`` (Megatron-Bridge 25.11's and
  NeMo 24.07's performance tables): the calibrated matmul share is fitted on its
  dense runs (:func:`roofkit.parallel.calibration.dense_fitting_runs`);
* the held-out set, runs the fit never sees: ``training_heldout.json``
  (Narayanan et al.'s Table 2 with ZeRO-3, Korthikanti et al.'s Tables 3 and 5,
  MT-NLG 530B, Megatron-Core's H100 weak-scaling table) and
  ``training_frontier_heldout.json`` (NVIDIA's dgxc-benchmarking, DeepSeek-V3's
  report, torchtitan's H100 benchmarks, Megatron-Core's Mixtral figure).

Each run gives the model, the accelerator, the layout, the batch and what was
published: a step time, or a FLOP rate or MFU with the source's own FLOP count
(:func:`published_step_s` turns it into a step time with that count). Under
``roofkit`` each run records what the source leaves implicit and roofkit
assumes (attention kernels, overlap, interleaving), each with its reason.

    >>> runs = load()
    >>> len(runs), runs[0].case, sum(r.frontier for r in runs)
    (42, 'Megatron-LM Table 1 1.7B on 32 A100', 28)
    >>> round(published_step_s(runs[11]), 2)           # Llama 3 405B on 8,192 H100s, from 430 TFLOP/s per GPU
    12.02
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources

from ...catalogs import models
from ...errors import InvalidValue
from .. import recipe as recipes
from . import experts
from .plan import model_flops_per_token, plan

__all__ = ["Run", "SETS", "load", "published_step_s", "plan_args", "predict", "flops_per_step", "compare"]

# each set: the dense BF16 runs of 2020-2024, then the frontier runs of 2024-2025 (FP8, experts, Blackwell)
SETS = {"fitting": ("training.json", "training_frontier.json"),
        "held-out": ("training_heldout.json", "training_frontier_heldout.json")}


@dataclass(frozen=True)
class Run:
    """One published run: the layout, what was published, where, and what roofkit assumes about it."""

    case: str
    model: object  # a roofkit.models.Model
    hw: str
    gpus: int
    flags: dict
    tokens: float
    seq: int
    published: str
    source: str
    published_step: float | None = None
    assumed: dict = field(default_factory=dict)
    held_out: bool = False
    dtype: str = "bf16"  # the precision the source trained in ('fp8', 'mxfp8', ...)
    fp8_recipe: str | None = None  # its scaling as the source names it ('delayed', 'current', 'blockwise', ...)
    file: str = ""  # the data file it comes from

    @property
    def frontier(self) -> bool:
        """A run of 2024-2025 (FP8, experts, Blackwell), from the frontier files."""
        return "frontier" in self.file

    def to_dict(self) -> dict:
        return {"case": self.case, "model": self.model.key, "hw": self.hw, "gpus": self.gpus, "flags": self.flags,
                "tokens": self.tokens, "seq": self.seq, "published": self.published, "source": self.source,
                "published_step_s": published_step_s(self), "assumed": self.assumed, "held_out": self.held_out}


def load(which: str = "fitting") -> list[Run]:
    """The runs of one set ('fitting', 'held-out') or of both ('all')."""
    if which == "all":
        return load("fitting") + load("held-out")
    if which not in SETS:
        raise InvalidValue(f"which must be one of {', '.join([*SETS, 'all'])}; got {which!r}.")
    out = []
    for name in SETS[which]:
        text = resources.files("roofkit").joinpath(f"data/published/{name}").read_text(encoding="utf-8")
        for row in json.loads(text):
            model = row["model"]
            M = models.get(model) if isinstance(model, str) else models.from_table(model, source=row["source"])
            out.append(Run(case=row["case"], model=M, hw=row["hw"], gpus=int(row["gpus"]),
                           flags=dict(row["flags"]), tokens=float(row["tokens"]), seq=int(row["seq"]),
                           published=row["published"], source=row["source"],
                           published_step=row.get("published_step_s"), assumed=dict(row.get("roofkit", {})),
                           held_out=which == "held-out", dtype=row.get("dtype", "bf16"),
                           fp8_recipe=row.get("fp8_recipe"), file=name))
    return out


def flops_per_step(run: Run, count: str | None = None) -> float:
    """The FLOPs of one step as the run's source counts them (``count``, default the run's own).

    'megatron-eq3'  Narayanan et al. 2021, eq. 3: 96 B s l h^2 (1 + s/6h + V/16lh), recomputation counted
    'megatron-core' Korthikanti et al. 2022, Appendix A, and Megatron-LM's num_floating_point_operations:
                    72 B s l h^2 (1 + s/6h + V/12hl), model FLOPs (B sequences of s tokens, l layers, width h)
    'roofkit-causal'  what MFU counts (:func:`roofkit.parallel.plan.model_flops_per_token`): 6N with the
                    active parameters (no embedding lookup), attention under the causal mask, 12 l H Q (s + 1)/2
    'roofkit'       the same with every score of the T x T matrix, 12 l H Q s (PaLM's count)
    """
    count = count or run.assumed.get("flop_count", "roofkit")
    M, s = run.model, run.seq
    B, l, h, V = run.tokens / s, M.layers, M.d_model, M.vocab
    if count == "megatron-eq3":
        return 96 * B * s * l * h ** 2 * (1 + s / (6 * h) + V / (16 * l * h))
    if count == "megatron-core":
        return 72 * B * s * l * h ** 2 * (1 + s / (6 * h) + V / (12 * h * l))
    if count in ("roofkit", "roofkit-causal"):
        return model_flops_per_token(M, s, causal=count == "roofkit-causal") * run.tokens
    raise InvalidValue(f"unknown FLOP count {count!r}; expected megatron-eq3, megatron-core or roofkit.")


def published_step_s(run: Run) -> float:
    """The published step time: as given, or from the published FLOP rate or MFU with the source's FLOP count."""
    from ...catalogs import hardware  # deferred: catalogs.hardware pulls in numpy (through formulas)

    if run.published_step is not None:
        return float(run.published_step)
    a = run.assumed
    if "published_tflops_per_gpu" in a:
        return flops_per_step(run) / (a["published_tflops_per_gpu"] * 1e12 * run.gpus)
    if "published_mfu" in a:
        return flops_per_step(run) / (a["published_mfu"] * hardware.get(run.hw).peak("bf16") * run.gpus)
    raise InvalidValue(f"{run.case}: no step time, FLOP rate or MFU to compare with.")


def _finest(M, pp: int) -> int:
    return max(1, M.layers // pp) if pp > 1 else 1


def plan_args(run: Run) -> dict:
    """The keyword arguments of :func:`roofkit.parallel.plan` for this run's layout and assumptions."""
    f, a = run.flags, run.assumed
    pp = int(f.get("pp", 1))
    v = a.get("virtual_stages", f.get("virtual_stages", 1))
    args = dict(model=run.model, hw=run.hw, gpus=run.gpus, global_batch_tokens=run.tokens, seq=run.seq,
                tp=int(f.get("tp", 1)), pp=pp, cp=int(f.get("cp", 1)), zero=int(a.get("zero", f.get("zero", 0))),
                microbatches=f.get("microbatches"), virtual_stages=_finest(run.model, pp) if v == "finest" else int(v),
                recompute=f.get("recompute", "none"), sequence_parallel=bool(a.get("sequence_parallel",
                                                                                   f.get("sequence_parallel", False))),
                attention=a.get("attention", "flash"), overlap=bool(a.get("overlap", True)),
                tp_overlap=bool(a.get("tp_overlap", False)), p2p_overlap=bool(a.get("p2p_overlap", True)),
                policy=a.get("policy"), inter=a.get("inter"), gather_api=a.get("gather_api", "flat"),
                recipe=recipes.from_run(run.dtype, run.fp8_recipe).name)
    if run.model.moe:  # the experts' layout and dispatch, where the source gives them (roofkit.parallel.experts)
        args |= dict(ep=int(f.get("ep", 1)), etp=int(f["etp"]) if "etp" in f else None,
                     max_nodes_per_token=a.get("max_nodes_per_token"),
                     dispatch_dtype=a.get("dispatch_dtype", "bf16"), dispatcher=a.get("dispatcher", "alltoall"),
                     moe_imbalance=a.get("moe_imbalance"), moe_expert_s=a.get("moe_expert_s"))
    if a.get("recompute") == "least-that-fits":
        for mode in ("none", "selective", "full"):
            args["recompute"] = mode
            if plan(**{k: v for k, v in args.items() if k not in experts.ESTIMATE_FIGURES}).fits is not False:
                break
    return args


def predict(run: Run, calibrated: bool = False, constants=None):
    """roofkit's plan of the run: the bound (default) or the calibrated estimate."""
    args = plan_args(run)
    if not calibrated:  # the bound's experts are balanced; a run's imbalance is the estimate's
        for key in experts.ESTIMATE_FIGURES:
            args.pop(key, None)
    return plan(**args, calibrated=calibrated, constants=constants)


def compare(which: str = "all", constants=None) -> list[dict]:
    """One row per run: case, set, published step time, and predicted / published for the bound and calibrated."""
    rows = []
    for run in load(which):
        pub = published_step_s(run)
        rows.append({"case": run.case, "set": "held-out" if run.held_out else "fitting", "published_s": pub,
                     "bound_ratio": predict(run).step_time_s / pub,
                     "calibrated_ratio": predict(run, calibrated=True, constants=constants).step_time_s / pub})
    return rows
