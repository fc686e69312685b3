"""The accounting of random stopping, as pure functions of RDP curves (like Opacus'
``accountants/analysis``): the number of runs' laws, Papernot & Steinke's Theorems 2
and 6, Liu & Talwar's Theorem 3.4, and their conversion to (ε, δ).
:class:`~noisysgd.tuning.NoisySGDClassifierCV` is the estimator built on them."""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ..rdp import epsilon_from_rdp, validate_delta, validate_orders

__all__ = [
    "SELECTIONS",
    "truncated_negative_binomial_mean",
    "truncated_negative_binomial_gamma",
    "truncated_negative_binomial_pmf",
    "rdp_truncated_negative_binomial",
    "rdp_poisson",
    "delta_from_rdp",
    "liu_talwar",
    "liu_talwar_horizon",
    "liu_talwar_split",
    "tuning_epsilon",
    "draw_runs",
]

#: Selection rules of :class:`~noisysgd.tuning.NoisySGDClassifierCV`.
SELECTIONS = ("poisson", "negative-binomial", "liu-talwar")


# --------------------------------------------------------------------------- validation


def selection_real(name, value, *, low=None, low_open=True, high=None, high_open=True) -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        rng = f"{'(' if low_open or low is None else '['}{lo}, {hi}{')' if high_open or high is None else ']'}"
        raise ValueError(f"{name} must be a finite number in {rng}. Found {value!r}.")
    return float(value)


def _curve(orders, rdp):
    alpha = validate_orders(orders)
    values = np.asarray(rdp, dtype=float)
    if values.shape != alpha.shape:
        raise ValueError(f"rdp must have one value per order ({alpha.size}). Found shape {values.shape}.")
    if np.isnan(values).any() or (values < 0).any():
        raise ValueError("rdp values must be non-negative numbers (inf allowed). Found a NaN or a negative.")
    return alpha, values


def _monotone(alpha: np.ndarray, values: np.ndarray) -> np.ndarray:
    """D_α is non-decreasing in α (van Erven & Harremoës 2014, Theorem 3): a bound
    at a higher order bounds every lower order.  Order-wise min over higher orders."""
    order = np.argsort(alpha)
    v = values[order]
    env = np.minimum.accumulate(v[::-1])[::-1]
    out = np.empty_like(values)
    out[order] = env
    return out


# --------------------------------------------------------------------------- the distributions


def truncated_negative_binomial_mean(eta: float, gamma: float) -> float:
    """E[K] for K ~ D_{η,γ} (Papernot & Steinke 2022, Definition 1 and the
    expectation stated after it): η(1−γ)/(γ(1−γ^η)) for η ≠ 0 and
    (1/γ − 1)/log(1/γ) for η = 0 (logarithmic distribution).

    >>> truncated_negative_binomial_mean(1.0, 0.25)   # geometric: 1/γ
    4.0
    """
    eta = selection_real("eta", eta, low=-1.0)
    gamma = selection_real("gamma", gamma, low=0.0, high=1.0)
    if eta == 0.0:
        return (1.0 / gamma - 1.0) / math.log(1.0 / gamma)
    # η(1−γ)/(γ(1−γ^η)), with 1 − γ^η = −expm1(η log γ) for accuracy near η = 0
    return eta * (1.0 - gamma) / (gamma * -math.expm1(eta * math.log(gamma)))


def truncated_negative_binomial_gamma(eta: float, mean: float) -> float:
    """The γ ∈ (0, 1) with E[K] = ``mean`` under D_{η,γ} (E[K] decreases from ∞
    to 1 as γ goes from 0 to 1; bisection to 1e-12 relative)."""
    eta = selection_real("eta", eta, low=-1.0)
    mean = selection_real("expected_runs", mean, low=1.0)
    if eta == 1.0:
        return 1.0 / mean
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= 0.0 or mid >= 1.0:
            break
        if truncated_negative_binomial_mean(eta, mid) > mean:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


def truncated_negative_binomial_pmf(k, eta: float, gamma: float) -> np.ndarray:
    """P[K = k] under D_{η,γ} (Papernot & Steinke 2022, Definition 1):
    (1−γ)^k/(γ^{−η} − 1) · ∏_{ℓ=0}^{k−1} (ℓ+η)/(ℓ+1) for η ≠ 0, and
    (1−γ)^k/(k log(1/γ)) for η = 0; k ≥ 1."""
    eta = selection_real("eta", eta, low=-1.0)
    gamma = selection_real("gamma", gamma, low=0.0, high=1.0)
    k = np.atleast_1d(np.asarray(k))
    if not np.issubdtype(k.dtype, np.integer) or (k < 1).any():
        raise ValueError(f"k must be integers >= 1. Found {k!r}.")
    from scipy.special import gammaln

    kf = k.astype(float)
    if eta == 0.0:
        return np.exp(kf * math.log1p(-gamma) - np.log(kf) - math.log(math.log(1.0 / gamma)))
    # ∏_{ℓ<k} (ℓ+η)/(ℓ+1) = Γ(k+η)/(Γ(η)Γ(k+1)); for η < 0, Γ(η) < 0 and
    # γ^{−η} − 1 < 0, and the signs cancel: use |·| of both.
    log_prod = gammaln(kf + eta) - gammaln(eta) - gammaln(kf + 1.0)
    log_norm = math.log(abs(math.expm1(-eta * math.log(gamma))))
    return np.exp(kf * math.log1p(-gamma) + log_prod - log_norm)


def draw_runs(selection: str, expected_runs: float, rng: np.random.Generator, *, eta: float = 1.0,
              delta: float | None = None) -> int:
    """Draw the number of runs K (independently of the data) for a selection rule:
    Poisson(μ = expected_runs); D_{η,γ} with E[K] = expected_runs (inverse CDF);
    for ``liu-talwar`` min(Geometric(γ = 1/expected_runs), T) with
    T = :func:`liu_talwar_horizon` (γ, δ/2)."""
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}. Found {selection!r}.")
    mean = selection_real("expected_runs", expected_runs, low=1.0, low_open=False)
    if selection == "poisson":
        return int(rng.poisson(mean))
    if selection == "liu-talwar":
        if delta is None:
            raise ValueError("delta is needed for the liu-talwar horizon T. Found None.")
        gamma = 1.0 / mean
        return int(min(rng.geometric(gamma), liu_talwar_horizon(gamma, validate_delta(delta) / 2.0)))
    gamma = truncated_negative_binomial_gamma(eta, mean)
    u = rng.random()
    k, cum = 0, 0.0
    # p(k+1)/p(k) = (1−γ)(k+η)/(k+1)
    p = float(truncated_negative_binomial_pmf(np.array([1]), eta, gamma)[0])
    while True:
        k += 1
        cum += p
        if u < cum or p == 0.0 or k > 10**7:
            return k
        p *= (1.0 - gamma) * (k + eta) / (k + 1)


# --------------------------------------------------------------------------- Papernot & Steinke


def rdp_truncated_negative_binomial(orders, rdp, *, eta: float, gamma: float) -> np.ndarray:
    """RDP of returning the best of K ~ D_{η,γ} runs of a mechanism with RDP
    curve ``rdp`` at ``orders`` (Papernot & Steinke 2022, Theorem 2).

    If Q is (λ, ε)-RDP and (λ̂, ε̂)-RDP (λ > 1, λ̂ ≥ 1), the best of K runs is
    (λ, ε′)-RDP with

        ε′ = ε + (1+η)(1 − 1/λ̂) ε̂ + (1+η) log(1/γ)/λ̂ + log(E[K])/(λ − 1).

    λ̂ is optimised over the grid (every order of the grid is a valid λ̂), and
    the result is made non-decreasing in λ (a bound at a higher order is one
    at a lower order).  Orders ≤ 1 get +inf (the theorem needs λ > 1).
    """
    alpha, values = _curve(orders, rdp)
    eta = selection_real("eta", eta, low=-1.0)
    gamma = selection_real("gamma", gamma, low=0.0, high=1.0)
    mean = truncated_negative_binomial_mean(eta, gamma)
    hat = alpha >= 1.0
    with np.errstate(invalid="ignore"):
        terms = (1.0 - 1.0 / alpha[hat]) * values[hat] + math.log(1.0 / gamma) / alpha[hat]
    c = (1.0 + eta) * float(np.min(terms)) if terms.size else math.inf
    out = np.full(alpha.shape, math.inf)
    above = alpha > 1.0
    out[above] = values[above] + c + math.log(mean) / (alpha[above] - 1.0)
    return _monotone(alpha, out)


def delta_from_rdp(orders, rdp, epsilon: float) -> float:
    """The smallest δ the RDP curve gives for ``epsilon``: the minimum over the
    orders of exp((α−1)(ρ_α − ε)) (1 − 1/α)^{α−1}/α (Canonne, Kamath & Steinke
    2020, Proposition 12; Balle et al. 2020 — the inverse of the library's
    ``improved`` conversion) and of √(1 − e^{−ρ_α}) (δ(ε) ≤ δ(0) = TV ≤
    √(1 − e^{−KL}) by Bretagnolle–Huber, KL ≤ D_α), capped at 1."""
    alpha, values = _curve(orders, rdp)
    eps = selection_real("epsilon", epsilon, low=0.0, low_open=False)
    ok = alpha > 1.0
    with np.errstate(invalid="ignore", over="ignore"):
        log_d = ((alpha[ok] - 1.0) * (values[ok] - eps + np.log1p(-1.0 / alpha[ok])) - np.log(alpha[ok]))
        bh = np.sqrt(-np.expm1(-values[alpha >= 1.0]))
    cands = [1.0]
    if log_d.size:
        cands.append(float(np.exp(np.nanmin(log_d))))
    if bh.size:
        cands.append(float(np.nanmin(bh)))
    return float(min(cands))


def rdp_poisson(orders, rdp, *, mean: float) -> np.ndarray:
    """RDP of returning the best of K ~ Poisson(μ) runs (Papernot & Steinke 2022,
    Theorem 6).

    If Q is (λ, ε)-RDP and (ε̂, δ̂)-DP with e^{ε̂} ≤ 1 + 1/(λ − 1), the best of
    K runs (⊥ if K = 0) is (λ, ε′)-RDP with ε′ = ε + μ δ̂ + log(μ)/(λ − 1).
    Here ε̂ = log(1 + 1/(λ − 1)) (the largest the theorem allows) and δ̂ is
    :func:`delta_from_rdp` of the same curve at ε̂.  Made non-decreasing in λ.
    """
    alpha, values = _curve(orders, rdp)
    mu = selection_real("mean", mean, low=0.0)
    out = np.full(alpha.shape, math.inf)
    for i, lam in enumerate(alpha):
        if lam <= 1.0 or not math.isfinite(values[i]):
            continue
        eps_hat = math.log1p(1.0 / (lam - 1.0))
        delta_hat = delta_from_rdp(alpha, values, eps_hat)
        out[i] = values[i] + mu * delta_hat + math.log(mu) / (lam - 1.0)
    return _monotone(alpha, out)


# --------------------------------------------------------------------------- Liu & Talwar


def liu_talwar_horizon(gamma: float, delta2: float) -> int:
    """T = ⌈max{log(1/δ₂)/γ, 1 + 1/(eγ)}⌉ (Liu & Talwar 2019, Theorem 3.4, rounded
    up to whole runs; the first term's role is P[Geometric(γ) > T] = (1 − γ)^T ≤
    e^{−γT} ≤ δ₂, the second matters only for δ₂ > e^{−γ−1/e} and only makes T, and
    so δ, larger).  The statement was transcribed without the paper's text at hand
    (see docs/tuning.md): the max keeps the larger of the two forms remembered."""
    gamma = selection_real("gamma", gamma, low=0.0, high=1.0, high_open=False)
    delta2 = validate_delta(delta2)
    return max(1, math.ceil(max(math.log(1.0 / delta2) / gamma, 1.0 + 1.0 / (math.e * gamma))))


def liu_talwar(epsilon1: float, delta1: float, *, gamma: float, delta2: float) -> tuple[float, float]:
    """(ε, δ) of random stopping over an (ε₁, δ₁)-DP mechanism (Liu & Talwar 2019,
    Theorem 3.4): after each run stop with probability γ, and after T =
    ⌈log(1/δ₂)/γ⌉ runs at the latest; release the best.  The result is
    (3ε₁ + 3√(2δ₁), √(2δ₁)·T + δ₂)-DP.  With δ₁ = 0 it is 3ε₁-DP (their
    Theorem 3.3 for pure DP has no δ₂ and no cap; this is the capped form)."""
    e1 = selection_real("epsilon1", epsilon1, low=0.0, low_open=False)
    d1 = selection_real("delta1", delta1, low=0.0, low_open=False, high=1.0)
    T = liu_talwar_horizon(gamma, delta2)
    r = math.sqrt(2.0 * d1)
    return 3.0 * e1 + 3.0 * r, r * T + delta2


def liu_talwar_split(delta: float, gamma: float) -> tuple[float, float, int]:
    """How the Liu–Talwar rule spends a target δ: δ₂ = δ/2 and √(2δ₁)·T = δ/2,
    i.e. δ₁ = (δ/(2T))²/2.  Returns (δ₁, δ₂, T)."""
    d = validate_delta(delta)
    delta2 = d / 2.0
    T = liu_talwar_horizon(gamma, delta2)
    delta1 = (d / (2.0 * T)) ** 2 / 2.0
    return delta1, delta2, T


# --------------------------------------------------------------------------- one entry point


def tuning_epsilon(orders, rdp, delta: float, *, selection: str, expected_runs: float,
                   eta: float = 1.0):
    """(ε, order, tuning RDP curve) of the best of K runs of a mechanism with the
    per-run RDP curve ``rdp``, for the Papernot–Steinke rules ``poisson``
    (μ = ``expected_runs``) and ``negative-binomial`` (η = ``eta``, γ such that
    E[K] = ``expected_runs``), converted to (ε, ``delta``) with the library's
    ``improved`` conversion."""
    alpha, values = _curve(orders, rdp)
    if selection == "poisson":
        tuned = rdp_poisson(alpha, values, mean=expected_runs)
    elif selection == "negative-binomial":
        gamma = truncated_negative_binomial_gamma(eta, expected_runs)
        tuned = rdp_truncated_negative_binomial(alpha, values, eta=eta, gamma=gamma)
    else:
        raise ValueError(f"selection must be 'poisson' or 'negative-binomial' for an RDP bound. "
                         f"Found {selection!r}.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        finite = np.isfinite(tuned)
        if not finite.any():
            return math.inf, None, tuned
        conv = epsilon_from_rdp(alpha[finite], tuned[finite], delta)
    return conv.epsilon, conv.order, tuned
