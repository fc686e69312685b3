"""Bok, Su & Altschuler: shifted interpolation, μ-GDP of the last iterate.

J. Bok, W. J. Su and J. M. Altschuler, *Shifted Interpolation for Differential
Privacy* (ICML 2024, arXiv:2403.00278), §4.  Their shifted interpolated
processes turn the shifted-divergence argument of privacy amplification by
iteration into a statement about tradeoff functions, so the privacy of the
final iterate comes out as μ-GDP (Dong, Roth & Su 2022) and converts to
(ε, δ) exactly (:mod:`noisysgd.gdp`) instead of through Rényi divergences.

Setting, in this library's terms (Altschuler–Talwar noise convention, as in
:mod:`noisysgd.run`): each step is ω ← Π[ω − η(g + Z)] with g the batch
gradient averaged over b, Z ~ N(0, σ²I) and σ = z·L/b; every example's loss
is m-strongly convex and M-smooth with m > 0, and the constant step size
satisfies η < 2/M, so a gradient step is a contraction with factor

    c = max(|1 − ηm|, |1 − ηM|) < 1

(Altschuler & Talwar, Lemma 5.5).  Replacing one example moves one step's
update by at most η·(sensitivity)/b (sensitivity 2L); relative to the
step's noise ησ that is μ₁ = (sensitivity/b)/σ = 1/(noise-to-sensitivity).

``full`` (NoisyGD, b = n), after T steps:

    μ_T = μ₁·√( (1+c)/(1−c) · (1−c^T)/(1+c^T) ),   μ₁ = (2L/n)/σ.

    T = 1 gives μ₁; c → 1 gives μ₁√T (composition); T → ∞ gives
    μ₁√((1+c)/(1−c)).  For full batches the paper shows this is exact.

``cyclic`` (NoisyCGD), l = ⌊n/b⌋ batches in a fixed order, E epochs:

    μ_E = μ₁·√( 1 + c^{2l−2}(1−c²)/(1−c^l)² · (1−c^{l(E−1)})/(1+c^{l(E−1)}) ),
    μ₁ = (2L/b)/σ.

    E = 1 gives μ₁; c → 1 gives μ₁√(1 + (E−1)/l).  The worst case is over
    the position of the differing example in the order (the last batch of
    the epoch).  The n mod b left-over examples are never used.

    *shuffle-once* (one secret, uniformly random partition drawn once and
    reused every epoch) gets the same μ: conditioned on the partition the
    run is NoisyCGD in that order, whose tradeoff function is at least
    G_μ at every position; the released model's law on either dataset is
    the mixture over partitions (the same mixing law on both), and a
    mixture of pairs each at least as hard to distinguish as G_μ is too
    (a test's errors are the averages of its errors on the components, and
    G_μ is convex).  Averaging over the unknown position instead of taking
    the worst would need μ per position, which this module does not have
    from the paper (only the worst case is implemented); ``ye-shokri``
    does average (Theorem 4.2).

    *Steps that are not a multiple of l.*  We use E = ⌈T/l⌉ epochs.  Let
    T = (E−1)l + r with 0 < r < l, and let the differing example sit in
    batch p of the order.  If p ≤ r it is used E times, l steps apart, and
    the run ends r − p steps after its last use: exactly the situation of a
    full E-epoch run with the example in batch l − r + p (same number of
    uses, same spacing, same number of steps after the last use).  The steps
    before the first use do not matter: until then both datasets give the
    same updates, so the two runs reach the first use with the same (data-
    dependent but common) distribution, and the bound holds for any common
    starting distribution (a tradeoff bound that holds for every starting
    point holds for a mixture of them, by convexity of the tradeoff
    function).  If p > r the example is used E − 1 times and the run ends
    l + r − p steps after the last use: an (E−1)-epoch run with the example
    in batch p − r.  Since μ_E is non-decreasing in E, the E-epoch worst
    case covers both.

    *One batch per epoch (l = 1, b > n/2).*  Every step then uses the same
    batch, i.e. the run is NoisyGD on that batch of b examples, and the
    ``full`` formula (n replaced by b, T = steps) applies; it is never larger
    than the cyclic formula at l = 1, which is valid but not tight there.
    We report the ``full`` one.

Numerics: both formulas are evaluated in log space from the gap 1 − c =
min(ηm, 2 − ηM), with log c = log1p(−(1 − c)), 1 − c^k = −expm1(k·log c) and
1 − c² = (1 − c)(1 + c), so c within 1e-15 of 1 and T up to 1e12 or more keep
full relative accuracy (tested against mpmath at 50 digits).

What is left out of the paper, and why:

* *Stochastic batches* (their NoisySGD: random batches each epoch).  The
  bound there is a tradeoff function built with the subsampling operator of
  Dong, Roth & Su, not a μ-GDP parameter, so it does not fit this GDP
  interface and needs numerical tradeoff-function composition; and we
  had no verified statement of it.  ``shuffle``, ``sample`` and ``poisson``
  runs are refused here; :mod:`.shifted_interpolation_sampled` computes a
  noise-split form for ``sample`` batches, flagged not sound (the form in the
  authors' code falls below the exact privacy of small instances).
* *Convex losses on a bounded domain* (c = 1, diameter D), where the bound
  comes from a minimisation over the time at which the interpolated process
  is synchronised, with the diameter as the initial shift.  Left out for
  lack of a verified statement; that regime is covered (in RDP) by
  ``altschuler-talwar``.  Consequently a declared diameter is allowed (the
  projection is harmless, see :meth:`ShiftedInterpolation.assumptions`) but
  not used to tighten the bound.
* Step-size schedules: the closed forms are for a constant step size.

Adjacency: the paper's replace-one.  Under add/remove the partition into
batches (cyclic) or the denominator n (full) changes, which the argument does
not cover: refused, as in ``altschuler-talwar``.
"""

from __future__ import annotations

import math

from ..run import Run
from .base import GDPAnalysis

__all__ = [
    "ShiftedInterpolation",
    "contraction_gap",
    "full_batch_mu_ratio",
    "cyclic_mu_ratio",
]

_CITATION = (
    "Bok, Su & Altschuler, Shifted Interpolation for Differential Privacy (ICML 2024, "
    "arXiv:2403.00278), §4: strongly convex NoisyGD (full batch) and NoisyCGD (cyclic batches); "
    "exact conversion of μ-GDP: Dong, Roth & Su (2022), Corollary 2.13"
)


# --------------------------------------------------------------------------- pure math


def contraction_gap(learning_rate: float, strong_convexity: float, smoothness: float) -> float:
    """1 − c for c = max(|1 − ηm|, |1 − ηM|), computed without cancellation.

    With 0 ≤ m ≤ M, c = max(1 − ηm, ηM − 1), so 1 − c = min(ηm, 2 − ηM).
    Positive exactly when m > 0 and η < 2/M (a strict contraction); the
    returned value may be ≤ 0, meaning c ≥ 1.

    >>> contraction_gap(0.5, 1.0, 2.0)
    0.5
    >>> contraction_gap(0.5, 2.0**-40, 1.0)  # c = 1 − 2⁻⁴¹, kept exactly as a gap
    4.547473508864641e-13
    """
    eta, m, M = float(learning_rate), float(strong_convexity), float(smoothness)
    return min(eta * m, 2.0 - eta * M)


def _check_gap(gap) -> float:
    g = float(gap)
    if not (0.0 < g <= 1.0):  # also rejects NaN
        raise ValueError(f"gap (1 − c) must be in (0, 1] (contraction factor c in [0, 1)). Found {gap!r}.")
    return g


def _log_one_minus_power(k: float, log_c: float) -> float:
    """log(1 − c^k) for k ≥ 0 (−inf at k = 0)."""
    if k == 0:
        return -math.inf
    if log_c == -math.inf:
        return 0.0
    return math.log(-math.expm1(k * log_c))


def _log_one_plus_power(k: float, log_c: float) -> float:
    """log(1 + c^k) for k ≥ 0."""
    if k == 0:
        return math.log(2.0)
    return math.log1p(math.exp(k * log_c))


def _log_power(k: float, log_c: float) -> float:
    """log c^k for k ≥ 0 (0 at k = 0, even when c = 0)."""
    return 0.0 if k == 0 else k * log_c


def full_batch_mu_ratio(steps, *, gap) -> float:
    """μ_T/μ₁ = √((1+c)/(1−c) · (1−c^T)/(1+c^T)) for NoisyGD, from the gap 1 − c.

    ``steps`` may be ``math.inf`` for the limit √((1+c)/(1−c)).

    >>> full_batch_mu_ratio(1, gap=0.3)
    1.0
    >>> round(full_batch_mu_ratio(math.inf, gap=0.5), 12)  # √(1.5/0.5)
    1.732050807569
    """
    g = _check_gap(gap)
    T = float(steps)
    if not T >= 1:
        raise ValueError(f"steps must be at least 1. Found {steps!r}.")
    log_c = math.log1p(-g) if g < 1.0 else -math.inf
    log_sq = math.log(2.0 - g) - math.log(g)
    if math.isfinite(T):
        log_sq += _log_one_minus_power(T, log_c) - _log_one_plus_power(T, log_c)
    return math.exp(0.5 * log_sq)


def cyclic_mu_ratio(epochs, *, gap, batches_per_epoch: int) -> float:
    """μ_E/μ₁ for NoisyCGD with l batches per epoch and E epochs, from the gap 1 − c:

    √(1 + c^{2l−2}(1−c²)/(1−c^l)² · (1−c^{l(E−1)})/(1+c^{l(E−1)})).

    ``epochs`` may be ``math.inf`` for the limit (the last factor → 1).

    >>> cyclic_mu_ratio(1, gap=0.5, batches_per_epoch=4)
    1.0
    >>> round(cyclic_mu_ratio(2, gap=0.5, batches_per_epoch=2) ** 2, 12)  # 1 + 0.25·0.75/0.5625·0.6
    1.2
    """
    g = _check_gap(gap)
    E = float(epochs)
    if not E >= 1:
        raise ValueError(f"epochs must be at least 1. Found {epochs!r}.")
    l = int(batches_per_epoch)  # noqa: E741 (the paper's notation)
    if l < 1:
        raise ValueError(f"batches_per_epoch must be at least 1. Found {batches_per_epoch!r}.")
    if E == 1:
        return 1.0
    log_c = math.log1p(-g) if g < 1.0 else -math.inf
    log_term = (
        _log_power(2 * l - 2, log_c)
        + math.log(g) + math.log(2.0 - g)  # 1 − c² = (1 − c)(1 + c)
        - 2.0 * _log_one_minus_power(l, log_c)
    )
    if math.isfinite(E):
        k = l * (E - 1.0)
        log_term += _log_one_minus_power(k, log_c) - _log_one_plus_power(k, log_c)
    return math.sqrt(1.0 + math.exp(log_term))


# --------------------------------------------------------------------------- the analysis


#: What every shifted-interpolation bound assumes (the stochastic-batch form adds its own).
COMMON_ASSUMPTIONS = (
    "only the final iterate is released; every intermediate iterate stays hidden",
    "every example's loss is m-strongly convex (m > 0) and M-smooth; with L2 "
    "regularization m and M are those of the regularized loss",
    "every per-example gradient of the unregularized loss has norm at most L (replacing "
    "one example changes the batch gradient by at most 2L/b)",
    "constant step size η < 2/M, so every gradient step is a contraction with factor "
    "c = max(|1 − ηm|, |1 − ηM|) < 1",
    "each step adds N(0, (z·L/b)²I) to the gradient averaged over b",
)


class ShiftedInterpolation(GDPAnalysis):
    """Bok, Su & Altschuler's μ-GDP of the last iterate for strongly convex
    Noisy-GD (full batch) and Noisy-CGD (cyclic batches)."""

    name = "shifted-interpolation"
    citation = _CITATION

    def assumptions(self) -> list[str]:
        return [
            *COMMON_ASSUMPTIONS,
            "an optional projection onto a fixed convex set after each noisy step is allowed: it "
            "is 1-Lipschitz, so c still bounds the contraction of a step, and the released point "
            "is a post-processing; the initial point does not depend on the data",
            "full batches, or cyclic batches in one fixed, data-independent order (worst position; "
            "shuffle-once, one secret random partition reused every epoch, is a mixture of such "
            "orders and gets the same bound); the n mod b left-over examples are never used; "
            "replace-one adjacency",
        ]

    def why_not(self, run: Run) -> str | None:
        if run.batching not in ("full", "cyclic", "shuffle-once"):
            return (
                "covers full and cyclic batches only (and shuffle-once, one random order reused "
                "every epoch: NoisyGD and NoisyCGD at the worst position); the paper's "
                "stochastic-batch bound is a subsampled tradeoff function, not μ-GDP: see "
                "shifted-interpolation-sampled (flagged not sound: no checked statement of it); "
                f"found batching={run.batching!r}"
            )
        # add/remove with full, cyclic or shuffle-once batches never gets here: Run refuses it
        # (run.ADD_REMOVE_BATCHINGS).
        if not run.strong_convexity > 0:
            return (
                "needs strongly convex losses, m > 0 (--strong-convexity): the closed forms need "
                f"a strict contraction c < 1; found strong_convexity={run.strong_convexity:g}"
            )
        if run.smoothness is None:
            return "needs the smoothness M of the losses (--smoothness) to compute the contraction factor c"
        if not run.constant_learning_rate:
            return "needs a constant step size (the closed forms are for constant η); found a schedule"
        eta, M = run.learning_rate, run.smoothness
        if not eta * M < 2.0:
            return (
                f"needs learning rate < 2/M = {2.0 / M:.6g} (strictly, so that c < 1); found {eta:g}"
            )
        gap = contraction_gap(eta, run.strong_convexity, M)
        if not gap > 0.0:
            return (
                f"needs a contraction factor c = max(|1 − ηm|, |1 − ηM|) < 1; found 1 − c = {gap:g} "
                f"(η·m = {eta * run.strong_convexity:g} is below float resolution)"
            )
        return None

    # ------------------------------------------------------------ parameters

    def _check(self, run: Run) -> None:
        reason = self.why_not(run)
        if reason is not None:
            raise ValueError(f"run does not satisfy the assumptions of {self.name}: {reason}")

    @staticmethod
    def _parts(run: Run) -> dict:
        """μ₁, the gap 1 − c, and the regime (the run must apply)."""
        gap = contraction_gap(run.learning_rate, run.strong_convexity, run.smoothness)
        sigma = run.sigma("altschuler-talwar")  # z·L/b
        mu1 = run.sensitivity / (run.batch_size * sigma)  # (2L/b)/σ = 2/z
        l = run.steps_per_epoch  # noqa: E741
        if run.batching == "full" or l == 1:
            return dict(mu1=mu1, gap=gap, sigma=sigma, regime="full", steps=run.steps)
        return dict(mu1=mu1, gap=gap, sigma=sigma, regime="cyclic", batches_per_epoch=l,
                    epochs=run.epochs_touched)

    def mu(self, run: Run) -> float:
        """μ of the released final model (the run must apply)."""
        self._check(run)
        p = self._parts(run)
        if p["regime"] == "full":
            return p["mu1"] * full_batch_mu_ratio(p["steps"], gap=p["gap"])
        return p["mu1"] * cyclic_mu_ratio(p["epochs"], gap=p["gap"],
                                          batches_per_epoch=p["batches_per_epoch"])

    def details(self, run: Run) -> dict:
        self._check(run)
        p = self._parts(run)
        if p["regime"] == "full":
            limit = p["mu1"] * full_batch_mu_ratio(math.inf, gap=p["gap"])
        else:
            limit = p["mu1"] * cyclic_mu_ratio(math.inf, gap=p["gap"],
                                               batches_per_epoch=p["batches_per_epoch"])
        out = {
            "mu": self.mu(run),
            "mu_step": p["mu1"],
            "mu_limit": limit,
            "mu_limit_note": "μ as the number of steps (full) or epochs (cyclic) grows without bound",
            "contraction": 1.0 - p["gap"],
            "contraction_gap": p["gap"],
            "sigma_altschuler_talwar": p["sigma"],
            "gradient_sensitivity": run.sensitivity,
        }
        if p["regime"] == "full":
            out["bound"] = "NoisyGD: μ₁·√((1+c)/(1−c)·(1−c^T)/(1+c^T))"
            out["steps"] = p["steps"]
            if run.batching in ("cyclic", "shuffle-once"):
                out["single_batch_note"] = (
                    "one batch per epoch: every step uses the same batch, so the full-batch formula "
                    "applies to that batch (n replaced by b)"
                )
        else:
            out["bound"] = (
                "NoisyCGD: μ₁·√(1 + c^(2l−2)(1−c²)/(1−c^l)²·(1−c^(l(E−1)))/(1+c^(l(E−1))))"
            )
            out["batches_per_epoch"] = p["batches_per_epoch"]
            out["epochs_used"] = p["epochs"]
            if run.steps % p["batches_per_epoch"]:
                out["partial_epoch_note"] = (
                    "steps is not a multiple of l: E = ⌈steps/l⌉ covers the partial last epoch "
                    "(worst case over the example's position; see the module docstring)"
                )
        if run.batching in ("cyclic", "shuffle-once"):
            out["examples_dropped_per_epoch"] = run.n % run.batch_size
        if run.batching == "shuffle-once":
            out["position_note"] = (
                "worst position of the fixed-order bound; it bounds every position, hence the "
                "mixture over the secret random partition (not averaged over positions)")
        if run.diameter is not None:
            out["diameter_note"] = "the projection is allowed but the diameter is not used by this bound"
        return out
