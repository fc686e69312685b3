"""dp_accounting's privacy loss distribution of a (Poisson-sampled) Gaussian, built in numpy.

``dp_accounting.pld.privacy_loss_distribution.from_gaussian_mechanism`` builds the
pessimistic connect-the-dots PMF (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022,
"Connect the Dots", §2.2 and their Algorithm 1 with fixed gap): for each grid loss
ε_i = i·Δ it needs the hockey-stick divergence δ(ε_i), which its ``get_delta_for_epsilon``
computes after inverting the privacy loss *one grid point at a time in Python*
(``[self.inverse_privacy_loss(eps) for eps in ...]``): ~16,000 scalar calls at Δ = 1e-4,
0.1–0.3 s per noise level, most of a calibration's time.

:func:`sampled_gaussian_pld` builds the same object with that one step vectorised:

* the privacy loss object, its truncation and its connect-the-dots bounds are
  dp_accounting's own ``GaussianPrivacyLoss`` (same ``log_mass_truncation_bound``);
* the inverse privacy loss is the closed form dp_accounting evaluates (its
  ``_inverse_privacy_loss_{add,remove,replace}`` for the Gaussian: without sampling
  x = ∓s/2 − ε σ²/s; sampled, ε is first mapped through log(1 + (e^{±ε} − 1)/q); under
  REPLACE, x = σ²/s · (asinh(−sinh(ε/2)·α) − ε/2), α = e^{s²/(2σ²)}(1 − q)/q), written in
  numpy with the same log-domain steps;
* δ(ε_i) = μ_upper_cdf(x_i) − e^{ε_i}·μ_lower_cdf(x_i) with dp_accounting's own cdfs,
  clipped to [0, 1] as it does, and the PMF is dp_accounting's
  ``create_pmf_pessimistic_connect_dots_fixed_gap``.

Composition, ε(δ) and everything downstream stay dp_accounting's.  tests/test_pld.py checks
the PMFs against ``from_gaussian_mechanism`` (to 1e-12) and the composed ε over a grid
of (q, σ, neighbouring relation), so a change in the library shows up there.
"""

from __future__ import annotations

import functools
import inspect
import math

import numpy as np

__all__ = ["sampled_gaussian_pld"]


@functools.lru_cache(maxsize=1)
def _truncation() -> float:
    """``from_gaussian_mechanism``'s default ``log_mass_truncation_bound`` (−50 today)."""
    from dp_accounting.pld import privacy_loss_distribution

    sig = inspect.signature(privacy_loss_distribution.from_gaussian_mechanism)
    return float(sig.parameters["log_mass_truncation_bound"].default)


def _log_sub(a, b):
    """log(e^a − e^b), a > b (dp_accounting's ``common._log_sub``)."""
    return a + np.log1p(-np.exp(b - a))


def _inverse(kind: str, eps: np.ndarray, sigma: float, s: float, q: float) -> np.ndarray:
    """The largest x whose privacy loss is at least ε (``inverse_privacy_loss``), for the
    points where dp_accounting inverts (see :func:`_deltas`)."""
    var_over_s = sigma * sigma / s
    if kind == "REPLACE":
        if q == 1.0:
            return -eps * var_over_s / 2
        a = np.abs(eps) / 2
        sign = np.where(eps >= 0, 1.0, -1.0)
        log_alpha = 0.5 * (s / sigma) ** 2 + math.log1p(-q) - math.log(q)
        with np.errstate(divide="ignore"):
            log_sinh = a + np.log1p(-np.exp(-2 * a)) - math.log(2)   # log sinh(|ε|/2)
        big = log_alpha + log_sinh
        asinh = -sign * np.logaddexp(0.5 * np.logaddexp(0, 2 * big), big)   # asinh(−sign·e^big)
        return np.where(eps == 0, 0.0, var_over_s * (asinh - eps / 2))
    if q == 1.0:
        base = eps
    else:   # ε' = ±log((1/q)e^{±ε} + 1 − 1/q): dp_accounting's log_a_times_exp_b_plus_c, step by step
        a = 1 / q
        sign = -1.0 if kind == "ADD" else 1.0
        d = sign * eps + np.log(a)
        base = np.where(eps == 0, 0.0, sign * _log_sub(d, np.log(-(1 - a))))
    x = -0.5 * s - base * var_over_s
    return x + s if kind == "ADD" else x


def _deltas(loss, kind: str, eps: np.ndarray, sigma: float, s: float, q: float) -> np.ndarray:
    """``loss.get_delta_for_epsilon(eps)`` with the inversion vectorised."""
    deltas = np.zeros_like(eps, dtype=float)
    if q == 1.0 or kind == "REPLACE":
        inv = np.ones_like(eps, dtype=bool)
    elif kind == "ADD":
        inv = eps < -math.log1p(-q)
    else:
        inv = eps > math.log1p(-q)
        deltas[~inv] = -np.expm1(eps[~inv])
    e = eps[inv]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = _inverse(kind, e, sigma, s, q)
    if q < 1.0 and kind == "ADD":     # at ε = −log(1 − q): inverse without sampling at +∞
        x = np.where(np.isclose(e, -math.log(1 - q), rtol=1e-9, atol=0.0), -math.inf, x)
    elif q < 1.0 and kind == "REMOVE":  # at ε = log(1 − q): inverse without sampling at −∞
        x = np.where(np.isclose(e, math.log(1 - q), rtol=1e-9, atol=0.0), math.inf, x)
    deltas[inv] = loss.mu_upper_cdf(x) - np.exp(e + loss.mu_lower_log_cdf(x))
    return np.clip(deltas, 0, 1)


def _pmf(sigma: float, s: float, q: float, interval: float, kind: str):
    from dp_accounting.pld import pld_pmf, privacy_loss_mechanism as plm

    loss = plm.GaussianPrivacyLoss(sigma, sensitivity=s, pessimistic_estimate=True,
                                   log_mass_truncation_bound=_truncation(), sampling_prob=q,
                                   adjacency_type=getattr(plm.AdjacencyType, kind))
    bounds = loss.connect_dots_bounds()
    lower = math.floor(bounds.epsilon_lower / interval)
    upper = math.ceil(bounds.epsilon_upper / interval)
    eps = np.arange(lower, upper + 1) * interval
    return pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(
        interval, lower, upper, _deltas(loss, kind, eps, sigma, s, q))


def sampled_gaussian_pld(standard_deviation: float, sensitivity: float = 1.0, sampling_prob: float = 1.0,
                         interval: float = 1e-4, replace_one: bool = False):
    """The PLD ``from_gaussian_mechanism(standard_deviation, sensitivity,
    value_discretization_interval=interval, sampling_prob=sampling_prob,
    neighboring_relation=REPLACE_ONE if replace_one else ADD_OR_REMOVE_ONE)`` returns
    (pessimistic connect-the-dots), built with the inverse privacy loss in numpy."""
    from dp_accounting.pld import privacy_loss_distribution

    sigma, s, q, interval = (float(standard_deviation), float(sensitivity), float(sampling_prob),
                             float(interval))
    for name, value in (("standard_deviation", sigma), ("sensitivity", s), ("interval", interval)):
        if not 0.0 < value < math.inf:
            raise ValueError(f"{name} must be positive and finite. Found {value!r}.")
    if not 0.0 < q <= 1.0:
        raise ValueError(f"sampling_prob must be in (0, 1]. Found {q!r}.")
    if replace_one:
        return privacy_loss_distribution.PrivacyLossDistribution(_pmf(sigma, s, q, interval, "REPLACE"))
    remove = _pmf(sigma, s, q, interval, "REMOVE")
    if q == 1.0:
        return privacy_loss_distribution.PrivacyLossDistribution(remove)
    return privacy_loss_distribution.PrivacyLossDistribution(remove, _pmf(sigma, s, q, interval, "ADD"))
