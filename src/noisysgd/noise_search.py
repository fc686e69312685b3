"""The one-dimensional searches a calibration runs over the noise multiplier z.

Every search here asks a caller's ``at(z)`` for a report (anything with an ``epsilon``) and
``meets(report)`` whether it meets the target, for ε non-increasing in z, and returns a z that
was *evaluated* and met the target, with z/(1 + tol) missed: never an interpolation.  What is
evaluated (which analyses, on which grid) and what "meets" means (a training share, a total
composed with a preprocessing query) are :mod:`noisysgd.accountant`'s.

* :func:`bisect_noise`: find a bracket by steps of ``factor``, then :func:`shrink` it;
* :func:`shrink`: close a bracket [lo, hi] (lo misses, hi meets) to a ratio 1 + tol,
  interpolating log ε against log z every other round and bisecting in between;
* :func:`place_then_decide`: a PLD's answer placed on its cheap coarse grid, then decided on
  the certificate's grid in about three evaluations (:func:`predicted`);
* :func:`noise_reaching` and :func:`noise_reaching_affine`: for the configuration search's prune,
  the z where an increasing utility proxy reaches a bound (no ε evaluated).
"""

from __future__ import annotations

import math

__all__ = ["AFFINE_PROBE", "Eps", "PLACE_TOL", "bisect_noise", "eps_or_inf", "noise_reaching", "noise_reaching_affine",
           "place_then_decide", "predicted", "shrink"]

def eps_or_inf(report) -> float:
    """``report.epsilon``, ∞ where it is None (no sound bound applies)."""
    e = report.epsilon
    return math.inf if e is None else e


#: How closely the PLD's coarse search grid places the answer before the certificate's grid decides.
PLACE_TOL = 1e-3


class Eps:
    """An ε with the one attribute :func:`bisect_noise` reads of a report."""

    def __init__(self, epsilon: float):
        self.epsilon = epsilon


def place_then_decide(coarse, fine, meets, start, start_coarse, tol, zmax, target, d, factor=2.0) -> float:
    """The smallest z meeting the target under ``fine`` (the certificate's PLD), placed first on
    ``coarse`` (its 2-4× cheaper search grid) to 0.1 %: the certificate's grid rounds less, so
    its answer lies a little below (~1e-3 at most where measured, on a grid 10× coarser).  ``fine`` at the coarse answer
    z_c gives ε_f(z_c); the slope of log ε in log z between the coarse search's two closest
    points predicts where ``fine`` meets the target, and two probes a factor (1 + tol) apart
    around the prediction close the bracket: 3 evaluations of ``fine`` where they straddle it
    (else one step of 0.1 % below z_c and the interpolation, as a fallback), instead of ~10.
    The returned z was evaluated under ``fine`` and met; z/(1 + tol) missed."""
    seen: list[tuple[float, float]] = []

    def placed(x: float):
        r = coarse(x)
        seen.append((x, eps_or_inf(r)))
        return r

    zc, _, _ = bisect_noise(placed, meets, start, start_coarse, max(tol, PLACE_TOL), zmax, target, d,
                             factor=factor)
    hi_report = fine(zc)
    if not meets(hi_report):  # (the coarse grid rounded below the fine one: not expected) search on fine
        z, _, _ = bisect_noise(fine, meets, zc, hi_report, tol, zmax, target, d)
        return z
    lo = lo_eps = None
    guess = predicted(seen, zc, eps_or_inf(hi_report), target)
    if guess is not None and guess < zc:
        step = math.exp(0.5 * math.log1p(tol) * (1.0 - 1e-6))  # as shrink's probes
        up, down = min(guess * step, zc), guess / step
        r_up = fine(up) if up < zc else hi_report
        if meets(r_up):
            zc, hi_report = up, r_up
            r_down = fine(down)
            if not meets(r_down):
                lo, lo_eps = down, eps_or_inf(r_down)
            else:
                zc, hi_report = down, r_down
        else:
            lo, lo_eps = up, eps_or_inf(r_up)
    if lo is None:
        below = zc / (1.0 + max(2.0 * tol, PLACE_TOL))
        r = fine(below)
        if meets(r):  # the fine answer lies further below than the grids explain: the general search
            z, _, _ = bisect_noise(fine, meets, below, r, tol, zmax, target, d)
            return z
        lo, lo_eps = below, eps_or_inf(r)
    z, _, _ = shrink(fine, meets, lo, lo_eps, zc, hi_report, tol, target)
    return z


def predicted(seen, z: float, eps: float, target: float) -> float | None:
    """Where log ε reaches log ``target`` from (``z``, ``eps``) along the slope of the two
    coarse evaluations ``seen`` closest to the target on either side of it (None if there is
    no such finite pair, or the slope is not negative)."""
    met = [(x, e) for x, e in seen if e <= target and 0.0 < e < math.inf]
    missed = [(x, e) for x, e in seen if e > target and e < math.inf]
    if not met or not missed or not (0.0 < eps < math.inf) or target <= 0.0:
        return None
    (x1, e1), (x0, e0) = min(met, key=lambda p: p[0]), max(missed, key=lambda p: p[0])
    span = math.log(x1) - math.log(x0)
    if not span > 0.0:  # (adjacent floats whose logs round equal: no slope to read)
        return None
    slope = (math.log(e1) - math.log(e0)) / span
    if not slope < 0.0:
        return None
    return z * math.exp((math.log(target) - math.log(eps)) / slope)


def bisect_noise(at, meets, start: float, start_report, tol: float, zmax: float, target, delta,
                  factor: float = 2.0):
    """Smallest z (to relative ``tol``) with ``meets(at(z))``, for ε non-increasing
    in z: returns (z, its report, the largest z evaluated that missed or None).
    The z returned was evaluated and met the target; z/(1 + tol) ≤ the miss.  From
    ``start`` the bracket is sought by steps of ``factor`` (down while it meets, else up
    by 2)."""
    hi, hi_report = start, (start_report if start_report is not None else at(start))
    lo = lo_eps = None
    if meets(hi_report):  # step down until the target is missed
        while True:
            z = hi / factor
            if z < 1e-6:
                return hi, hi_report, None
            r = at(z)
            if not meets(r):
                lo, lo_eps = z, eps_or_inf(r)
                break
            hi, hi_report = z, r
    else:  # double until it is met
        while True:
            lo, lo_eps, hi = hi, eps_or_inf(hi_report), hi * 2.0
            if hi > zmax:
                raise ValueError(
                    f"epsilon {target!r} at delta {delta!r} is not met even with noise_multiplier "
                    f"{zmax:g} (max_noise_multiplier); the run may be too long for this budget"
                )
            hi_report = at(hi)
            if meets(hi_report):
                break
    return shrink(at, meets, lo, lo_eps, hi, hi_report, tol, target)


def shrink(at, meets, lo: float, lo_eps: float, hi: float, hi_report, tol: float, target=None):
    """[lo, hi] (lo misses, hi meets) shrunk to a ratio 1 + ``tol``: (hi, its report, lo)."""
    # Shrink [lo, hi] (lo misses, hi meets) to a ratio 1 + tol.  The next point is
    # where log ε, interpolated linearly in log z between the ends, meets the target
    # (kept inside the middle 80% of the bracket), probed just above and just below:
    # when the interpolation is good, both probes straddle the answer and the
    # bracket closes in two evaluations.  Every other round is a plain geometric
    # bisection, so the bracket shrinks whatever ε(z) looks like.  Only evaluated
    # points become ends: the answer met the target where it was evaluated.
    interpolate = True
    while hi / lo > 1.0 + tol:
        x_lo, x_hi = math.log(lo), math.log(hi)
        hi_eps = eps_or_inf(hi_report)
        probes = [math.sqrt(lo * hi)]
        if interpolate and 0.0 < hi_eps < lo_eps < math.inf and target > 0.0:
            w = (math.log(lo_eps) - math.log(target)) / (math.log(lo_eps) - math.log(hi_eps))
            x = x_lo + min(0.9, max(0.1, w)) * (x_hi - x_lo)
            step = 0.5 * math.log1p(tol) * (1.0 - 1e-6)  # the probes' ratio just under 1 + tol, despite rounding
            probes = [math.exp(min(x + step, x_hi)), math.exp(max(x - step, x_lo))]
        interpolate = not interpolate
        for z in probes:
            if not lo < z < hi:
                continue
            r = at(z)
            if meets(r):
                hi, hi_report = z, r
            else:
                lo, lo_eps = z, eps_or_inf(r)
    return hi, hi_report, lo


# ------------------------------------------------------------------ where a proxy reaches a bound
#
# The configuration search prunes a candidate at the noise z* where its utility proxy (increasing
# in z) reaches the best proxy so far: if the target is missed there, the calibrated z lies above
# z*, and so does the candidate's proxy.


def noise_reaching(proxy_at, bound: float, max_noise: float, tol: float) -> float | None:
    """A z at which the increasing ``proxy_at`` has reached ``bound`` (proxy_at(z) ≥ bound: the
    callers prune where the target is missed there, so the calibrated z lies above it and its proxy
    at or above ``bound`` — whatever the tolerance), within ``tol`` (relative) of the first such z,
    given proxy_at(0) < bound; None where it stays below ``bound`` up to the first power of two
    above ``max_noise``, the calibrations' largest noise multiplier (a bound that saturates: no z
    rules the item out)."""
    lo, hi = 0.0, 1.0
    while proxy_at(hi) < bound:
        if hi > max_noise:
            return None
        lo, hi = hi, 2.0 * hi
    while hi - lo > tol * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if proxy_at(mid) < bound else (lo, mid)
    return hi


#: Where :func:`noise_reaching_affine` reads each bound's slope in z² (a power of two: z² exact; far
#: from 0, so the difference of the two readings is not lost to the bound's constant part).
AFFINE_PROBE = 2.0 ** 10


def noise_reaching_affine(terms_at, bound: float, max_noise: float, tol: float) -> float | None:
    """:func:`noise_reaching` for a proxy that is the smallest of bounds each affine in z², plus a
    bias (``terms_at(z)``: :func:`noisysgd.config.proxy_terms`' dict at noise z — its ``proxy``,
    ``bias_term`` and each ``*_bound``): the proxy reaches ``bound`` where every bound has, at the
    largest of the z² each reaches it at, read off the bounds at z = 0 and z = :data:`AFFINE_PROBE`
    and checked there (nudged up where rounding left the proxy under ``bound``); the bisection
    where that fails.  3–4 evaluations of the proxy where the bisection took ~15; at or below the
    bisection's answer, and None exactly where it gives None (the proxy under ``bound`` at the
    first power of two above ``max_noise``)."""
    def proxy_at(z: float) -> float:
        return terms_at(z)["proxy"]

    if proxy_at(2.0 ** (math.floor(math.log2(max_noise)) + 1)) < bound:
        return None
    t0, t1 = terms_at(0.0), terms_at(AFFINE_PROBE)
    w = 0.0
    for key in (k for k in t0 if k.endswith("_bound")):
        need = bound - t0["bias_term"] - t0[key]
        if need > 0.0:
            slope = (t1[key] - t0[key]) / AFFINE_PROBE ** 2
            if not slope > 0.0:
                return noise_reaching(proxy_at, bound, max_noise, tol)
            w = max(w, need / slope)
    z, nudge = math.sqrt(w), 1e-12
    for _ in range(40):
        if proxy_at(z) >= bound:
            return z
        z, nudge = z * (1.0 + nudge) + 1e-300, 2.0 * nudge
    return noise_reaching(proxy_at, bound, max_noise, tol)
