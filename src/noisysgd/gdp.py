"""Gaussian differential privacy (μ-GDP): exact conversion to (ε, δ) and to RDP.

A mechanism is μ-GDP when distinguishing its outputs on neighbouring datasets
is at least as hard as distinguishing N(0, 1) from N(μ, 1) (Dong, Roth & Su,
*Gaussian differential privacy*, J. R. Stat. Soc. B 84(1), 2022,
arXiv:1905.02383, Definition 2.6).  It is exactly the privacy of a Gaussian
mechanism whose sensitivity divided by its noise standard deviation is μ.

Two conversions:

* **exact** (ε, δ): a μ-GDP mechanism is (ε, δ(ε))-DP for every ε ≥ 0 with

      δ(ε) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2)

  (Dong, Roth & Su 2022, Corollary 2.13; the same curve as the analytic
  Gaussian mechanism of Balle & Wang 2018, Theorem 8), and no smaller δ
  holds for the Gaussian mechanism: the conversion is lossless.
  :func:`gdp_delta` evaluates it, :func:`gdp_epsilon` inverts it.
* **RDP**: the Gaussian mechanism with sensitivity/σ = μ has Rényi divergence
  α·μ²/2 at every order α (Mironov 2017, Proposition 7), so a μ-GDP
  mechanism is (α, αμ²/2)-RDP (Dong, Roth & Su 2022, §2.4 and Appendix B).
  :func:`gdp_rdp` returns that curve, so a GDP bound can be combined order by
  order with RDP analyses; converting it to (ε, δ) through RDP is looser than
  the exact conversion above.

Numerics
--------
Writing a = −ε/μ + μ/2 and b = a − μ (so b² = a² + 2ε and e^ε·e^{−b²/2} =
e^{−a²/2}), with Φ(t) = ½·e^{−t²/2}·erfcx(−t/√2):

* for a < 0 (ε > μ²/2, where δ can be tiny), in log space, so δ down to
  1e-300 and far below (as log δ) keeps its relative accuracy and the
  e^ε·Φ(·) product never overflows: for μ > 1,
  δ = ½·e^{−a²/2}·(erfcx(−a/√2) − erfcx(−b/√2)); for μ ≤ 1, where those two
  values nearly cancel, δ = φ(a)·∫ (1 − t·R(t)) dt over the interval of width
  μ centred at ε/μ (R the Mills ratio, R′ = tR − 1), by Gauss–Legendre
  quadrature, so even μ = 1e-8 keeps about 13 digits.
* for a ≥ 0: δ = ½erf(a/√2) + ½erf(−b/√2) − expm1(ε)·Φ(b), a sum of
  non-negative terms minus a small one (no cancellation of Φ(a) − Φ(b)
  when μ is tiny).

Each evaluation carries a bound on its own floating-point error (a few dozen
ulps per special-function value, propagated through the cancellation);
:func:`gdp_epsilon` only returns an ε whose δ is at most the target *after*
adding that error, so ε is never under-reported.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import special

from .rdp import validate_delta, validate_orders
from .run import checked_real

__all__ = ["bisect_decreasing", "gdp_delta", "gdp_log_delta", "gdp_epsilon", "gdp_mu", "gdp_mu_estimate", "gdp_rdp",
           "validate_mu"]

_EPS = float(np.finfo(float).eps)
#: Relative error allowed per special-function evaluation (erfcx, erf, ndtr,
#: exp, log1p), in ulps; scipy's are within about 10 ulps (checked against
#: mpmath in the tests).
_ULPS = 64.0
_SQRT1_2 = math.sqrt(0.5)
_LOG2 = math.log(2.0)


def validate_mu(mu) -> float:
    """Return ``mu`` as a finite float ≥ 0, or raise ``ValueError`` naming it."""
    return checked_real("mu", mu, positive=False)


def _check_epsilon(epsilon) -> float:
    if isinstance(epsilon, bool) or epsilon is None:
        raise ValueError(f"epsilon must be a non-negative number. Found {epsilon!r}.")
    try:
        e = float(epsilon)
    except (TypeError, ValueError):
        raise ValueError(f"epsilon must be a non-negative number. Found {epsilon!r}.") from None
    if not e >= 0:  # also rejects NaN; +inf is allowed (δ = 0)
        raise ValueError(f"epsilon must be a non-negative number. Found {epsilon!r}.")
    return e


#: Gauss–Legendre rule on [−1, 1] for the integral form of δ when μ ≤ 1.
_GL_X, _GL_W = np.polynomial.legendre.leggauss(24)
_SQRT_PI_2 = math.sqrt(math.pi / 2.0)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
#: Terms of the asymptotic series of 1 − t·R(t) used for t ≥ 10 (all before
#: the smallest term, so the first omitted one bounds the truncation error).
_ASYMPTOTIC_TERMS = 40


def _mills_complement(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """g(t) = 1 − t·R(t) for t ≥ 0, with R(t) = Φ(−t)/φ(t) the Mills ratio, and
    a bound on the relative error of each value.

    g is positive and decreasing, ≈ 1/t² for large t.  Below t = 10 it is
    1 − t·√(π/2)·erfcx(t/√2), which loses about log10(1 + t²) digits to
    cancellation; from t = 10 on, the alternating asymptotic series
    Σ_{k≥1} (−1)^{k+1} (2k−1)!!/t^{2k} is summed (40 terms, all before its
    smallest, so the truncation error is below 1e-16 relative)."""
    t = np.asarray(t, dtype=float)
    out = np.empty_like(t)
    rel = np.empty_like(t)
    small = t < 10.0
    ts = t[small]
    out[small] = 1.0 - ts * _SQRT_PI_2 * special.erfcx(ts * _SQRT1_2)
    rel[small] = _ULPS * _EPS * (1.0 + ts * ts)
    tl = t[~small]
    if tl.size:
        inv2 = 1.0 / (tl * tl)
        term = inv2.copy()
        total = term.copy()
        for k in range(1, _ASYMPTOTIC_TERMS):
            term = -term * (2 * k + 1) * inv2
            total += term
        out[~small] = total
        rel[~small] = _ULPS * _EPS
    return out, rel


def _log_delta(mu: float, eps: float) -> tuple[float, float]:
    """(log δ(ε), a bound on the relative error of δ) for validated μ > 0, finite ε ≥ 0."""
    r = eps / mu
    a = -r + 0.5 * mu
    b = -r - 0.5 * mu
    if a < 0.0 and mu <= 1.0:
        # δ = φ(a)·(R(−a) − R(−b)) = φ(a)·∫_{r−μ/2}^{r+μ/2} (1 − t·R(t)) dt, since
        # R′(t) = t·R(t) − 1.  The interval has the exact width μ around r, so
        # no cancellation between two separately rounded end points; the
        # integrand is entire and the interval at most 1 wide, so 24
        # Gauss–Legendre nodes integrate it to full precision.
        g, rel = _mills_complement(r + 0.5 * mu * _GL_X)
        integral = 0.5 * mu * float(np.dot(_GL_W, g))
        err = _ULPS * _EPS * (2.0 + a * a + r) + float(rel.max())
        return -0.5 * a * a - _HALF_LOG_2PI + math.log(integral), err
    if a < 0.0:
        x = special.erfcx(-a * _SQRT1_2)
        y = special.erfcx(-b * _SQRT1_2)
        diff = x - y  # μ > 1: the two differ by a fair fraction, little cancellation
        # erfcx values, the rounding of u and v (their difference μ/√2 carries an
        # absolute error of about eps·(|a| + |b|)), and e^{−a²/2}.
        err = _ULPS * _EPS * ((x + y) / diff + (abs(a) + abs(b)) / mu + a * a + 1.0)
        return -0.5 * a * a - _LOG2 + math.log(diff), err
    pos = 0.5 * (special.erf(a * _SQRT1_2) + special.erf(-b * _SQRT1_2))
    if eps <= 1.0:
        neg = math.expm1(eps) * special.ndtr(b)
    else:  # e^ε·Φ(b) − Φ(b) without overflowing e^ε (e^ε·Φ(b) ≤ Φ(a) ≤ 1)
        neg = math.exp(eps + special.log_ndtr(b)) - special.ndtr(b)
    value = pos - neg
    # log Φ(b) ≈ −b²/2 = −(a²/2 + ε): its rounding error is amplified by that size.
    err_abs = _ULPS * _EPS * (pos + abs(neg)) * (1.0 + abs(a) + abs(b) + eps + 0.5 * a * a)
    if not value > err_abs:
        value = max(value, 0.0) + err_abs
        return math.log(value), 1.0
    return math.log(value), err_abs / value


def gdp_log_delta(mu, epsilon) -> float:
    """log δ(ε) of μ-GDP (see :func:`gdp_delta`), accurate where δ underflows.

    >>> round(gdp_log_delta(1.0, 40.0), 6)
    -788.423413
    """
    m = validate_mu(mu)
    e = _check_epsilon(epsilon)
    if m == 0.0 or math.isinf(e):
        return -math.inf
    return _log_delta(m, e)[0]


def gdp_delta(mu, epsilon) -> float:
    """The smallest δ for which a μ-GDP mechanism is (ε, δ)-DP.

    δ(ε) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2) — Dong, Roth & Su, *Gaussian
    differential privacy* (2022), Corollary 2.13.  Exact (lossless) for the
    Gaussian mechanism; computed in log space (see the module docstring), to
    about 1e-13 relative accuracy in typical regimes.

    Parameters
    ----------
    mu : float
        μ ≥ 0, finite (μ = 0: perfect privacy, δ = 0).
    epsilon : float
        ε ≥ 0 (``inf`` gives 0).

    >>> round(gdp_delta(1.0, 1.0), 12)
    0.126936737507
    >>> gdp_delta(0.0, 0.5)
    0.0
    """
    log_d = gdp_log_delta(mu, epsilon)
    return math.exp(log_d) if log_d > -math.inf else 0.0


def bisect_decreasing(g, lo: float, hi: float, *, max_iter: int = 2200) -> float:
    """For g(lo) > 0 ≥ g(hi): shrink the bracket until ``lo`` and ``hi`` are adjacent floats
    (or ``max_iter`` evaluations); returns ``hi``, the end where g ≤ 0.  The next point is the
    false-position one, with the Illinois rule (an end kept twice has its value halved, so both
    ends close in: Dahlquist & Björck, *Numerical Methods*, §6.2) — about 10 evaluations of a
    smooth g instead of bisection's ~64 — and a bisection wherever that point is not strictly
    inside the bracket, is not finite, or the bracket did not halve over the last three steps
    (so it closes whatever g looks like).  Only the end where g ≤ 0 is returned, as bisection
    would (instead of scipy's brentq, whose import costs 0.25 s of every CLI call); the callers
    verify and nudge the result anyway."""
    g_lo, g_hi = g(lo), g(hi)
    kept = 0            # +1: lo was kept last step, −1: hi was
    widths = [hi - lo]
    for _ in range(max_iter):
        half = lo + 0.5 * (hi - lo)
        if not lo < half < hi:
            break
        mid = half
        if (len(widths) < 4 or widths[-1] <= 0.5 * widths[-4]) and math.isfinite(g_lo) \
                and math.isfinite(g_hi) and g_lo > g_hi:
            x = hi - g_hi * (hi - lo) / (g_hi - g_lo)
            if lo < x < hi:
                mid = x
        gm = g(mid)
        if gm > 0.0:
            lo, g_lo = mid, gm
            if kept == -1:
                g_hi *= 0.5
            kept = -1
        else:
            hi, g_hi = mid, gm
            if kept == 1:
                g_lo *= 0.5
            kept = 1
        widths.append(hi - lo)
    return hi


def gdp_epsilon(mu, delta) -> float:
    """The smallest ε ≥ 0 with δ(ε) ≤ ``delta`` for a μ-GDP mechanism (exact conversion).

    δ(ε) of :func:`gdp_delta` (Dong, Roth & Su 2022, Corollary 2.13) is
    strictly decreasing in ε, so the root is bracketed in [0, ε_hi] with
    ε_hi = μ²/2 − μ·Φ⁻¹(δ) (where Φ(−ε/μ + μ/2) ≤ δ already) and found by
    Newton's method on log δ(ε) − log δ, whose slope is exact (−e^ε·Φ(−ε/μ − μ/2)/δ(ε)), kept
    inside the bracket (:func:`_newton_root`) — for δ ≤ 1/2; above it, where log δ is flat near
    its root and rounding decides it, by false position to adjacent floats
    (:func:`bisect_decreasing`).  The root is then nudged upward until
    δ(ε), plus a bound on its floating-point error, is at most ``delta``: the
    returned ε is never below the true one, and above it by a few ulps (more
    only where δ(ε) itself is ill-conditioned, e.g. μ below 1e-8).  Returns 0
    when δ(0) ≤ ``delta`` (or μ = 0).

    >>> round(gdp_epsilon(1.0, 1e-5), 9)
    4.377178096
    >>> gdp_epsilon(0.0, 1e-5)
    0.0
    """
    m = validate_mu(mu)
    d = validate_delta(delta)
    if m == 0.0:
        return 0.0
    log_target = math.log(d)

    def excess(eps: float) -> tuple[float, float]:  # (log δ(ε) with its error padding − log δ, log δ(ε))
        log_d, err = _log_delta(m, eps)
        return log_d + math.log1p(err) - log_target, log_d

    over, log_d0 = excess(0.0)
    if over <= 0.0:
        return 0.0
    hi = max(0.5 * m * m - m * float(special.ndtri(d)), m * _EPS)
    for _ in range(2000):
        log_d = _log_delta(m, hi)[0]
        if log_d < log_target:
            break
        hi *= 2.0
    else:  # pragma: no cover - δ(ε) → 0 as ε → ∞, so the loop ends
        raise RuntimeError(f"gdp_epsilon could not bracket the root for mu={m!r}, delta={d!r}.")
    # Above δ = 1/2 log δ(ε) is flat near its root, which its rounding then decides: the false
    # position to adjacent floats and the growing steps below, as before Newton's method was used.
    newton = d <= 0.5
    if log_d0 <= log_target:
        eps = 0.0
    elif newton:
        eps = _newton_root(m, log_target, 0.0, hi, log_d)
    else:
        eps = bisect_decreasing(lambda e: _log_delta(m, e)[0] - log_target, 0.0, hi)
    # Nudge upward until the error-padded δ is below the target: first by the padding over the
    # slope where that is a step of at most _PAD_STEP of ε (log δ locally linear), then in growing
    # steps (where the padding is large against the slope the linear step can overshoot by far —
    # μ = 50 at δ = 1 − 1e-14 went from 920 to 9,461 — and the growing steps are left to find it).
    over, log_d = excess(eps)
    if over <= 0.0:
        return float(eps)
    slope = _slope(m, eps, log_d) if newton and math.isfinite(log_d) else 0.0
    if 0.0 < slope < math.inf and over / slope <= _PAD_STEP * abs(eps):
        eps += 1.001 * over / slope + 2.0 * abs(eps) * _EPS
    step = max(abs(eps) * 2 * _EPS, 1e-300)
    for _ in range(2000):
        if excess(eps)[0] <= 0.0:
            return float(eps)
        eps += step
        step *= 2.0
    raise RuntimeError(  # pragma: no cover
        f"gdp_epsilon could not verify delta(epsilon) <= delta for mu={m!r}, delta={d!r}."
    )


#: The largest padding (relative to ε) :func:`gdp_epsilon` steps over in one linear step.
_PAD_STEP = 1e-9


def _slope(m: float, eps: float, log_d: float) -> float:
    """−d log δ(ε)/dε = e^ε·Φ(b)/δ (b = −ε/μ − μ/2: the terms in φ cancel, as e^ε·φ(b) = φ(a)),
    from log δ(ε) = ``log_d``."""
    return math.exp(eps + float(special.log_ndtr(-eps / m - 0.5 * m)) - log_d)


def _newton_root(m: float, log_target: float, lo: float, hi: float, log_hi: float) -> float:
    """The root of log δ(ε) = ``log_target`` in [lo, hi] (positive at lo, at most 0 at hi), by
    Newton's method on log δ with its exact slope (:func:`_slope`), kept inside the bracket (a
    bisection wherever a step leaves it or did not halve |log δ − log_target|): ~5 evaluations of
    log δ where a false position to adjacent floats took ~18.  Returns a point within a few ulps
    of the root, on either side (the caller's padding check decides); ``log_hi``: log δ(hi)."""
    x, last, log_d = hi, math.inf, log_hi
    for k in range(400):
        if k:
            log_d = _log_delta(m, x)[0]
        gx = log_d - log_target
        if gx > 0.0:
            lo = x
        else:
            hi = x
        if gx == 0.0 or not hi - lo > 4.0 * _EPS * hi:
            return x
        slope = _slope(m, x, log_d) if math.isfinite(log_d) else 0.0
        nx = x + gx / slope if 0.0 < slope < math.inf else math.nan
        if abs(nx - x) <= 4.0 * _EPS * abs(x):  # converged to the rounding of log δ
            return nx if lo <= nx <= hi else x
        if not lo < nx < hi or abs(gx) > 0.5 * last:
            nx = lo + 0.5 * (hi - lo)
        x, last = nx, abs(gx)
    return hi


def gdp_mu(epsilon, delta) -> float:
    """The largest μ (to a relative 1e-12; a few ulps where δ is not near 1) whose μ-GDP meets
    (``epsilon``, ``delta``)-DP by the exact conversion (Dong, Roth & Su 2022, Corollary 2.13:
    :func:`gdp_epsilon`, which is increasing in μ and never below the true ε): a Gaussian mechanism of sensitivity Δ calibrated to (ε, δ) needs
    noise of standard deviation Δ/μ.  The returned μ meets the target (never above it).

    >>> mu = gdp_mu(1.0, 1e-5)
    >>> gdp_epsilon(mu, 1e-5) <= 1.0 < gdp_epsilon(mu * (1 + 1e-9), 1e-5)
    True
    """
    return _gdp_mu(_check_epsilon(epsilon), validate_delta(delta))


#: How close below the largest μ that meets the target :func:`gdp_mu` returns (relative): each step
#: of its last bisection is a :func:`gdp_epsilon` (~25 evaluations of log δ), and the adjacent floats it
#: went to before took ~12 of them where 1e-12 takes one or two.
MU_REL_TOL = 1e-12


@functools.lru_cache(maxsize=256)
def _gdp_mu(e: float, d: float) -> float:
    """:func:`gdp_mu` of validated arguments, cached (a calibration's start asks it once per
    candidate of a configuration search, always with the same target).

    δ(μ; ε) of Corollary 2.13 is increasing in μ at fixed ε, so the root of
    log δ(μ; ε) = log d is found on μ directly (Illinois false position,
    :func:`bisect_decreasing`, to adjacent floats: ~15 evaluations of log δ instead of a
    bisection over :func:`gdp_epsilon`'s own root finding, 10-100× cheaper), then stepped down
    until :func:`gdp_epsilon`, with its error padding, meets ``e`` (the contract is that
    function's), and bisected back up towards the last miss where the steps overshot (to
    :data:`MU_REL_TOL`)."""
    lo, hi = 0.0, 1.0
    while gdp_epsilon(hi, d) <= e:
        lo, hi = hi, 2.0 * hi
        if hi > 1e6:
            return lo
    log_target = math.log(d)

    def padded(m: float) -> bool:  # δ(m; e) with its error bound meets d (cheap; then the contract)
        log_d, err = _log_delta(m, e)
        return log_d + math.log1p(err) <= log_target

    def meets(m: float) -> bool:  # the contract: gdp_epsilon, with its error padding, meets e
        return m > 0.0 and padded(m) and gdp_epsilon(m, d) <= e

    mu, bad = _mu_root(e, d, lo, hi), None
    step = max(mu * 2 * _EPS, 5e-324)
    while not meets(mu):  # down in growing steps until the contract holds (the end lo included)
        bad, mu, step = mu, mu - step, 2.0 * step
        if not mu > 0.0:
            raise ValueError(f"delta {d!r} is too small for a Gaussian mechanism at epsilon {e!r}: "
                             "no mu > 0 meets it in floating point.")
    for _ in range(200 if bad is not None else 0):  # the steps overshot: back up towards the last miss
        mid = 0.5 * (mu + bad)
        if not mu < mid < bad or bad - mu <= MU_REL_TOL * bad:  # the largest μ that meets is in [mu, bad)
            break
        mu, bad = (mid, bad) if meets(mid) else (mu, mid)
    return mu


@functools.lru_cache(maxsize=256)
def gdp_mu_estimate(epsilon, delta) -> float:
    """The μ at which δ(μ; ``epsilon``) = ``delta`` (Dong, Roth & Su 2022, Corollary 2.13), by false
    position on log δ (:func:`bisect_decreasing`, ~15 evaluations of it), **without**
    :func:`gdp_mu`'s check against :func:`gdp_epsilon` and its error padding (~10 of those, 5-10×
    the cost): within ~1e-13 of :func:`gdp_mu` (6e-14 at most on 49 targets with δ ≤ 0.5; more for δ near
    1, where gdp_mu's padding steps further down), possibly above it.  For where a search
    starts or what it aims at — whose answer is then decided by evaluated bounds — never for the
    noise of a mechanism that must meet (``epsilon``, ``delta``).

    >>> abs(gdp_mu_estimate(1.0, 1e-5) / gdp_mu(1.0, 1e-5) - 1) < 1e-12
    True
    """
    e, d = _check_epsilon(epsilon), validate_delta(delta)
    if not (0.0 < e < math.inf) or d >= 1.0:
        return gdp_mu(e, d)
    return _mu_root(e, d, 0.0, 1.0)


def _mu_root(e: float, d: float, lo: float, hi: float) -> float:
    """The root of log δ(μ; e) = log d (δ increasing in μ at fixed e) from the bracket [lo, hi]:
    ``hi`` doubled while δ is still below d there (up to 10⁶, where ``lo`` is returned), ``lo``
    = 0 replaced by a finite end (halving), then Illinois false position to adjacent floats
    (:func:`bisect_decreasing`: the end where δ ≥ d).  Shared by :func:`gdp_mu` (which then
    verifies it) and :func:`gdp_mu_estimate` (which does not)."""
    log_target = math.log(d)

    def h(m: float) -> float:  # decreasing in μ: positive while δ(μ; e) is below the target
        return math.inf if m <= 0.0 else log_target - _log_delta(m, e)[0]

    while h(hi) > 0.0:
        lo, hi = hi, 2.0 * hi
        if hi > 1e6:
            return lo
    if lo == 0.0:  # a finite lower end, so that false position applies from the start
        lo = 0.5 * hi
        while lo > 1e-300 and h(lo) <= 0.0:
            lo, hi = 0.5 * lo, lo
    return bisect_decreasing(h, lo, hi)


def gdp_rdp(mu, orders) -> np.ndarray:
    """RDP curve α·μ²/2 of a μ-GDP mechanism at each order.

    A μ-GDP mechanism is as private as a Gaussian mechanism with
    sensitivity/σ = μ, whose Rényi divergence of order α is αμ²/2 (Mironov
    2017, Proposition 7; Dong, Roth & Su 2022, Appendix B).  Converting this
    curve to (ε, δ) is looser than :func:`gdp_epsilon`; it is for combining a
    GDP bound with RDP analyses order by order.

    >>> gdp_rdp(2.0, [2.0, 3.0]).tolist()
    [4.0, 6.0]
    """
    m = validate_mu(mu)
    alpha = validate_orders(orders)
    return alpha * (0.5 * m * m)
