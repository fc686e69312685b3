"""The replace-one pair's quadrature: the numerics of
:func:`noisysgd.rdp.replace_one_sampled_gaussian_rdp` (whose docstring derives every bound used
here), the context that widens its cells for a search's screen (:func:`screen_quadrature`), and
the shifted log-sum-exp it and the RDP series use (:func:`log_sum_exp`).

Kept apart from :mod:`noisysgd.rdp`, which calls :func:`replace_one_orders` and bounds the orders
between the integrated ones by chords."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math

import numpy as np
from scipy import special

__all__ = ["SCREEN_COARSER", "current_coarser", "log_sum_exp", "replace_one_orders", "screen_quadrature"]

_EPS = float(np.finfo(float).eps)


#: How many times wider than the certificate's the quadrature cells of
#: :func:`noisysgd.rdp.replace_one_sampled_gaussian_rdp` are in the current context (:func:`screen_quadrature`).
_COARSER = contextvars.ContextVar("replace_one_coarser", default=1)
#: ... and how much wider for a search's screen.
SCREEN_COARSER = 4


@contextlib.contextmanager
def screen_quadrature(coarser: int = SCREEN_COARSER):
    """Within this context, :func:`noisysgd.rdp.replace_one_sampled_gaussian_rdp` integrates on cells
    ``coarser`` times wider (and ``coarser`` times fewer).  Every cell's bound is an upper
    bound at any width (that function's docstring), so the result is still a sound upper bound
    on D_α, only looser: by about (Δμ)²α/8 where the tilted bound is used and Δ² elsewhere
    (at ``coarser`` = 4: 0.2 % in the median and up to 0.9 % at σ = 0.6, q = 10⁻³ over 240 (q, σ, α),
    measured against mpmath), for half the work.  For a search that ranks
    candidates at a tolerance far wider than that (the configuration search's screen, 10 %);
    no certificate is computed inside it."""
    if coarser not in (1, 2, 4, 8):
        raise ValueError(f"coarser must be 1, 2, 4 or 8. Found {coarser!r}.")
    token = _COARSER.set(coarser)
    try:
        yield
    finally:
        _COARSER.reset(token)


#: Largest number of grid cells on the x > 0 side for one order.
_REPLACE_CELLS = 4096
#: Widest grid cell (in units of the noise standard deviation).
_REPLACE_WIDTH = 0.01
#: How many cell values (orders × cells) one batch of :func:`_replace_one_log_am1` holds.
_REPLACE_BATCH = 32768


@functools.lru_cache(maxsize=512)
def replace_one_orders(alpha: tuple, q: float, sigma: float, coarser: int = 1) -> tuple:
    """Upper bounds on D_α of the replace-one pair at each order of ``alpha`` (noise σ, sampling
    rate q; cells ``coarser`` times wider), by the quadrature of
    :func:`noisysgd.rdp.replace_one_sampled_gaussian_rdp` (whose docstring derives it), with its
    floating-point margin; cached per (orders, q, σ, coarser)."""
    mu = 1.0 / sigma
    out = []
    # a few orders at a time: rows of cells × orders up to ~_REPLACE_BATCH values (larger blocks
    # leave the cache and cost more than numpy's per-call overhead they save)
    step = max(1, _REPLACE_BATCH * coarser // (_REPLACE_CELLS + 1024))
    # the cells of the x ≥ 0 grids that some order uses, computed once for all the batches
    prefix: dict = {}
    for g in (_right_grid(a, q, mu, coarser) for a in alpha):
        prefix[g[0], g[2]] = max(prefix.get((g[0], g[2]), 0), g[1])
        prefix[_REPLACE_COARSE] = max(prefix.get(_REPLACE_COARSE, 0), g[4])
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        logs = np.concatenate([_replace_one_log_am1(alpha[i:i + step], q, mu, coarser, prefix)
                               for i in range(0, len(alpha), step)])
    for a, log_am1 in zip(alpha, logs.tolist()):
        if not np.isfinite(log_am1):
            out.append(math.inf if log_am1 > 0 else 0.0)
            continue
        log_am1 += 1e-9  # floating-point margin (see the docstring)
        out.append(float(np.logaddexp(0.0, log_am1)) / (a - 1) * (1 + 4 * _EPS))
    return tuple(out)


def _log_ndtr_diff(lo, hi):
    """log(Φ(hi) − Φ(lo)) for lo < hi elementwise, from the side where Φ is small."""
    lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=float), np.asarray(hi, dtype=float))
    right = lo >= 0  # 1 − Φ is small: Φ(−lo) − Φ(−hi)
    big = special.log_ndtr(np.where(right, -lo, hi))
    small = special.log_ndtr(np.where(right, -hi, lo))
    out = big + np.log1p(-np.exp(small - big))
    mid = ~right & (hi > 0)  # straddles 0: no cancellation
    if mid.any():
        out[mid] = np.log(special.ndtr(hi[mid]) - special.ndtr(lo[mid]))
    return out


#: Terms of the series of u for small |αr| (:func:`_log_u`).
_SERIES_TERMS = range(2, 16)


def _log_u(r, a):
    """log u(e^r) = log(e^{αr} − α(e^r − 1) − 1), stable for every r; ``a`` (α) a number, or a
    column of orders (one row of cells ``r`` per order)."""
    a = np.asarray(a, dtype=float)
    r = np.asarray(r, dtype=float)
    ar = a * r
    shape = ar.shape
    rb, ab = np.broadcast_to(r, shape), np.broadcast_to(a, shape)
    out = np.empty(shape)
    big = ar > 1.0
    small = np.abs(ar) < 0.1
    rest = ~(big | small)
    if big.any():
        a_big, ar_big = ab[big], ar[big]
        out[big] = ar_big + np.log1p(-a_big * np.exp((1 - a_big) * rb[big]) + (a_big - 1) * np.exp(-ar_big))
    if rest.any():
        out[rest] = np.log(np.expm1(ar[rest]) - ab[rest] * np.expm1(rb[rest]))
    count = int(np.count_nonzero(small))
    if count:
        # Σ_{k≥2} (α^k − α) r^k / k! by Horner's rule (|αr| < 0.1: 14 terms leave a remainder
        # below 1e-16 of the first), the coefficients per order (:func:`_series_coefficients`)
        orders = np.atleast_1d(a).reshape(-1)
        coef = _series_coefficients(tuple(orders.tolist()))      # (terms, orders), highest power first
        if a.ndim == 2 and a.shape[0] > 1 and 2 * count >= small.size:
            # most of the block: the whole of it, one column of coefficients per order (no gathers)
            ser = np.broadcast_to(coef[0][:, None], shape).copy()
            for c in coef[1:]:
                ser *= rb
                ser += c[:, None]
            ser *= rb
            ser *= rb
            out[small] = np.log(ser[small])
        else:
            rs = rb[small]
            if orders.size > 1 and small.ndim == 2:
                cs = coef[:, np.nonzero(small)[0]]
            else:
                cs = np.broadcast_to(coef[:, :1], (coef.shape[0], count))
            ser = cs[0].copy()
            for c in cs[1:]:
                ser *= rs
                ser += c
            out[small] = np.log(ser * rs * rs)
    return out


@functools.lru_cache(maxsize=256)
def _series_coefficients(orders: tuple) -> np.ndarray:
    """(α^k − α)/k! for k in :data:`_SERIES_TERMS`, highest k first (one row per k, one column per
    order of ``orders``): α^k − α = α·expm1((k − 1) log α), exact where α is near 1."""
    coef = np.array([[x * math.expm1((k - 1) * math.log(x)) / math.factorial(k) for x in orders]
                     for k in reversed(_SERIES_TERMS)])
    coef.setflags(write=False)
    return coef


@functools.lru_cache(maxsize=64)
def _replace_one_pieces(q: float, mu: float, blocks: tuple):
    """The order-independent quantities on the cells of ``blocks``, one after the other: each block
    (start, width, n) the n cells of start + width·[0, …, n]; and each cell's 2·log(width)."""
    lq, l1q = math.log(q), math.log1p(-q)
    c = 0.5 * mu * mu
    lo = np.concatenate([start + width * np.arange(n, dtype=float) for start, width, n in blocks])
    hi = np.concatenate([start + width * np.arange(1, n + 1, dtype=float) for start, width, n in blocks])
    two_log_width = np.concatenate([np.full(n, 2 * math.log(width)) for _, width, n in blocks])
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        la_lo, la_hi = np.logaddexp(l1q, lq + mu * lo - c), np.logaddexp(l1q, lq + mu * hi - c)
        lb_lo, lb_hi = np.logaddexp(l1q, lq - mu * lo - c), np.logaddexp(l1q, lq - mu * hi - c)
        r_lo, r_hi = la_lo - lb_lo, la_hi - lb_hi
        # masses of P and Q on the cells
        l0 = _log_ndtr_diff(lo, hi)
        lpp = _log_ndtr_diff(lo - mu, hi - mu)
        lqq = _log_ndtr_diff(lo + mu, hi + mu)
        lp = np.logaddexp(l1q + l0, lq + lpp)
        lqm = np.logaddexp(l1q + l0, lq + lqq)
        # P − Q on cells with x ≥ 0 (where the N(+μ) mass is the larger)
        lpq = lq + lpp + np.log1p(-np.exp(lqq - lpp))
        # the maximum of the density Q on the cell: (1−q)φ(dist to 0) + qφ(dist to −μ)
        d0 = np.maximum(0.0, np.maximum(lo, -hi))
        d1 = np.maximum(0.0, np.maximum(lo + mu, -(hi + mu)))
        lqmax = np.logaddexp(l1q - 0.5 * d0 * d0, lq - 0.5 * d1 * d1) - 0.5 * math.log(2 * math.pi)
        ls_a_hi = lq + mu * hi - c - la_hi
        ls_b_lo = lq - mu * lo - c - lb_lo
        log_rp = math.log(mu) + np.logaddexp(ls_a_hi, ls_b_lo)  # max r' on the cell
    out = (lo, hi, la_lo, lb_lo, r_lo, r_hi, lp, lqm, lqmax, ls_a_hi, ls_b_lo, log_rp, lpq, two_log_width)
    for arr in out:
        arr.setflags(write=False)
    return out


#: Cells of this width (in units of σ) carry the x ≥ 0 side beyond its fine cells, as on the left
#: beyond −8: from X_F = α·μ + _REPLACE_FINE_PAST on, where the integrand's mass is below e^{−50}
#: of its peak (P^αQ^{1−α} ∝ φ(x − αμ) there), a looser bound costs nothing.
_REPLACE_COARSE = 0.25
_REPLACE_FINE_PAST = 10.0


def _right_grid(a: float, q: float, mu: float, coarser: int) -> tuple[float, int, int, int, int, float]:
    """The x ≥ 0 grid of order ``a`` (:func:`_replace_one_log_am1`): (fine cell width, its fine
    cells, the shared prefix grid's cells, the first and end index of its coarse cells on the grid
    of width :data:`_REPLACE_COARSE` (equal: none), X_R)."""
    width_max, cells = _REPLACE_WIDTH * coarser, _REPLACE_CELLS // coarser
    lq, l1q = math.log(q), math.log1p(-q)
    c = 0.5 * mu * mu
    x_kappa = (l1q - lq + math.log(1e5 * a) + c) / mu
    x_right = max(5.0, min(a * mu + 30.0, max(x_kappa, 5.0)))
    # Cell widths 0.01 / 2^k on the right; the cells of an order are a prefix of the
    # _REPLACE_CELLS cells of that width, computed once (with their masses) for every order.
    d_target = min(width_max, 0.03 * coarser / (mu * math.sqrt(a)))
    d = width_max / 2.0 ** math.ceil(math.log2(width_max / d_target))
    n_right = math.ceil(x_right / d)
    if n_right > cells:
        n_right, d = cells, x_right / cells
        return d, n_right, n_right, 0, 0, n_right * d
    n_fine = math.ceil((a * mu + _REPLACE_FINE_PAST) / d)
    if n_fine >= n_right:
        return d, n_right, cells, 0, 0, n_right * d
    # coarse cells from the last grid point of width 0.25 at or before the fine cells' end (an
    # overlap of less than a cell, counted twice: never a gap) to the first at or after X_R
    first = math.floor(d * n_fine / _REPLACE_COARSE)
    end = math.ceil(x_right / _REPLACE_COARSE)
    return d, n_fine, cells, first, end, end * _REPLACE_COARSE


def _right_cells(pieces, ar: np.ndarray, lar: np.ndarray, inside: np.ndarray, mu: float) -> np.ndarray:
    """The log of each x ≥ 0 cell's bound, one row per order (``ar``, ``lar``: the orders and
    their logs as a column), −∞ outside each order's own cells (``inside``); +∞ where no bound
    holds.  Near end = left end: u is increasing there."""
    lo, hi, la_lo, lb_lo, r_lo, r_hi, lp, lqm, lqmax, ls_a_hi, ls_b_lo, log_rp, lpq, two_log_width = pieces
    log_du = lar + r_hi + _log_expm1_safe((ar - 1) * r_hi) + log_rp
    lin = np.logaddexp(_log_u(r_lo, ar) + lqm, log_du + lqmax + two_log_width - math.log(2))
    # tilted bound of ∫ P^α Q^{1−α}, minus the exact αP − (α−1)Q = P + (α−1)(P − Q);
    # only tried where t^α dominates (elsewhere the linear bound is the better one)
    tilt = np.full(lin.shape, np.inf)
    m = ((ar - 1) * r_hi >= 1.0) & inside
    if m.any():
        i, j = np.nonzero(m)
        am = ar[i, 0]
        dmax = mu * (am * np.exp(ls_a_hi[j]) + (am - 1) * np.exp(ls_b_lo[j]))
        lt = (am * la_lo[j] + (1 - am) * lb_lo[j] - dmax * lo[j] + 0.5 * dmax * dmax
              + _log_ndtr_diff(lo[j] - dmax, hi[j] - dmax))
        lm = np.logaddexp(lp[j], np.log(am - 1) + lpq[j])
        ok = (lm - lt) < math.log(0.9)
        tilt[i, j] = np.where(ok, lt + np.log1p(-np.exp(np.minimum(lm - lt, math.log(0.9)))), np.inf)
    cell = np.minimum(np.where(np.isnan(lin), np.inf, lin), np.where(np.isnan(tilt), np.inf, tilt))
    return np.where(inside, cell, -np.inf)


def _replace_one_log_am1(alphas, q: float, mu: float, coarser: int = 1, prefix: dict | None = None) -> np.ndarray:
    """log of an upper bound on A_α − 1 for the replace-one pair (see the caller), at every order
    of ``alphas`` at once (one row of cells per order: the per-cell arithmetic is the same,
    without numpy's per-call cost once per order); cells ``coarser`` times wider and fewer
    (:func:`screen_quadrature`), each bound as rigorous.  ``prefix``: for each x ≥ 0 grid (cell
    width, cells), and for the coarse cells (key :data:`_REPLACE_COARSE`), how many of its first
    cells to compute its order-independent pieces on (at least what these orders use: the
    caller's batches share them); None: these orders' own."""
    alphas = [float(x) for x in alphas]
    a = np.array(alphas)[:, None]                       # one row per order
    log_a = np.array([math.log(x) for x in alphas])[:, None]
    lq, l1q = math.log(q), math.log1p(-q)
    c = 0.5 * mu * mu
    x_left = 30.0 + mu
    parts = []

    # x ≤ 0: u decreasing; near end = right end.  Cells of width 2^−7 on [−8, 0],
    # 0.25 further left (mass below e^{−32} there: a looser bound costs nothing).
    # Widths are powers of two, so the cells meet exactly at −8 and 0.  (One block of cells.)
    n_far = int(math.ceil((x_left - 8.0) / 0.25))
    x_left = 8.0 + 0.25 * n_far
    left = ((-x_left, 0.25, n_far), (-8.0, 2.0**-7 * coarser, 1024 // coarser))
    lo, hi, _, _, r_lo, r_hi, _, lqm, lqmax, _, _, log_rp, _, two_log_width = _replace_one_pieces(q, mu, left)
    log_du = log_a + r_hi + np.log(-np.expm1((a - 1) * r_lo)) + log_rp
    parts.append(np.logaddexp(_log_u(r_hi, a) + lqm, log_du + lqmax + two_log_width - math.log(2)))
    # left tail: u ≤ u(−X_L), times the Q mass below −X_L
    tail_q = np.logaddexp(l1q + special.log_ndtr(-x_left), lq + special.log_ndtr(-x_left + mu))
    parts.append(_log_u(r_lo[:1], a) + tail_q)

    # x ≥ 0: fine cells (orders sharing a cell width share the prefix grid), then coarse ones, in
    # one block of cells per cell width: each order's own fine prefix, and its own coarse cells
    grids = [_right_grid(x, q, mu, coarser) for x in alphas]
    right = [np.full((len(alphas), 1), -np.inf)]
    bad = np.zeros(len(alphas), dtype=bool)
    n_coarse = math.ceil(_REPLACE_CELLS * _REPLACE_WIDTH / _REPLACE_COARSE) * coarser + 1
    for key in dict.fromkeys((g[0], g[2]) for g in grids):
        rows = [i for i, g in enumerate(grids) if (g[0], g[2]) == key]
        width_r, n_shared = key
        n_rows = np.array([grids[i][1] for i in rows])[:, None]
        n_max = int(n_rows.max())
        # the shared grid's first cells only (the points 0 + width·k whatever their count)
        n_prefix = n_max if prefix is None else max(n_max, prefix.get(key, n_max))
        first, end = (np.array([grids[i][k] for i in rows])[:, None] for k in (3, 4))
        n_end = int(end.max())
        inside = np.arange(n_max)[None, :] < n_rows    # each order's own prefix of the cells
        blocks = ((0.0, width_r, n_prefix),)
        if n_end > 0:  # and its coarse cells, past the fine ones
            n_cp = n_end if prefix is None else max(n_end, prefix.get(_REPLACE_COARSE, n_end))
            blocks += ((0.0, _REPLACE_COARSE, min(n_cp, n_coarse)),)
            index = np.arange(n_end)[None, :]
            inside = np.concatenate([inside, (index >= first) & (index < end)], axis=1)
        pieces = _replace_one_pieces(q, mu, blocks)
        if n_max < n_prefix or (n_end > 0 and n_end < blocks[1][2]):  # this batch's cells of the block
            cols = np.arange(n_max) if n_end == 0 else np.concatenate([np.arange(n_max), n_prefix + np.arange(n_end)])
            pieces = [v[cols] for v in pieces]
        cell = _right_cells(pieces, a[rows], log_a[rows], inside, mu)
        bad[rows] |= np.isposinf(cell).any(axis=1)
        column = np.full((len(alphas), 1), -np.inf)
        column[rows, 0] = log_sum_exp(cell, axis=1)
        right.append(column)
    parts.append(np.concatenate(right, axis=1))
    # right tail beyond X_R
    x_right = np.array([g[5] for g in grids])[:, None]
    lkappa = l1q - (lq + mu * x_right - c)
    tail = ((1 - a) * l1q + a * np.logaddexp(0.0, lkappa) + a * lq - a * c + 0.5 * (a * mu) ** 2
            + special.log_ndtr(a * mu - x_right))
    parts.append(tail)
    allv = np.concatenate(parts, axis=1)
    bad |= np.isnan(allv).any(axis=1) | np.isposinf(allv).any(axis=1)
    return np.where(bad, np.inf, log_sum_exp(allv, axis=1))


def _log_expm1_safe(x):
    """log(e^x − 1) for x ≥ 0 (−inf at 0), without overflow."""
    x = np.asarray(x, dtype=float)
    return np.where(x > 0, x + np.log(-np.expm1(-np.maximum(x, 1e-300))), -np.inf)


def log_sum_exp(x: np.ndarray, axis=None):
    """log Σ e^x over ``axis`` (every entry when None: a float), −inf where every term is −inf:
    scipy's ``logsumexp`` (the same shift by the maximum) without its per-call overhead, 3–10×
    cheaper on the arrays here (the RDP series' (orders × 128) blocks, the replace-one cells,
    :mod:`noisysgd.limits`' atoms)."""
    top = np.max(x, axis=axis, keepdims=True)
    shift = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        out = np.log(np.sum(np.exp(x - shift), axis=axis, keepdims=True)) + shift
    return float(out.reshape(())) if axis is None else np.squeeze(out, axis=axis)



def current_coarser() -> int:
    """How many times wider than the certificate's the quadrature cells are in the current
    context (1 outside :func:`screen_quadrature`)."""
    return _COARSER.get()
