"""Bok, Su & Altschuler for random batches: shifted interpolation *with* amplification by sampling.

J. Bok, W. J. Su and J. M. Altschuler, *Shifted Interpolation for Differential
Privacy* (ICML 2024, arXiv:2403.00278), NoisySGD (§4, stochastic batches; the
full- and cyclic-batch results are :mod:`.shifted_interpolation`).

**Status: flagged not sound** (``sound = False``; computed for comparison,
never counted as a guarantee).  We could not read the paper's theorem or proof
for stochastic batches; the only statement we had is the one the authors' public
code evaluates (github.com/jinhobok/shifted_interpolation_dp, ``gdp.py``
``gdp_clt_sc`` and ``plot_nsgd_fdp.py``, through a CLT approximation):

    (code form)  G(√2·μ₁·(c^k − c^t)/(1 − c)) ⊗ C_p(G(μ₁))^{⊗k},  k = t − τ.

**That form is wrong**: already at b = n (p = 1, C_1 = Id) and t = 2, k = 1 it
gives μ₁√(1 + 2c²), below the exact NoisyGD value μ₁(1 + c)/√(1 + c²) of
:mod:`.shifted_interpolation` whenever c³ + c < 1 (c < 0.682); and the exact
1-D check below finds it below the true divergence at p = 0.9, 0.7 and 0.4
too (tests/test_shifted_interpolation_sampled.py reproduces both).  The √2 on
the shift is what a split of each step's noise into two halves gives; the code
applies the split to the shift only.  What this analysis computes is the
*split form*, the √2 on both parts:

    f_τ = G(√2·μ₁·(c^k − c^t)/(1 − c)) ⊗ C_p(G(√2·μ₁))^{⊗k}   (1 ≤ k < t),
    f_0 = C_p(G(μ₁))^{⊗t}                                        (τ = 0: composition),

best over the windows evaluated.  f_0 is plain composition of the subsampled
steps (Dong, Roth & Su 2022, Theorem 9, composed), which is sound by itself.
The split form passed every exact check we ran (the test grid and 1,000
random small instances at 5 values of ε each, T ≤ 10, p up to 1, c from 0.05
to 0.99), but it has no proof we could check, and its noise split acts where
the shift depends on whether the differing example is in the sampled batch —
the kind of step that breaks Altschuler & Talwar's (B.2) (see
:class:`.altschuler_talwar.AltschulerTalwarSampled`).  The exact checks are
weak exactly there: in a linear-plus-ridge instance every batch applies the
same contraction, so batch membership and the update map are not coupled.
Instances where they are (per-example curvatures that differ) have unbounded
gradient differences on ℝ and break the Lipschitz assumption — there even
plain composition of C_p(G(μ₁)) falls below the truth — and need a projection,
i.e. non-Gaussian laws, which we did not compute.  Until a proof is checked
it stays flagged.

Setting (this library's Altschuler–Talwar noise convention): each step is
ω ← Π[ω − η(g_B(ω) + Z)], g_B the gradient averaged over a batch B of b
examples drawn uniformly *without replacement* and independently at every
step (``sample``), Z ~ N(0, σ²I), σ = z·L/b.  Every example's loss is
m-strongly convex and M-smooth (m > 0), constant η < 2/M, so each gradient
step is a c-contraction, c = max(|1 − ηm|, |1 − ηM|) (Altschuler & Talwar,
Lemma 5.5); replacing one example moves a step that uses it by at most
η·2L/b, i.e. μ₁ = (2L/b)/σ = 2/z noise units.  p = b/n.  G(μ) is the μ-GDP
tradeoff function and C_p Dong, Roth & Su's subsampling operator for
fixed-size sampling without replacement: with f_p = p·f + (1 − p)·Id,
C_p(f) = min{f_p, f_p⁻¹}**.

Numerical evaluation (no CLT).  C_p(G(μ)) is the tradeoff function of a
symmetric pair whose privacy loss, under the first distribution, is: the loss
L(x) = log(1 − p + p·e^{μx − μ²/2}) of f_p's pair (N(0,1), (1−p)N(0,1) +
pN(μ,1)) under the mixture, on {L > 0}; an atom at 0 of mass
(1 − p)(2Φ(μ/2) − 1) (the segment of slope −1 the convex hull adds); and −L
under N(0,1) on {L ≥ 0}.  Its hockey-stick curve is therefore, for ε ≥ 0,

    δ(ε) = p·Φ̄(x_ε − μ) + (1 − p − e^ε)·Φ̄(x_ε),  x_ε = log((e^ε − 1 + p)/p)/μ + μ/2,

(that of f_p), and δ(−ε) = 1 − e^{−ε} + e^{−ε}δ(ε) (symmetry); a test checks
it against the convex hull computed directly.  We discretise it with
dp_accounting's pessimistic *connect-the-dots* construction (Doroshenko et
al. 2022, Algorithm 1: a discrete pair that dominates the true one, so every
composition of it is an upper bound) on the grid εᵢ = i·h (h = 1e-4, widened
so that one step spans at most 10,000 points a side), compose it k times
(FFT), and compose the result with the Gaussian part *exactly*:
δ_f(ε) = m_∞ + Σ_j w_j·δ_{G(s)}(ε − ℓ_j) over the composed PMF (w_j at loss
ℓ_j, infinite-loss mass m_∞), δ_G(x) = Φ(−x/s + s/2) − e^x Φ(−x/s − s/2) for
every real x.  ε(δ) is found by a bracketing search and is always a point
that was evaluated and met δ.  Connect-the-dots adds far less than the h/2
per step of the privacy-buckets rounding.

The windows evaluated are a fixed set (never depending on z, so ε is
non-increasing in z): k = t, and k₀·{1/2, 1/√2, 1, √2, 2} where k₀ minimises
the small-μ CLT proxy 2((c^k − c^t)/(1 − c))² + 2p²k.  Every window is a bound
of the same form, so the minimum over them is one.

Not covered: ``poisson`` batches (a Poisson batch of size |B| with the fixed
denominator b contracts with a factor that depends on |B|, and an empty one
does not contract), add/remove adjacency (replace-one only), step-size
schedules, and the convex-with-diameter form (whose noise split ω has the same
unresolved status).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import special

from ..run import Run
from .base import Analysis
from .shifted_interpolation import COMMON_ASSUMPTIONS, contraction_gap

__all__ = [
    "ShiftedInterpolationSampled",
    "subsampled_gaussian_delta",
    "subsampled_gaussian_pmf",
    "bound_delta",
    "bound_epsilon",
    "candidate_windows",
    "default_interval",
    "gaussian_delta",
    "shift",
]

_CITATION = (
    "Bok, Su & Altschuler, Shifted Interpolation for Differential Privacy (ICML 2024, "
    "arXiv:2403.00278), NoisySGD with stochastic batches (form transcribed from the authors' code); "
    "subsampling operator C_p: Dong, Roth & Su (2022), Theorem 9; connect-the-dots PLD: "
    "Doroshenko et al. (2022), as implemented by dp_accounting"
)

_UNSOUND_REASON = (
    "no checked proof: the form in the authors' code is below the exact privacy of small instances "
    "(even at b = n), and the noise-split form computed here, which passes those checks, splits the "
    "noise where the shift depends on the sampled batch, the step that breaks Altschuler–Talwar's (B.2)"
)

#: δ(ε) of one C_p(G(μ)) step beyond the last grid point goes to the infinite-loss mass.
_TAIL_DELTA = 1e-18


# --------------------------------------------------------------------------- pure math


def _check_p_mu(p, mu) -> tuple[float, float]:
    p, mu = float(p), float(mu)
    if not 0.0 < p <= 1.0:
        raise ValueError(f"p (sampling rate b/n) must be in (0, 1]. Found {p!r}.")
    if not 0.0 < mu < math.inf:
        raise ValueError(f"mu must be positive and finite. Found {mu!r}.")
    return p, mu


def subsampled_gaussian_delta(epsilon, p: float, mu: float) -> np.ndarray:
    """δ(ε) = sup_α [1 − e^ε α − C_p(G(μ))(α)] for every real ε (vectorised).

    >>> round(float(subsampled_gaussian_delta(0.0, 1.0, 1.0)), 12)  # Φ(1/2) − Φ(−1/2)
    0.382924922548
    """
    p, mu = _check_p_mu(p, mu)
    eps = np.asarray(epsilon, dtype=float)
    a = np.abs(eps)
    # x_ε with log((e^a − 1 + p)/p) = log(expm1(a) + p) − log p
    x = (np.log(np.expm1(a) + p) - math.log(p)) / mu + mu / 2.0
    tail = special.ndtr(-x)
    d_pos = p * special.ndtr(-(x - mu)) + (1.0 - p) * tail - np.exp(a) * tail
    d_pos = np.clip(d_pos, 0.0, 1.0)
    d_neg = -np.expm1(-a) + np.exp(-a) * d_pos
    return np.where(eps >= 0, d_pos, np.clip(d_neg, 0.0, 1.0))


def gaussian_delta(x, s: float) -> np.ndarray:
    """Hockey-stick divergence of G(s) at every real x (s = 0: (1 − e^x)₊)."""
    x = np.asarray(x, dtype=float)
    if s == 0.0:
        return np.maximum(-np.expm1(x), 0.0)
    # e^x·Φ(−x/s − s/2) in log space: no overflow at large x (where it vanishes)
    out = special.ndtr(-x / s + s / 2.0) - np.exp(x + special.log_ndtr(-x / s - s / 2.0))
    return np.clip(out, 0.0, 1.0)


@functools.lru_cache(maxsize=64)
def _loss_upper(p: float, mu: float) -> float:
    """The smallest ε with δ(ε) ≤ _TAIL_DELTA for one C_p(G(μ)) step (to 1e-12 relative)."""
    hi = mu * 2.0 + 1.0
    while subsampled_gaussian_delta(hi, p, mu) > _TAIL_DELTA:
        hi *= 2.0
    lo = 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if subsampled_gaussian_delta(mid, p, mu) > _TAIL_DELTA:
            lo = mid
        else:
            hi = mid
    return hi


#: Most grid points per side for one step: the interval widens beyond this (any
#: interval gives an upper bound; a wide one-step loss range, i.e. little noise,
#: would otherwise make the composition slow).
_MAX_POINTS = 10000


def default_interval(p: float, mu: float, base: float = 1e-4) -> float:
    """``base``, widened so that one step's loss grid has at most _MAX_POINTS points a side."""
    p, mu = _check_p_mu(p, mu)
    return max(float(base), _loss_upper(p, mu) / _MAX_POINTS)


@functools.lru_cache(maxsize=32)
def subsampled_gaussian_pmf(p: float, mu: float, interval: float):
    """Pessimistic connect-the-dots PMF (dp_accounting ``PLDPmf``) of one C_p(G(μ)) step."""
    from dp_accounting.pld import pld_pmf

    p, mu = _check_p_mu(p, mu)
    interval = float(interval)
    if not 0.0 < interval < math.inf:
        raise ValueError(f"interval must be positive and finite. Found {interval!r}.")
    # largest grid loss: δ(ε_max) ≤ _TAIL_DELTA (the rest becomes infinite-loss mass)
    upper = math.ceil(_loss_upper(p, mu) / interval)
    lower = -upper
    eps = np.arange(lower, upper + 1) * interval
    deltas = subsampled_gaussian_delta(eps, p, mu)
    # exact values are non-increasing; remove float noise by raising (never lowering) δ
    deltas = np.maximum.accumulate(deltas[::-1])[::-1]
    return pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(interval, lower, upper, deltas)


@functools.lru_cache(maxsize=64)
def _composed(p: float, mu: float, k: int, interval: float):
    """(losses, probs, cumulative probs, infinity mass) of C_p(G(μ))^{⊗k}
    (dense, pessimistic; losses ascending)."""
    pmf = subsampled_gaussian_pmf(p, mu, interval)
    comp = pmf.self_compose(int(k)) if k > 1 else pmf
    dense = comp.to_dense_pmf()
    probs = np.asarray(dense._probs, dtype=float)
    losses = (dense._lower_loss + np.arange(probs.size)) * interval
    return losses, probs, np.cumsum(probs), float(dense._infinity_mass)


def bound_delta(epsilon: float, *, p: float, mu: float, shift: float, k: int,
                interval: float | None = None) -> float:
    """δ(ε) of G(shift) ⊗ C_p(G(μ))^{⊗k} (the C_p part discretised pessimistically).

    Losses ℓ with ε − ℓ ≥ x₀ = s(s/2 + 12) (where δ_G ≤ Φ(−12) < 1e-32) are not
    summed one by one: their total mass times δ_G(x₀) is added instead (an
    upper bound, since δ_G is decreasing)."""
    interval = default_interval(p, mu) if interval is None else interval
    losses, probs, cum, inf_mass = _composed(float(p), float(mu), int(k), float(interval))
    s, eps = float(shift), float(epsilon)
    x0 = s * (s / 2.0 + 12.0)
    i = int(np.searchsorted(losses, eps - x0, side="right"))  # losses[:i] have ε − ℓ ≥ x0
    far = float(cum[i - 1]) * float(gaussian_delta(x0, s)) if i > 0 else 0.0
    near = float(np.dot(probs[i:], gaussian_delta(eps - losses[i:], s)))
    return inf_mass + far + near


def bound_epsilon(delta: float, *, p: float, mu: float, shift: float, k: int,
                  interval: float | None = None) -> float:
    """Smallest ε ≥ 0 (to a relative 1e-7, rounded up) with :func:`bound_delta` ≤ δ; inf if none."""
    interval = default_interval(p, mu) if interval is None else interval

    def d(e):
        return bound_delta(e, p=p, mu=mu, shift=shift, k=k, interval=interval)

    if d(0.0) <= delta:
        return 0.0
    inf_mass = _composed(float(p), float(mu), int(k), float(interval))[3]
    if inf_mass >= delta:
        return math.inf
    lo, hi = 0.0, 1.0
    d_lo, d_hi = d(lo), d(hi)
    while d_hi > delta:
        lo, d_lo, hi = hi, d_hi, 2.0 * hi
        if hi > 1e6:
            return math.inf
        d_hi = d(hi)
    # Illinois regula falsi on log δ(ε) − log δ, keeping a bracket d(lo) > δ ≥ d(hi);
    # the returned ε is always an evaluated point that meets δ.
    log_t = math.log(delta)
    f_lo, f_hi = math.log(d_lo) - log_t, (math.log(d_hi) - log_t) if d_hi > 0 else -math.inf
    side = 0
    for _ in range(100):
        if hi - lo <= 1e-7 * max(1.0, hi) or f_hi >= -1e-7:
            break
        if math.isfinite(f_hi):
            mid = hi - f_hi * (hi - lo) / (f_hi - f_lo)
            if not lo < mid < hi:
                mid = 0.5 * (lo + hi)
        else:
            mid = 0.5 * (lo + hi)
        d_mid = d(mid)
        f_mid = (math.log(d_mid) - log_t) if d_mid > 0 else -math.inf
        if d_mid > delta:
            lo, f_lo = mid, f_mid
            if side == -1:
                f_hi *= 0.5
            side = -1
        else:
            hi, f_hi = mid, f_mid
            if side == 1:
                f_lo *= 0.5
            side = 1
    return hi


def candidate_windows(steps: int, gap: float, p: float) -> list[int]:
    """The window lengths k = t − τ evaluated (they do not depend on the noise)."""
    t = int(steps)
    c = 1.0 - gap
    log_c = math.log1p(-gap) if gap < 1.0 else -math.inf

    def proxy(k: float) -> float:
        ck = math.exp(k * log_c) if log_c != -math.inf else 0.0
        ct = math.exp(t * log_c) if log_c != -math.inf else 0.0
        return 2.0 * ((ck - ct) / (1.0 - c)) ** 2 + 2.0 * p * p * k

    # proxy is convex-ish in k: golden-section on [1, t] in log space, then a few multiples
    a, b = 0.0, math.log(t) if t > 1 else 0.0
    g = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(80):
        x1, x2 = b - g * (b - a), a + g * (b - a)
        if proxy(math.exp(x1)) <= proxy(math.exp(x2)):
            b = x2
        else:
            a = x1
    k0 = math.exp(0.5 * (a + b))
    ks = {t}
    for r in (0.5, 2 ** -0.5, 1.0, 2 ** 0.5, 2.0):
        ks.add(min(t, max(1, int(round(k0 * r)))))
    return sorted(ks)


def shift(k: int, steps: int, gap: float, mu1: float) -> float:
    """s_k = √2·μ₁·(c^k − c^t)/(1 − c), computed from the gap 1 − c."""
    t = int(steps)
    if k >= t:
        return 0.0
    log_c = math.log1p(-gap) if gap < 1.0 else -math.inf
    if log_c == -math.inf:
        return 0.0  # c = 0: c^k − c^t = 0 for k ≥ 1
    # c^k − c^t = c^k (1 − c^{t−k})
    return math.sqrt(2.0) * mu1 * math.exp(k * log_c) * (-math.expm1((t - k) * log_c)) / gap


# --------------------------------------------------------------------------- the analysis


class ShiftedInterpolationSampled(Analysis):
    """The noise-split form of Bok, Su & Altschuler's NoisySGD bound for
    fixed-size random batches (a Gaussian shift term and subsampled steps over
    the window); flagged not sound, see the module docstring."""

    name = "shifted-interpolation-sampled"
    citation = _CITATION
    sound = False
    unsound_reason = _UNSOUND_REASON
    #: connect-the-dots discretisation of one subsampled step's privacy loss
    #: (widened where one step's losses span more than 10000 intervals a side)
    value_discretization_interval = 1e-4

    def assumptions(self) -> list[str]:
        return [
            *COMMON_ASSUMPTIONS,
            "every batch is b examples drawn uniformly without replacement, independently at "
            "every step ('sample'); replace-one adjacency",
            "an optional projection onto a fixed convex set after each noisy step is allowed "
            "(1-Lipschitz); the initial point does not depend on the data",
        ]

    def why_not(self, run: Run) -> str | None:
        if run.batching != "sample":
            return (
                "covers fixed-size random batches ('sample') only: the transcribed NoisySGD form "
                "is for batches of exactly b examples (a Poisson batch's contraction depends on "
                f"its size, and an empty one does not contract); found batching={run.batching!r}"
            )
        if run.adjacency != "replace":
            return "the bound is for replace-one adjacency; use adjacency='replace'"
        if not run.strong_convexity > 0:
            return (
                "needs strongly convex losses, m > 0 (--strong-convexity); found "
                f"strong_convexity={run.strong_convexity:g}"
            )
        if run.smoothness is None:
            return "needs the smoothness M of the losses (--smoothness) to compute the contraction factor c"
        if not run.constant_learning_rate:
            return "needs a constant step size; found a schedule"
        eta, M = run.learning_rate, run.smoothness
        if not eta * M < 2.0:
            return f"needs learning rate < 2/M = {2.0 / M:.6g} (strictly, so that c < 1); found {eta:g}"
        gap = contraction_gap(eta, run.strong_convexity, M)
        if not gap > 0.0:
            return (
                f"needs a contraction factor c < 1; found 1 − c = {gap:g} "
                f"(η·m = {eta * run.strong_convexity:g} is below float resolution)"
            )
        return None

    def _parts(self, run: Run) -> dict:
        gap = contraction_gap(run.learning_rate, run.strong_convexity, run.smoothness)
        sigma = run.sigma("altschuler-talwar")
        mu1 = run.sensitivity / (run.batch_size * sigma)  # 2/z
        return dict(gap=gap, mu1=mu1, p=run.sampling_rate, steps=int(run.steps))

    @staticmethod
    def _window(k: int, q: dict) -> tuple[float, float]:
        """(μ of each subsampled step, Gaussian shift) of window k (split form; k = t: composition)."""
        if k >= q["steps"]:
            return q["mu1"], 0.0
        return math.sqrt(2.0) * q["mu1"], shift(k, q["steps"], q["gap"], q["mu1"])

    def _best(self, run: Run, delta: float) -> tuple[float, int, list]:
        q = self._parts(run)
        table = []
        for k in candidate_windows(q["steps"], q["gap"], q["p"]):
            mu, s = self._window(k, q)
            h = default_interval(q["p"], mu, self.value_discretization_interval)
            e = bound_epsilon(delta, p=q["p"], mu=mu, shift=s, k=k, interval=h)
            table.append((k, s, e))
        k, s, e = min(table, key=lambda r: r[2])
        return e, k, table

    def _evaluate(self, run, *, delta, orders, conversion):
        eps, k, table = self._best(run, float(delta))
        q = self._parts(run)
        details = {
            "bound": "G(√2·μ₁·(c^k − c^t)/(1−c)) ⊗ C_p(G(√2·μ₁))^⊗k (k < t), C_p(G(μ₁))^⊗t "
                     "(k = t), best window k = t − τ",
            "window": int(k),
            "tau": int(q["steps"] - k),
            "shift_mu": self._window(k, q)[1],
            "mu_step": q["mu1"],
            "sampling_rate": q["p"],
            "contraction": 1.0 - q["gap"],
            "contraction_gap": q["gap"],
            "windows_evaluated": [int(r[0]) for r in table],
            "epsilon_per_window": [float(r[2]) for r in table],
            "method": "dp_accounting connect-the-dots PLD of C_p(G(μ₁)) composed k times, "
                      "exact composition with the Gaussian shift",
            "value_discretization_interval": default_interval(
                q["p"], self._window(k, q)[0], self.value_discretization_interval),
            "not_sound": self.unsound_reason,
        }
        return self.applied(delta, epsilon=eps if math.isfinite(eps) else math.inf, details=details)
