"""Run the requested analyses on one run and report the smallest sound ε.

(Issue 5 extends this with the order-by-order minimum over RDP analyses,
calibration and planning; this module is the single place that combines
analyses, so those additions land here.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import __version__
from .analyses import AnalysisResult, get_analysis
from .rdp import CONVERSIONS, validate_delta, validate_orders
from .run import Run

__all__ = ["DEFAULT_ANALYSES", "EpsilonReport", "epsilon"]

#: Analyses evaluated when none are named.
DEFAULT_ANALYSES = ("composition", "composition-pld")


@dataclass(frozen=True)
class EpsilonReport:
    """Per-analysis results for one run and δ, and the smallest sound ε among them."""

    run: Run
    delta: float
    results: dict[str, AnalysisResult]
    #: Whether analyses flagged not sound may supply the best bound (never by default).
    include_unsound: bool = False

    @property
    def best(self) -> AnalysisResult | None:
        """The applicable analysis with the smallest ε among the sound ones (and the
        unsound ones too if ``include_unsound``); ``None`` if there is none."""
        candidates = [
            r for r in self.results.values()
            if r.applies and (r.sound or self.include_unsound) and r.epsilon is not None
        ]
        return min(candidates, key=lambda r: r.epsilon, default=None)

    @property
    def epsilon(self) -> float | None:
        """ε of :attr:`best`; ``None`` if no (sound, unless ``include_unsound``) analysis applies."""
        best = self.best
        return None if best is None else best.epsilon

    def to_dict(self) -> dict:
        eps = self.epsilon
        best = self.best
        return {
            "noisysgd_version": __version__,
            "delta": self.delta,
            "adjacency": self.run.adjacency,
            "epsilon": eps if eps is not None and math.isfinite(eps) else None,
            "best_analysis": None if best is None else best.analysis,
            "best_is_sound": None if best is None else best.sound,
            "include_unsound": self.include_unsound,
            "run": self.run.to_dict(),
            "analyses": {name: r.to_dict() for name, r in self.results.items()},
        }


def _check_delta(delta) -> float:
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise ValueError(f"delta must be in (0, 1). Found {delta!r}.") from None
    if not (0.0 < d < 1.0):
        raise ValueError(f"delta must be in (0, 1). Found {delta!r}.")
    return d


def epsilon(
    run: Run,
    *,
    delta: float,
    analyses=None,
    orders=None,
    conversion: str = "improved",
    include_unsound: bool = False,
) -> EpsilonReport:
    """Evaluate ``analyses`` (names) on ``run`` and report ε for ``delta``.

    The best bound is taken over sound analyses only, unless
    ``include_unsound`` (then the report says that its best may not be a
    guarantee).  Everything is validated before anything is computed.

    >>> from noisysgd import Run
    >>> run = Run(n=60000, batch_size=240, batching="poisson", steps=10000,
    ...           learning_rate=0.1, noise_multiplier=1.1, lipschitz=1.0, adjacency="add-remove")
    >>> report = epsilon(run, delta=1e-5, analyses=["composition"])
    >>> round(report.epsilon, 4), report.best.order
    (2.0131, 9.8)
    """
    if not isinstance(run, Run):
        raise ValueError(f"run must be a noisysgd.Run. Found {type(run).__name__}.")
    d = validate_delta(delta)
    if not isinstance(include_unsound, bool):
        raise ValueError(f"include_unsound must be True or False. Found {include_unsound!r}.")
    if conversion not in CONVERSIONS:
        raise ValueError(f"conversion must be one of {', '.join(CONVERSIONS)}. Found {conversion!r}.")
    alpha = None if orders is None else validate_orders(orders)
    names = list(DEFAULT_ANALYSES if analyses is None else analyses)
    if isinstance(analyses, str):
        names = [analyses]
    if not names:
        raise ValueError("analyses must name at least one analysis. Found an empty list.")
    chosen = {name: get_analysis(name) for name in dict.fromkeys(names)}
    results = {
        name: a.evaluate(run, delta=d, orders=alpha, conversion=conversion)
        for name, a in chosen.items()
    }
    return EpsilonReport(run, d, results, include_unsound)
