"""Privacy analyses of Noisy-SGD, one module per paper, looked up by name."""

from __future__ import annotations

import math
from functools import lru_cache

from ..gdp import gdp_epsilon, gdp_mu
from ..rdp import validate_delta
from ..run import Run, checked_real
from .base import Analysis, AnalysisResult, GDPAnalysis, RDPAnalysis
from .altschuler_talwar import AltschulerTalwar, AltschulerTalwarSampled
from .composition import Composition, CompositionPLD
from .ryffel import Ryffel, RyffelEpochs
from .shifted_interpolation import ShiftedInterpolation
from .shifted_interpolation_sampled import ShiftedInterpolationSampled
from .ye_shokri import Chourasia, YeShokri, YeShokriNaive, YeShokriReshuffle

__all__ = ["Analysis", "AnalysisResult", "GDPAnalysis", "RDPAnalysis", "ANALYSES", "get_analysis", "misses"]

#: Every analysis the library implements, by the name the CLI and API use.
ANALYSES: dict[str, Analysis] = {
    a.name: a for a in (
        Composition(), CompositionPLD(), AltschulerTalwar(), AltschulerTalwarSampled(),
        YeShokri(), YeShokriReshuffle(), YeShokriNaive(), Chourasia(), ShiftedInterpolation(), ShiftedInterpolationSampled(), Ryffel(), RyffelEpochs(),
    )
}


def get_analysis(name: str) -> Analysis:
    """The analysis called ``name``; ``ValueError`` listing the valid names otherwise."""
    try:
        return ANALYSES[name]
    except (KeyError, TypeError):
        raise ValueError(f"analysis must be one of {', '.join(ANALYSES)}. Found {name!r}.") from None


def misses(run: Run, *, epsilon: float, delta: float, analyses) -> bool:
    """Whether the best sound bound of the named ``analyses`` (a list of names; not their
    order-wise minimum) misses ``epsilon`` on ``run`` at ``delta``: some sound analysis applies,
    and every one that applies gives ε > ``epsilon`` — what
    :func:`noisysgd.epsilon(run, delta=delta, analyses=analyses) <noisysgd.accountant.epsilon>`
    says (``best`` not None and its ε above the target), for less.  The analyses are asked in turn,
    stopping at the first that meets; a μ-GDP analysis is decided by its μ where that lies at or
    above the least μ known to miss (:func:`_missing_mu`: ε is non-decreasing in μ), by its
    exact conversion otherwise, as its report would.  For a search's prune (its candidates'
    reports are never shown)."""
    d = validate_delta(delta)
    epsilon = checked_real("epsilon", epsilon, positive=False)
    applies = False
    for name in dict.fromkeys([analyses] if isinstance(analyses, str) else analyses):
        analysis = get_analysis(name)
        if not analysis.sound or analysis.why_not(run) is not None:
            continue  # (a flagged analysis never supplies the best bound)
        if isinstance(analysis, GDPAnalysis):
            mu = analysis.mu(run)
            if mu >= _missing_mu(epsilon, d):
                applies = True
                continue
            eps = gdp_epsilon(mu, d)
        else:
            eps = analysis.evaluate(run, delta=d).epsilon
        if eps is None:  # (no bound: not a candidate of the report's best either)
            continue
        applies = True
        if eps <= epsilon:
            return False
    return applies


@lru_cache(maxsize=64)
def _missing_mu(epsilon: float, delta: float) -> float:
    """A μ at which μ-GDP misses (``epsilon``, ``delta``) by :func:`~noisysgd.gdp.gdp_epsilon`,
    checked there with a margin far above its rounding (ε at least 1e-11 relative above the
    target), just above :func:`~noisysgd.gdp.gdp_mu`'s answer; every larger μ misses too.  ∞
    where no such μ is found (every μ is then converted exactly), and for δ above 1/2, where
    gdp_epsilon's padding of its error bound is no longer a few ulps and ε need not be monotone in
    μ to the last digit (near δ = 1 the root is 0 and the answer is padding)."""
    if not 0.0 < epsilon < math.inf or delta > 0.5:
        return math.inf
    try:
        mu = gdp_mu(epsilon, delta) * (1.0 + 1e-9)
    except ValueError:
        return math.inf
    return mu if mu > 0.0 and gdp_epsilon(mu, delta) > epsilon * (1.0 + 1e-11) else math.inf
