"""What every analysis is: a named, cited bound with explicit assumptions.

An analysis is a pure function of a :class:`~noisysgd.run.Run`.  It first says
whether it applies (and if not, why), then returns either an RDP curve over
Rényi orders (:class:`RDPAnalysis`), a Gaussian-DP parameter μ
(:class:`GDPAnalysis`, converted to (ε, δ) exactly), or ε for a δ directly.
"""

from __future__ import annotations

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
    validate_delta,
    validate_orders,
)
from ..run import Run

__all__ = ["AnalysisResult", "Analysis", "RDPAnalysis", "GDPAnalysis"]


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

    def to_dict(self) -> dict:
        """JSON-ready form: non-finite numbers become ``null`` (``applies`` tells why)."""
        rdp = None
        if self.rdp is not None:
            rdp = {_order_key(a): _finite(v) for a, v in zip(self.orders, self.rdp)}
        return {
            "applies": self.applies,
            "reason": self.reason,
            "sound": self.sound,
            "epsilon": _finite(self.epsilon),
            "mu": _finite(self.mu),
            "not_sound_reason": self.not_sound_reason,
            "order": self.order,
            "conversion": self.conversion,
            "citation": self.citation,
            "details": self.details,
            "warnings": list(self.warnings),
            "rdp": rdp,
        }


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
    return _finite(value)


def _finite(value):
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


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
        reason = self.why_not(run)
        if reason is not None:
            result = AnalysisResult(self.name, False, reason, self.sound, float(delta), citation=self.citation)
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


class RDPAnalysis(Analysis):
    """An analysis that yields an RDP curve ε(α), converted to (ε, δ) at the end."""

    @abstractmethod
    def rdp(self, run: Run, orders) -> np.ndarray:
        """RDP of the released final model at each order (the run must apply)."""

    def details(self, run: Run) -> dict:
        """Extra quantities worth reporting (burn-in, mechanism, ...)."""
        return {}

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
        return AnalysisResult(
            self.name,
            True,
            None,
            self.sound,
            float(delta),
            epsilon=conv.epsilon,
            order=conv.order,
            orders=np.array(alpha, dtype=float),
            rdp=curve,
            conversion=conversion,
            citation=self.citation,
            details=details,
            warnings=tuple(str(w.message) for w in caught),
        )


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

    def details(self, run: Run) -> dict:
        """Extra quantities worth reporting."""
        return {}

    def _evaluate(self, run, *, delta, orders, conversion):
        d = validate_delta(delta)
        alpha = DEFAULT_ORDERS if orders is None else validate_orders(orders)
        mu = float(self.mu(run))
        return AnalysisResult(
            self.name,
            True,
            None,
            self.sound,
            d,
            epsilon=gdp_epsilon(mu, d),
            order=None,
            orders=np.array(alpha, dtype=float),
            rdp=gdp_rdp(mu, alpha),
            conversion=self.conversion,
            citation=self.citation,
            details=self.details(run),
            mu=mu,
        )
