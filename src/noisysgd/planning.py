"""Planning: ε versus epochs for every analysis, where hidden state pays, and plateaus.

:func:`plan` evaluates each analysis on the same run stopped after each of a
range of epochs (:meth:`Analysis.curve <noisysgd.analyses.base.Analysis.curve>`:
closed forms in the number of steps where an analysis has one, one pass of
the Ye–Shokri recursion, the Altschuler–Talwar split search shared across
T) and reports

* every analysis' ε curve (∞ where it does not apply, with the reason), the
  order-wise minimum of the sound RDP curves, and the best sound ε at each
  epoch with the analysis that gave it;
* for every hidden-state analysis, the *cross-over*: the first epoch of the
  range from which it stays below the composition baseline (the smaller of
  ``composition`` and ``composition-pld``, both sound bounds for the same
  mechanism);
* for every analysis whose bound converges, its *plateau*: the limit of ε as
  the number of epochs grows and the first epoch within 0.1% of it (found
  outside the requested range when needed);
* with a target ε, how many epochs the budget allows (:func:`max_epochs
  <noisysgd.accountant.max_epochs>`, "unlimited" when the best bound plateaus
  below it).

``composition-pld`` costs a PLD composition per point for sampled batches; it
is computed at a few log-spaced epochs and bounded in between by the next
computed one (composition never lowers ε with more steps), and refined by
bisection around each cross-over.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from . import __version__
from .accountant import BEST, COMBINED, EpochBudget, analysis_names, check_report_options, max_epochs, skipped_by_best
from .analyses import ANALYSES, get_analysis
from .analyses.base import StepsCurve, finite_or_none
from .rdp import DEFAULT_ORDERS, OrderGridWarning, epsilon_from_rdp_rows, validate_delta, validate_orders
from .progress import bar
from .run import Run, checked_real
from .text import plan_summary, short_repr

__all__ = ["Plan", "PlanCurve", "plan", "parse_epochs", "BASELINES"]

#: The composition baselines: every iterate released.  Hidden-state analyses
#: are compared with the smaller of the two at each epoch.
BASELINES = ("composition", "composition-pld")
#: A bound counts as converged when ε at 10⁷ epochs is within this relative
#: distance of ε at 10⁶; the plateau epoch is the first within PLATEAU_RTOL of the limit.
_FAR = 10**7
_CONVERGED_RTOL = 1e-9
PLATEAU_RTOL = 1e-3
#: At most this many epochs in one plan (each is a row of every curve).
MAX_POINTS = 100_000


@dataclass(frozen=True)
class PlanCurve:
    """One analysis' ε at each epoch of a plan, and what it implies."""

    analysis: str
    sound: bool
    applies: bool  # at some epoch of the plan
    reason: str | None
    epsilon: np.ndarray
    order: np.ndarray
    exact: np.ndarray
    not_sound_reason: str | None = None
    #: ε as epochs → ∞, when the bound converges; None otherwise.
    limit: float | None = None
    #: The first epoch with ε within 0.1% of ``limit`` (may lie beyond the plan's range).
    plateau_epoch: int | None = None
    #: The first epoch of the range from which ε stays below the composition baseline.
    crossover_epoch: int | None = None

    def __repr__(self) -> str:
        if not self.applies:
            reason = self.reason if len(self.reason or "") <= 100 else self.reason[:99] + "…"
            return short_repr(self, analysis=self.analysis, applies=False, reason=reason)
        return short_repr(self, analysis=self.analysis, sound=self.sound,
                          last_epsilon=float(self.epsilon[-1]), limit=self.limit,
                          crossover_epoch=self.crossover_epoch, points=int(self.epsilon.size))

    def to_dict(self) -> dict:
        return {
            "applies": self.applies,
            "reason": self.reason,
            "sound": self.sound,
            "not_sound_reason": self.not_sound_reason,
            "epsilon": [finite_or_none(v) for v in self.epsilon],
            "order": [finite_or_none(v) for v in self.order],
            "exact": [bool(v) for v in self.exact],
            "limit": finite_or_none(self.limit),
            "plateau_epoch": self.plateau_epoch,
            "crossover_epoch": self.crossover_epoch,
        }


@dataclass(frozen=True)
class Plan:
    """ε versus epochs for one run and δ (see :func:`plan`)."""

    run: Run
    delta: float
    epochs: np.ndarray
    curves: dict[str, PlanCurve]
    best_epsilon: np.ndarray
    best_analysis: list[str | None]
    include_unsound: bool = False
    budget: EpochBudget | None = None
    details: dict = field(default_factory=dict)
    conversion: str = "improved"
    #: The limit line (:mod:`noisysgd.limits`): ``{"epochs": [...], "epsilon": [...]}`` at up to
    #: LIMIT_POINTS of the plan's epochs, or ``{"reason": ...}`` where it does not apply.
    limit_line: dict | None = None

    def __repr__(self) -> str:
        return short_repr(
            self, epochs=f"{int(self.epochs[0])}..{int(self.epochs[-1])} ({self.epochs.size} points)",
            best_epsilon=float(self.best_epsilon[-1]), best_analysis=self.best_analysis[-1],
            limit=self.limit, delta=self.delta,
            budget=None if self.budget is None else (
                "unlimited" if self.budget.epochs is None else f"{self.budget.epochs} epochs"))

    def summary(self) -> str:
        """What ``noisysgd plan`` prints (wrapped to the terminal width)."""
        return plan_summary(self)

    @property
    def limit(self) -> float | None:
        """The smallest plateau value among the sound convergent bounds (ε after
        unlimited training under the best bound), or None if none converges."""
        limits = [c.limit for c in self._eligible() if c.limit is not None]
        return min(limits, default=None)

    def _eligible(self) -> list[PlanCurve]:
        return [c for c in self.curves.values() if c.applies and (c.sound or self.include_unsound)]

    def to_dict(self) -> dict:
        return {
            "noisysgd_version": __version__,
            "delta": self.delta,
            "adjacency": self.run.adjacency,
            "run": {k: v for k, v in self.run.to_dict().items() if k not in ("steps", "epochs")},
            "epochs": [int(e) for e in self.epochs],
            "best": {
                "epsilon": [finite_or_none(v) for v in self.best_epsilon],
                "analysis": list(self.best_analysis),
                "limit": finite_or_none(self.limit),
            },
            "include_unsound": self.include_unsound,
            "analyses": {name: c.to_dict() for name, c in self.curves.items()},
            "budget": None if self.budget is None else self.budget.to_dict(),
            "limit_line": self.limit_line,
            "details": self.details,
        }


def parse_epochs(text: str) -> np.ndarray:
    """Epochs from ``"A:B"`` (A to B inclusive), ``"A:B:S"`` (step S), ``"A:B:logN"``
    (about N log-spaced epochs) or a comma-separated list.

    >>> parse_epochs("1:5").tolist(), parse_epochs("10:50:20").tolist(), parse_epochs("3,1,2").tolist()
    ([1, 2, 3, 4, 5], [10, 30, 50], [1, 2, 3])
    >>> parse_epochs("1:1000:log4").tolist()
    [1, 10, 100, 1000]
    """
    bad = ValueError(
        f"epochs must be A:B, A:B:STEP, A:B:logN or a comma-separated list of integers >= 1. "
        f"Found {text!r}."
    )
    if not isinstance(text, str) or not text.strip():
        raise bad
    try:
        if ":" in text:
            parts = text.split(":")
            if len(parts) not in (2, 3):
                raise bad
            lo, hi = int(parts[0]), int(parts[1])
            if lo < 1 or hi < lo:
                raise bad
            if len(parts) == 2:
                values = np.arange(lo, hi + 1)
            elif parts[2].strip().lower().startswith("log"):
                count = int(parts[2].strip()[3:])
                if count < 1:
                    raise bad
                values = np.unique(np.round(np.geomspace(lo, hi, count)).astype(np.int64))
            else:
                step = int(parts[2])
                if step < 1:
                    raise bad
                values = np.arange(lo, hi + 1, step)
                if values[-1] != hi:
                    values = np.append(values, hi)
        else:
            values = np.array(sorted({int(p) for p in text.split(",") if p.strip()}))
    except (ValueError, OverflowError):
        raise bad from None
    if values.size == 0 or (values < 1).any():
        raise bad
    if values.size > MAX_POINTS:
        raise ValueError(f"epochs must name at most {MAX_POINTS} epochs. Found {values.size} in {text!r}.")
    return values.astype(np.int64)


def _check_epochs(epochs) -> np.ndarray:
    if isinstance(epochs, str):
        return parse_epochs(epochs)
    if isinstance(epochs, range):
        epochs = np.arange(epochs.start, epochs.stop, epochs.step)
    arr = np.asarray(epochs)
    if (arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer)
            or (arr < 1).any()):
        raise ValueError(f"epochs must be a non-empty sequence of integers >= 1. Found {epochs!r}.")
    if arr.size > MAX_POINTS:
        raise ValueError(f"epochs must name at most {MAX_POINTS} epochs. Found {arr.size}.")
    return np.unique(arr.astype(np.int64))


def plan(
    run: Run,
    *,
    delta: float,
    epochs="1:100",
    analyses=None,
    orders=None,
    conversion: str = "improved",
    include_unsound: bool = False,
    epsilon: float | None = None,
    progress: bool = False,
) -> Plan:
    """ε of ``run`` (its ``steps`` ignored) after each of ``epochs`` whole epochs,
    under every analysis (``analyses="best"``, the default) or the named ones.

    ``epochs``: a sequence of integers, a ``range``, or text as
    :func:`parse_epochs` reads it (``"1:1000"``).  ``epsilon``: a target; the
    plan then also says how many epochs it allows (``plan.budget``).
    ``progress``: a progress bar on stderr (one step per analysis, then the
    cross-overs, plateaus and budget).

    >>> import noisysgd
    >>> run = noisysgd.Run(n=1000, batch_size=50, batching="cyclic", steps=1, learning_rate=0.05,
    ...                    noise_multiplier=4.0, lipschitz=1.0, smoothness=1.25,
    ...                    strong_convexity=0.05)
    >>> p = noisysgd.plan(run, delta=1e-5, epochs="1:200")
    >>> c = p.curves["ye-shokri"]   # overtakes composition at epoch 2, levels off at 4.013
    >>> c.crossover_epoch, round(c.limit, 3), c.plateau_epoch
    (2, 4.013, 120)
    >>> p.best_analysis[-1], round(float(p.best_epsilon[-1]), 3)
    ('shifted-interpolation', 3.64)
    """
    if not isinstance(run, Run):
        raise ValueError(f"run must be a noisysgd.Run. Found {type(run).__name__}.")
    d = validate_delta(delta)
    ep = _check_epochs(epochs)
    check_report_options(include_unsound, conversion)
    alpha = DEFAULT_ORDERS if orders is None else validate_orders(orders)
    target = None if epsilon is None else checked_real("epsilon", epsilon)
    if isinstance(run.learning_rate, tuple):
        raise ValueError(
            "learning_rate must be a constant or a polynomial decay (lr_decay) to plan over epochs; "
            f"an explicit schedule fixes steps = {run.steps}."
        )
    names = analysis_names(analyses)
    best = BEST in names
    chosen = list(ANALYSES) if best else list(dict.fromkeys(names))
    # Plateaus are searched on a log grid up to 10⁷ epochs evaluated together
    # with the plan's epochs (one pass of every analysis); the PLD, which
    # grows without bound and costs a composition per point, only on the plan's.
    search = run.constant_learning_rate  # a decaying step size: no plateau search
    grid = np.union1d(ep, _SEARCH_GRID) if search else ep
    at_ep = np.searchsorted(grid, ep)

    evaluate = _Evaluator(run, d, alpha, conversion)
    stages = bar(len(chosen) + 3 + (target is not None), "plan", progress, unit="stage")
    on_grid = {}
    for name in chosen:
        stages.set_description_str(f"plan: {name}")
        if best and skipped_by_best(name, names, include_unsound):  # flagged: never the best, not paid for
            on_grid[name] = get_analysis(name).not_evaluated_curve(run, grid * run.steps_per_epoch)
        else:
            on_grid[name] = evaluate(name, ep if name == "composition-pld" else grid)
        stages.update()
    stages.set_description_str("plan: cross-overs")
    raw = {name: c if name == "composition-pld" else _take(c, at_ep) for name, c in on_grid.items()}
    combined_grid = None
    if best:
        combined_grid = _combined(on_grid, grid, d, alpha, conversion, include_unsound)
        if combined_grid is not None:
            raw[COMBINED] = _take(combined_grid, at_ep)
    has_baseline = any(n in raw and raw[n].applies.any() for n in BASELINES)
    crossovers = _crossovers(run, ep, raw, d) if has_baseline else {}
    stages.update()
    stages.set_description_str("plan: plateaus")
    curves = {name: _plan_curve(name, c, crossovers.get(name), search and _plateau_of(
        name, grid, on_grid, combined_grid, evaluate, include_unsound)) for name, c in raw.items()}
    stages.update()
    best_eps, best_names = _best_per_epoch(curves, include_unsound, ep.size)
    budget = None
    if target is not None:
        stages.set_description_str("plan: epoch budget")
        budget = max_epochs(run, epsilon=target, delta=d, analyses=analyses, orders=orders,
                            conversion=conversion, include_unsound=include_unsound)
        stages.update()
    stages.set_description_str("plan: limit line")
    line = limit_line(run, ep, d)
    stages.update()
    stages.close()
    details = {
        "steps_per_epoch": run.steps_per_epoch,
        "orders": [float(a) for a in alpha],
        "conversion": conversion,
        "plateau_rtol": PLATEAU_RTOL,
        "baseline": "the smaller of " + " and ".join(n for n in BASELINES if n in raw),
    }
    if "composition-pld" in raw and not raw["composition-pld"].exact.all():
        details["composition_pld_note"] = (
            "composition-pld (a PLD composition per point) was computed at the epochs where "
            "'exact' is true; between them it is the next computed value, an upper bound since "
            "composition never lowers epsilon with more steps"
        )
    return Plan(run, d, ep, curves, best_eps, best_names, include_unsound, budget, details, conversion, line)


class _Evaluator:
    """One analysis' curve of ``run`` over whole epochs (edge-order warnings are expected on
    curves and silenced)."""

    def __init__(self, run: Run, delta: float, orders, conversion: str):
        self.run, self.delta, self.orders, self.conversion = run, delta, orders, conversion

    def __call__(self, name: str, epochs: np.ndarray) -> StepsCurve:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OrderGridWarning)
            return get_analysis(name).curve(self.run, epochs * self.run.steps_per_epoch, delta=self.delta,
                                            orders=self.orders, conversion=self.conversion)


def _plateau_of(name, grid, on_grid, combined_grid, evaluate: _Evaluator, include_unsound: bool):
    """(limit, plateau epoch) of a convergent curve on the search grid, or (None, None): the
    baselines grow without bound; the order-wise minimum is recombined at each probe."""
    if name == COMBINED:
        def combined_at(epochs: np.ndarray) -> np.ndarray:
            parts = {n: evaluate(n, epochs) for n, c in on_grid.items()
                     if c.rdp is not None and c.applies.any() and (c.sound or include_unsound)}
            comb = _combined(parts, epochs, evaluate.delta, evaluate.orders, evaluate.conversion, include_unsound)
            return np.full(epochs.size, np.inf) if comb is None else comb.epsilon

        return _plateau(grid, combined_grid.epsilon, combined_at)
    if name not in BASELINES and on_grid[name].applies.any():
        return _plateau(grid, on_grid[name].epsilon, lambda e: evaluate(name, e).epsilon)
    return None, None


def _plan_curve(name: str, c: StepsCurve, crossover, plateau) -> PlanCurve:
    limit, at = plateau if plateau else (None, None)
    return PlanCurve(name, c.sound, bool(c.applies.any()), c.reason, c.epsilon, c.order, c.exact,
                     c.not_sound_reason, limit, at, crossover)


def _best_per_epoch(curves: dict, include_unsound: bool, size: int):
    """The smallest eligible ε at each epoch and the analysis giving it (ties go to a single
    analysis: the order-wise minimum is listed last)."""
    eligible = [c for c in curves.values() if c.applies and (c.sound or include_unsound)]
    if not eligible:
        return np.full(size, np.inf), [None] * size
    stack = np.vstack([c.epsilon for c in eligible])
    which = np.argmin(stack, axis=0)
    best_eps = stack[which, np.arange(size)]
    best_names = [eligible[i].analysis if math.isfinite(best_eps[j]) else None for j, i in enumerate(which)]
    return best_eps, best_names


#: Most epochs at which a plan evaluates the limit line (each ~0.1 s for Poisson batches,
#: their laws built together); they include the plan's first and last epochs.
LIMIT_POINTS = 8
#: The lattice of the plan's limit line for poisson/sample/shuffle: 2¹⁴ cells, 6× cheaper than
#: :func:`noisysgd.limits.limit_epsilon`'s 2¹⁶ and still a lower bound (any lattice is), within
#: 1 % of it where measured (n = 60,000, b = 100, 100 epochs: 0.24587 against 0.24688, 0.4 %;
#: n = 5,000, b = 250, 60 epochs: 0.7 %).
LIMIT_CELLS = 1 << 14


def limit_line(run: Run, epochs: np.ndarray, delta: float) -> dict:
    """ε of the linear + ridge instance of ``run`` (:func:`noisysgd.limits.limit_epsilon`)
    after some of ``epochs``: no sound analysis in the instance's class can certify less
    there.  At most :data:`LIMIT_POINTS` epochs, log-spaced among the plan's.  Where the
    limit does not apply (a projection, a step-size schedule, ...) ``{"reason": ...}``."""
    from .limits import limit_epsilons

    ep = np.asarray(epochs, dtype=np.int64)
    if ep.size > LIMIT_POINTS:
        idx = np.unique(np.round(np.geomspace(1, ep.size, LIMIT_POINTS)).astype(int) - 1)
        ep = ep[idx]
    try:   # poisson/sample: the epochs' laws built in one pass on one lattice
        values = limit_epsilons(run, ep * run.steps_per_epoch, delta, cells=LIMIT_CELLS)
    except ValueError as exc:
        return {"reason": str(exc)}
    except ArithmeticError as exc:  # auxiliary information: the plan stands without it
        return {"reason": f"not computed: {type(exc).__name__} in its numerics"}
    return {"epochs": [int(e) for e in ep], "epsilon": [finite_or_none(v) for v in values],
            "meaning": "exact privacy of the run's linear + ridge instance: no sound analysis in its class "
                       "(all but altschuler-talwar, which needs a projection) can certify less"}


def _crossover_index(hidden, baseline) -> int | None:
    """Index of the first epoch from which ``hidden`` < ``baseline`` at every later one."""
    below = hidden < baseline * (1.0 - 1e-12)
    if not below[-1]:
        return None
    above = np.flatnonzero(~below)
    return 0 if above.size == 0 else int(above[-1] + 1)


def _envelope(eps: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Every value that was not computed replaced by the next computed one (the
    last is always computed): an upper bound, for ε non-decreasing in epochs."""
    idx = np.flatnonzero(exact)
    return eps[idx[np.searchsorted(idx, np.arange(eps.size), side="left")]]


def _crossovers(run: Run, ep, curves: dict[str, StepsCurve], delta):
    """Cross-over epochs against the composition baseline, and the PLD curve
    made exact where a cross-over depends on it.

    Where ``composition-pld`` was only bounded by the next computed value, a
    cross-over found against that bound is refined by bisection on exact PLD
    values between the last epoch where the hidden-state bound is not below
    the baseline and the next computed epoch (assuming, as holds for these
    monotone curves, that they cross once in between)."""
    rdp = curves["composition"].epsilon if "composition" in curves else np.full(ep.size, np.inf)
    pld = curves.get("composition-pld")
    eps = np.full(ep.size, np.inf) if pld is None else pld.epsilon.copy()
    exact = np.ones(ep.size, dtype=bool) if pld is None else pld.exact.copy()
    analysis = get_analysis("composition-pld")

    def below(hidden, i: int) -> bool:
        if not exact[i]:
            eps[i] = analysis._epsilon(run.replace(steps=int(ep[i]) * run.steps_per_epoch), delta)
            exact[i] = True
        return hidden[i] < min(eps[i], rdp[i]) * (1.0 - 1e-12)

    out: dict[str, int | None] = {}
    for name, c in curves.items():
        if name in BASELINES or not c.applies.any():
            continue
        i = _crossover_index(c.epsilon, np.minimum(_envelope(eps, exact), rdp))
        if i is not None and not exact[i]:
            lo, hi = i - 1, i + int(np.argmax(exact[i:]))  # not below at lo; below at hi (exact)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if below(c.epsilon, mid):
                    hi = mid
                else:
                    lo = mid
            i = hi
        out[name] = None if i is None else int(ep[i])
    if pld is not None:
        curves["composition-pld"] = StepsCurve(**{**pld.__dict__, "epsilon": _envelope(eps, exact),
                                                  "exact": exact})
    return out


def _combined(raw: dict[str, StepsCurve], ep, delta, alpha, conversion, include_unsound):
    """The order-wise minimum of the applicable (sound) RDP curves at each epoch."""
    rows = [c.rdp for c in raw.values()
            if c.rdp is not None and c.applies.any() and (c.sound or include_unsound)]
    if not rows:
        return None
    stack = np.minimum.reduce(rows)
    eps, order = epsilon_from_rdp_rows(alpha, stack, delta, conversion=conversion)
    sound = all(c.sound for c in raw.values() if c.rdp is not None and c.applies.any()
                and (c.sound or include_unsound))
    return StepsCurve(COMBINED, sound, ep, np.isfinite(eps), None, eps, order,
                      np.ones(ep.size, dtype=bool), orders=alpha, rdp=stack)


def _take(curve: StepsCurve, idx: np.ndarray) -> StepsCurve:
    """The curve at the step counts ``idx`` (indices into its own)."""
    return StepsCurve(**{
        k: (v[idx] if isinstance(v, np.ndarray) and k != "orders" else v)
        for k, v in curve.__dict__.items()
    })


#: Epochs at which plateaus are looked for: a log grid to 10⁶, and 10⁷ to
#: check convergence (ε(10⁷) within _CONVERGED_RTOL of ε(10⁶)).
_SEARCH_GRID = np.union1d(np.unique(np.round(np.geomspace(1, _FAR // 10, 97)).astype(np.int64)),
                          [_FAR])


def _plateau(grid: np.ndarray, eps: np.ndarray, curve) -> tuple[float | None, int | None]:
    """(limit, first epoch with ε within PLATEAU_RTOL of it) for a curve known on
    ``grid`` (which holds 10⁶ and 10⁷ epochs), when it has converged there;
    ``curve(epochs)`` evaluates it elsewhere to narrow the bracket."""
    i6, i7 = np.searchsorted(grid, [_FAR // 10, _FAR])
    far6, far7 = eps[i6], eps[i7]
    if not (math.isfinite(far7) and far7 <= far6 * (1.0 + _CONVERGED_RTOL)):
        return None, None
    threshold = far7 * (1.0 - PLATEAU_RTOL)
    first = int(np.argmax(eps >= threshold))  # eps[i7] >= threshold, so one exists
    hi = int(grid[first])
    lo = int(grid[first - 1]) if first > 0 else 0  # ε(lo) < threshold (lo = 0: none)
    while hi - lo > 1:
        sub = np.unique(np.linspace(lo + 1, hi - 1, min(64, hi - lo - 1)).round().astype(np.int64))
        vals = curve(sub)
        above = np.flatnonzero(vals >= threshold)
        if above.size:
            hi = int(sub[above[0]])
            lo = int(sub[above[0] - 1]) if above[0] > 0 else lo
        else:
            lo = int(sub[-1])
    return float(far7), hi
