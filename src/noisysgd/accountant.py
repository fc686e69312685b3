"""One accountant: the tightest sound bound, noise calibration, training budgets.

:func:`epsilon` evaluates analyses on a run.  With ``analyses="best"`` (the
default) it evaluates every analysis the library has and reports the smallest
ε among

* each applicable sound analysis on its own (RDP analyses converted from their
  curve, Gaussian-DP analyses exactly, ``composition-pld`` by its PLD), and
* the *order-wise minimum*: at every Rényi order α the smallest RDP value of
  any applicable sound analysis (each is a valid bound on D_α of the released
  model, so their minimum is one; GDP analyses enter as αμ²/2), converted to
  (ε, δ) once.  This can beat every analysis alone when different analyses
  are tightest at different orders.

Analyses that do not apply are reported with their reason; analyses flagged
not sound are reported with theirs and never supply the best bound unless
``include_unsound=True``.

:func:`calibrate` finds the smallest noise multiplier meeting a target
(ε, δ); :func:`max_epochs` the longest training a budget allows.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from . import __version__
from .analyses import ANALYSES, AnalysisResult, get_analysis
from .noise_search import Eps as _Eps, bisect_noise as _bisect_noise, eps_or_inf as _eps_or_inf
from .noise_search import place_then_decide as _place_then_decide, shrink as _shrink
from .rdp import CONVERSIONS, epsilon_from_rdp, validate_delta, validate_orders
from .run import Run, checked_real
from .progress import bar
from .text import calibration_summary, epsilon_summary, queries_text, short_repr

__all__ = [
    "BEST",
    "COMBINED",
    "DEFAULT_ANALYSES",
    "EpsilonReport",
    "Calibration",
    "EpochBudget",
    "epsilon",
    "calibrate",
    "max_epochs",
    "compose_query",
    "compose_with_query",
    "certify_composed",
    "Composed",
    "composed_epsilon",
    "calibrate_composed",
    "calibrate_with_query",
]

#: The pseudo-analysis name for "every analysis, and the tightest sound bound".
BEST = "best"
#: Name of the order-wise minimum in reports.
COMBINED = "order-wise-minimum"
#: Analyses evaluated when none are named.
DEFAULT_ANALYSES = (BEST,)


@dataclass(frozen=True)
class EpsilonReport:
    """Per-analysis results for one run and δ, and the best bound among them.

    ``combined`` is the order-wise minimum of the sound RDP curves (``None``
    when fewer than one RDP/GDP analysis applies or ``best`` was not asked for).
    """

    run: Run
    delta: float
    results: dict[str, AnalysisResult]
    include_unsound: bool = False
    combined: AnalysisResult | None = None
    conversion: str = "improved"

    def __repr__(self) -> str:
        best = self.best
        applying = sum(r.applies for r in self.results.values())
        return short_repr(self, epsilon=self.epsilon, delta=self.delta,
                          best=None if best is None else best.analysis,
                          analyses=f"{applying} of {len(self.results)} apply")

    def summary(self) -> str:
        """The table ``noisysgd epsilon`` prints (wrapped to the terminal width)."""
        return epsilon_summary(self)

    def _candidates(self) -> list[AnalysisResult]:
        out = [
            r for r in self.results.values()
            if r.applies and (r.sound or self.include_unsound) and r.epsilon is not None
        ]
        if self.combined is not None and self.combined.epsilon is not None:
            out.append(self.combined)
        return out

    @property
    def best(self) -> AnalysisResult | None:
        """The result with the smallest ε among the applicable sound analyses and
        their order-wise minimum (unsound ones too if ``include_unsound``);
        ``None`` if there is none.  Ties go to a single analysis."""
        candidates = self._candidates()
        return min(candidates, key=lambda r: (r.epsilon, r.analysis == COMBINED), default=None)

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
            "order_wise_minimum": None if self.combined is None else self.combined.to_dict(),
        }

    def certificate(self) -> dict:
        """The privacy certificate: :meth:`to_dict` plus the assumptions that the
        bound rests on — those of the analyses that supplied it — which the
        trainer must uphold, and the run it must execute exactly."""
        out = self.to_dict()
        best = self.best
        names: list[str] = []
        if best is not None:
            names = (list(best.details.get("components", [])) if best.analysis == COMBINED
                     else [best.analysis])
        out["certificate"] = {
            "guarantee": None if best is None else (
                f"({_fmt(best.epsilon)}, {self.delta:g})-DP for the final model only, "
                f"{self.run.adjacency} adjacency"
                + ("" if best.sound else " -- NOT SOUND: " + (best.not_sound_reason or ""))
            ),
            "rests_on": names,
            "assumptions": {name: get_analysis(name).assumptions() for name in names},
            "trainer_must_run": self.run.to_dict(),
        }
        return out


def _fmt(x: float) -> str:
    return format(x, ".6g")


def check_report_options(include_unsound, conversion) -> None:
    """The two options every report takes: ``include_unsound`` a bool, ``conversion`` one of
    :data:`~noisysgd.rdp.CONVERSIONS`."""
    if not isinstance(include_unsound, bool):
        raise ValueError(f"include_unsound must be True or False. Found {include_unsound!r}.")
    if conversion not in CONVERSIONS:
        raise ValueError(f"conversion must be one of {', '.join(CONVERSIONS)}. Found {conversion!r}.")


def analysis_names(analyses) -> list[str]:
    if analyses is None:
        names = list(DEFAULT_ANALYSES)
    elif isinstance(analyses, str):
        names = [analyses]
    else:
        names = list(analyses)
    if not names:
        raise ValueError("analyses must name at least one analysis. Found an empty list.")
    for name in names:
        if name != BEST:
            get_analysis(name)  # ValueError listing the valid names
    return names


def _combine(results: dict[str, AnalysisResult], delta: float, conversion: str,
             include_unsound: bool) -> AnalysisResult | None:
    """The order-wise minimum of the applicable (sound) RDP curves, converted once."""
    curves = [
        r for r in results.values()
        if r.applies and (r.sound or include_unsound) and r.rdp is not None
    ]
    if not curves:
        return None
    alpha = curves[0].orders
    curves = [r for r in curves if r.orders.shape == alpha.shape and np.array_equal(r.orders, alpha)]
    stack = np.vstack([r.rdp for r in curves])
    which = np.argmin(stack, axis=0)
    curve = stack[which, np.arange(alpha.size)]
    conv = epsilon_from_rdp(alpha, curve, delta, conversion=conversion)
    details: dict = {"components": [r.analysis for r in curves]}
    if conv.order is not None:
        i = int(np.flatnonzero(alpha == conv.order)[0])
        details["at_optimal_order"] = {"analysis": curves[int(which[i])].analysis}
    return AnalysisResult(
        COMBINED, True, None, all(r.sound for r in curves), delta,
        epsilon=conv.epsilon, order=conv.order, orders=alpha, rdp=curve, conversion=conversion,
        citation="order-wise minimum of the applicable analyses' RDP bounds (each bounds D_α)",
        details=details,
    )


def epsilon(
    run: Run,
    *,
    delta: float,
    analyses=None,
    orders=None,
    conversion: str = "improved",
    include_unsound: bool = False,
) -> EpsilonReport:
    """Evaluate ``analyses`` on ``run`` and report ε for ``delta``.

    ``analyses``: names of analyses, or ``"best"`` (the default): every
    analysis, plus their order-wise minimum.  The best bound is taken over
    sound analyses only, unless ``include_unsound`` (then the report says that
    its best may not be a guarantee).  Everything is validated before anything
    is computed.

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
    check_report_options(include_unsound, conversion)
    alpha = None if orders is None else validate_orders(orders)
    names = analysis_names(analyses)
    best = BEST in names
    chosen = list(ANALYSES) if best else list(dict.fromkeys(names))
    return _evaluate(run, d, chosen, best, alpha, conversion, include_unsound, named=names)


def skipped_by_best(name: str, names, include_unsound: bool) -> bool:
    """Whether the best bound leaves analysis ``name`` uncomputed: flagged not sound, not
    named, and ``include_unsound`` off — it could never supply the best bound, so its cost
    (for some, minutes and gigabytes) is not paid."""
    return not include_unsound and name not in names and not get_analysis(name).sound


def _evaluate(run: Run, delta: float, chosen: list[str], combine: bool, orders, conversion: str,
              include_unsound: bool, named=()) -> EpsilonReport:
    """The report for validated arguments: ``chosen`` analyses, and their
    order-wise minimum if ``combine`` (flagged analyses the best bound cannot use are
    reported as not evaluated unless ``named`` or ``include_unsound``)."""
    results = {
        name: (get_analysis(name).not_evaluated(run, delta)
               if combine and skipped_by_best(name, named, include_unsound)
               else get_analysis(name).evaluate(run, delta=delta, orders=orders, conversion=conversion))
        for name in chosen
    }
    combined = _combine(results, delta, conversion, include_unsound) if combine else None
    return EpsilonReport(run, delta, results, include_unsound, combined, conversion)


#: :func:`epsilon` under a name that the ``epsilon=`` arguments below do not shadow.
_report = epsilon


# ------------------------------------------------------------------ calibration
#
# The searches over z (bracketing, the interpolating shrink, the PLD's two grids) are
# noise_search's; this module says what is evaluated and when the target is met.


@dataclass(frozen=True)
class Calibration:
    """The smallest noise multiplier found to meet a target, and its report."""

    noise_multiplier: float
    target_epsilon: float
    delta: float
    report: EpsilonReport
    rel_tol: float
    evaluations: int

    @property
    def epsilon(self) -> float:
        return self.report.epsilon

    def __repr__(self) -> str:
        best = self.report.best
        return short_repr(self, noise_multiplier=self.noise_multiplier, epsilon=self.epsilon,
                          target_epsilon=self.target_epsilon, delta=self.delta,
                          analysis=None if best is None else best.analysis)

    def summary(self) -> str:
        """What ``noisysgd calibrate`` prints (wrapped to the terminal width)."""
        return calibration_summary(self)

    def to_dict(self) -> dict:
        return {
            "noise_multiplier": self.noise_multiplier,
            "target_epsilon": self.target_epsilon,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rel_tol": self.rel_tol,
            "evaluations": self.evaluations,
            "report": self.report.to_dict(),
        }


def calibrate(
    run: Run,
    *,
    epsilon: float,
    delta: float,
    analyses=None,
    orders=None,
    conversion: str = "improved",
    include_unsound: bool = False,
    rel_tol: float = 1e-4,
    max_noise_multiplier: float = 1e6,
    progress: bool = False,
) -> Calibration:
    """The smallest noise multiplier z (to relative tolerance ``rel_tol``) for
    which ``run`` (its own z is ignored and may be None) meets (``epsilon``, ``delta``) under
    the best sound analysis (or the named ``analyses``).

    Bisection in log z between a z that misses and one that meets the target;
    ``progress``: a bar on stderr counting the evaluations (the CLI's, on a
    terminal).  The returned z is always one at which the bound was *evaluated* and met
    the target (never an interpolation), and z/(1 + rel_tol) missed it — so it
    never overshoots the budget, and z·(1 − 1e-3) misses it whenever the bound
    is monotone in z (which holds for every analysis here up to the numerical
    search inside altschuler-talwar and, at δ ≲ 1e-10, dp_accounting's PLD
    discretisation, where ε can rise by ~1e-4 when z rises by 1e-6).  For sampled batches
    ``composition-pld`` is calibrated first (placed on its coarser search grid, decided on
    the certificate's), and the other analyses are asked once whether they meet the target
    at its answer (missing there, they miss below it), and only if they do, just below it and
    bisected below that point if they meet there too.  The result
    is the same (ε is monotone in z for every analysis), with one evaluation of the RDP
    analyses instead of one per step of the search.

    >>> from noisysgd import Run
    >>> run = Run(n=60000, batch_size=240, batching="poisson", steps=10000, learning_rate=0.1,
    ...           noise_multiplier=1.0, lipschitz=1.0, adjacency="add-remove")
    >>> cal = calibrate(run, epsilon=2.0, delta=1e-5, analyses="composition")
    >>> round(cal.noise_multiplier, 3), cal.epsilon <= 2.0
    (1.104, True)
    """
    if not isinstance(run, Run):
        raise ValueError(f"run must be a noisysgd.Run. Found {type(run).__name__}.")
    target = checked_real("epsilon", epsilon)
    d = validate_delta(delta)
    tol = checked_real("rel_tol", rel_tol)
    if not 1e-12 <= tol <= 0.1:
        raise ValueError(f"rel_tol must be in [1e-12, 0.1]. Found {rel_tol!r}.")
    zmax = checked_real("max_noise_multiplier", max_noise_multiplier)
    check_report_options(include_unsound, conversion)
    orders = None if orders is None else validate_orders(orders)
    names = analysis_names(analyses)
    chosen = list(ANALYSES) if BEST in names else list(dict.fromkeys(names))
    count = 0

    evaluations = bar(None, "calibrate", progress, unit="eval")

    def report(z: float, exclude=()) -> EpsilonReport:
        nonlocal count
        count += 1
        evaluations.set_description_str(f"calibrate: z = {z:.5g}")
        evaluations.update()
        return _evaluate(run.replace(noise_multiplier=z), d, [n for n in chosen if n not in exclude],
                         BEST in names, orders, conversion, include_unsound, named=names)

    def meets(r: EpsilonReport) -> bool:
        return _eps_or_inf(r) <= target

    try:
        # The PLD of sampled batches (~30 ms per noise level once its one-step PMF is built
        # in numpy, ~2 ms on its 3x coarser search grid) is searched first; the RDP
        # analyses (the replace-one quadrature costs ~0.1 s per noise level) are then asked
        # once whether they beat it.
        pld = "composition-pld"

        def coarse(z: float) -> _Eps:
            nonlocal count
            count += 1
            evaluations.update()
            return _Eps(ANALYSES[pld].search_epsilon(run.replace(noise_multiplier=z), d))

        expensive = (pld,) if (pld in chosen and len(chosen) > 1
                               and _pld_is_expensive(run)) else ()
        run.require("steps", why="to calibrate the noise of the run")
        start, factor = _start(run, target, d, clt=pld in chosen, rdp=_rdp_alone(run, chosen))
        # Warnings raised at the noise levels tried on the way (an optimal order at the
        # edge of the grid, say) are not about the answer: the search is silent, and the
        # returned z is evaluated once more at the end, its warnings raised as usual.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if chosen == [pld] and _pld_is_expensive(run):  # the PLD alone (it applies to every run)
                z = _place_then_decide(coarse, report, meets, start, None, tol, zmax, target, d, factor)
            else:
                z = _search(chosen, pld, expensive, report, coarse, meets, start, tol, zmax, target, d, factor)
        z_report = report(z)  # every analysis at the returned noise level, warnings included
    finally:
        evaluations.close()
    return Calibration(z, target, d, z_report, tol, count)


#: Where a calibration of the RDP composition alone starts on sampled batches, as a multiple of
#: the central-limit estimate, by adjacency: the RDP's answer lies 1.056-1.126x above it under
#: replace-one and 1.061-1.209x under add/remove on the configuration search's grid (n from 426
#: to 60,000, b/n up to 1/4, 10-100 epochs, epsilon 0.5-3; measured), so the start usually
#: meets and one step of 1.08 down (two under add/remove) misses.
RDP_START = {"replace": 1.13, "add-remove": 1.22}


def _rdp_alone(run: Run, chosen) -> bool:
    """Whether the RDP composition is the only one of ``chosen`` that applies to ``run`` (every
    other refuses it for a reason that does not depend on z, e.g. a hidden-state analysis on
    Poisson batches under add/remove): its calibration may start where that of the RDP alone does
    (:func:`_start`).  Only where the search starts."""
    probe = run if run.noise_multiplier is not None else run.replace(noise_multiplier=1.0)
    return "composition" in chosen and all(
        name == "composition" or ANALYSES[name].why_not(probe) is not None for name in chosen)


def _start(run: Run, epsilon: float, delta: float, mu_query: float = 0.0, *,
           clt: bool = True, rdp: bool = False) -> tuple[float, float]:
    """(where a calibration starts, its first step down): for sampled batches whose PLD is
    searched (``clt``) 1.06× the central-limit estimate of the answer (:func:`~noisysgd.analyses.composition.clt_noise_multiplier`,
    steps of 1.08: the bracket is usually found in two evaluations; the run's own z plays no part,
    so the answer does not depend on it); where the RDP composition alone is (``rdp``: asked
    alone, or the only analysis that applies, :func:`_rdp_alone`),
    :data:`RDP_START` × that estimate, steps of 1.08; else the run's own z if it has one, else 1
    (steps of 2).  Only where the search starts: the answer is decided by evaluated bounds,
    whatever the start."""
    from .analyses.composition import clt_noise_multiplier
    from .gdp import gdp_mu_estimate

    fallback = (1.0 if run.noise_multiplier is None else max(run.noise_multiplier, 1e-3)), 2.0
    if (not (clt or rdp) or not (0.0 < epsilon < math.inf) or run.steps is None
            or not _pld_is_expensive(run)):
        return fallback
    mu2 = gdp_mu_estimate(epsilon, delta) ** 2 - mu_query ** 2    # μ² of the run when the query takes μ_q²
    z = clt_noise_multiplier(run, math.sqrt(mu2)) if mu2 > 0.0 else None
    return fallback if z is None else ((1.06 if clt else RDP_START.get(run.adjacency, 1.22)) * z, 1.08)


def _search(chosen, pld, expensive, report, coarse, meets, start, tol, zmax, target, d, factor=2.0) -> float:
    """calibrate's search.  With a PLD of sampled batches (``expensive``) it goes first
    (:func:`_pld_first`); otherwise every analysis is bisected together."""
    if expensive:
        try:
            return _pld_first(chosen, pld, report, coarse, meets, start, tol, zmax, target, d, factor)
        except ValueError:  # the PLD never meets the target: perhaps another analysis does
            pass
    first = report(start, expensive)
    if first.best is None:
        reasons = "; ".join(
            f"{name} does not apply: {r.reason}" if not r.applies
            else f"{name} is flagged not sound" for name, r in first.results.items()
            if not r.applies or not r.sound
        )
        raise ValueError(f"no sound analysis applies to this run, nothing to calibrate: {reasons}")
    # steps of ``factor`` from a start placed for the RDP alone; after a PLD that never met, of 2
    z, _, _ = _bisect_noise(lambda x: report(x, expensive), meets, start, first, tol, zmax, target, d,
                            2.0 if expensive else factor)
    return z


def _pld_first(chosen, pld, report, coarse, meets, start, tol, zmax, target, d, factor=2.0) -> float:
    """The best bound's answer when ``pld`` is the PLD of sampled batches.  The best bound meets
    the target at z iff some analysis (or the order-wise minimum of the RDP ones) does, and each
    is non-increasing in z, so the answer is the smaller of the PLD's own answer z_p and that of
    the others.  z_p is found first (placed on the PLD's coarser grid, decided on the
    certificate's: :func:`~noisysgd.noise_search.place_then_decide`); the others are then evaluated once, at
    z_p (where they miss, they miss everywhere below, and z_p is the answer: one evaluation of
    the RDP analyses, ~0.1 s for the replace-one quadrature, which the final report at z_p then
    finds cached), and if they meet there, at z_p/(1 + tol), and bisected below it if they
    meet there too.  As in the plain search,
    the returned z was evaluated and met the target, and z/(1 + tol) missed it."""
    others = [n for n in chosen if n != pld]
    z = _place_then_decide(coarse, lambda x: report(x, others), meets, start, None, tol, zmax, target, d, factor)

    def rest(x: float) -> EpsilonReport:
        return report(x, (pld,))

    if not meets(rest(z)):  # they miss at z, hence below it; the final report at z finds them cached
        return z
    below = z / (1.0 + tol)
    r = rest(below)
    if not meets(r):
        return z
    z, _, _ = _bisect_noise(rest, meets, below, r, tol, zmax, target, d)
    return z


def _pld_is_expensive(run: Run) -> bool:
    """composition-pld composes a PLD for sampled batches (else it is one Gaussian)."""
    return run.batching in ("poisson", "sample") and run.batch_size < run.n


# ------------------------------------------------------------------ epoch budget


@dataclass(frozen=True)
class EpochBudget:
    """How many whole epochs a budget allows (``None`` = unlimited)."""

    epochs: int | None
    target_epsilon: float
    delta: float
    #: For an unlimited budget: the limit of ε and the epochs after which it is
    #: within 0.1% of it (the plateau).
    limit_epsilon: float | None = None
    plateau_epochs: int | None = None
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "epochs": "unlimited" if self.epochs is None else self.epochs,
            "target_epsilon": self.target_epsilon,
            "delta": self.delta,
            "limit_epsilon": self.limit_epsilon,
            "plateau_epochs": self.plateau_epochs,
        }


#: Analyses whose ε grows without bound in the number of steps.
_DIVERGENT = ("composition", "composition-pld")
#: Epochs at which a convergent bound is taken as its limit (checked against 1/10 of it).
_FAR = 10**7


def max_epochs(
    run: Run,
    *,
    epsilon: float,
    delta: float,
    analyses=None,
    orders=None,
    conversion: str = "improved",
    include_unsound: bool = False,
) -> EpochBudget:
    """The largest number of whole epochs of ``run`` (its ``steps`` are ignored)
    whose best bound stays within (``epsilon``, ``delta``).

    "Unlimited" (``epochs=None``) when the best bound at 10⁷ epochs equals the
    one at 10⁶ (to 1e-9: a plateau) and is within the budget; then
    ``plateau_epochs`` is the first epoch count within 0.1% of that limit.
    Otherwise a doubling search and a bisection over whole epochs (ε is
    non-decreasing in the number of epochs for every analysis here).
    """
    if not isinstance(run, Run):
        raise ValueError(f"run must be a noisysgd.Run. Found {type(run).__name__}.")
    target = checked_real("epsilon", epsilon)
    d = validate_delta(delta)
    names = analysis_names(analyses)
    per_epoch = run.steps_per_epoch

    # The composition baselines grow without bound (and the PLD's cost grows
    # with T): the plateau is looked for among the other analyses only.
    listed = list(ANALYSES) if BEST in names else names
    convergent = [n for n in listed if n not in _DIVERGENT and n != BEST]

    def at(epochs: int, convergent_only: bool = False) -> float:
        r = _report(run.replace(steps=epochs * per_epoch), delta=d,
                    analyses=convergent if convergent_only else names, orders=orders,
                    conversion=conversion, include_unsound=include_unsound)
        eps = _eps_or_inf(r)
        if convergent_only and BEST in names:  # their order-wise minimum too
            combined = _combine(r.results, d, conversion, include_unsound)
            if combined is not None:
                eps = min(eps, combined.epsilon)
        return eps

    first = at(1)
    if first > target:
        return EpochBudget(0, target, d, details={"epsilon_after_one_epoch": first})
    far = before = math.inf
    if convergent:
        far, before = at(_FAR, True), at(_FAR // 10, True)
    if far <= target and far <= before * (1 + 1e-9):
        lo, hi = 0, _FAR // 10  # first epoch count within 0.1% of the limit
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if at(mid, True) >= far * (1 - 1e-3):
                hi = mid
            else:
                lo = mid
        return EpochBudget(None, target, d, limit_epsilon=far, plateau_epochs=hi,
                           details={"plateau_rel_tol": 1e-3})
    lo, hi = 1, 2
    while at(hi) <= target:
        lo, hi = hi, hi * 2
        if hi > _FAR // 10:
            raise ValueError(
                f"epsilon {target!r} allows more than {lo} epochs but no plateau within it was "
                "found; give a smaller budget or more noise"
            )
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if at(mid) <= target:
            lo = mid
        else:
            hi = mid
    return EpochBudget(lo, target, d)


# ------------------------------------------------------------- runs composed with preprocessing queries
#
# A private preprocessing query (the feature ranges, the mean: noisysgd.preprocessing) is a Gaussian
# mechanism answered on the same data before training.  The release is the model *and* the query's
# answer; these three functions certify it and calibrate the training for the composed total.


@dataclass(frozen=True)
class Composed:
    """The total (ε, δ) of a training run and a private preprocessing query composed
    (:func:`compose_with_query`): how (``method``), basic composition's ε for comparison, and the
    analyses the total ``rests_on`` (an average of the iterates may be released only where every
    one of them accounts every iterate)."""

    epsilon: float
    delta: float
    method: str
    epsilon_basic: float
    rests_on: tuple
    epsilon_train: float = math.nan  # the training's ε that basic composition added the query's to


def _rests_on(r) -> tuple:
    return tuple(r.details.get("components", ())) if r.analysis == COMBINED else (r.analysis,)


def compose_with_query(report: EpsilonReport | None, query: dict, *, eps_train: float | None = None,
                       delta_train: float | None = None, covering=None, exclude=()) -> Composed:
    """The total (ε, δ) of the training and the private preprocessing it was trained with (ranges,
    centering, curvature, or several: :func:`noisysgd.preprocessing.combine_queries`), at
    δ = δ_train + δ_query.

    Always available: (ε, δ) add up — basic composition, which holds for adaptively chosen
    mechanisms (Dwork & Roth 2014, Theorem 3.16 and §3.5).  With the training's
    :class:`~noisysgd.EpsilonReport` (``report``), the query — a Gaussian mechanism, μ_q-GDP
    (``query["mu"]``) — is also composed into every sound training bound that has a finer
    form, and the smallest ε wins (each is a valid bound at the same δ):

    * a μ-GDP bound: √(μ² + μ_q²)-GDP (Dong, Roth & Su 2022, Corollary 3.3, adaptive), converted
      exactly (:func:`noisysgd.gdp.gdp_epsilon`);
    * an RDP curve ε(α): ε(α) + α·μ_q²/2 (the Gaussian's RDP; Mironov 2017, Proposition 1 for
      adaptive composition), converted as the accountant converts;
    * ``composition-pld``: the query's Gaussian pair composed into the run's PLD
      (:func:`noisysgd.analyses.composition.epsilon_with_gaussian_query`).

    Both compositions are adaptive: the training run, for any fixed ranges, meets its bound on
    every pair of adjacent data sets (scaling each example by given ranges, or subtracting a
    given center, changes each example alone, so adjacent data sets stay adjacent).

    ``eps_train``, ``delta_train``: the training's (ε, δ) for basic composition (default: the
    report's).  ``covering``: the only analyses the total may rest on (None: every one) — an
    average of the iterates is covered only by those that account every iterate, and then basic
    composition too takes the best of them, not the report's overall best.  ``exclude``: analyses
    whose native composition is left out (a calibration's check of the others,
    :func:`calibrate_with_query`); basic composition still takes the report's best."""
    def allowed(r) -> bool:
        return covering is None or set(_rests_on(r)) <= set(covering)

    candidates = [] if report is None else [
        r for r in report.results.values() if r.applies and r.sound and r.epsilon is not None and allowed(r)]
    if report is not None and report.combined is not None and report.combined.rdp is not None and allowed(
            report.combined):
        candidates.append(report.combined)
    if eps_train is None or covering is not None:
        if report is None:
            raise ValueError("compose_with_query needs eps_train or a report.")
        train = min(candidates, key=lambda r: r.epsilon, default=None) if covering is not None else report.best
        if train is None:
            return Composed(math.inf, (delta_train if delta_train is not None else report.delta) + query["delta"],
                            "no analysis covers the release", math.inf, (), math.inf)
        eps_train, basis = train.epsilon, _rests_on(train)
    else:
        basis = () if report is None or report.best is None else _rests_on(report.best)
    delta_train = report.delta if delta_train is None else delta_train
    eps_basic, delta = eps_train + query["epsilon"], delta_train + query["delta"]
    eps, method, rests_on = eps_basic, "basic composition (Dwork & Roth 2014, Theorem 3.16, adaptive)", basis
    mu_q = query.get("mu")
    if report is not None and mu_q is not None:
        from .gdp import gdp_epsilon

        for r in candidates:
            if r.analysis in exclude:
                continue
            try:
                if r.mu is not None:
                    e = gdp_epsilon(math.hypot(r.mu, mu_q), delta)
                    how = (f"GDP composition of {r.analysis} (mu {r.mu:.6g}) and the query "
                           "(Dong, Roth & Su 2022, Cor. 3.3)")
                elif r.analysis == "composition-pld" and report.run is not None:
                    from .analyses.composition import epsilon_with_gaussian_query

                    e = epsilon_with_gaussian_query(report.run, delta, mu_q)
                    how = ("PLD composition of composition-pld and the query (dp_accounting; dominating "
                           "pairs compose adaptively: Zhu, Dong & Wang 2022, Thm 10)")
                elif r.rdp is not None and r.orders is not None:
                    alpha = np.asarray(r.orders, dtype=float)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # an order at the grid's edge: still a valid bound
                        e = epsilon_from_rdp(alpha, np.asarray(r.rdp, dtype=float) + alpha * mu_q * mu_q / 2,
                                             delta, conversion=r.conversion or "improved").epsilon
                    how = f"RDP composition of {r.analysis} and the query (Mironov 2017, Prop. 1)"
                else:
                    continue
            except (ValueError, ArithmeticError):
                continue
            if math.isfinite(e) and e < eps:
                eps, method, rests_on = float(e), how, _rests_on(r)
    return Composed(float(eps), float(delta), method, float(eps_basic), tuple(rests_on), float(eps_train))


def certify_composed(certificate: dict, composed: Composed, delta_train: float, adjacency: str,
                     query: dict) -> None:
    """Write ``composed`` (:func:`compose_with_query`) into a training ``certificate``: its guarantee
    then covers the model *and* the query's answer (the training's own kept as ``training_guarantee``)."""
    mu_q = query.get("mu")
    certificate["preprocessing"] = dict(query)
    what = queries_text(query) or "its preprocessing"
    text = (f"({composed.epsilon:.6g}, {composed.delta:.3g})-DP for the final model and {what}, {adjacency} "
            f"adjacency: the private queries (mu {mu_q if mu_q is None else format(mu_q, '.4g')}; "
            f"({query['epsilon']:.6g}, {query['delta']:.3g}) alone) composed with training's "
            f"({composed.epsilon_train:.6g}, {delta_train:.3g}) by {composed.method}")
    cert = certificate.get("certificate")
    if isinstance(cert, dict):
        cert["training_guarantee"] = cert.get("guarantee")
        cert["guarantee"] = text
        cert["total_rests_on"] = list(composed.rests_on)
    certificate["epsilon_total"], certificate["delta_total"] = composed.epsilon, composed.delta
    certificate["epsilon_total_basic"] = composed.epsilon_basic
    certificate["composition"] = composed.method


def compose_query(certificate: dict, eps_train: float, delta_train: float, adjacency: str,
                  query: dict, report=None, exclude=(), covering=None) -> tuple[float, float]:
    """Make ``certificate`` (a training certificate, changed in place) cover the model *and*
    the private preprocessing it was trained with: :func:`compose_with_query`, written by
    :func:`certify_composed`.  Returns the total (ε, δ), at δ = δ_train + δ_query."""
    composed = compose_with_query(report, query, eps_train=eps_train, delta_train=delta_train, covering=covering,
                                  exclude=exclude)
    certify_composed(certificate, composed, delta_train, adjacency, query)
    return composed.epsilon, composed.delta


def composed_epsilon(report: EpsilonReport, query: dict) -> float:
    """The total ε of ``report``'s training run composed with the Gaussian ``query``
    (:func:`compose_with_query`)."""
    if report.best is None:
        return math.inf
    return compose_with_query(report, query).epsilon


def calibrate_with_query(run: Run, *, epsilon: float, delta: float, query: dict, analyses=None,
                         rel_tol: float = 1e-4) -> Calibration:
    """The smallest noise multiplier (to ``rel_tol``) at which ``run`` composed with the private
    preprocessing ``query`` (:func:`compose_query`) meets ``epsilon`` + the query's ε at
    ``delta`` + the query's δ (``epsilon``, ``delta``: the training's share, as recorded).

    Where the PLD of sampled batches can decide and the query is a Gaussian (μ_q), the total is
    calibrated directly: the PLD composed with the query is placed on its coarser search grid
    and decided on the certificate's (:func:`~noisysgd.noise_search.place_then_decide`), then every other analysis, composed
    as the certificate composes them, is read off the report at that answer (missing there, they
    miss below it), and only where one meets there asked just below it and bisected below it if
    it meets there too — no calibration to a basic-composition share first.  Otherwise
    the training is calibrated to its share and :func:`calibrate_composed` lowers the noise.
    Either way the returned z was evaluated and met the total (the certificate's composition),
    and z/(1 + rel_tol) missed it."""
    def two_stage() -> Calibration:
        share = calibrate(run, epsilon=epsilon, delta=delta, analyses=analyses, rel_tol=rel_tol)
        return calibrate_composed(run, share, query, analyses)

    names = analysis_names(analyses)
    if (query.get("mu") is None or not (BEST in names or "composition-pld" in names)
            or not _pld_is_expensive(run)):
        return two_stage()
    from .analyses.composition import epsilon_with_gaussian_query

    total, delta_total, mu = epsilon + query["epsilon"], delta + query["delta"], query["mu"]
    coarsening = ANALYSES["composition-pld"].search_coarsening
    evaluations = 0

    def pld(z: float, grid: float = 1) -> _Eps:
        nonlocal evaluations
        evaluations += 1
        return _Eps(epsilon_with_gaussian_query(run.replace(noise_multiplier=z), delta_total, mu, coarsening=grid))

    def at(z: float) -> _Eps:  # every analysis, composed with the query as the certificate composes it
        nonlocal evaluations
        evaluations += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _Eps(composed_epsilon(_report(run.replace(noise_multiplier=z), delta=delta,
                                                 analyses=analyses), query))

    def meets(c: _Eps) -> bool:
        return c.epsilon <= total

    start, factor = _start(run, total, delta_total, mu)
    try:
        z = _place_then_decide(lambda x: pld(x, coarsening), pld, meets, start, None, rel_tol, 1e6, total,
                               delta_total, factor)
    except ValueError:  # the PLD never meets the total: perhaps another analysis does
        return two_stage()
    final = _report(run.replace(noise_multiplier=z), delta=delta, analyses=analyses)  # warnings as usual
    # Does another analysis (or the RDP minimum, or basic composition) beat the PLD below z?
    # Each composed ε is non-increasing in z and the PLD missed at z/(1 + rel_tol): if all the
    # others miss at z itself, they miss below it too, and z is the answer without a second
    # report (~0.1-0.2 s where the replace-one RDP is computed by quadrature).
    others = compose_query({}, final.epsilon, final.delta, run.adjacency, query, report=final,
                           exclude=("composition-pld",))[0] if final.best is not None else math.inf
    if others <= total:
        below = z / (1.0 + rel_tol)
        r = at(below)
        if meets(r):  # another analysis beats the PLD below its answer
            z, _, _ = _bisect_noise(at, meets, below, r, rel_tol, 1e6, total, delta_total)
            final = _report(run.replace(noise_multiplier=z), delta=delta, analyses=analyses)
    return Calibration(z, epsilon, delta, final, rel_tol, evaluations + 1)


def calibrate_composed(run: Run, cal: Calibration, query: dict, analyses) -> Calibration:
    """From ``cal`` (training calibrated to its share, basic composition), the smallest noise
    multiplier (to ``cal.rel_tol``) whose composition with ``query`` meets the total target.

    The answer lies between the training calibrated *alone* to the whole target (no composed
    bound can be below its training part's own bound at the same δ: √(μ² + μ_q²) ≥ μ, an added
    RDP term ≥ 0, and basic composition adds ε_q) and ``cal``'s noise; the bracket is shrunk
    as :func:`calibrate` shrinks its own (:func:`~noisysgd.noise_search.shrink`: interpolation in log ε against log z,
    alternating with bisection; each composed ε is non-increasing in z).  The returned z was
    evaluated and met the total."""
    total, delta_total = cal.target_epsilon + query["epsilon"], cal.delta + query["delta"]
    hi = cal.noise_multiplier
    evaluations = cal.evaluations

    def at(z) -> _Eps:
        nonlocal evaluations
        evaluations += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = epsilon(run.replace(noise_multiplier=z), delta=cal.delta, analyses=analyses)
        return _Eps(composed_epsilon(r, query))

    def meets(c: _Eps) -> bool:
        return c.epsilon <= total

    hi_c = _Eps(composed_epsilon(cal.report, query))
    if not meets(_Eps(hi_c.epsilon / (1 + 1e-12))):  # cannot happen (basic composition)
        return cal
    if (query.get("mu") is not None and cal.report.best is not None
            and cal.report.best.analysis == "composition-pld" and _pld_is_expensive(run)):
        # the PLD decides: place the answer with the query composed on its coarser search grid
        # (2–4× cheaper), then decide it with every analysis composed on the certificate's grid
        from .analyses.composition import epsilon_with_gaussian_query

        def coarse(z) -> _Eps:
            return _Eps(epsilon_with_gaussian_query(run.replace(noise_multiplier=z), delta_total, query["mu"],
                                                    coarsening=ANALYSES["composition-pld"].search_coarsening))

        z = _place_then_decide(coarse, at, meets, hi, None, cal.rel_tol, math.inf, total, delta_total, factor=1.25)
        final = epsilon(run.replace(noise_multiplier=z), delta=cal.delta, analyses=analyses)
        return Calibration(z, cal.target_epsilon, cal.delta, final, cal.rel_tol, evaluations + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = calibrate(run, epsilon=total, delta=delta_total, analyses=analyses, rel_tol=cal.rel_tol)
    evaluations += alone.evaluations
    lo = alone.noise_multiplier / (1 + cal.rel_tol)
    if lo >= hi:
        return cal
    lo_c = at(lo)
    if meets(lo_c):  # (only if the bounds are not monotone): take it, it was evaluated and meets
        hi = lo
    else:
        hi, _, _ = _shrink(at, meets, lo, lo_c.epsilon, hi, hi_c, cal.rel_tol, total)
    final = epsilon(run.replace(noise_multiplier=hi), delta=cal.delta, analyses=analyses)  # warnings as usual
    return Calibration(hi, cal.target_epsilon, cal.delta, final, cal.rel_tol, evaluations + 1)
