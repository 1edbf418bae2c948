"""Speculative decoding: a small draft model guesses k tokens, the large model checks them in one step.

Leviathan, Kalman & Matias, "Fast Inference from Transformers via Speculative
Decoding", ICML 2023 (arXiv:2211.17192); Chen et al. 2023 (arXiv:2302.01318)
found the same scheme. With an acceptance rate α (the chance that the target
model accepts a drafted token, each independently), one target step verifies
k drafted tokens and always adds one of its own, so it yields

    E[tokens per target step] = sum_{i=0}^{k} α^i = (1 - α^(k+1)) / (1 - α)

(the paper's equation 1; k + 1 when α = 1). :func:`expected_tokens` computes it
from that sum, derived by sympy once: the same expression serves numbers and
symbols (:func:`derivation` shows it). If a draft step costs c target steps and
the target's step over k + 1 tokens costs about one of its ordinary steps (true
while decode is memory-bound), the walltime speed-up is (the paper's Theorem 3.8)

    S = (1 - α^(k+1)) / ((1 - α)(k c + 1))

:func:`plan` replaces those two assumptions by the layer model: the draft's step,
and the target's step over k + 1 new tokens, each from
:func:`roofkit.inference.latency.decode_step`.

    >>> expected_tokens(0.8, 4)
    3.3616
    >>> round(speedup(0.8, 4, 0.05), 2)
    2.8
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache

from ...errors import InvalidValue
from ...units import is_symbolic, nonnegative
from . import latency

__all__ = ["expected_tokens", "speedup", "derivation", "best_k", "Speculation", "plan"]


@lru_cache(maxsize=1)
def _derived():
    """(alpha, k, the sum, its closed form, a numeric function of (alpha, k)) from sympy, once."""
    import sympy  # deferred: sympy costs ~0.25 s at import

    alpha = sympy.Symbol("alpha", nonnegative=True)
    k = sympy.Symbol("k", integer=True, nonnegative=True)
    i = sympy.Symbol("i", integer=True, nonnegative=True)
    total = sympy.Sum(alpha**i, (i, 0, k))
    closed = total.doit()  # Piecewise((k + 1, alpha = 1), ((1 - alpha^(k+1)) / (1 - alpha), True))
    return alpha, k, total, closed, sympy.lambdify((alpha, k), closed, modules="math")


def _alpha(value):
    if is_symbolic(value):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise InvalidValue(f"alpha, the acceptance rate, must be a number in [0, 1]; got {value!r}.")
    return float(value)


def _k(value):
    if is_symbolic(value):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or not 0 <= value <= 1000:
        raise InvalidValue(f"k, the drafted tokens per step, must be a whole number from 0 to 1000; got {value!r}.")
    return int(value)


def expected_tokens(alpha, k):
    """Tokens one target step yields on average: sum_{i=0}^{k} alpha^i. Numbers, or sympy symbols for the formula."""
    a, kk = _alpha(alpha), _k(k)
    A, K, _, closed, numeric = _derived()
    if is_symbolic(a) or is_symbolic(kk):
        return closed.subs({A: a, K: kk})
    return float(numeric(a, kk))


def derivation() -> dict:
    """{'sum': the sum over the k + 1 positions, 'closed': sympy's closed form}, for show.math."""
    _, _, total, closed, _ = _derived()
    return {"sum": total, "closed": closed}


def speedup(alpha, k, cost_ratio):
    """Leviathan et al.'s walltime speed-up E / (k c + 1), c = a draft step's time over a target step's."""
    c = nonnegative(cost_ratio, "cost_ratio")
    return expected_tokens(alpha, k) / (_k(k) * c + 1)


def best_k(alpha, cost_ratio, k_max=16) -> int:
    """The k from 1 to ``k_max`` with the largest :func:`speedup`."""
    return max(range(1, _k(k_max) + 1), key=lambda k: speedup(alpha, k, cost_ratio))


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding of one target with one draft, from the layer model."""

    target: str
    draft: str
    k: int
    alpha: float
    expected_tokens: float
    target_step_s: float  # an ordinary decode step of the target (1 new token)
    verify_step_s: float  # the target's step over k + 1 new tokens
    draft_step_s: float
    cost_ratio: float  # draft step / target step: the paper's c
    time_per_round_s: float  # k draft steps + one verification
    tpot_s: float  # per accepted token
    speedup: float  # target_step_s / tpot_s
    paper_speedup: float  # E / (k c + 1), the verification assumed as cheap as one step

    def to_dict(self) -> dict:
        return asdict(self)


def plan(target, draft, hw, k=4, alpha=0.8, context=4096, batch=1, gpus=1, **options) -> Speculation:
    """Speculative decoding of ``target`` with ``draft`` on the same ``gpus`` x ``hw``, from the layer model."""
    kk, a = _k(k), _alpha(alpha)
    if kk < 1:
        raise InvalidValue("k must be at least 1 to speculate at all.")
    step = latency.decode_step(target, hw, batch, context, gpus, **options).time_s
    verify = latency.decode_step(target, hw, batch, context, gpus, new_tokens=kk + 1, **options).time_s
    small = latency.decode_step(draft, hw, batch, context, gpus, **options).time_s
    E = expected_tokens(a, kk)
    per_round = kk * small + verify
    return Speculation(target=str(target), draft=str(draft), k=kk, alpha=a, expected_tokens=E, target_step_s=step,
                       verify_step_s=verify, draft_step_s=small, cost_ratio=small / step,
                       time_per_round_s=per_round, tpot_s=per_round / E, speedup=step * E / per_round,
                       paper_speedup=speedup(a, kk, small / step))
