"""Altschuler & Talwar: convergent privacy of Noisy-SGD on a bounded convex domain.

J. M. Altschuler and K. Talwar, *Privacy of Noisy Stochastic Gradient Descent:
More Iterations without More Privacy Loss* (NeurIPS 2022; journal version,
``shared/papers/004``).  Equation numbers below are the journal version's.

Their algorithm, in their noise convention: ω ← Π_K[ω − η(G + Z)], with G the
batch gradient averaged over the fixed denominator b and Z ~ N(0, σ²I).  In
this library's convention σ = z·L/b (:mod:`noisysgd.run`).  When only the
final iterate is released, the Rényi divergence stops growing once T passes
a burn-in T̄ ≈ Dn/(Lη) (Theorem 3.1).  What is implemented, per batching:

``poisson``, ``sample`` — the smaller of the composition branch
    T·S_α(b/n, bσ/2L) and the shift-budget bound of ``full`` below with a use
    of the differing example at *every* step: conditional on the batch
    sequence the run is a deterministic-batch contractive noisy iteration, and
    a mixture over batch sequences is bounded by its worst component (joint
    quasi-convexity, Lemma 2.6).  This converges in T but pays 2ηL/b per step
    instead of the paper's amplified rate.  The paper's own bound (B.2)/(B.3),
    min{ T·S_α(b/n, bσ/2L),
    min_{σ₁²+σ₂²=σ²} min_{T̃∈{1..T−1}} T̃·S_α(b/n, bσ₂/2L) + α D² φ(T̃) / (2η²σ₁²) },
    with φ(T̃) = 1/T̃ (convex, Step 4 of the proof of Theorem 3.1) or
    φ(T̃) = (1−c²)/(c^{−2T̃}−1) (strongly convex, footnote 15 and (B.3)),
    c = max(|1−ηm|, |1−ηM|) (Lemma 5.5).  The split is optimised numerically
    (a grid in logit(σ₂²/σ²), then golden-section refinement of the best
    bracket; every evaluated split is a valid bound, so the minimum over them
    is one); T̃ in closed form (the objective is convex in T̃; floor/ceiling of
    the continuous optimum).  The cost does not depend on T.  Its proof has a
    gap (it conditions on the noise as if batch membership were independent of
    it), so it is the separate, **unsound** analysis ``altschuler-talwar-sampled``
    (:class:`AltschulerTalwarSampled`), kept for comparison and figures.
``full`` — the smaller of (B.1), with D̃ = D + 2ηL/n, and (B.2)/(B.3) with
    b = n (q = 1: the sampled Gaussian is the Gaussian mechanism; the proof
    of Theorem 3.1 goes through with P[i* ∈ B] = 1).
``cyclic``, ``shuffle-once``, ``shuffle`` — Theorem 5.8 in its non-asymptotic form (5.6):
    α/(2η²σ²)·Σ_{t>τ} a_t², minimised over τ and over *all* admissible
    shifts a_t (the paper's a_t is one admissible choice, so the optimum is
    never larger).  The optimum over a_t under the constraints of
    Proposition 3.2 is the greatest convex minorant of the shift budget; we
    take it for the worst case over *where in each epoch* the differing
    example is used (the latest position, which lowers the budget pointwise),
    which covers every fixed order (``cyclic``, any position) and therefore
    every shuffled order too (``shuffle-once``: one random order drawn once;
    ``shuffle``: a fresh one each epoch): a shuffled run is a mixture of fixed-order runs
    and the Rényi divergence is jointly quasi-convex (Lemma 2.6).  τ = 0 gives
    the classical PABI bound (5.4) (shift 0 at the common initialisation).
    The n mod b examples left over by ``⌊n/b⌋`` batches per epoch are never
    used (footnote 3 of Ye & Shokri; the trainer drops them).

Strong convexity (c < 1) is used only where the contraction holds almost
surely with the same c at every step and a bound exploits it: ``full`` (and
``sample`` in the unsound ``altschuler-talwar-sampled``).  Under ``poisson`` an
empty batch makes the step the identity (c = 1); elsewhere the convex bound
is used (valid, since a c-contraction is a contraction).

S_α here is :func:`~noisysgd.rdp.sampled_gaussian_rdp`, D_α(mixture ‖ N), the
larger direction; the paper's Definition 2.10 takes D_α(N ‖ mixture), which
under replace adjacency is *below* the true one-step divergence (see
:class:`AltschulerTalwarSampled`), so the larger one is required, not just
conservative.

Adjacency (Remark B.2): ``replace`` uses the gradient sensitivity 2L.
Under ``add-remove`` (which :class:`~noisysgd.run.Run` admits for ``poisson``
only, n the declared public size) the analysis refuses: a Poisson batch can
hold every row the data have, a number no public quantity bounds, so the
contraction condition η ≤ 2b/(mM) of Observation 3.3 cannot be checked
(docs/privacy.md).  Composition covers those runs.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ..rdp import (
    replace_one_sampled_gaussian_rdp,
    sampled_gaussian_rdp,
    sampled_gaussian_rdp_pairs,
    validate_orders,
)
from ..run import PARTITION_BATCHINGS, Run
from .base import RDPAnalysis

__all__ = [
    "AltschulerTalwar",
    "contraction",
    "split_bound",
    "cyclic_shift_cost",
    "lower_bound_rdp",
    "LOWER_BOUND_ORDER",
]

_CITATION = (
    "Altschuler & Talwar, Privacy of Noisy Stochastic Gradient Descent: More Iterations "
    "without More Privacy Loss (NeurIPS 2022), Theorems 3.1, 5.1, 5.8 and Appendix B "
    "(B.1)-(B.3), Remark B.2"
)

#: Grid in x = logit(σ₂²/σ²) searched before the golden-section refinement.
_SPLIT_GRID = np.linspace(-12.0, 12.0, 49)
_GOLDEN_ITERATIONS = 32
_INVPHI = (math.sqrt(5.0) - 1.0) / 2.0


# --------------------------------------------------------------------------- pure math


def contraction(learning_rate: float, strong_convexity: float, smoothness: float) -> float:
    """c = max(|1 − ηm|, |1 − ηM|), the contraction factor of a gradient step on
    an m-strongly convex, M-smooth function (Lemma 5.5); 1 when m = 0 and
    η ≤ 2/M (Lemma 2.1: a plain contraction).  Values ≥ 1 are returned as 1.

    >>> contraction(0.5, 1.0, 2.0)
    0.5
    >>> contraction(1.0, 0.0, 1.0)
    1.0
    """
    eta, m, M = float(learning_rate), float(strong_convexity), float(smoothness)
    c = max(abs(1.0 - eta * m), abs(1.0 - eta * M))
    return min(c, 1.0)


def _log_contraction(learning_rate: float, strong_convexity: float, smoothness: float) -> float:
    """log c computed without cancellation (log1p for c = 1 − ηm close to 1)."""
    eta, m, M = float(learning_rate), float(strong_convexity), float(smoothness)
    c = contraction(eta, m, M)
    if c >= 1.0 or m == 0.0:
        return 0.0
    if c == 0.0:
        return -math.inf
    if c == abs(1.0 - eta * m) and eta * m < 1.0:
        return math.log1p(-eta * m)
    return math.log(c)


def _pabi_weight(window, log_c: float):
    """φ(T̃): the shift cost Σ a_t² for a distance of 1 spread over T̃ steps.

    Convex (log c = 0): 1/T̃ (a_t = 1/T̃, Step 3b of Theorem 3.1).  c-contractive:
    (1−c²)/(c^{−2T̃}−1), the minimum of Σ a_t² subject to Σ c^{τ−t} a_t = 1
    (footnote 15 of Appendix B)."""
    window = np.asarray(window, dtype=float)
    if log_c == 0.0:
        return 1.0 / window
    if log_c == -math.inf:
        return np.zeros_like(window)
    with np.errstate(over="ignore"):
        return -math.expm1(2.0 * log_c) / np.expm1(-2.0 * log_c * window)


def _best_window(Q, B, log_c: float, t_max: float):
    """min over integers T̃ ∈ [1, t_max] of T̃·Q + B·φ(T̃), elementwise.

    The objective is convex in T̃ (linear plus a convex decreasing φ), so the
    integer minimum is at the floor or ceiling of the continuous minimiser:
    √(B/Q) in the convex case; in the strongly convex case, with κ = −2 log c,
    y = e^{κT̃} solves Q(y−1)² = B(1−c²)κ·y, i.e.
    T̃ = log(1 + β/2 + √(β + β²/4))/κ, β = B(1−c²)κ/Q.  (Appendix B.3 prints
    this with (1−c)² in place of (1−c²); the direct minimisation in the tests
    confirms the form used here.)
    """
    Q = np.asarray(Q, dtype=float)
    B = np.asarray(B, dtype=float)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if log_c == 0.0:
            t = np.sqrt(B / Q)
        elif log_c == -math.inf:
            t = np.ones_like(Q)
        else:
            kappa = -2.0 * log_c
            beta = B * (-math.expm1(2.0 * log_c)) * kappa / Q
            t = np.log1p(beta / 2.0 + np.sqrt(beta + beta * beta / 4.0)) / kappa
    t = np.where(np.isnan(t), t_max, t)
    t = np.clip(t, 1.0, t_max)
    lo = np.clip(np.floor(t), 1.0, t_max)
    hi = np.clip(np.ceil(t), 1.0, t_max)
    v_lo = lo * Q + B * _pabi_weight(lo, log_c)
    v_hi = hi * Q + B * _pabi_weight(hi, log_c)
    take_hi = v_hi < v_lo
    return np.where(take_hi, v_hi, v_lo), np.where(take_hi, hi, lo)


def split_bound(orders, *, q: float, noise_to_sensitivity: float, pabi_scale, log_c: float = 0.0,
                steps: int, window_table=None, grid=None, refine: bool = True):
    """Bounds (B.2)/(B.3) at each order, with the optimal split and window.

    Parameters
    ----------
    orders : array_like
        Rényi orders α > 1.
    q : float
        Sampling rate b/n (1 for full batches).
    noise_to_sensitivity : float
        bσ/(2L) (replace) or bσ/L (add/remove): the noise multiplier of the
        sampled Gaussian S_α(q, ·) before splitting.
    pabi_scale : array_like
        α·D²/(2η²σ²) at each order: the shift-reduction cost of the diameter
        with all the noise (divided by 1 − u when only σ₁² = (1−u)σ² is used).
    log_c : float
        log of the contraction factor (0 for convex losses).
    steps : int
        T.
    window_table : (windows, weights) or None
        For step-size schedules: candidate windows T̃ and the shift cost ψ(T̃)
        of each (:func:`schedule_window_costs`); the diameter term is then
        ``pabi_scale·ψ(T̃)/(1 − u)`` (``pabi_scale`` = α·D²/(2σ²), without η)
        and ``log_c`` is ignored.  ``None``: constant steps, φ(T̃) in closed form.

    Returns
    -------
    (values, u, window) : arrays over orders
        The bound, the share u = σ₂²/σ² of the noise variance used for
        amplification by sampling (1: the composition branch T·S_α(q, bσ/2L)),
        and T̃ = T − τ.
    """
    alpha = validate_orders(orders)
    T = int(steps)
    A = np.broadcast_to(np.asarray(pabi_scale, dtype=float), alpha.shape)
    search = _SplitSearch(alpha, q, noise_to_sensitivity, log_c, T, window_table)
    search.best = T * sampled_gaussian_rdp(alpha, q, noise_to_sensitivity)  # the composition branch, u = 1
    if T < 2:
        return search.result()
    xs = _SPLIT_GRID if grid is None else np.asarray(grid, dtype=float)
    i = search.on_grid(xs, A)
    if not refine or xs.size < 3:
        return search.result()
    # Refine inside the bracket of the best grid point.  The objective is the
    # lower envelope over integer windows T̃ of smooth curves, so it can have a
    # local minimum on each piece: search the envelope, then each of the
    # windows next to the one it found with T̃ held fixed (smooth in the split).
    lo = xs[np.maximum(i - 1, 0)]
    hi = xs[np.minimum(i + 1, xs.size - 1)]
    lo = np.where(i == 0, lo - 8.0, lo)
    hi = np.where(i == xs.size - 1, hi + 8.0, hi)
    search.golden(lo, hi, A)
    around = search.best_w.copy()
    for offset in (-1, 0, 1):
        search.golden(lo, hi, A, search.neighbour_windows(around, offset))
    return search.result()


class _SplitSearch:
    """The minimisation behind :func:`split_bound`, order-wise: the noise split x = logit(u)
    and the window T̃, over a grid then by golden-section search; every point evaluated is
    a valid bound, and the smallest per order is kept (``best``, with its u and T̃)."""

    def __init__(self, alpha, q, noise_to_sensitivity, log_c, T, window_table):
        self.alpha, self.q, self.nts, self.log_c, self.T = alpha, q, noise_to_sensitivity, log_c, T
        self.table = None if window_table is None else (np.asarray(window_table[0], dtype=float),
                                                         np.asarray(window_table[1], dtype=float))
        self.best = None
        self.best_u = np.ones_like(alpha)
        self.best_w = np.full_like(alpha, float(T))

    def result(self):
        return self.best, self.best_u, self.best_w

    def inner(self, Q, B, fixed=None):
        """min over windows of T̃·Q + B·weight(T̃) (or at the ``fixed`` windows)."""
        if self.table is None:
            if fixed is None:
                return _best_window(Q, B, self.log_c, float(self.T - 1))
            return fixed * Q + B * _pabi_weight(fixed, self.log_c), fixed
        table_w, table_c = self.table
        if fixed is not None:
            k = np.searchsorted(table_w, fixed)
            return fixed * Q + B * table_c[k], fixed
        vals = table_w * Q[..., None] + B[..., None] * table_c
        k = np.argmin(vals, axis=-1)
        return np.take_along_axis(vals, k[..., None], -1)[..., 0], table_w[k]

    def evaluate(self, x, A, fixed=None):
        u = special.expit(x)
        Q = sampled_gaussian_rdp_pairs(self.alpha, self.q, self.nts * np.sqrt(u))
        B = A / special.expit(-x)  # A / (1 − u), accurate for u near 1
        return self.inner(Q, B, fixed)

    def keep(self, x, value, window):
        better = value < self.best
        self.best = np.where(better, value, self.best)
        self.best_u = np.where(better, special.expit(x), self.best_u)
        self.best_w = np.where(better, window, self.best_w)

    def on_grid(self, xs, A) -> np.ndarray:
        """Every order at every split of the grid ``xs``; keeps each order's best and returns
        its index in ``xs``."""
        alpha = self.alpha
        flat_x = np.repeat(xs[None, :], alpha.size, axis=0)
        u = special.expit(flat_x)
        Q = sampled_gaussian_rdp_pairs(
            np.repeat(alpha, xs.size), self.q, (self.nts * np.sqrt(u)).ravel()
        ).reshape(alpha.size, xs.size)
        B = A[:, None] / special.expit(-flat_x)
        values, windows = self.inner(Q, B)
        i = np.argmin(values, axis=1)
        rows = np.arange(alpha.size)
        self.keep(xs[i], values[rows, i], windows[rows, i])
        return i

    def neighbour_windows(self, around, offset):
        """The windows ``offset`` (−1, 0, +1) next to ``around``: integers in [1, T − 1], or the
        neighbours in the table of a schedule."""
        if self.table is None:
            return np.clip(around + offset, 1.0, float(self.T - 1))
        table_w = self.table[0]
        k = np.clip(np.searchsorted(table_w, around) + offset, 0, table_w.size - 1)
        return table_w[k]

    def golden(self, lo, hi, A, fixed=None):
        """Golden-section search of each order's objective on [lo, hi]; every evaluated point
        is kept (each is a valid bound)."""
        c = hi - _INVPHI * (hi - lo)
        d = lo + _INVPHI * (hi - lo)
        (fc, wc), (fd, wd) = self.evaluate(c, A, fixed), self.evaluate(d, A, fixed)
        self.keep(c, fc, wc)
        self.keep(d, fd, wd)
        for _ in range(_GOLDEN_ITERATIONS):
            left = fc <= fd  # the minimum is in [lo, d]
            hi = np.where(left, d, hi)
            lo = np.where(left, lo, c)
            new_c = np.where(left, hi - _INVPHI * (hi - lo), d)
            new_d = np.where(left, c, lo + _INVPHI * (hi - lo))
            x_new = np.where(left, new_c, new_d)
            f_new, w_new = self.evaluate(x_new, A, fixed)
            self.keep(x_new, f_new, w_new)
            fc, fd = np.where(left, f_new, fd), np.where(left, fc, f_new)
            c, d = new_c, new_d


#: Windows evaluated exactly (longer windows: an integral bound, convex case only).
_EXACT_WINDOWS = 1 << 20


def schedule_window_costs(run: Run, *, allocation: str = "eta-squared", strongly_convex: bool = False):
    """Candidate windows T̃ and the shift cost ψ(T̃) of each, for a step-size schedule.

    The diameter term of Proposition 3.2 over the last T̃ steps, with noise
    η_t·σ₁ at step t, is (α/2σ₁²)·Σ_t a_t²/η_t² subject to moving the shift D
    to 0.  Convex losses: Σ a_t = D.  With per-step contractions
    c_t = max(|1−η_t m|, |1−η_t M|) (Lemma 5.5 at each step), the shift left
    after the window is P·D − Σ_t w_t a_t with P = Π c_t and w_t the product of
    the contractions after step t (Proposition 5.6 with c_t in place of c).
    By Cauchy–Schwarz the best allocation is a_t ∝ w_t·η_t², giving

        ψ(T̃) = P² / Σ_t w_t² η_t²,   term = α·D²·ψ(T̃)/(2σ₁²).

    For constant steps this is 1/(T̃η²) (eq. (3.6)) resp. (1−c²)/(η²(c^{−2T̃}−1))
    ((B.3)).  ``allocation="eta"`` gives instead the paper's a_t ∝ η_t, eq. (5.7):
    ψ = T̃/(Σ_t η_t)² (convex only), never smaller (Cauchy–Schwarz).  (5.7) as
    printed sums η_t over t = τ+1..T−1, one step fewer than the window of the
    sampling term; we use the same T̃ steps for both, as (3.6) does.

    Windows up to 2²⁰ steps are evaluated exactly (all of them if T ≤ 4097,
    else a geometric grid — any window gives a valid bound).  Longer windows
    (convex polynomial schedules only) use Σ_{i=a}^{b} i^{−2c} ≥ ∫_a^{b+1} x^{−2c}dx
    + (a^{−2c} − (b+1)^{−2c})/2 (trapezoids over a convex function), which only
    makes ψ larger.
    """
    T = run.steps
    longest = T - 1
    J = min(longest, _EXACT_WINDOWS) if not isinstance(run.learning_rate, tuple) else longest
    eta = run.step_sizes(T - J, T)[::-1]  # η of the last J steps, latest first
    log_eta2 = 2.0 * np.log(eta)
    if allocation == "eta":
        if strongly_convex:
            raise ValueError("allocation='eta' is eq. (5.7), stated for convex losses only.")
        cum = np.cumsum(eta)
        windows = np.arange(1, J + 1, dtype=float)
        log_psi = np.log(windows) - 2.0 * np.log(cum)
    elif allocation == "eta-squared":
        if strongly_convex:
            m, M = run.strong_convexity, run.smoothness
            c = np.minimum(np.maximum(np.abs(1.0 - eta * m), np.abs(1.0 - eta * M)), 1.0)
            with np.errstate(divide="ignore"):
                log_c = np.log(c)
        else:
            log_c = np.zeros_like(eta)
        log_w = np.concatenate([[0.0], np.cumsum(log_c)[:-1]])  # contractions after each step
        log_p = np.cumsum(log_c)
        log_den = np.logaddexp.accumulate(2.0 * log_w + log_eta2)
        log_psi = 2.0 * log_p - log_den
        windows = np.arange(1, J + 1, dtype=float)
    else:
        raise ValueError(f"allocation must be 'eta-squared' or 'eta'. Found {allocation!r}.")
    if J > 4096:
        keep = np.unique(np.round(np.geomspace(1, J, 2048)).astype(np.int64)) - 1
        windows, log_psi = windows[keep], log_psi[keep]
    if longest > J and not strongly_convex and allocation == "eta-squared":
        extra = np.unique(np.round(np.geomspace(J + 1, longest, 256)))
        two_c = 2.0 * run.lr_decay
        a, b1 = T - extra + 1.0, T + 1.0  # steps t = T−T̃..T−1 carry (t+1)^(−c)
        if two_c == 1.0:
            integral = np.log(b1) - np.log(a)
        else:
            integral = (b1 ** (1.0 - two_c) - a ** (1.0 - two_c)) / (1.0 - two_c)
        # x^(−2c) is convex, so each ∫_i^{i+1} is at most the trapezoid: the sum is
        # at least the integral plus half the drop over the range.
        integral = integral + 0.5 * (a ** -two_c - b1 ** -two_c)
        windows = np.concatenate([windows, extra])
        log_psi = np.concatenate([log_psi, -2.0 * math.log(run.learning_rate) - np.log(integral)])
    return windows, np.exp(log_psi)


def cyclic_shift_cost(*, diameter_shift: float, step_shift: float, batches_per_epoch: int,
                      steps: int) -> tuple[float, int]:
    """min over τ of the optimal Σ_{t>τ} a_t² in Proposition 3.2 for a run in
    which the differing example is used once per epoch, worst case over its
    position in each epoch.  Returns (cost, window T − τ).

    ``diameter_shift`` is D̃ = D + 2ηL/b (proof of Theorem 5.8), ``step_shift``
    s = 2ηL/b the shift a step on the differing example adds, and
    ``batches_per_epoch`` K = ⌊n/b⌋ (1 for full batches: then this is (B.1)).

    The constraint of Proposition 3.2 is that the partial sums A_t = Σ_{τ<i≤t} a_i
    stay below the budget C_t = D̃ + s·#{uses of the example in (τ, t]} and
    end at A_T = C_T; the minimum of Σ a_t² is attained by the greatest convex
    minorant of the points (t, C_t).  Using the example at the *last* step of
    each epoch makes C_t smallest for every t < T, and assuming a use in each
    partial epoch at the window's ends makes C_T largest; that budget bounds
    every position pattern, including epochs in which a shuffled example is
    among the n mod b dropped ones (s_t need only bound sup‖ϕ_t − ϕ'_t‖, so a
    fictitious use at an epoch's last step is allowed) (a lower barrier shrinks the feasible set, and
    scaling the minimiser for a larger C_T gives a feasible point for a smaller
    one).  Windows starting inside an epoch are dominated by the window
    starting at that epoch's beginning, so τ runs over epoch boundaries; at
    τ = 0 the iterates coincide and D̃ is replaced by 0 (bound (5.4)).

    >>> cost, window = cyclic_shift_cost(diameter_shift=1.0, step_shift=0.1, batches_per_epoch=1, steps=100)
    >>> round(cost, 6), window  # (B.1): min over T̃ of T̃(D̃/T̃ + s)², T̃ = D̃/s
    (0.4, 10)
    """
    Dt, s, K, T = float(diameter_shift), float(step_shift), int(batches_per_epoch), int(steps)
    full, r = divmod(T, K)
    p = 1 if r else 0

    def cost(f: int, y0: float) -> float:
        # Window of f full epochs (plus the final partial one): the budget has a
        # corner just before each jump; the corners of the full epochs are
        # collinear (slope s/K), so the first and last represent them all.
        R = f * K + r
        points = []
        first = 1 if K >= 2 else 2
        for m in sorted({first, f}):
            if 1 <= m <= f:
                points.append((float(m * K - 1), y0 + (m - 1) * s))
        if p:
            points.append((float(R - 1), y0 + f * s))
        points.append((float(R), y0 + (f + p) * s))
        return _minorant_cost([pt for pt in points if pt[0] > 0])

    best_cost, best_window = cost(full, 0.0), T  # τ = 0
    f_max = full - 1 if r == 0 else full  # τ = jK with j ≥ 1 and a non-empty window
    f_min = 1 if r == 0 else 0
    if f_max >= f_min:
        guess = Dt / s if s > 0 else float(f_max)
        cands = {f_min, f_min + 1, f_min + 2, f_max, f_max - 1}
        cands.update(int(g) for g in np.floor(guess) + np.arange(-3, 5))
        cands.update(int(g) for g in np.unique(np.round(np.geomspace(max(f_min, 1), max(f_max, 1), 40))))
        for f in sorted(c for c in cands if f_min <= c <= f_max):
            v = cost(f, Dt)
            if v < best_cost:
                best_cost, best_window = v, f * K + r
    return best_cost, best_window


def _minorant_cost(points: list[tuple[float, float]]) -> float:
    """Σ (Δy)²/Δx along the greatest convex minorant from (0, 0) through the
    lowest of ``points`` (sorted by x > 0, the last one the end point): the
    least Σ a_t² over a path that stays below every point and ends at the last."""
    hull = [(0.0, 0.0)]
    for pt in sorted(set(points)):
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            # drop the middle point unless it lies strictly below the chord
            if (y2 - y1) * (pt[0] - x1) >= (pt[1] - y1) * (x2 - x1):
                hull.pop()
            else:
                break
        hull.append(pt)
    return sum((y2 - y1) ** 2 / (x2 - x1) for (x1, y1), (x2, y2) in zip(hull, hull[1:]))


# --------------------------------------------------------------------------- lower bound

#: The order ᾱ = 100 at which Theorem 4.1 is proved.
LOWER_BOUND_ORDER = 100.0
_C_SIGMA, _C_D, _C_ALPHA = 1e-3, 1e3, 1e-7


def lower_bound_rdp(run: Run) -> tuple[float | None, str | None]:
    """Theorem 4.1: Noisy-SGD is *not* (ᾱ, ε)-RDP at ᾱ = 100 for
    ε ≤ c_α·ᾱ·L²/(n²σ²)·min(T, T̄), T̄ = 0.75·Dn/(Lη), with the paper's constants
    c_σ = 1e-3, c_D = 1e3, c_α = 1e-7 (footnote 13), on a family of L-Lipschitz
    linear losses over [−D/2, D/2], provided D ≥ c_D·η·L and
    σ² ≤ c_σ·D²/(η²T̄) (σ = z·L/b).  Replace adjacency, random batches.

    Capped at (0.1 − log(100)/99)·min(T, T̄)/T̄, the largest ε its proof
    (Appendix A.4, via the RDP-to-DP conversion) actually rules out.  Not for
    strongly convex losses (the construction is linear).

    Returns (value, None) where the assumptions hold, else (None, reason).
    """
    if run.diameter is None:
        return None, "Theorem 4.1 needs a bounded domain (diameter)"
    if run.adjacency != "replace":
        return None, "Theorem 4.1 is stated for replace adjacency"
    if run.batching not in ("poisson", "sample"):
        return None, "Theorem 4.1 is stated for random batches (poisson/sample)"
    if not run.constant_learning_rate:
        return None, "Theorem 4.1 is stated for a constant step size"
    if run.strong_convexity > 0:
        return None, "Theorem 4.1's losses are linear, not strongly convex"
    D, eta, L, n = run.diameter, run.learning_rate, run.lipschitz, run.n
    sigma = run.sigma("altschuler-talwar")
    t_bar = 0.75 * D * n / (L * eta)
    if D < _C_D * eta * L:
        return None, f"Theorem 4.1 needs D >= {_C_D:g}·η·L"
    if sigma * sigma > _C_SIGMA * D * D / (eta * eta * t_bar):
        return None, "Theorem 4.1 needs σ² <= c_σ·D²/(η²·T̄)"
    value = _C_ALPHA * LOWER_BOUND_ORDER * L * L / (n * n * sigma * sigma) * min(run.steps, t_bar)
    # The proof (Appendix A.4) rules out (100, ε)-RDP only for ε below
    # 0.1 − log(100)/99 after T̄ steps (and proportionally less before, by
    # composition); the stated formula grows without limit as σ → 0, so cap it.
    cap = (0.1 - math.log(LOWER_BOUND_ORDER) / (LOWER_BOUND_ORDER - 1)) * min(run.steps, t_bar) / t_bar
    return min(value, cap), None


# --------------------------------------------------------------------------- the analysis


def _with_steps(run: Run, steps: int) -> Run:
    """The same run stopped after ``steps`` steps (an explicit schedule is truncated)."""
    if isinstance(run.learning_rate, tuple):
        if steps > run.steps:
            raise ValueError(f"steps must be at most the schedule's length ({run.steps}). Found {steps}.")
        return run.replace(steps=steps, learning_rate=run.learning_rate[:steps])
    return run.replace(steps=steps)


def _composition_step_rdp(run: Run, alpha, q: float, ns: float) -> np.ndarray:
    """One step of the composition branch T·S_α: every iterate released, so any
    valid per-step RDP of the sampled Gaussian serves.  Poisson batches under
    ``replace`` get the tight replace-one pair (1−q)N(0)+qN(±L) (noise z·L on the
    sum: σ = z = 2·ns; see :func:`~noisysgd.rdp.replace_one_sampled_gaussian_rdp`),
    never above S_α(q, ns); fixed-size batches keep S_α(q, ns) (the 2L pair)."""
    if run.batching == "poisson" and run.adjacency == "replace":
        return replace_one_sampled_gaussian_rdp(alpha, q, 2.0 * ns)
    return sampled_gaussian_rdp(alpha, q, ns)


class AltschulerTalwar(RDPAnalysis):
    """Altschuler & Talwar's hidden-state bound for convex Noisy-SGD on a bounded domain."""

    name = "altschuler-talwar"
    citation = _CITATION
    #: Whether random batches get the paper's (B.2)/(B.3) (see AltschulerTalwarSampled).
    _paper_sampling = False

    def assumptions(self) -> list[str]:
        return [
            "only the final iterate is released; every intermediate iterate stays hidden",
            "every example's loss is convex and M-smooth (m-strongly convex if m > 0 is declared); "
            "with L2 regularization m and M are those of the regularized loss (§5.4)",
            "every per-example gradient of the unregularized loss has norm at most L "
            "(Lipschitz constant or clipping norm of a GLM, where clipping keeps the loss convex)",
            "iterates are projected onto a convex set of diameter D after every step, and the "
            "initial point lies in that set and does not depend on the data",
            "constant step size η <= 2/M (poisson: η <= 2b/(nM), so that a step on any realised "
            "batch is a contraction, Observation 3.3)",
            "each step adds N(0, (z·L/b)²I) to the gradient averaged over the fixed denominator b",
            "batches formed exactly as declared; shuffle/shuffle-once/cyclic drop the n mod b "
            "leftover examples",
        ]

    def why_not(self, run: Run) -> str | None:
        if not run.convex:
            return (
                "needs convex losses (declare convex=True / --convex): without convexity the "
                "privacy loss of the hidden state need not converge"
            )
        if run.diameter is None:
            return "needs the diameter D of the constraint set the iterates are projected onto (--diameter)"
        if run.smoothness is None:
            return "needs the smoothness M of the losses (--smoothness) to check that each step contracts"
        eta, M = run.max_learning_rate, run.smoothness
        if eta > 2.0 / M:
            return f"needs learning rate <= 2/M = {2.0 / M:.6g} (Lemma 2.1); found {eta:g}"
        if not run.constant_learning_rate and run.batching in PARTITION_BATCHINGS:
            return (
                "step-size schedules are analysed for random batches only (§5.3: poisson, sample, "
                f"full); not for {run.batching} batching"
            )
        if (not run.constant_learning_rate and run.batching in ("poisson", "sample")
                and not self._paper_sampling):
            return (
                "step-size schedules with random batches are covered only by (5.7), whose proof "
                "shares the gap of (B.2) (see altschuler-talwar-sampled); use full batches or a "
                "constant step size"
            )
        if run.batching == "poisson" and run.adjacency == "add-remove":
            return (
                "under add-remove, n is the declared public size and the data may hold any number m of "
                "rows; a poisson batch can hold all m while the step divides by b, so the step is a "
                "contraction for every batch only if learning rate <= 2b/(mM) (Observation 3.3), which "
                "no public quantity bounds. Use adjacency='replace'"
            )
        if run.batching == "poisson":
            limit = 2.0 * run.batch_size / (run.n * M)
            if eta > limit:
                return (
                    "under poisson batching a batch can hold up to n examples while the step divides "
                    f"by b, so the step is a contraction for every batch only if learning rate <= "
                    f"2b/(nM) = {limit:.6g} (Observation 3.3); found {eta:g}. Use batching='sample' "
                    "(fixed-size batches) or a smaller learning rate"
                )
        # add/remove with any batching but poisson never gets here: Run refuses it
        # (run.ADD_REMOVE_BATCHINGS).
        return None

    # ------------------------------------------------------------ parameters

    def _regime(self, run: Run) -> dict:
        """Which bound applies and its inputs, in the paper's notation."""
        sigma = run.sigma("altschuler-talwar")  # z·L/b
        eta, L, b, n, D = run.max_learning_rate, run.lipschitz, run.batch_size, run.n, run.diameter
        strongly = run.strong_convexity > 0 and run.batching in ("sample", "full")
        log_c = _log_contraction(eta, run.strong_convexity, run.smoothness) if strongly else 0.0
        # Sensitivity of the batch-gradient *sum* relative to L (Remark B.2).
        # (add/remove for shuffle/cyclic/full is refused by Run).
        factor = run.sensitivity / L
        out = dict(sigma=sigma, log_c=log_c, factor=factor, strongly=strongly)
        random = run.batching in ("poisson", "sample")
        split = run.batching == "full" or (random and self._paper_sampling)
        if random:  # the composition branch T·S_α(b/n, bσ/2L) is always valid
            out.update(composition=(b / n, run.noise_multiplier / factor))
        if split:
            out.update(q=1.0 if run.batching == "full" else b / n,
                       noise_to_sensitivity=run.noise_multiplier / factor)
        if not run.constant_learning_rate:  # §5.3: only the split bound, with a window table
            out["schedule"] = True
            return out
        if not split or run.batching == "full":
            # cyclic/shuffle: Theorem 5.8; full: (B.1); random batches: the same
            # shift budget with a use at every step (worst-case batch sequence).
            s_ = factor * eta * L / b
            K = 1 if (random or run.batching == "full") else run.steps_per_epoch
            out.update(step_shift=s_, diameter_shift=D + s_, batches_per_epoch=K)
        return out

    def rdp_with_details(self, run: Run, orders):
        reason = self.why_not(run)
        if reason is not None:
            raise ValueError(f"run does not satisfy the assumptions of {self.name}: {reason}")
        alpha = validate_orders(orders)
        g = self._regime(run)
        sigma, eta = g["sigma"], run.learning_rate
        per_order: dict[str, np.ndarray] = {}
        curve = np.full(alpha.shape, np.inf)
        if "composition" in g and "q" not in g:
            q, ns = g["composition"]
            curve = run.steps * _composition_step_rdp(run, alpha, q, ns)
            per_order.update(bound=np.full(alpha.shape, "composition (T·S_α)"),
                             window_steps=np.full(alpha.shape, float(run.steps)))
        if "q" in g:
            scale, table = self._split_inputs(run, g, alpha)
            values, u, window = split_bound(
                alpha, q=g["q"], noise_to_sensitivity=g["noise_to_sensitivity"], pabi_scale=scale,
                log_c=g["log_c"], steps=run.steps, window_table=table,
            )
            curve = values
            label = "split (B.2)" if g["log_c"] == 0 else "split (B.3)"
            if table is not None:
                label = "split, schedule (§5.3, a_t ∝ η_t²)"
            per_order.update(
                bound=np.where(u >= 1.0, "composition (T·S_α)", label),
                sigma1=sigma * np.sqrt(np.maximum(1.0 - u, 0.0)),
                sigma2=sigma * np.sqrt(u),
                window_steps=window,
            )
        if "step_shift" in g:
            cost, window = cyclic_shift_cost(
                diameter_shift=g["diameter_shift"], step_shift=g["step_shift"],
                batches_per_epoch=g["batches_per_epoch"], steps=run.steps,
            )
            pabi = alpha * cost / (2.0 * eta * eta * sigma * sigma)
            label = "(B.1)" if run.batching == "full" else (
                "Theorem 5.8 (5.6)" if run.batching in PARTITION_BATCHINGS
                else "(B.1)-form PABI, worst-case batches (quasi-convexity)")
            if per_order:
                take = pabi < curve
                per_order["bound"] = np.where(take, label, per_order["bound"])
                for key, value in (("sigma1", sigma), ("sigma2", 0.0)):
                    if key in per_order:
                        per_order[key] = np.where(take, value, per_order[key])
                per_order["window_steps"] = np.where(take, float(window), per_order["window_steps"])
                curve = np.minimum(curve, pabi)
            else:
                curve = pabi
                per_order.update(
                    bound=np.full(alpha.shape, label),
                    window_steps=np.full(alpha.shape, float(window)),
                )
        return curve, per_order

    @staticmethod
    def _split_inputs(run: Run, g: dict, alpha: np.ndarray):
        """The diameter-term scale and, for schedules, the window table."""
        sigma, D = g["sigma"], run.diameter
        if g.get("schedule"):
            table = schedule_window_costs(run, strongly_convex=g["strongly"])
            return alpha * D * D / (2.0 * sigma * sigma), table
        eta = run.learning_rate
        return alpha * D * D / (2.0 * eta * eta * sigma * sigma), None

    def rdp(self, run: Run, orders) -> np.ndarray:
        return self.rdp_with_details(run, orders)[0]

    def rdp_over_steps(self, run: Run, steps, orders) -> np.ndarray:
        """RDP curves for the same run stopped after each of ``steps``: an array
        of shape (len(steps), len(orders)), for ε-versus-T plots and planning.

        The expensive part (the sampled-Gaussian divergences over the split
        grid) is computed once.  Each row is the minimum of valid bounds: the
        composition branch, the best split on the grid at that T, the refined
        split found for the largest T wherever its window T̃ fits (T − 1 ≥ T̃),
        and the shift-budget bound ((5.6), (B.1) or its worst-case-batch form) at
        that T.  Both this and :meth:`rdp` return valid bounds from numerical
        searches over the split; either can be slightly tighter than the other.
        """
        reason = self.why_not(run)
        if reason is not None:
            raise ValueError(f"run does not satisfy the assumptions of {self.name}: {reason}")
        alpha = validate_orders(orders)
        ts = np.asarray(steps)
        if ts.ndim != 1 or ts.size == 0 or not np.issubdtype(ts.dtype, np.integer) or (ts < 1).any():
            raise ValueError(f"steps must be a non-empty sequence of integers >= 1. Found {steps!r}.")
        g = self._regime(run)
        sigma, eta, D = g["sigma"], run.max_learning_rate, run.diameter
        out = np.full((ts.size, alpha.size), np.inf)
        if g.get("schedule"):  # the schedule changes with T: one evaluation per T
            for row, T in enumerate(ts.tolist()):
                out[row] = self.rdp(_with_steps(run, T), alpha)
            return out
        if "composition" in g and "q" not in g:
            q, ns = g["composition"]
            out[:] = ts[:, None] * _composition_step_rdp(run, alpha, q, ns)[None, :]
        if "q" in g:
            q, ns, log_c = g["q"], g["noise_to_sensitivity"], g["log_c"]
            scale = alpha * D * D / (2.0 * eta * eta * sigma * sigma)
            per_step = sampled_gaussian_rdp(alpha, q, ns)
            xs = np.linspace(-12.0, 12.0, 97)
            flat_x = np.repeat(xs[None, :], alpha.size, axis=0)
            Q = sampled_gaussian_rdp_pairs(
                np.repeat(alpha, xs.size), q, (ns * np.sqrt(special.expit(flat_x))).ravel()
            ).reshape(alpha.size, xs.size)
            B = scale[:, None] / special.expit(-flat_x)
            top, _, top_window = split_bound(
                alpha, q=q, noise_to_sensitivity=ns, pabi_scale=scale, log_c=log_c, steps=int(ts.max())
            )
            out[:] = ts[:, None] * per_step[None, :]
            multi = np.flatnonzero(ts >= 2)
            for chunk in np.array_split(multi, max(1, multi.size // 32)):
                if chunk.size == 0:
                    continue
                t_max = (ts[chunk] - 1).astype(float)[:, None, None]
                grid_best = _best_window(Q[None], B[None], log_c, t_max)[0].min(axis=2)
                fits = top_window[None, :] <= t_max[:, :, 0]
                value = np.minimum(out[chunk], grid_best)
                out[chunk] = np.where(fits, np.minimum(value, top[None, :]), value)
        if "step_shift" in g:
            factor = alpha / (2.0 * eta * eta * sigma * sigma)
            for row, T in enumerate(ts.tolist()):
                cost, _ = cyclic_shift_cost(
                    diameter_shift=g["diameter_shift"], step_shift=g["step_shift"],
                    batches_per_epoch=g["batches_per_epoch"], steps=T,
                )
                out[row] = np.minimum(out[row], factor * cost)
        return out

    def details(self, run: Run) -> dict:
        g = self._regime(run)
        c = math.exp(g["log_c"])
        out = {
            "sigma_altschuler_talwar": g["sigma"],
            "burn_in_steps": math.ceil(run.diameter * run.n / (run.lipschitz * run.max_learning_rate)),
            "burn_in_note": "T̄ = ⌈Dn/(Lη)⌉ of Theorem 3.1 (up to constants): past it ε stops growing",
            "contraction": c,
            "strong_convexity_used": g["log_c"] != 0.0,
            "gradient_sensitivity": g["factor"] * run.lipschitz,
        }
        if run.strong_convexity > 0 and (g["log_c"] == 0.0 or "q" not in g):
            out["strong_convexity_note"] = (
                f"m > 0 is not used by this bound under {run.batching} batching; the convex bound "
                "is reported (valid, since a c-contraction is a contraction)"
            )
        if run.batching in ("poisson", "sample") and not self._paper_sampling:
            out["random_batches_note"] = (
                "the paper's (B.2)/(B.3) for random batches rest on a conditioning step that does "
                "not hold as written (see altschuler-talwar-sampled); this analysis reports the "
                "smaller of composition and the shift-budget bound for the worst batch sequence"
            )
        if run.batching in PARTITION_BATCHINGS:
            out["examples_dropped_per_epoch"] = run.n % run.batch_size
        lb, _ = lower_bound_rdp(run)
        if lb is not None:
            out["lower_bound_rdp_order_100"] = lb
        return out


class AltschulerTalwarSampled(AltschulerTalwar):
    """Altschuler & Talwar's (B.2)/(B.3) (and (5.7) for schedules) for random batches,
    as published — computed for comparison and figures, **not sound**.

    Why it is flagged.  The proof of Theorem 3.1 (Steps 2–3) splits the noise,
    conditions on the sampling part Z, and treats the two conditional processes
    as contractive noisy iterations with the *same* random update maps.  But
    on the second dataset Z'_t = N_t + m_t·1[i* ∈ B_t], so conditioning on
    Z'_t = z changes the law of whether i* is in the batch, while on the first
    dataset it does not: the conditional update maps differ in law, and the
    second term of (3.3) is not 0 at τ = 0 as the proof uses.  Concretely, at
    T = 1, b = 1, n = 100, z = 1 and a gradient flipped from −L to +L, the
    true D₃₂ between the two outputs is 11.26 (mpmath quadrature), while the
    published (B.2) gives S₃₂(0.01, 1/2) = 0.0053 in the paper's direction of
    Definition 2.10 (this library's larger direction gives 59.2, so its
    composition branch stays valid; the split branch is not repaired by that).
    Numerical checks on small models found no violation of the split branch,
    but no proof is known to us; until one is, it never counts as a guarantee.
    """

    name = "altschuler-talwar-sampled"
    sound = False
    _paper_sampling = True
    unsound_reason = (
        "the proof of (B.2)/(B.3) conditions on the noise as if batch membership were "
        "independent of it; it is not on the second dataset (at T = 1 the published bound is "
        "below the true divergence)"
    )

    def why_not(self, run: Run) -> str | None:
        if run.batching not in ("poisson", "sample"):
            return f"covers random batches (poisson, sample) only; use altschuler-talwar for {run.batching}"
        return super().why_not(run)

    def details(self, run: Run) -> dict:
        out = super().details(run)
        out["not_sound"] = self.unsound_reason
        return out
