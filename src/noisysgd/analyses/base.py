"""What every analysis is: a named, cited bound with explicit assumptions.

An analysis is a pure function of a :class:`~noisysgd.run.Run`.  It first says
whether it applies (and if not, why), then returns either an RDP curve over
Rényi orders (:class:`RDPAnalysis`), a Gaussian-DP parameter μ
(:class:`GDPAnalysis`, converted to (ε, δ) exactly), or ε for a δ directly.
"""

from __future__ import annotations

import functools
import math
import warnings
from abc import ABC, abstractmethod
import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ..gdp import gdp_epsilon, gdp_rdp
from ..rdp import (
    DEFAULT_ORDERS,
    OrderGridWarning,
    epsilon_from_rdp,
    epsilon_from_rdp_rows,
    validate_delta,
    validate_orders,
)
from ..run import Run

__all__ = ["AnalysisResult", "StepsCurve", "Analysis", "RDPAnalysis", "GDPAnalysis", "check_steps"]


@dataclass(frozen=True)
class AnalysisResult:
    """The outcome of one analysis on one run, for one δ.

    ``mu`` is set by Gaussian-DP analyses (:class:`GDPAnalysis`): the run's
    final model is μ-GDP; ``epsilon`` is then its exact conversion.
    """

    analysis: str
    applies: bool
    reason: str | None
    sound: bool
    delta: float
    epsilon: float | None = None
    order: float | None = None
    orders: np.ndarray | None = None
    rdp: np.ndarray | None = None
    conversion: str | None = None
    citation: str = ""
    details: dict = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    mu: float | None = None
    not_sound_reason: str | None = None

    def __repr__(self) -> str:
        from ..text import short_repr

        if not self.applies:
            reason = self.reason if len(self.reason or "") <= 100 else self.reason[:99] + "…"
            return short_repr(self, analysis=self.analysis, applies=False, reason=reason)
        extra = {"mu": self.mu} if self.mu is not None else {"order": self.order}
        return short_repr(self, analysis=self.analysis, epsilon=self.epsilon, delta=self.delta,
                          **extra, sound=self.sound)

    def to_dict(self) -> dict:
        """JSON-ready form: non-finite numbers become ``null`` (``applies`` tells why)."""
        rdp = None
        if self.rdp is not None:
            rdp = {_order_key(a): finite_or_none(v) for a, v in zip(self.orders, self.rdp)}
        return {
            "applies": self.applies,
            "reason": self.reason,
            "sound": self.sound,
            "epsilon": finite_or_none(self.epsilon),
            "mu": finite_or_none(self.mu),
            "not_sound_reason": self.not_sound_reason,
            "order": self.order,
            "conversion": self.conversion,
            "citation": self.citation,
            "details": self.details,
            "warnings": list(self.warnings),
            "rdp": rdp,
        }


@dataclass(frozen=True)
class StepsCurve:
    """One analysis on the same run stopped after each of several step counts
    (:meth:`Analysis.curve`): the data of an ε-versus-steps (or epochs) curve.

    Arrays have one entry per step count.  ``epsilon`` is +inf where the
    analysis does not apply; ``exact`` is False where the value was not
    computed at that step count but read off a larger one that was (an upper
    bound, because the bound is non-decreasing in the number of steps — used
    by ``composition-pld``, whose every evaluation costs a PLD composition).
    """

    analysis: str
    sound: bool
    steps: np.ndarray
    applies: np.ndarray
    reason: str | None
    epsilon: np.ndarray
    order: np.ndarray
    exact: np.ndarray
    orders: np.ndarray | None = None
    rdp: np.ndarray | None = None
    mu: np.ndarray | None = None
    not_sound_reason: str | None = None


def check_steps(steps) -> np.ndarray:
    """``steps`` as a 1-D int64 array of step counts >= 1, or ``ValueError`` naming it."""
    ts = np.asarray(steps)
    if (ts.ndim != 1 or ts.size == 0 or not np.issubdtype(ts.dtype, np.integer)
            or (ts < 1).any()):
        raise ValueError(f"steps must be a non-empty sequence of integers >= 1. Found {steps!r}.")
    return ts.astype(np.int64)


def _order_key(order: float) -> str:
    return format(float(order), ".12g")


def _plain(value):
    """A numpy scalar as a plain JSON-ready Python value (non-finite → None)."""
    if isinstance(value, (str, type(None))):
        return value
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (np.str_,)):
        return str(value)
    return finite_or_none(value)


def finite_or_none(value):
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


#: Why the best bound left a flagged analysis out (:meth:`Analysis.not_evaluated`).
NOT_EVALUATED = ("not evaluated: flagged not sound, so never part of the best bound; include_unsound=True "
                 "(--include-unsound) or naming it computes it")


class Analysis(ABC):
    """A privacy analysis of Noisy-SGD.

    Subclasses set ``name``, ``citation`` and ``sound`` and implement
    :meth:`why_not` and :meth:`_evaluate`.
    """

    name: str = ""
    citation: str = ""
    #: False for published bounds whose proof is known to be incomplete: they
    #: are computed for comparison but never count as a guarantee.
    sound: bool = True
    #: Why a flagged analysis is not sound (shown with every result of it).
    unsound_reason: str | None = None
    #: Whether the bound depends on the step size; a run without one
    #: (``learning_rate=None``) is then refused with that reason.
    uses_learning_rate: bool = True
    #: Whether the bound holds for a clip that changes from step to step (``Run.adaptive_clip``):
    #: only the composition analyses, which account every iterate and need no fixed gradient map.
    adaptive_clip_ok: bool = False

    def __init_subclass__(cls, **kwargs):
        """Every subclass's :meth:`why_not` first refuses a run without a step size
        when the bound needs one, so that no analysis reads a missing η."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("why_not")
        if own is None or getattr(own, "_checks_learning_rate", False):
            return

        @functools.wraps(own)
        def why_not(self, run, _own=own):
            if self.uses_learning_rate and run.learning_rate is None:
                return "needs the step size (learning_rate / --lr); the composition baselines do not"
            spec = getattr(run, "adaptive_clip", None)
            if spec is not None and not getattr(spec, "certifiable", True):
                return f"its adaptive clip ({type(spec).__name__}) is a broken mechanism kept for audits: no bound covers it"
            if spec is not None and not self.adaptive_clip_ok:
                return ("the run clips adaptively: its contraction argument needs one gradient map (one clip) "
                        "for every step; only the composition analyses cover a clip that moves")
            return _own(self, run)

        why_not._checks_learning_rate = True
        cls.why_not = why_not

    @abstractmethod
    def assumptions(self) -> list[str]:
        """The conditions under which the bound holds, in words."""

    @abstractmethod
    def why_not(self, run: Run) -> str | None:
        """``None`` if the analysis applies to ``run``, else the reason it does not."""

    def evaluate(self, run: Run, *, delta: float, orders=None, conversion: str = "improved") -> AnalysisResult:
        """ε(δ) for ``run``, or a result saying why the analysis does not apply."""
        if not isinstance(run, Run):
            raise ValueError(f"run must be a noisysgd.Run. Found {type(run).__name__}.")
        # Every argument is checked first, whether or not the analysis applies.
        delta = validate_delta(delta)
        orders = None if orders is None else validate_orders(orders)
        _check_conversion(conversion)
        run.require("noise_multiplier", "steps", why="to compute epsilon")
        reason = self.why_not(run)
        if reason is not None:
            result = self.refused(reason, delta)
        else:
            result = self._evaluate(run, delta=delta, orders=orders, conversion=conversion)
        if not self.sound:  # every output that shows a flagged analysis says why
            result = dataclasses.replace(
                result, not_sound_reason=self.unsound_reason or "flagged not sound; see its documentation"
            )
        return result

    @abstractmethod
    def _evaluate(self, run: Run, *, delta: float, orders, conversion: str) -> AnalysisResult:
        """Compute the bound for a run the analysis applies to."""

    def applied(self, delta: float, **fields) -> AnalysisResult:
        """The result of this analysis where it applies: its ε and what else ``fields`` give, at ``delta``."""
        return AnalysisResult(self.name, True, None, self.sound, float(delta), citation=self.citation, **fields)

    def refused(self, reason: str, delta: float, **fields) -> AnalysisResult:
        """The result of this analysis where it does not apply, with the ``reason``."""
        return AnalysisResult(self.name, False, reason, self.sound, delta, citation=self.citation, **fields)

    def not_evaluated(self, run: Run, delta: float) -> AnalysisResult:
        """The result of a flagged analysis that the best bound did not compute: it could
        never be the best (a flagged analysis supplies it only with ``include_unsound``), so
        its cost is not paid.  It says why, and how to compute it."""
        reason = self.why_not(run) or NOT_EVALUATED
        return self.refused(reason, delta,
                            not_sound_reason=self.unsound_reason or "flagged not sound; see its documentation")

    def not_evaluated_curve(self, run: Run, steps) -> StepsCurve:
        """:meth:`not_evaluated` for a curve over ``steps``."""
        ts = check_steps(steps)
        reason = next((r for r in (self.why_not(_at_steps(run, int(t))) for t in ts[:1]) if r), NOT_EVALUATED)
        return StepsCurve(self.name, self.sound, ts, np.zeros(ts.size, dtype=bool), reason,
                          np.full(ts.size, np.inf), np.full(ts.size, np.nan), np.ones(ts.size, dtype=bool),
                          not_sound_reason=self.unsound_reason or "flagged not sound; see its documentation")

    def curve(self, run: Run, steps, *, delta: float, orders=None,
              conversion: str = "improved") -> StepsCurve:
        """ε(δ) of ``run`` stopped after each of ``steps`` (its own ``steps`` is
        ignored): what :meth:`evaluate` gives at each step count, with the
        expensive parts shared where the analysis allows it
        (:meth:`RDPAnalysis.rdp_over_steps`, :meth:`GDPAnalysis.mu_over_steps`).
        Analyses whose bound comes from a numerical search (altschuler-talwar's
        noise split) may return a slightly different, equally valid bound."""
        if not isinstance(run, Run):
            raise ValueError(f"run must be a noisysgd.Run. Found {type(run).__name__}.")
        ts = check_steps(steps)
        d = validate_delta(delta)
        alpha = DEFAULT_ORDERS if orders is None else validate_orders(orders)
        _check_conversion(conversion)
        run.require("noise_multiplier", why="to compute epsilon")
        reasons = [self.why_not(_at_steps(run, int(t))) for t in ts]
        ok = np.array([r is None for r in reasons], dtype=bool)
        eps = np.full(ts.size, np.inf)
        order = np.full(ts.size, np.nan)
        exact = np.ones(ts.size, dtype=bool)
        parts: dict = {}
        if ok.any():
            parts = self._curve(run, ts[ok], delta=d, orders=alpha, conversion=conversion)
            eps[ok], order[ok] = parts["epsilon"], parts.get("order", np.nan)
            if "exact" in parts:
                exact[ok] = parts["exact"]
        extra = {}
        for key in ("rdp", "mu"):
            if key in parts:
                full = np.full((ts.size, *np.shape(parts[key])[1:]), np.inf)
                full[ok] = parts[key]
                extra[key] = full
        return StepsCurve(
            self.name, self.sound, ts, ok, next((r for r in reasons if r is not None), None),
            eps, order, exact, orders=alpha if "rdp" in extra else None,
            not_sound_reason=None if self.sound else (
                self.unsound_reason or "flagged not sound; see its documentation"),
            **extra,
        )

    def _curve(self, run: Run, steps: np.ndarray, *, delta: float, orders: np.ndarray,
               conversion: str) -> dict:
        """ε at each step count (the analysis applies at every one): one
        :meth:`evaluate` per step count unless a subclass shares the work."""
        eps = [self._evaluate(_at_steps(run, int(t)), delta=delta, orders=orders,
                              conversion=conversion).epsilon for t in steps]
        return {"epsilon": np.array(eps, dtype=float)}


class RDPAnalysis(Analysis):
    """An analysis that yields an RDP curve ε(α), converted to (ε, δ) at the end."""

    @abstractmethod
    def rdp(self, run: Run, orders) -> np.ndarray:
        """RDP of the released final model at each order (the run must apply)."""

    def details(self, run: Run) -> dict:
        """Extra quantities worth reporting (burn-in, mechanism, ...)."""
        return {}

    def rdp_over_steps(self, run: Run, steps, orders) -> np.ndarray:
        """RDP curves of ``run`` stopped after each of ``steps``: an array of
        shape (len(steps), len(orders)).  This default evaluates :meth:`rdp`
        once per step count; analyses with a closed form in the number of
        steps override it."""
        alpha = validate_orders(orders)
        return np.array([self.rdp(_at_steps(run, int(t)), alpha) for t in check_steps(steps)])

    def _curve(self, run, steps, *, delta, orders, conversion):
        rows = np.asarray(self.rdp_over_steps(run, steps, orders), dtype=float)
        eps, order = epsilon_from_rdp_rows(orders, rows, delta, conversion=conversion)
        edge = (eps > 0) & np.isfinite(eps) & ((order == orders.min()) | (order == orders.max()))
        if orders.size > 1 and edge.any():
            warnings.warn(
                f"{self.name}: the optimal Rényi order is at the edge of the order grid "
                f"[{orders.min():g}, {orders.max():g}] at {int(edge.sum())} of {eps.size} step "
                "counts; a wider grid may give a smaller epsilon there.",
                OrderGridWarning, stacklevel=3,
            )
        return {"epsilon": eps, "order": order, "rdp": rows}

    def rdp_with_details(self, run: Run, orders) -> tuple[np.ndarray, dict | None]:
        """The RDP curve and, optionally, per-order quantities (arrays of the
        curve's length, e.g. the optimal noise split at each order); the
        report shows them at the order that gives the smallest ε."""
        return self.rdp(run, orders), None

    def _evaluate(self, run, *, delta, orders, conversion):
        alpha = DEFAULT_ORDERS if orders is None else validate_orders(orders)
        curve, per_order = self.rdp_with_details(run, alpha)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", OrderGridWarning)
            conv = epsilon_from_rdp(alpha, curve, delta, conversion=conversion)
        for w in caught:  # re-emit, and keep the text for the report
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        details = self.details(run)
        if per_order and conv.order is not None:
            i = int(np.flatnonzero(alpha == conv.order)[0])
            details["at_optimal_order"] = {k: _plain(v[i]) for k, v in per_order.items()}
        return self.applied(delta, epsilon=conv.epsilon, order=conv.order, orders=np.array(alpha, dtype=float),
                            rdp=curve, conversion=conversion, details=details,
                            warnings=tuple(str(w.message) for w in caught))


class GDPAnalysis(Analysis):
    """An analysis that shows the released model is μ-GDP (Dong, Roth & Su 2022).

    Subclasses implement :meth:`mu`.  ε(δ) is the exact conversion of μ-GDP
    (:func:`~noisysgd.gdp.gdp_epsilon`, conversion ``"gdp-exact"``), whatever
    RDP conversion is requested: it is never larger than any conversion of
    the mechanism's RDP curve.  The result also carries that curve, αμ²/2
    (:meth:`rdp`), so that a GDP bound can be combined order by order with
    RDP analyses.
    """

    #: Name of the (ε, δ) conversion this kind of analysis uses.
    conversion = "gdp-exact"

    @abstractmethod
    def mu(self, run: Run) -> float:
        """μ such that the released final model is μ-GDP (the run must apply)."""

    def rdp(self, run: Run, orders) -> np.ndarray:
        """The RDP curve αμ²/2 implied by μ-GDP (:func:`~noisysgd.gdp.gdp_rdp`)."""
        return gdp_rdp(self.mu(run), orders)

    def mu_over_steps(self, run: Run, steps) -> np.ndarray:
        """μ of ``run`` stopped after each of ``steps`` (one :meth:`mu` each by default)."""
        return np.array([self.mu(_at_steps(run, int(t))) for t in check_steps(steps)], dtype=float)

    def _curve(self, run, steps, *, delta, orders, conversion):
        mus = self.mu_over_steps(run, steps)
        return {
            "epsilon": np.array([gdp_epsilon(float(m), delta) for m in mus]),
            "mu": mus,
            "rdp": np.array([gdp_rdp(float(m), orders) for m in mus]).reshape(mus.size, orders.size),
        }

    def details(self, run: Run) -> dict:
        """Extra quantities worth reporting."""
        return {}

    def _evaluate(self, run, *, delta, orders, conversion):
        d = validate_delta(delta)
        alpha = DEFAULT_ORDERS if orders is None else validate_orders(orders)
        mu = float(self.mu(run))
        return self.applied(d, epsilon=gdp_epsilon(mu, d), order=None, orders=np.array(alpha, dtype=float),
                            rdp=gdp_rdp(mu, alpha), conversion=self.conversion, details=self.details(run), mu=mu)


def _at_steps(run: Run, steps: int) -> Run:
    """``run`` stopped after ``steps`` steps (an explicit step-size schedule cannot be
    cut or extended: it fixes the number of steps)."""
    if steps == run.steps:
        return run
    if isinstance(run.learning_rate, tuple):
        raise ValueError(
            "learning_rate must be a constant or a polynomial decay (lr_decay) to evaluate the run "
            f"at other numbers of steps; an explicit schedule fixes steps = {run.steps}."
        )
    return run.replace(steps=steps)


def _check_conversion(conversion) -> None:
    from ..rdp import CONVERSIONS

    if conversion not in CONVERSIONS:
        raise ValueError(f"conversion must be one of {', '.join(CONVERSIONS)}. Found {conversion!r}.")
