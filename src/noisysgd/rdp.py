"""Rényi-DP numerics: Gaussian and sampled-Gaussian RDP, and RDP → (ε, δ).

Everything here is pure math on numpy arrays: no state, no I/O, nothing
imported from the rest of the package.

Conventions
-----------
``sigma`` is the ratio *noise standard deviation / L2 sensitivity* (the noise
multiplier of a sensitivity-1 mechanism).  ``q`` is the sampling probability.
All functions are vectorised over an array of Rényi orders ``alpha > 1``.

The sampled Gaussian mechanism (SGM) is the one of Mironov, Talwar & Zhang,
*Rényi Differential Privacy of the Sampled Gaussian Mechanism* (2019,
arXiv:1908.10530).  With μ₀ = N(0, σ²), μ₁ = N(1, σ²) and
μ = (1−q)μ₀ + qμ₁ we return

    S_α(q, σ) = D_α(μ ‖ μ₀) = log A_α / (α − 1),   A_α = E_{μ₀}[(μ/μ₀)^α],

which is the larger of the two directions (MTZ19, Theorem 5) and the one every
peer (Opacus, dp_accounting, TF Privacy) computes.  Altschuler & Talwar write
S_α(q, σ) for the other direction, D_α(μ₀ ‖ μ) (their Definition 2.10); using
the larger one in their bounds is conservative.

Numerical error and which side it falls on
------------------------------------------
* Integer orders use the exact finite binomial sum (MTZ19, §3.3, eq. for
  integer α), rewritten for A_α − 1 so that no cancellation occurs:
  A_α − 1 = Σ_{k≥2} C(α,k)(1−q)^{α−k} q^k (e^{(k²−k)/(2σ²)} − 1), all terms
  ≥ 0.  RDP values as small as 1e-300 keep full relative precision.
* Fractional orders use the two-sided series of MTZ19 (§3.3).  The series is
  alternating beyond k > α; it is summed until the first omitted term is below
  1e-12 of the result, and that term (an upper bound on the truncation error
  of an alternating series with decreasing terms) is *added* to the result.
  An estimate of the floating-point error is added as well.
* Every fractional-order value is also bounded by the chord between the
  neighbouring integer orders: α ↦ (α−1)·D_α is a cumulant generating
  function, hence convex, so it lies below that chord.  We return the smaller
  of the two upper bounds.  If the series does not converge within its
  iteration cap we return the chord bound and warn (:class:`RDPNumericsWarning`);
  if that is not finite either, ``inf``.  A finite underestimate is never
  returned knowingly.
* Accuracy: about 1e-12 relative where log A_α = (α−1)·D_α is well above
  1e-4; in general the absolute error of log A_α is a few 1e-15 (float64
  summation), always rounded upward, so tiny divergences at orders near 1
  (say 1e-13 at α = 1.01) may be over-estimated by a large *relative* factor.
* D_α is non-decreasing in α, so each returned value is finally replaced by
  the smallest bound at any order of the grid at least as large.

:func:`replace_one_sampled_gaussian_rdp` bounds the replace-one pair of a
Poisson-sampled Gaussian, (1−q)N(0,σ²)+qN(±1,σ²), by certified quadrature
(its docstring gives the pair's justification and the error bounds).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import special

from .quadrature import current_coarser, log_sum_exp, replace_one_orders

__all__ = [
    "DEFAULT_ORDERS",
    "RDPNumericsWarning",
    "OrderGridWarning",
    "EpsilonConversion",
    "CONVERSIONS",
    "validate_orders",
    "validate_delta",
    "gaussian_rdp",
    "sampled_gaussian_rdp",
    "replace_one_sampled_gaussian_rdp",
    "epsilon_from_rdp",
    "epsilon_from_rdp_rows",
]

_EPS = float(np.finfo(float).eps)
#: Largest Rényi order accepted (the exact integer sum costs O(α) memory).
MAX_ORDER = 1e6
#: Relative accuracy the fractional-order series is summed to.
_SERIES_RTOL = 1e-12
#: Total number of series terms after which a fractional order falls back to
#: the (conservative) chord bound.
_SERIES_CAP = 131_072


class RDPNumericsWarning(UserWarning):
    """A Rényi divergence could only be bounded loosely (still an upper bound)."""


class OrderGridWarning(UserWarning):
    """The optimal Rényi order sits at the edge of the grid: ε may improve with a wider grid."""


def _default_orders() -> np.ndarray:
    near_one = [1.01, 1.02, 1.05]
    tenths = [1 + x / 10 for x in range(1, 100)]  # 1.1, 1.2, ..., 10.9 (as Opacus)
    integers = list(range(11, 65))  # 11, ..., 64
    large = [72, 80, 96, 112, 128, 160, 192, 256, 320, 384, 512, 768, 1024]
    orders = np.array(near_one + tenths + integers + large, dtype=float)
    orders.setflags(write=False)
    return orders


#: Default grid of Rényi orders: a superset of Opacus' default grid
#: (1.1 … 10.9 in steps of 0.1, then 12 … 63), with orders closer to 1 and up to
#: 1024 for strong privacy regimes and hidden-state bounds.
DEFAULT_ORDERS: np.ndarray = _default_orders()


def validate_orders(orders) -> np.ndarray:
    """Return ``orders`` as a 1-D float array, or raise ``ValueError``.

    Orders must be finite, strictly greater than 1 and at most :data:`MAX_ORDER`.
    """
    try:
        arr = np.asarray(orders, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"orders must be numbers greater than 1. Found {orders!r}.") from None
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"orders must be a non-empty 1-D sequence. Found {orders!r}.")
    bad = ~np.isfinite(arr) | (arr <= 1)
    if bad.any():
        raise ValueError(
            f"orders must be finite and greater than 1. Found {float(arr[bad][0])!r} in orders."
        )
    if (arr > MAX_ORDER).any():
        raise ValueError(f"orders must be at most {MAX_ORDER:g}. Found {float(arr.max())!r} in orders.")
    return arr


def _check_sigma(sigma) -> float:
    try:
        s = float(sigma)
    except (TypeError, ValueError):
        raise ValueError(f"sigma must be a positive finite number. Found {sigma!r}.") from None
    if not math.isfinite(s) or s <= 0:
        raise ValueError(f"sigma must be a positive finite number. Found {sigma!r}.")
    if s > 1e100:  # σ² would overflow in the series and silently give 0
        raise ValueError(f"sigma must be at most 1e100. Found {sigma!r}.")
    return s


def _check_q(q) -> float:
    try:
        p = float(q)
    except (TypeError, ValueError):
        raise ValueError(f"Sampling rate q must be in [0, 1]. Found {q!r}.") from None
    if not (0.0 <= p <= 1.0):  # also rejects NaN
        raise ValueError(f"Sampling rate q must be in [0, 1]. Found {q!r}.")
    return p


def gaussian_rdp(orders, sigma) -> np.ndarray:
    """RDP of the Gaussian mechanism with sensitivity 1 and noise ``sigma``: α / (2σ²).

    Mironov, *Rényi Differential Privacy* (CSF 2017), Proposition 7.

    >>> gaussian_rdp([2.0, 10.0], 2.0).tolist()
    [0.25, 1.25]
    """
    alpha = validate_orders(orders)
    s = _check_sigma(sigma)
    return alpha / (2.0 * s * s)


def sampled_gaussian_rdp(orders, q, sigma) -> np.ndarray:
    """RDP of the sampled Gaussian mechanism, S_α(q, σ), for every order.

    Parameters
    ----------
    orders : array_like
        Rényi orders, finite and > 1; integer and fractional orders mix freely.
    q : float
        Sampling probability in [0, 1].
    sigma : float
        Noise standard deviation divided by the L2 sensitivity, > 0.

    Returns
    -------
    numpy.ndarray
        Upper bounds on D_α(μ ‖ μ₀) (see the module docstring), exact to about
        1e-12 relative where the computation is exact, otherwise larger.

    Examples
    --------
    With q = 1 the mechanism is the plain Gaussian mechanism:

    >>> float(sampled_gaussian_rdp([4.0], 1.0, 2.0)[0])
    0.5
    >>> round(float(sampled_gaussian_rdp([2.0], 0.5, 1.0)[0]), 12)  # log(1 + q²(e−1))
    0.357374019509
    """
    alpha = validate_orders(orders)
    p = _check_q(q)
    s = _check_sigma(sigma)
    out = _sgm_pairs(alpha, p, np.full(alpha.shape, s), stacklevel=3)
    return _monotone_envelope(alpha, out)


def sampled_gaussian_rdp_pairs(orders, q, sigmas) -> np.ndarray:
    """S_{α_i}(q, σ_i) for pairs of orders and noise levels, elementwise.

    The same numerics as :func:`sampled_gaussian_rdp` (exact integer sums,
    the two-sided fractional series with its remainder added, the chord bound
    between neighbouring integer orders, float error rounded upward), but with
    one σ per order: optimisations that search a different noise level at
    every order (the noise split of Altschuler & Talwar's bound) evaluate all
    orders in one vectorised call.  No envelope across orders is taken (the
    σ's differ), so a value may exceed ``sampled_gaussian_rdp`` at the same
    (α, σ) by the amount that envelope saves; never less.

    >>> import numpy as np
    >>> pairs = sampled_gaussian_rdp_pairs([2.0, 2.0, 4.5], 0.01, [1.0, 2.0, 1.0])
    >>> single = [sampled_gaussian_rdp([a], 0.01, s)[0] for a, s in [(2.0, 1.0), (2.0, 2.0), (4.5, 1.0)]]
    >>> bool(np.allclose(pairs, single, rtol=1e-12))
    True
    """
    alpha = validate_orders(orders)
    p = _check_q(q)
    sig = np.atleast_1d(np.asarray(sigmas, dtype=float))
    if sig.shape != alpha.shape:
        raise ValueError(f"sigmas must have one value per order ({alpha.size}). Found shape {sig.shape}.")
    bad = ~np.isfinite(sig) | (sig <= 0) | (sig > 1e100)
    if bad.any():
        raise ValueError(f"sigma must be a positive finite number at most 1e100. Found {float(sig[bad][0])!r}.")
    return _sgm_pairs(alpha, p, sig, stacklevel=3)


def _sgm_pairs(alpha: np.ndarray, p: float, sig: np.ndarray, *, stacklevel: int) -> np.ndarray:
    """S_{α_i}(p, σ_i) elementwise, for validated inputs (see the two public functions)."""
    if p == 0.0:
        return np.zeros_like(alpha)
    if p == 1.0:
        return alpha / (2.0 * sig * sig)
    is_int = (alpha == np.floor(alpha)) & (alpha < 2.0**53)
    out = np.empty_like(alpha)
    out[is_int] = _rdp_int(alpha[is_int], p, sig[is_int])
    frac = ~is_int
    if frac.any():
        a, s = alpha[frac], sig[frac]
        lo = np.floor(a)
        hi = lo + 1
        g_hi = (hi - 1) * _rdp_int(hi, p, s)
        g_lo = np.zeros_like(a)
        has_lo = lo >= 2
        g_lo[has_lo] = (lo[has_lo] - 1) * _rdp_int(lo[has_lo], p, s[has_lo])
        with np.errstate(invalid="ignore"):
            chord = ((hi - a) * g_lo + (a - lo) * g_hi) / (a - 1)
        chord = np.where(np.isfinite(chord), chord, np.inf)
        series, converged = _rdp_frac(a, p, s)
        if not converged.all():
            warnings.warn(
                "The sampled-Gaussian series did not converge at orders "
                f"{a[~converged].tolist()} (q={p}, sigma={s[~converged].tolist()}); using the "
                "conservative bound by convexity between neighbouring integer orders.",
                RDPNumericsWarning,
                stacklevel=stacklevel,
            )
        out[frac] = np.minimum(series, chord)
    return out * (1 + 4 * _EPS)


def _monotone_envelope(alpha: np.ndarray, values: np.ndarray) -> np.ndarray:
    """D_α is non-decreasing in α, so a bound at a larger order bounds every smaller
    one: replace each value by the smallest bound at an order >= it."""
    order = np.argsort(alpha, kind="stable")
    env = np.minimum.accumulate(values[order][::-1])[::-1]
    out = np.empty_like(values)
    out[order] = env
    return out


def _log_expm1(x: np.ndarray) -> np.ndarray:
    """log(e^x − 1) for x > 0, without overflow or cancellation."""
    return x + np.log(-np.expm1(-x))


def _rdp_int(alpha: np.ndarray, q: float, sigma, lower: bool = False) -> np.ndarray:
    """Exact integer-order SGM RDP via the non-negative series for A_α − 1 (MTZ19 §3.3), rounded
    up (``lower``: rounded down, a lower bound on the exact value).

    ``sigma`` is a scalar or an array of the shape of ``alpha`` (one σ per order)."""
    alpha = np.asarray(alpha, dtype=float)
    if alpha.size == 0:
        return alpha.copy()
    sigma = np.broadcast_to(np.asarray(sigma, dtype=float), alpha.shape)
    lengths = (alpha - 1).astype(np.int64)  # k = 2 .. α
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    a_rep = np.repeat(alpha, lengths)
    k = np.arange(lengths.sum(), dtype=float) - np.repeat(starts, lengths) + 2.0
    log_q, log_1mq = math.log(q), math.log1p(-q)
    g_a, g_k, g_ak = special.gammaln(a_rep + 1), special.gammaln(k + 1), special.gammaln(a_rep - k + 1)
    s_rep = np.repeat(sigma, lengths)
    x = (k * k - k) / (2.0 * s_rep * s_rep)
    parts = (g_a, -g_k, -g_ak, k * log_q, (a_rep - k) * log_1mq, _log_expm1(x))
    terms = sum(parts)
    magnitude = sum(np.abs(p) for p in parts)
    peak = np.maximum.reduceat(terms, starts)
    peak_rep = np.repeat(peak, lengths)
    log_am1 = peak + np.log(np.add.reduceat(np.exp(terms - peak_rep), starts))
    # Floating-point error: each term's exponent carries an absolute error of about
    # eps times the magnitude of its parts; weight it by the term's share of the sum.
    weighted = np.add.reduceat(np.exp(terms - peak_rep) * magnitude, starts)
    err = 8 * _EPS * weighted / np.exp(log_am1 - peak) + 4 * _EPS * np.log2(lengths + 1.0)
    if lower:  # (the log1p and the division round by an ulp or two each: 8 ulps off covers them)
        return np.logaddexp(0.0, log_am1 - err) / (alpha - 1) * (1 - 8 * _EPS)
    return np.logaddexp(0.0, log_am1 + err) / (alpha - 1)


def _sgm_terms(alpha_col, k, q, sigma):
    """Log-magnitudes and signs of the two MTZ19 series terms at (α, k), with the
    magnitude of their parts (for the floating-point error estimate)."""
    s2 = sigma * sigma
    log_q, log_1mq = math.log(q), math.log1p(-q)
    z0 = s2 * (log_1mq - log_q) + 0.5
    j = alpha_col - k
    g_a, g_k, g_j = special.gammaln(alpha_col + 1), special.gammaln(k + 1), special.gammaln(j + 1)
    lc = g_a - g_k - g_j
    sign = special.gammasgn(j + 1)
    quad_a, quad_b = (k * k - k) / (2 * s2), (j * j - j) / (2 * s2)
    tail_a = special.log_ndtr((z0 - k) / sigma)
    tail_b = special.log_ndtr((j - z0) / sigma)
    ta = lc + k * log_q + j * log_1mq + quad_a + tail_a
    tb = lc + j * log_q + k * log_1mq + quad_b + tail_b
    # The rounding error of lc comes from its large parts, not their small difference.
    common = np.abs(g_a) + np.abs(g_k) + np.abs(g_j) + np.abs(k * log_q) + np.abs(j * log_1mq)
    mag_a = common + np.abs(quad_a) + np.abs(tail_a)
    mag_b = common + np.abs(quad_b) + np.abs(tail_b)
    return ta, tb, sign, mag_a, mag_b


def _rdp_frac(alpha: np.ndarray, q: float, sigma):
    """Fractional-order SGM RDP by the two-sided series of MTZ19 §3.3, in log space.

    A_α = Σ_k C(α,k) [ q^k (1−q)^{α−k} e^{(k²−k)/2σ²} Φ((z₀−k)/σ)
                     + q^{α−k} (1−q)^k e^{((α−k)²−(α−k))/2σ²} Φ((α−k−z₀)/σ) ],
    z₀ = σ² log(1/q − 1) + 1/2 (the point where q·μ₁/μ₀ = 1 − q).

    Tail bound.  By Φ(−x) = φ(x)·R(x) (R the Mills ratio) each term equals
    (1−q)^α φ(z₀/σ) C(α,k) R((k−z₀)/σ), resp. R((k−α+z₀)/σ).  For k > α,
    |C(α,k)| ∝ B(k−α, α+1) and R are Laplace transforms of positive measures,
    so the term magnitudes h(k) are completely monotone and alternate in sign.
    For such a series the remainder from K lies in
    [h(K)/2, h(K)/2 + (h(K) − h(K+1))/2] (pair the differences of a convex
    sequence), which we add on the unfavourable side.

    ``sigma`` is a scalar or an array of the shape of ``alpha``.
    Returns (upper bounds on the RDP, converged flags).
    """
    n = alpha.size
    sig = np.broadcast_to(np.asarray(sigma, dtype=float), alpha.shape)
    log_pos = np.full(n, -np.inf)
    log_neg = np.full(n, -np.inf)
    log_err = np.full(n, -np.inf)  # log Σ |term|·(magnitude of its parts)
    active = np.arange(n)
    done = np.zeros(n, dtype=bool)
    result = np.full(n, np.inf)
    k0, size = 0, 64
    while active.size and k0 < _SERIES_CAP:
        a = alpha[active][:, None]
        s_col = sig[active][:, None]
        k = np.arange(k0, k0 + size, dtype=float)[None, :]
        ta, tb, sign, mag_a, mag_b = _sgm_terms(a, k, q, s_col)
        terms = np.concatenate([ta, tb], axis=1)
        sgn = np.concatenate([sign, sign], axis=1)
        with np.errstate(divide="ignore"):
            log_pos[active] = np.logaddexp(
                log_pos[active], log_sum_exp(np.where(sgn > 0, terms, -np.inf), axis=1)
            )
            log_neg[active] = np.logaddexp(
                log_neg[active], log_sum_exp(np.where(sgn < 0, terms, -np.inf), axis=1)
            )
            magnitude = np.concatenate([mag_a, mag_b], axis=1)
            log_err[active] = np.logaddexp(
                log_err[active], log_sum_exp(terms + np.log(magnitude), axis=1)
            )
        k0 += size
        # The next two terms, for the remainder bound of the alternating tail.
        nxt = np.array([k0, k0 + 1], dtype=float)[None, :]
        na, nb, nsign, _, _ = _sgm_terms(a, nxt, q, s_col)
        lp, ln = log_pos[active], log_neg[active]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            ratio = np.exp(ln - lp)
            log_s = lp + np.log1p(-ratio)  # log of the partial sum
            h_a, h_b = np.exp(na - log_s[:, None]), np.exp(nb - log_s[:, None])
            gap = 0.5 * (np.maximum(h_a[:, 0] - h_a[:, 1], 0) + np.maximum(h_b[:, 0] - h_b[:, 1], 0))
            mid = 0.5 * nsign[:, 0] * (h_a[:, 0] + h_b[:, 0])
            upper = mid + np.where(nsign[:, 0] > 0, gap, 0.0)  # remainder / partial sum, upper end
            log_a = log_s + np.log1p(upper)
            fp_err = 8 * _EPS * np.exp(log_err[active] - log_s)
            fp_err += 4 * _EPS * (1 + ratio) / np.maximum(1 - ratio, _EPS)
        past_peak = k0 > alpha[active] + 1
        ok = past_peak & (ratio < 0.5) & np.isfinite(log_a) & (log_a > 0)
        ok &= gap <= _SERIES_RTOL * log_a
        if ok.any():
            idx = active[ok]
            result[idx] = (log_a[ok] + fp_err[ok]) / (alpha[idx] - 1)
            done[idx] = True
            active = active[~ok]
        size = min(size * 2, 16_384)
    return result, done


# --------------------------------------------------------------------------- replace-one pair

def replace_one_sampled_gaussian_rdp(orders, q, sigma) -> np.ndarray:
    """RDP of a Poisson-sampled Gaussian step under *replace-one* adjacency.

    With every per-example contribution of norm at most 1 and noise N(0, σ²I),
    the tight pair of output laws is

        P = (1−q)·N(0, σ²) + q·N(+1, σ²),   Q = (1−q)·N(0, σ²) + q·N(−1, σ²)

    (one dimension suffices), and this returns certified upper bounds on
    D_α(P ‖ Q) (= D_α(Q ‖ P) by the symmetry x ↦ −x) at every order.

    ``sigma`` here is noise std / *per-example* bound (the noise multiplier z),
    **not** noise / sensitivity: the replace-one sensitivity is 2, and the
    looser add/remove-style pair with that sensitivity is
    ``sampled_gaussian_rdp(orders, q, sigma / 2)``.  The returned value is
    never above that one (we take the smaller of the two bounds).

    Why this pair.  Under replace-one with Poisson sampling the datasets differ
    in one example, x versus x'; conditioned on which other examples are
    sampled (identically distributed under both datasets), a step outputs
    (1−q)N(s, σ²I) + qN(s + g(x), σ²I) versus the same with g(x'), where s is
    the other examples' sum.  By joint convexity of the Rényi/hockey-stick
    divergences (in the form E over s) and translation invariance it suffices
    to bound the pair with s = 0 and ‖g(x)‖, ‖g(x')‖ ≤ 1.  That g(x) = −g(x') = e
    (antipodal unit vectors) is the worst case is the dominating pair for
    replace-one Poisson subsampling of the Gaussian stated by Zhu, Dong &
    Wang, *Optimal Accounting of Differential Privacy via Characteristic
    Function* (AISTATS 2022, §5 / Appendix on subsampling under the replace-one
    relation) and by Lebeda, Regehr, Kamath & Steinke, *Avoiding Pitfalls for
    Privacy Accounting of Subsampled Mechanisms under Composition* (2024,
    §2); dp_accounting's PLD models exactly this pair
    (``from_gaussian_mechanism(..., sampling_prob=q,
    neighboring_relation=REPLACE_ONE)`` with sensitivity 1: μ_upper =
    (1−q)N(0)+qN(−1), μ_lower = (1−q)N(0)+qN(+1)).  For collinear g(x), g(x')
    the dominance is checked numerically in tests/test_replace_one.py.

    Numerics (all in units of σ, μ = 1/σ, with P = φ·a, Q = φ·b,
    a = 1−q+q·e^{μx−μ²/2}, b = 1−q+q·e^{−μx−μ²/2}, t = P/Q = e^r):

        A_α − 1 = ∫ Q·u(t),   u(t) = t^α − α(t − 1) − 1 ≥ 0,

    using E_Q[t − 1] = 0; the integrand is non-negative, so A_α − 1 keeps its
    relative accuracy however small it is.  r is increasing in x with
    r(0) = 0, and u∘exp∘r is decreasing for x < 0 and increasing for x > 0.
    On each cell [l, l + Δ] of a grid through 0 we take the smaller of two
    upper bounds, both rigorous:

    * *linear*: u ≤ u(near end) + U'·(distance), with U' an upper bound of
      |du/dx| on the cell from the monotone factors of
      du/dx = α e^r (e^{(α−1)r} − 1)·μ(s_a + s_b) (s_a = q e^{μx−μ²/2}/a
      increasing, s_b decreasing), and ∫_cell (x−l)Q ≤ max_cell Q · Δ²/2;
    * *tilted* (cells with x ≥ 0): log h, h = a^α b^{1−α} = P^αQ^{1−α}/φ, has
      derivative μ(α s_a + (α−1) s_b) ≤ D on the cell, so
      ∫_cell P^αQ^{1−α} ≤ h(l)·∫_cell φ(x)e^{D(x−l)}dx (a Gaussian integral),
      from which the exact cell masses αP − (α−1)Q are subtracted (used only
      where that removes at most 90 %, limiting cancellation).

    Cells are 0.25 wide left of −8 and right of αμ + 10, where the integrand's mass is negligible
    (P^αQ^{1−α} ∝ φ(x − αμ) there): the same rigorous cell bounds, looser only where nothing
    rests on them.  Tails: for x ≤ −X_L, u ≤ u(−X_L) (monotone) times the exact Q mass; for
    x ≥ X_R, Q·u ≤ P^αQ^{1−α} ≤ (1−q)^{1−α}(1+κ)^α q^α e^{α(μx−μ²/2)}φ(x),
    κ = (1−q)/(q e^{μX_R−μ²/2}), integrated in closed form.  Cell masses come
    from differences of log Φ taken on the side where they do not cancel.
    Floating-point rounding: every cell value is computed to a few hundred
    ulps at worst (the subtraction above amplifies by at most 10), so
    A_α − 1 is multiplied by 1 + 1e-9 (a wide margin).  Discretisation only
    loosens the bound: relative looseness about (Δμ)²α/8 where the tilted
    bound is used and Δ² elsewhere (Δ ≤ 0.01, smaller for large αμ²; a cell
    budget caps the grid, making very large orders looser, never lower).
    Finally D_α is non-decreasing in α, so the monotone envelope over the
    grid is taken.

    Results are cached per (orders, q, σ).

    >>> import numpy as np
    >>> tight = replace_one_sampled_gaussian_rdp([2.0, 8.0], 0.01, 2.0)
    >>> loose = sampled_gaussian_rdp([2.0, 8.0], 0.01, 1.0)
    >>> bool(np.all(tight < loose))
    True
    """
    alpha = validate_orders(orders)
    p = _check_q(q)
    s = _check_sigma(sigma)
    if p == 0.0 or p == 1.0:
        return sampled_gaussian_rdp(alpha, p, s / 2.0)
    key = (alpha.tobytes(), p, s, current_coarser())
    cached = _REPLACE_ONE_CACHE.get(key)
    if cached is not None:
        return cached.copy()
    with warnings.catch_warnings(record=True) as raised:
        warnings.simplefilter("always")
        tight = _replace_one_on_grid(alpha, p, s, key[3])
        out = _monotone_envelope(alpha, _below_loose(alpha, p, s / 2.0, tight))
    for w in raised:  # raised again, as they came (a result that warned is not kept)
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if not raised:
        if len(_REPLACE_ONE_CACHE) >= 512:
            _REPLACE_ONE_CACHE.clear()  # (one call, safe beside another thread's; refilled as asked)
        _REPLACE_ONE_CACHE[key] = out.copy()
    return out


#: replace_one_sampled_gaussian_rdp's results by (orders, q, σ, cell factor), at most 512 (then
#: emptied): a calibration reports its answer again at the end, and the certificate once more.
_REPLACE_ONE_CACHE: dict = {}


def _below_loose(alpha: np.ndarray, q: float, sigma: float, bound: np.ndarray) -> np.ndarray:
    """min(``bound``, S_α(q, σ)) at every order (S: :func:`sampled_gaussian_rdp` before its
    envelope, which the caller's envelope of the minimum makes redundant), computing S only at the
    orders where ``bound`` may exceed it: at α ≥ 2, S_α ≥ S_⌊α⌋ (an RDP is non-decreasing in α,
    and S is an upper bound at every order), and the integer order's exact series rounded down
    (:func:`_rdp_int` with ``lower``) is at most S_⌊α⌋; where ``bound`` is at most that, the
    minimum is ``bound`` itself.  The same values as computing S everywhere, for a fraction of
    its series (most of the replace-one pair's cost besides the quadrature)."""
    need = np.ones(alpha.size, dtype=bool)
    high = alpha >= 2.0
    if high.any():
        floors = np.floor(alpha[high])
        unique, where = np.unique(floors, return_inverse=True)
        below = _rdp_int(unique, q, sigma, lower=True)[where]
        need[high] = ~(bound[high] <= below)
    out = np.array(bound, dtype=float)
    if need.any():
        loose = _sgm_pairs(alpha[need], q, np.full(int(need.sum()), sigma), stacklevel=4)
        out[need] = np.minimum(out[need], loose)
    return out


#: Orders computed by quadrature: at most every ``_REPLACE_STRIDE``-th of a long order grid
#: (and its last); the others are bounded by the chord of the convex log A_α (see below).
_REPLACE_STRIDE = 4
#: ... and only between orders within this ratio of each other (a tight chord).
_REPLACE_SPAN = 1.25
#: ... and where D_α grows by at most this factor between the two (else every order is integrated).
_REPLACE_JUMP = 1.3


def _replace_one_on_grid(alpha: np.ndarray, q: float, sigma: float, coarser: int = 1) -> np.ndarray:
    """Upper bounds of D_α at every order of ``alpha``: the quadrature bound at every
    ``_REPLACE_STRIDE``-th order (the first and last always), and between two such orders
    α₀ < α < α₁ the chord of f(α) = (α−1)·D_α = log A_α:

        f(α) ≤ f̂(α₀) + (α − α₀)/(α₁ − α₀)·(f̂(α₁) − f̂(α₀)),

    valid because A_α = E_Q[e^{α·log(P/Q)}] is a moment generating function in α, so
    log A_α is convex (Hölder), and f̂ ≥ f at the two ends.  Orders are skipped only
    where they are close ((α₁−1) ≤ 1.25·(α₀−1)) and D_α grows by at most 1.3× between the
    two ends; elsewhere (the steep stretch where a sampled Gaussian's RDP turns from ~q²α
    to ~α/σ²) every order is integrated.  This integrates about a third of the default
    grid's orders (1.8–2.5× faster per curve); the chord is within ~3 % of the per-order bound and ε
    at δ = 1e-5 within 0.5 % (benchmarks/replace_one_speed.py).  Short order lists (≤ 40
    orders, as tests pass) are computed at every order.  ``coarser``: :func:`screen_quadrature`'s
    cell factor."""
    n = alpha.size
    if n <= 40 or not np.all(np.diff(alpha) > 0):
        return np.array(replace_one_orders(tuple(alpha.tolist()), q, sigma, coarser))
    nodes, i = [0], 0
    while i < n - 1:  # skip at most STRIDE − 1 orders, and only where the orders are close
        j = min(i + _REPLACE_STRIDE, n - 1)
        while j > i + 1 and alpha[j] - 1.0 > _REPLACE_SPAN * (alpha[i] - 1.0):
            j -= 1
        nodes.append(j)
        i = j
    nodes = np.array(nodes)
    at = np.array(replace_one_orders(tuple(alpha[nodes].tolist()), q, sigma, coarser))
    f = at * (alpha[nodes] - 1.0)
    out = np.empty(n)
    out[nodes] = at
    for j in range(nodes.size - 1):
        i0, i1 = nodes[j], nodes[j + 1]
        inner = np.arange(i0 + 1, i1)
        if inner.size == 0:
            continue
        if not (np.isfinite(f[j]) and np.isfinite(f[j + 1])) or at[j + 1] > _REPLACE_JUMP * at[j]:
            # a steep stretch (where a sampled Gaussian's RDP turns from ~q²α to ~α/σ²) or an
            # infinite end: a chord would be loose there, so integrate every order
            out[inner] = replace_one_orders(tuple(alpha[inner].tolist()), q, sigma, coarser)
            continue
        w = (alpha[inner] - alpha[i0]) / (alpha[i1] - alpha[i0])
        out[inner] = (f[j] + w * (f[j + 1] - f[j])) / (alpha[inner] - 1.0) * (1 + 4 * _EPS)
    return out


# --------------------------------------------------------------------------- conversions

#: Names of the RDP → (ε, δ) conversions.
CONVERSIONS = ("classic", "improved")


def validate_delta(delta) -> float:
    """Return ``delta`` as a float in (0, 1), or raise ``ValueError`` naming it."""
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise ValueError(f"delta must be in (0, 1). Found {delta!r}.") from None
    if not (0.0 < d < 1.0):  # also rejects NaN
        raise ValueError(f"delta must be in (0, 1). Found {delta!r}.")
    return d


@dataclass(frozen=True)
class EpsilonConversion:
    """ε for a given δ from an RDP curve, with the order that achieved it."""

    epsilon: float
    order: float | None
    conversion: str
    at_edge: bool


def epsilon_from_rdp(orders, rdp, delta: float, *, conversion: str = "improved") -> EpsilonConversion:
    """Convert an RDP curve to (ε, δ)-DP, minimising over the orders.

    ``classic``: ε = min_α ε_α + log(1/δ)/(α−1) — Mironov (2017) Proposition 3,
    the conversion the papers use (Altschuler & Talwar Lemma 2.5).

    ``improved`` (default): ε = min_α ε_α + log(1 − 1/α) − (log δ + log α)/(α−1)
    — Balle, Barthe, Gaboardi, Hsu & Sato (2020), arXiv:2004.00010,
    Proposition 12 (also Canonne, Kamath & Steinke 2020).  It also uses that
    ε = 0 suffices when δ ≥ √(1 − e^{−ε_α}) (Bretagnolle–Huber; KL ≤ D_α), as
    dp_accounting does.  Never larger than ``classic``.

    Warns with :class:`OrderGridWarning` when the optimal order is the smallest
    or largest of the grid (a wider grid might give a smaller ε).

    >>> c = epsilon_from_rdp([2.0, 4.0, 8.0], [0.1, 0.2, 4.0], 1e-5, conversion="classic")
    >>> round(c.epsilon, 6), c.order
    (4.037642, 4.0)
    """
    alpha = validate_orders(orders)
    values = np.atleast_1d(np.asarray(rdp, dtype=float))
    if values.shape != alpha.shape:
        raise ValueError(f"rdp must have one value per order ({alpha.size}). Found {rdp!r}.")
    if np.isnan(values).any() or (values < 0).any():
        raise ValueError(f"rdp values must be non-negative numbers. Found {values.tolist()!r}.")
    d = validate_delta(delta)
    eps = _epsilon_grid(alpha, values, d, conversion)
    i = int(np.argmin(eps))
    best = float(eps[i])
    if not math.isfinite(best):
        return EpsilonConversion(math.inf, None, conversion, False)
    at_edge = alpha.size > 1 and best > 0 and (alpha[i] == alpha.min() or alpha[i] == alpha.max())
    if at_edge:
        warnings.warn(
            f"The optimal Rényi order {alpha[i]:g} is at the edge of the order grid "
            f"[{alpha.min():g}, {alpha.max():g}]; a wider grid may give a smaller epsilon.",
            OrderGridWarning,
            stacklevel=2,
        )
    return EpsilonConversion(best, float(alpha[i]), conversion, bool(at_edge))


def _epsilon_grid(alpha: np.ndarray, values: np.ndarray, d: float, conversion: str) -> np.ndarray:
    """ε(δ) at every order (the last axis of ``values``), before the minimum over orders."""
    if conversion not in CONVERSIONS:
        raise ValueError(f"conversion must be one of {', '.join(CONVERSIONS)}. Found {conversion!r}.")
    with np.errstate(invalid="ignore"):
        if conversion == "classic":
            eps = values + math.log(1.0 / d) / (alpha - 1)
        else:
            eps = values + np.log1p(-1.0 / alpha) - (math.log(d) + np.log(alpha)) / (alpha - 1)
            eps = np.where(d * d + np.expm1(-values) > 0, 0.0, eps)
    return np.where(np.isinf(values), np.inf, np.maximum(eps, 0.0))


def epsilon_from_rdp_rows(orders, rows, delta: float, *, conversion: str = "improved"):
    """:func:`epsilon_from_rdp` for many RDP curves at once (one per row of
    ``rows``, shape (k, len(orders))): returns (ε, optimal order) as two arrays of
    length k (order NaN where ε is infinite).  No grid-edge warning: callers that
    plot curves over many runs check the edge themselves if they need to.

    >>> eps, order = epsilon_from_rdp_rows([2.0, 4.0, 8.0], [[0.1, 0.2, 4.0], [1, 2, 3]], 1e-5,
    ...                                    conversion="classic")
    >>> round(float(eps[0]), 6), order.tolist()
    (4.037642, [4.0, 8.0])
    """
    alpha = validate_orders(orders)
    values = np.asarray(rows, dtype=float)
    if values.ndim != 2 or values.shape[1] != alpha.size:
        raise ValueError(
            f"rows must have shape (k, {alpha.size}), one value per order. Found shape {values.shape}."
        )
    if np.isnan(values).any() or (values < 0).any():
        raise ValueError("rows must hold non-negative RDP values (no NaN).")
    eps = _epsilon_grid(alpha, values, validate_delta(delta), conversion)
    i = np.argmin(eps, axis=1) if eps.shape[0] else np.zeros(0, dtype=int)
    best = eps[np.arange(eps.shape[0]), i]
    order = np.where(np.isfinite(best), alpha[i], np.nan)
    return best, order
