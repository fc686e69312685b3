"""Ye & Shokri, and Chourasia et al.: convergent privacy of strongly convex Noisy-SGD.

J. Ye and R. Shokri, *Differentially Private Learning Needs Hidden State (Or
Much Faster Convergence)* (NeurIPS 2022; ``shared/papers/001``), and R.
Chourasia, J. Ye and R. Shokri, *Differential Privacy Dynamics of Langevin
Diffusion and Noisy Gradient Descent* (NeurIPS 2021).

Their update (Algorithm 1): θ ← θ − η·g(θ; B) + √(2ησ²)·N(0, I), g the
gradient averaged over the batch of b examples.  In this library's
convention σ = z·L·√(η/2)/b (:mod:`noisysgd.run`), and every formula below
depends on the noise only through the one-step Rényi divergence of a use of
the differing example,

    ρ(α) = α·η·S_g²/(4σ²b²) = α/(2ν²),

ν = noise std on the gradient sum / its sensitivity (``run.noise_to_sensitivity``;
S_g = 2L under replace-one, so ν = z/2 and ρ = 2α/z², their Corollary 5.3).
λ is the strong convexity m, β the smoothness M of the (regularised) loss,
and every theorem needs η < 2/(λ + β), which makes one gradient step a
(1 − ηλ)-contraction; c² = (1 − ηλ)² below.  With

    ε₀ʲ(α) = ρ(α)·c^{2(j−1)} / Σ_{s=0}^{j−1} c^{2s},   j = 1, …, l = ⌊n/b⌋

(the privacy of a use followed by j − 1 steps that do not touch it), the
analyses are, per batching:

``cyclic`` — Theorem 3.3 (3): for the differing example in batch j₀ of a
    fixed order, ε ≤ ε₀^h·(1 − c^{2(K−1)(l−h)})/(1 − c^{2(l−h)}) + ε₀^{l−j₀},
    h = ⌊n/(2b)⌋ = ⌊l/2⌋.  The worst position is the last batch (ε₀¹ = ρ);
    :meth:`YeShokri.rdp_per_position` gives every position.  ``cyclic`` means
    *any* data-independent order, so the worst position is what is certified.
``shuffle-once`` — Theorem 4.2 (5), transcribed from the paper:

        ε ≤ ε₀^{⌊n/2b⌋}(α)·(1 − (1−ηλ)^{2(K−1)(n/b−⌊n/2b⌋)})/(1 − (1−ηλ)^{2(n/b−⌊n/2b⌋)})
            + 1/(α−1)·log( Avg_{0≤j₀<n/b} e^{(α−1)·ε₀^{n/b−j₀}(α)} ),

    for "shuffle and partition" exactly as in their Algorithm 1, line 3: *one*
    uniformly random partition B⁰, …, B^{n/b−1}, drawn once (secretly, and
    independently of the data) and reused in every epoch — which is what the
    trainer's ``shuffle-once`` does.  It is Theorem 3.3 averaged over the
    uniform position j₀ of the differing example by the joint convexity of
    e^{(α−1)R_α} (Lemma 4.1): both datasets share the partition's law, and
    conditioned on it the run is the fixed-order one.  With n/b not an
    integer (l = ⌊n/b⌋ batches), the differing example is in each batch with
    probability b/n and dropped (divergence 0, e^0 = 1 ≤ each term) with
    probability (n mod b)/n; averaging over the l batches with weight 1/l, as
    implemented, is therefore an upper bound.  A run that stops r < l steps
    into its last epoch gets the same Lemma 4.1 mixture of the per-position
    bounds of :meth:`YeShokri.rdp_per_position` (for r = l that mixture *is*
    (5)).  The mixture never exceeds the worst position (the ``cyclic`` bound).
``shuffle`` — **not covered by** ``ye-shokri``.  Theorem 4.2 (5) is proved for
    "shuffle and partition" as in their Algorithm 1, line 3: *one* random
    partition drawn once and reused in every epoch (Theorem 3.3 averaged over
    the one uniform position j₀, Lemma 4.1): ``shuffle-once``.  This library's ``shuffle`` draws
    a fresh permutation every epoch, so the differing example's position
    changes between epochs and neither Theorem 3.3 nor 4.2 applies as stated.
    Exact divergences of small linear-Gaussian instances found no violation
    (a review's), but that is not a proof: Theorem 4.2 on reshuffled
    runs is the separate analysis ``ye-shokri-reshuffle``, flagged **not
    sound**, kept for the paper's Figure 2(a) and comparison.  Its formula:
    the first term of Theorem 3.3 plus (1/(α−1))·log Avg_{j₀} exp((α−1)·ε₀^{l−j₀}),
    computed with logsumexp (their footnote 4 shifts by ε₀¹; logsumexp is exact);
    whole epochs only (a run that stops inside an epoch gets Theorem 3.3 at
    the worst position).
``sample`` — Theorem 4.3 (6): ε ≤ log(S)/(α−1) with S₀ = 1 and
    S ← q·e^{(α−1)ρ}·S + (1−q)·S^{c²}, q = b/n, once per step.  Run in log
    space; the map s ↦ f(s) is increasing and convex and f(s) − s is
    non-increasing, so the iterates increase to the smallest fixed point s* if
    there is one.  Once the iteration stalls, s̄ slightly above it is
    *certified* by checking f(s̄) ≤ s̄ (then every later iterate is ≤ s̄), so
    K = 10⁶ epochs cost what K = 100 do.  Without a fixed point (q·e^{(α−1)ρ}
    ≥ 1: the order is useless) or when the iteration is cut at
    ``_MAX_ITERATIONS`` steps, s_T ≤ s_t + (T − t)·(f(s_t) − s_t) bounds the
    rest (the increments never grow).
``full`` — Theorems 3.3/4.2 need l ≥ 2 (h = 0 is undefined), so full
    batches get their Theorem 2.1 with b = n, which is Chourasia et al.'s
    bound (below).  (Their Appendix D.7 proves a tighter full-batch bound; it
    is not in our copy of the paper, so it is not implemented.)
``poisson`` — not covered (Theorem 4.3 is for fixed-size batches).

Theorem 2.1, the *naive* extension of Chourasia et al. (``ye-shokri-naive``):
ε ≤ α·S_g²/(λσ²b²)·(1 − e^{−ληK/2}) = 4ρ/(ηλ)·(1 − e^{−ληK/2}), with K the
number of steps that can use the differing example: one per epoch under
``shuffle``/``shuffle-once``/``cyclic`` (epochs touched), every step under ``sample`` and
``full``.  (Steps that do not use it are the same Markov kernel on both
datasets and cannot increase the divergence, so counting only the uses is
valid; with K = all steps the bound would only be larger.)

``chourasia`` — Chourasia, Ye & Shokri (2021), Theorem 2, full batches:
ε ≤ α·S_g²/(λσ²n²)·(1 − e^{−ληK/2}), K = steps, under *their* conditions:
η < 1/β (stricter than 2/(λ + β); we keep the stricter one) and the start
θ₀ ~ Π_C(N(0, (2σ²/λ)·I)), which the trainer must use.

Why these are sound where Altschuler & Talwar's (B.2) is not : the
only randomness that the proofs average over is the batch selection, which
is independent of the noise and has the *same* law on both datasets; the
mixture is then handled by the joint convexity of exp((α−1)R_α) (Lemma 4.1),
never by conditioning on the noise.  Their Lemma 3.2 needs a log-Sobolev
constant for the iterates; Theorem 3.3's proof derives it from the
contraction, which is what Ryffel et al.'s Lemma 3.4 lacks for the mixture
process (see ``ryffel``).  Our copy of the paper omits the appendices with
the proofs (D.5, E); we rely on the published statements.

Projection.  Their algorithm is unconstrained.  A run that projects onto a
convex set K (``diameter`` set) is covered too: with ω_t = Π_K(y_t), the
pre-projection iterates follow y_{t+1} = f(Π_K(y_t)) + noise, which is their
Algorithm 1 with the step map f∘Π_K — still (1 − ηλ)-Lipschitz (Π_K is
1-Lipschitz) and still within η·S_g/b of the other dataset's map at every
point — the only two properties the theorems use; the released Π_K(y_T) is
post-processing.  The constants need to hold on K only.

Adjacency.  The theorems are for replace-one neighbours.  Under ``sample``,
add/remove reduces to a replacement inside the batch with probability
b/(n+1) ≤ b/n (see :attr:`noisysgd.run.Run.sensitivity`; the recursion is
increasing in q), so it is covered with S_g = 2L.  Under ``shuffle``,
``shuffle-once``, ``cyclic`` and ``full`` adding an example changes the partition (or the
denominator n): refused, as in ``altschuler-talwar``.

Dropped examples: with ⌊n/b⌋ batches per epoch the n mod b left-over
examples are never used (their footnote 3); the trainer drops them.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ..gdp import bisect_decreasing
from ..rdp import validate_orders
from ..run import PARTITION_BATCHINGS, Run
from .base import RDPAnalysis, check_steps

__all__ = [
    "YeShokri",
    "YeShokriReshuffle",
    "YeShokriNaive",
    "Chourasia",
    "epsilon0",
    "fixed_order_rdp",
    "shuffle_rdp",
    "shuffle_once_rdp",
    "sampling_rdp",
    "naive_rdp",
]

_CITATION = (
    "Ye & Shokri, Differentially Private Learning Needs Hidden State (Or Much Faster "
    "Convergence) (NeurIPS 2022), Theorems 3.3, 4.2, 4.3 (and 2.1 for full batches)"
)
_NAIVE_CITATION = (
    "Ye & Shokri (NeurIPS 2022), Theorem 2.1: the naive extension of Chourasia et al. to "
    "mini-batches (for comparison)"
)
_CHOURASIA_CITATION = (
    "Chourasia, Ye & Shokri, Differential Privacy Dynamics of Langevin Diffusion and Noisy "
    "Gradient Descent (NeurIPS 2021), Theorem 2 (= Ye & Shokri Theorem 2.1 with b = n)"
)

#: Steps iterated in Theorem 4.3 before the remaining ones are bounded in closed form.
_MAX_ITERATIONS = 200_000
#: Steps after which an order without a fixed point switches to the linear bound.
_SETTLE_ITERATIONS = 2_000
#: Relative stall at which a fixed point is certified for Theorem 4.3.
_STALL = 1e-13
#: Relative remaining climb (estimated) below which a fixed point just above the
#: iterate is tried (an upper bound within ~1e-9 of the limit; the curve is
#: rounded up by 1e-9 anyway).
_GAP_RTOL = 1e-10
#: An order whose iterates would need more than this many further steps to get
#: within _GAP_RTOL of their fixed point is bounded in closed form instead.
_SLOW_ITERATIONS = 50_000
#: Steps iterated between two rounds of fixed-point and settling checks.
_BLOCK = 32
#: Chunk of positions for the log-average of Theorem 4.2 (memory).
_CHUNK = 4096


# ------------------------------------------------------------------ formulas


def _log_c2(eta: float, lam: float) -> float:
    """log (1 − ηλ)², the per-step contraction of Rényi divergence / α."""
    if not (0.0 < eta * lam < 1.0):
        raise ValueError(f"learning_rate * strong_convexity must be in (0, 1). Found {eta * lam!r}.")
    return 2.0 * math.log1p(-eta * lam)


def epsilon0(j, rho, log_c2):
    """ε₀ʲ(α) of Theorems 3.3/4.2: ρ·c^{2(j−1)}/Σ_{s<j} c^{2s}, computed as
    ρ·c^{2(j−1)}·(1 − c²)/(1 − c^{2j}) with expm1 (accurate for c → 1).

    ``j`` (≥ 1) and ``rho`` broadcast; ``log_c2`` = log c² < 0.
    """
    j = np.asarray(j, dtype=float)
    return np.asarray(rho) * np.exp((j - 1.0) * log_c2) * (np.expm1(log_c2) / np.expm1(j * log_c2))


def _first_term(rho, log_c2, batches: int, epochs):
    """ε₀^h·(1 − c^{2(K−1)(l−h)})/(1 − c^{2(l−h)}), h = ⌊l/2⌋ (Theorems 3.3, 4.2)."""
    h = batches // 2
    g = (batches - h) * log_c2
    k = np.asarray(epochs, dtype=float)
    return epsilon0(h, rho, log_c2) * (np.expm1((k - 1.0) * g) / np.expm1(g))


def fixed_order_rdp(rho, log_c2, *, batches: int, epochs, position: int | None = None):
    """Theorem 3.3 (3): RDP for the differing example in batch ``position``
    (0-based; ``None`` = the last batch, the worst) after ``epochs`` whole
    epochs of ``batches`` = ⌊n/b⌋ ≥ 2 batches.  ``rho`` is ρ(α) per order."""
    if batches < 2:
        raise ValueError(f"batches must be at least 2 (Theorem 3.3 assumes n/b >= 2). Found {batches!r}.")
    j0 = batches - 1 if position is None else int(position)
    if not 0 <= j0 < batches:
        raise ValueError(f"position must be in [0, {batches - 1}]. Found {position!r}.")
    return _first_term(rho, log_c2, batches, epochs) + epsilon0(batches - j0, rho, log_c2)


def shuffle_rdp(alpha, rho, log_c2, *, batches: int, epochs):
    """Theorem 4.2 (5) after ``epochs`` whole epochs under shuffle and partition.

    The log-average (1/(α−1))·log Avg_{j₀} e^{(α−1)ε₀^{l−j₀}} is a logsumexp over
    j = 1..l, accumulated in chunks so that l = 10⁶ batches needs little memory.
    """
    if batches < 2:
        raise ValueError(f"batches must be at least 2 (Theorem 4.2 assumes n/b >= 2). Found {batches!r}.")
    alpha = np.asarray(alpha, dtype=float)
    rho = np.asarray(rho, dtype=float)
    log_avg = _log_mean_exp(alpha, rho, log_c2, [(0.0, batches)], total=batches) / (alpha - 1.0)
    return _first_term(rho, log_c2, batches, np.asarray(epochs)[..., None] if np.ndim(epochs) else epochs) + log_avg


def _log_mean_exp(alpha, rho, log_c2, groups, *, total: int, ones: int = 0):
    """log((1/total)·(ones + Σ_groups Σ_{j=1}^{count} e^{offset + (α−1)·ε₀ʲ(α)})) per
    order, for ``groups`` of (offset per order, count); total = ones + Σ counts.

    Accurate in both regimes: where every exponent is below 700 (no overflow)
    as log1p of the mean of expm1 terms — relative accuracy even when the
    result is tiny (a logsumexp minus log(total) would cancel there) — and
    otherwise as a logsumexp.  Positions are accumulated in chunks (memory).
    """
    a1 = alpha - 1.0
    small = np.zeros(np.shape(alpha))
    lse = np.full(np.shape(alpha), math.log(ones) if ones else -np.inf)
    top = np.full(np.shape(alpha), -np.inf)
    for offset, count in groups:
        offset = np.broadcast_to(np.asarray(offset, dtype=float), np.shape(alpha))
        if count <= 0:
            continue
        top = np.maximum(top, offset + a1 * rho)  # ε₀¹ = ρ is the largest ε₀ʲ
        for start in range(1, count + 1, _CHUNK):
            j = np.arange(start, min(count, start + _CHUNK - 1) + 1, dtype=float)
            x = offset[..., None] + a1[..., None] * epsilon0(j[None, :], rho[..., None], log_c2)
            with np.errstate(over="ignore"):
                small = small + np.expm1(np.minimum(x, 700.0)).sum(axis=-1)
            lse = np.logaddexp(lse, special.logsumexp(x, axis=-1))
    return np.where(top < 700.0, np.log1p(small / total), lse - math.log(total))


def shuffle_once_rdp(alpha, rho, log_c2, *, batches: int, epochs: int, last_epoch_steps: int | None = None):
    """RDP of ``shuffle-once`` (one secret uniformly random partition reused
    every epoch) after ``epochs`` epochs, the last of which runs
    ``last_epoch_steps`` = r of its l = ``batches`` steps (None: all of them).

    The Lemma 4.1 mixture (1/(α−1))·log Avg_{j₀} e^{(α−1)·ε(j₀)} of the
    per-position Theorem 3.3 bounds ε(j₀) of :meth:`YeShokri.rdp_per_position`
    (position j₀ uniform over the l batches).  For r = l this is Theorem 4.2
    (5) (:func:`shuffle_rdp`).  For r < l: positions j₀ < r were used E times
    and end r − j₀ steps after their last use (first term for E epochs plus
    ε₀^{r−j₀}); positions j₀ ≥ r were used E − 1 times (first term for E − 1
    epochs plus ε₀^{l−j₀}, or divergence 0 when E = 1).
    """
    if batches < 2:
        raise ValueError(f"batches must be at least 2 (Theorem 4.2 assumes n/b >= 2). Found {batches!r}.")
    E = int(epochs)
    if E < 1:
        raise ValueError(f"epochs must be at least 1. Found {epochs!r}.")
    r = batches if last_epoch_steps is None else int(last_epoch_steps)
    if not 1 <= r <= batches:
        raise ValueError(f"last_epoch_steps must be in [1, {batches}]. Found {last_epoch_steps!r}.")
    if r == batches:
        return shuffle_rdp(alpha, rho, log_c2, batches=batches, epochs=E)
    alpha = np.asarray(alpha, dtype=float)
    rho = np.asarray(rho, dtype=float)
    a1 = alpha - 1.0
    groups = [(a1 * _first_term(rho, log_c2, batches, E), r)]  # used E times, r − j₀ steps ago
    if E > 1:
        groups.append((a1 * _first_term(rho, log_c2, batches, E - 1), batches - r))
        ones = 0
    else:  # not used yet: l − r terms e^0 = 1
        ones = batches - r
    return _log_mean_exp(alpha, rho, log_c2, groups, total=batches, ones=ones) / a1


def naive_rdp(rho, eta_lambda: float, uses):
    """Theorem 2.1: 4ρ/(ηλ)·(1 − e^{−ληK/2}) = α·S_g²/(λσ²b²)·(1 − e^{−ληK/2}), K = ``uses``."""
    k = np.asarray(uses, dtype=float)
    return 4.0 * np.asarray(rho) / eta_lambda * (-np.expm1(-eta_lambda * k / 2.0))


def _sampling_map(s, r, q, c2):
    """One step of Theorem 4.3 in log space, s = log S:
    log(q·e^{r}·S + (1−q)·S^{c²}) with r = (α−1)ρ; accurate both for tiny s
    (as log1p of expm1 terms) and huge s (as a logaddexp)."""
    rs = r + s
    if rs.max() < 600.0 and s.max() < 600.0:
        # No overflow below e^709, and log1p of a sum of non-negative terms is
        # accurate to a few ulps at any size: the common case, one expression.
        return np.log1p(q * np.expm1(rs) + (1.0 - q) * np.expm1(c2 * s))
    if s.min() >= 30.0 and rs.min() >= 30.0:  # every order far from 0: log space only
        log_1q = math.log1p(-q) if q < 1.0 else -np.inf
        return np.logaddexp(math.log(q) + rs, log_1q + c2 * s)
    small = (s < 30.0) & (rs < 30.0)
    with np.errstate(over="ignore", divide="ignore"):
        a = np.log1p(q * np.expm1(np.where(small, r + s, 0.0))
                     + (1.0 - q) * np.expm1(np.where(small, c2 * s, 0.0)))
        log_q = math.log(q)
        log_1q = math.log1p(-q) if q < 1.0 else -np.inf
        b = np.logaddexp(log_q + r + s, log_1q + c2 * s)
    return np.where(small, a, b)


def sampling_rdp(alpha, rho, log_c2, *, q: float, steps, return_info: bool = False):
    """Theorem 4.3 (6): RDP after each of ``steps`` steps of fixed-size batches
    drawn without replacement with q = b/n.

    ``steps`` is an int (returns an array over orders) or a non-decreasing
    sequence of ints (returns an array (len(steps), len(orders))).  Every
    value returned bounds the recursion's value from above: the exact iterate;
    a certified fixed point s̄ ≥ s* ≥ s_T; or, once the increments
    d_t = f(s_t) − s_t have settled (they never grow, since f(s) − s is convex
    with a finite limit), the linear bound s_t + (T − t)·d_t.  With
    ``return_info`` also returns, per order, the step at which the fixed point
    was certified (``inf`` where it was not).
    """
    alpha = np.asarray(alpha, dtype=float)
    r = (alpha - 1.0) * np.asarray(rho, dtype=float)
    scalar = np.ndim(steps) == 0
    ts = np.atleast_1d(np.asarray(steps))
    if (ts.size == 0 or not np.issubdtype(ts.dtype, np.integer) or (ts < 1).any()
            or (np.diff(ts) < 0).any()):
        raise ValueError(f"steps must be positive integers in non-decreasing order. Found {steps!r}.")
    if not 0.0 < q <= 1.0:
        raise ValueError(f"q must be in (0, 1]. Found {q!r}.")
    key = (alpha.tobytes(), r.tobytes(), float(log_c2), float(q), _MAX_ITERATIONS)
    memo = _RECURSIONS.get(key)
    if memo is not None and all(int(t) in memo.rows or (memo.done and t >= memo.rec.t) for t in ts):
        # a plan asks the same recursion again at other step counts (its plateau search): the
        # values at counts seen before, and past the step where every order was settled (where
        # the value is a function of T alone), are what a fresh run would compute
        out = np.array([memo.rows[int(t)] if int(t) in memo.rows else memo.rec.value(float(t)) for t in ts])
        # a fresh run stops at the last count asked: what it certified by then, not what the memo did later
        fixed_at = np.where(memo.rec.fixed_at <= ts[-1], memo.rec.fixed_at, np.inf)
        return _finish(out, alpha, scalar, return_info, fixed_at)
    rec = _SamplingRecursion(r, q, math.exp(log_c2))
    out = np.empty((ts.size, alpha.size))
    nxt = 0
    while nxt < ts.size:
        todo = np.isnan(rec.fixed) & np.isnan(rec.slope)
        if rec.t >= _MAX_ITERATIONS or not todo.any():
            break
        idx = np.flatnonzero(todo)
        # Iterate with nothing but the map up to the next multiple of _BLOCK
        # (or requested T); the checks run at multiples of _BLOCK only,
        # so what is certified when does not depend on which T were requested.
        block = int(min(_BLOCK - rec.t % _BLOCK, ts[nxt] - rec.t, _MAX_ITERATIONS - rec.t))
        cur, prev, nxt_val = rec.iterate(idx, block)
        if rec.t % _BLOCK == 0:
            rec.check(idx, cur, prev, nxt_val)
        while nxt < ts.size and ts[nxt] == rec.t:
            out[nxt] = rec.value(rec.t)
            nxt += 1
    if nxt < ts.size:  # the iteration was cut: closed-form bounds for the rest
        rec.cap(np.flatnonzero(np.isnan(rec.fixed) & np.isnan(rec.slope)))
        for k in range(nxt, ts.size):
            out[k] = rec.value(float(ts[k]))
    done = not (np.isnan(rec.fixed) & np.isnan(rec.slope)).any()
    if memo is None or memo.rec.t < rec.t:
        memo = _RECURSIONS[key] = _Memo(rec, done, {})
        while len(_RECURSIONS) > 8:
            _RECURSIONS.pop(next(iter(_RECURSIONS)))
    if memo.rec is rec:
        memo.rows.update((int(t), row.copy()) for t, row in zip(ts, out))
    return _finish(out, alpha, scalar, return_info, rec.fixed_at)


class _Memo:
    """A finished recursion, its ``done`` flag (every order settled: fixed point or slope), and
    the rows it computed at the step counts asked for."""

    def __init__(self, rec, done: bool, rows: dict):
        self.rec, self.done, self.rows = rec, done, rows


#: The last few recursions of :func:`sampling_rdp` (a plan asks the same one three times).
_RECURSIONS: dict = {}


def _finish(out, alpha, scalar: bool, return_info: bool, fixed_at):
    # Round up: float rounding (of c² above all) drifts by about 1e-16 per step;
    # 1e-9 relative covers 10⁶ iterated steps with room, and a bound must never
    # come out below the exact recursion.
    curve = out / (alpha - 1.0) * (1.0 + 1e-9)
    curve = curve[0] if scalar else curve
    if return_info:
        return curve, fixed_at.copy()
    return curve


class _SamplingRecursion:
    """The state of Theorem 4.3's recursion s_{t+1} = f(s_t), order-wise: the iterate s_t
    and f(s_t), and per order a certified fixed point (``fixed``, from step ``fixed_at``), a
    settled increment for the linear bound (``slope``, from ``anchor_t``), or both
    (``capped``: the smaller is used)."""

    def __init__(self, r, q: float, c2: float):
        self.r, self.q, self.c2 = r, q, c2
        self.a_lim = math.log(q) + r  # lim_{s→∞} f(s) − s
        size = r.size
        self.s = np.zeros(size)
        self.fixed = np.full(size, np.nan)  # certified fixed point
        self.fixed_at = np.full(size, np.inf)
        self.slope = np.full(size, np.nan)  # settled increment (linear regime)
        self.anchor_t = np.zeros(size)
        self.capped = np.zeros(size, dtype=bool)  # linear bound and fixed point, both valid
        self.t = 0
        self.fs = _sampling_map(self.s, r, q, c2)  # f(s) at the current iterate, one map call per step
        self.slow_check = _SETTLE_ITERATIONS

    def value(self, T):
        s, fixed = self.s, self.fixed
        v = s.copy()
        done = ~np.isnan(fixed)
        v[done] = fixed[done]
        lin = ~np.isnan(self.slope)
        v[lin] = s[lin] + (T - self.anchor_t[lin]) * self.slope[lin]
        v[self.capped] = np.minimum(v[self.capped], fixed[self.capped])
        if done.any():  # a fixed point certified at step T itself: the iterate is exact
            exact = (self.fixed_at == T) & ~self.capped
            v[exact] = s[exact]
        return v

    def cap(self, orders):
        """Stop iterating ``orders``: bound s_T by the linear bound from here and,
        where there is one, a certified fixed point (root-finding)."""
        for i in orders:
            self.slope[i] = self.fs[i] - self.s[i]
            self.anchor_t[i] = self.t
            if self.a_lim[i] < 0.0:
                star = _certified_fixed_point(self.s[i], self.r[i], self.q, self.c2)
                if star is not None:
                    self.fixed[i] = star
                    self.capped[i] = True

    def iterate(self, idx, block: int):
        """``block`` steps of the map for the orders ``idx``; (s_t, s_{t−1}, f(s_t)) of them."""
        cur, nxt_val, r_i = self.s[idx], self.fs[idx], self.r[idx]
        prev = cur
        for _ in range(block):
            prev, cur = cur, nxt_val
            nxt_val = _sampling_map(cur, r_i, self.q, self.c2)
        self.t += block
        self.s[idx], self.fs[idx], self.anchor_t[idx] = cur, nxt_val, self.t
        return cur, prev, nxt_val

    def check(self, idx, new, prev, nxt_val):
        """At a multiple of _BLOCK: certify fixed points, settle slopes, cap slow orders."""
        s, r, t, a_lim = self.s, self.r, self.t, self.a_lim
        step, d = new - prev, nxt_val - new
        # Near a fixed point: certify one just above the iterate.  If f(s̄) ≤ s̄
        # then every later iterate stays below s̄ (f is increasing and s_t ≤ s̄),
        # so s̄ bounds s_T for every T ≥ t.  Candidates: the iterate plus 4× the
        # geometric estimate of the remaining climb d/(1 − d/step), once that is
        # below _GAP_RTOL of the iterate; or, at a stall, the iterate itself.
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = d / step
            gap = np.where((ratio > 0) & (ratio < 1), d / (1.0 - ratio), np.inf)
        stalled = step <= _STALL * np.maximum(new, 1e-300)
        close = stalled | (gap <= _GAP_RTOL * new)
        if close.any():
            j = idx[close]
            cand = np.where(stalled[close], s[j] * (1.0 + 1e-11),
                            np.maximum(s[j] + 4.0 * gap[close], s[j] * (1.0 + 1e-11))) + 1e-300
            ok = _sampling_map(cand, r[j], self.q, self.c2) <= cand * (1.0 - 1e-14)
            self.fixed[j[ok]] = cand[ok]
            self.fixed_at[j[ok]] = t
        # No fixed point (q·e^r >= 1): once the increments have settled, use the
        # linear bound s_T <= s_t + (T − t)·d_t (valid at any t; tight once settled).
        settled = (np.isnan(self.fixed[idx]) & (a_lim[idx] >= 0.0)
                   & ((d - a_lim[idx] <= 1e-10 * np.abs(d)) | (t >= _SETTLE_ITERATIONS)))
        self.slope[idx[settled]] = d[settled]
        # Orders creeping towards a far fixed point (contraction ratio near 1) would
        # take more than _SLOW_ITERATIONS further steps to converge: cap them.
        if t >= self.slow_check:
            self.slow_check = t + 1024
            with np.errstate(divide="ignore", invalid="ignore"):
                need = np.log(_GAP_RTOL * new / gap) / np.log(ratio)
            slow = (np.isnan(self.fixed[idx]) & np.isnan(self.slope[idx]) & (a_lim[idx] < 0.0)
                    & ~(need <= _SLOW_ITERATIONS))
            self.cap(idx[slow])


def _certified_fixed_point(s0: float, r: float, q: float, c2: float):
    """A value s̄ ≥ s* with f(s̄) ≤ s̄ (checked), found by root-finding f(s) = s
    from the current iterate s0 ≤ s*; ``None`` if none is found."""
    def g(s):
        return float(_sampling_map(np.array([s]), np.array([r]), q, c2)[0]) - s

    lo = max(s0, 0.0)
    hi = max(2.0 * lo, 1.0)
    while g(hi) >= 0.0:
        hi *= 2.0
        if hi > 1e300:
            return None
    root = bisect_decreasing(g, lo, hi) if g(lo) > 0 else lo
    cand = root * (1.0 + 1e-11) + 1e-300
    for _ in range(100):
        if g(cand) <= -1e-14 * cand:
            return cand
        cand = cand * (1.0 + 1e-9) + 1e-300
    return None


# ------------------------------------------------------------------ analyses


class _Common(RDPAnalysis):
    """Shared checks of the Ye–Shokri family."""

    batchings: tuple[str, ...] = ()
    #: The strict upper bound on η, as a function of (m, M), and its name.
    eta_limit_name = "2/(m+M)"

    @staticmethod
    def _eta_limit(m: float, M: float) -> float:
        return 2.0 / (m + M)

    def _common_why_not(self, run: Run) -> str | None:
        if run.strong_convexity <= 0:
            return (
                "needs strongly convex losses (strong_convexity m > 0, e.g. L2 regularization "
                f"λ = m); found m = {run.strong_convexity:g}"
            )
        if run.smoothness is None:
            return "needs the smoothness M of the losses (--smoothness)"
        if not run.constant_learning_rate:
            return "needs a constant step size (the theorems are stated for one η)"
        eta, m, M = run.learning_rate, run.strong_convexity, run.smoothness
        limit = self._eta_limit(m, M)
        if not eta < limit:
            return f"needs learning rate < {self.eta_limit_name} = {limit:.6g}; found {eta:g}"
        if run.batching not in self.batchings:
            return f"covers {', '.join(self.batchings)} batching; not {run.batching}"
        # add/remove with shuffle-once/cyclic/full never gets here: Run refuses it
        # (run.ADD_REMOVE_BATCHINGS admits poisson only, which this analysis does not cover).
        return None

    def _rho(self, run: Run, alpha: np.ndarray) -> np.ndarray:
        """ρ(α) = α·ηS_g²/(4σ²b²) = α/(2ν²)."""
        nu = run.noise_to_sensitivity
        return alpha / (2.0 * nu * nu)

    def _check(self, run: Run, orders) -> np.ndarray:
        reason = self.why_not(run)
        if reason is not None:
            raise ValueError(f"run does not satisfy the assumptions of {self.name}: {reason}")
        return validate_orders(orders)

    def rdp(self, run: Run, orders) -> np.ndarray:
        return self.rdp_with_details(run, orders)[0]

    def _base_details(self, run: Run) -> dict:
        eta, m = run.learning_rate, run.strong_convexity
        nu = run.noise_to_sensitivity
        return {
            "sigma_ye_shokri": run.sigma("ye-shokri"),
            "gradient_sensitivity": run.sensitivity,
            "contraction": 1.0 - eta * m,
            "rdp_per_use_over_order": 1.0 / (2.0 * nu * nu),
        }


class YeShokri(_Common):
    """Ye & Shokri's hidden-state bounds for strongly convex, smooth Noisy-SGD."""

    name = "ye-shokri"
    citation = _CITATION
    batchings = ("shuffle-once", "cyclic", "sample", "full")

    def assumptions(self) -> list[str]:
        return [
            "only the final iterate is released; every intermediate iterate stays hidden",
            "every example's loss is m-strongly convex (m > 0) and M-smooth on the domain; with "
            "L2 regularization λ these are the regularized loss's constants (Proposition 5.2)",
            "every per-example gradient of the unregularized loss has norm at most L (Lipschitz "
            "constant, or clipping norm where the clipped gradient is still that of a convex loss "
            "with the stated m and M, as for GLMs, Proposition 5.2), so replacing one example "
            "moves the batch gradient sum by at most 2L",
            "constant step size η < 2/(m + M), so each gradient step is a (1 − ηm)-contraction",
            "each step adds N(0, (z·L/b)²I) to the batch-averaged gradient (Ye & Shokri: "
            "√(2ησ²)·N(0, I) with σ = z·L·√(η/2)/b)",
            "no projection, or projection onto a convex set after each step (covered, see module "
            "notes); the start point does not depend on the data",
            "batches formed exactly as declared: sample = b distinct examples drawn afresh each "
            "step; cyclic = one fixed, data-independent order of ⌊n/b⌋ batches (worst position); "
            "shuffle-once = one secret uniformly random partition into ⌊n/b⌋ batches, drawn once "
            "independently of the data and reused every epoch (Theorem 4.2); for both the n mod b "
            "left-over examples are never used",
        ]

    def why_not(self, run: Run) -> str | None:
        if run.batching == "shuffle" and "shuffle" not in self.batchings:
            return (
                "Theorem 4.2 is proved for one random partition reused in every epoch; shuffle "
                "here draws a fresh permutation each epoch, which no theorem of the paper covers "
                "(ye-shokri-reshuffle computes it anyway, flagged not sound); use shuffle-once "
                "(one secret random partition, Theorem 4.2), cyclic batches, ye-shokri-naive or "
                "altschuler-talwar"
            )
        reason = self._common_why_not(run)
        if reason is not None:
            return reason
        if run.batching in PARTITION_BATCHINGS and run.steps_per_epoch < 2:
            return (
                f"needs at least 2 batches per epoch (n/b >= 2, Theorems 3.3 and 4.2); found "
                f"⌊n/b⌋ = {run.steps_per_epoch}"
            )
        return None

    def _full_epochs(self, run: Run) -> tuple[int, int]:
        """(epochs touched E, steps r in the last epoch, 1 <= r <= l)."""
        l = run.steps_per_epoch
        E = run.epochs_touched
        return E, run.steps - (E - 1) * l

    def rdp_with_details(self, run: Run, orders):
        alpha = self._check(run, orders)
        rho = self._rho(run, alpha)
        eta, m = run.learning_rate, run.strong_convexity
        lc2 = _log_c2(eta, m)
        per_order = None
        if run.batching == "full":
            curve = naive_rdp(rho, eta * m, run.steps)
            label = "Theorem 2.1 with b = n (Chourasia et al.)"
        elif run.batching == "sample":
            curve, fixed_at = sampling_rdp(alpha, rho, lc2, q=run.batch_size / run.n, steps=run.steps,
                                           return_info=True)
            label = "Theorem 4.3"
            # where the recursion sat at its certified fixed point (inf: not reached)
            per_order = {"plateau_steps": np.where(fixed_at <= run.steps, fixed_at, np.inf)}
        else:
            l = run.steps_per_epoch
            E, r = self._full_epochs(run)
            if run.batching == "shuffle-once":
                curve = shuffle_once_rdp(alpha, rho, lc2, batches=l, epochs=E, last_epoch_steps=r)
                label = ("Theorem 4.2" if r == l else
                         "Lemma 4.1 mixture of Theorem 3.3 over the uniform position (partial epoch)")
            elif run.batching == "shuffle" and r == l:
                curve = shuffle_rdp(alpha, rho, lc2, batches=l, epochs=E)
                label = "Theorem 4.2"
            else:
                curve = fixed_order_rdp(rho, lc2, batches=l, epochs=E)
                label = "Theorem 3.3, worst position (last batch)"
        per_order = {**(per_order or {}), "bound": np.full(alpha.shape, label)}
        # closed forms: round up by 1e-12 relative so float rounding never lands below
        return np.asarray(curve, dtype=float) * (1.0 + 1e-12), per_order

    def rdp_per_position(self, run: Run, orders) -> np.ndarray:
        """Theorem 3.3 for each position of the differing example in a fixed order
        (``cyclic``; for ``shuffle-once``, conditioned on the partition): an array (⌊n/b⌋, len(orders)), row j₀ = batch j₀ (0-based)
        of each epoch.

        When the run stops r < l steps into its last epoch, batch j₀ < r was used
        E times and is followed by r − 1 − j₀ steps (the bound of position
        l − r + j₀ of an E-epoch run), batch j₀ ≥ r only E − 1 times (the bound
        of position j₀ of an (E−1)-epoch run; 0 if E = 1).
        """
        alpha = self._check(run, orders)
        if run.batching not in PARTITION_BATCHINGS:
            raise ValueError(f"run.batching must be cyclic or shuffle-once for per-position bounds. "
                             f"Found {run.batching!r}.")
        rho = self._rho(run, alpha)
        lc2 = _log_c2(run.learning_rate, run.strong_convexity)
        l = run.steps_per_epoch
        E, r = self._full_epochs(run)
        out = np.zeros((l, alpha.size))
        for j0 in range(l):
            if j0 < r:
                out[j0] = _first_term(rho, lc2, l, E) + epsilon0(r - j0, rho, lc2)
            elif E > 1:
                out[j0] = _first_term(rho, lc2, l, E - 1) + epsilon0(l - j0, rho, lc2)
        return out

    def rdp_over_steps(self, run: Run, steps, orders) -> np.ndarray:
        """Whole epochs share one pass (:meth:`rdp_over_epochs`); other step
        counts are evaluated one by one."""
        ts = check_steps(steps)
        l = run.steps_per_epoch
        if (ts % l == 0).all():
            return self.rdp_over_epochs(run, ts // l, orders)
        return super().rdp_over_steps(run, ts, orders)

    def rdp_over_epochs(self, run: Run, epochs, orders) -> np.ndarray:
        """RDP curves for the same run stopped after each of ``epochs`` whole
        epochs (``steps`` is ignored): an array (len(epochs), len(orders)).
        Closed forms for cyclic/shuffle-once/shuffle/full; one pass of the recursion for sample."""
        alpha = self._check(run, orders)
        ks = np.asarray(epochs)
        if ks.ndim != 1 or ks.size == 0 or not np.issubdtype(ks.dtype, np.integer) or (ks < 1).any():
            raise ValueError(f"epochs must be a non-empty sequence of integers >= 1. Found {epochs!r}.")
        rho = self._rho(run, alpha)
        eta, m = run.learning_rate, run.strong_convexity
        lc2 = _log_c2(eta, m)
        l = run.steps_per_epoch
        up = 1.0 + 1e-12  # as in rdp_with_details
        if run.batching == "full":
            return naive_rdp(rho[None, :], eta * m, ks[:, None]) * up
        if run.batching == "sample":
            order = np.argsort(ks, kind="stable")
            vals = sampling_rdp(alpha, rho, lc2, q=run.batch_size / run.n, steps=ks[order] * l)
            out = np.empty_like(vals)
            out[order] = vals
            return out
        if run.batching in ("shuffle", "shuffle-once"):
            return shuffle_rdp(alpha, rho, lc2, batches=l, epochs=ks) * up
        return fixed_order_rdp(rho[None, :], lc2, batches=l, epochs=ks[:, None]) * up

    def details(self, run: Run) -> dict:
        out = self._base_details(run)
        if run.batching in PARTITION_BATCHINGS:
            E, r = self._full_epochs(run)
            out["examples_dropped_per_epoch"] = run.n % run.batch_size
            out["epochs"] = E
            if run.batching == "cyclic":
                out["worst_position"] = "last batch of the epoch (j0 = n/b − 1)"
            if run.batching == "shuffle-once":
                out["position"] = (
                    "uniform over the ⌊n/b⌋ batches of one secret random partition drawn once: "
                    "Theorem 4.2 averages Theorem 3.3 over it (Lemma 4.1)")
            if r < run.steps_per_epoch and run.batching == "shuffle-once":
                out["partial_epoch_note"] = (
                    f"the run stops {r} steps into epoch {E}: the Lemma 4.1 mixture of the "
                    "per-position Theorem 3.3 bounds (positions before the stop used E times, "
                    "the others E − 1 times)")
            elif r < run.steps_per_epoch:
                out["partial_epoch_note"] = (
                    f"the run stops {r} steps into epoch {E}: bounded by the fixed-order bound at "
                    "the worst position (Theorem 4.2 is stated for whole epochs)"
                    if run.batching == "shuffle" else
                    f"the run stops {r} steps into epoch {E}: the worst position is still bounded "
                    f"by the {E}-epoch bound"
                )
        if run.batching == "sample":
            out["plateau_note"] = (
                "at_optimal_order.plateau_steps: the step from which the Theorem 4.3 recursion "
                "sits at its fixed point (null: not reached); more steps cost no more privacy"
            )
        if run.batching == "full":
            out["full_batch_note"] = (
                "Theorems 3.3/4.2 need n/b >= 2; full batches use Theorem 2.1 with b = n "
                "(Chourasia et al.'s bound; their Appendix D.7 bound is not implemented)"
            )
        return out


class YeShokriReshuffle(YeShokri):
    """Theorem 4.2 applied to per-epoch reshuffling — the paper's Figure 2(a)
    setting as this library runs it — computed for comparison, **not sound**."""

    name = "ye-shokri-reshuffle"
    sound = False
    batchings = ("shuffle",)
    unsound_reason = (
        "Theorem 4.2 is proved for one random partition reused in every epoch (Algorithm 1, "
        "line 3); here each epoch draws a fresh permutation, so the differing example's "
        "position changes between epochs and the theorem does not apply as stated"
    )

    def details(self, run: Run) -> dict:
        out = super().details(run)
        out["not_sound"] = self.unsound_reason
        return out


class YeShokriNaive(_Common):
    """Ye & Shokri's Theorem 2.1, the naive mini-batch extension of Chourasia et al."""

    name = "ye-shokri-naive"
    citation = _NAIVE_CITATION
    batchings = ("shuffle", "shuffle-once", "cyclic", "sample", "full")

    def assumptions(self) -> list[str]:
        return YeShokri().assumptions()

    def why_not(self, run: Run) -> str | None:
        return self._common_why_not(run)

    def _uses(self, run: Run) -> int:
        return run.epochs_touched if run.batching in PARTITION_BATCHINGS else run.steps

    def rdp_with_details(self, run: Run, orders):
        alpha = self._check(run, orders)
        eta, m = run.learning_rate, run.strong_convexity
        curve = naive_rdp(self._rho(run, alpha), eta * m, self._uses(run))
        return curve, None

    def rdp_over_steps(self, run: Run, steps, orders) -> np.ndarray:
        """Closed form in the number of uses of the differing example."""
        alpha = self._check(run, orders)
        uses = np.array([self._uses(run.replace(steps=int(t))) for t in check_steps(steps)])
        eta, m = run.learning_rate, run.strong_convexity
        return naive_rdp(self._rho(run, alpha)[None, :], eta * m, uses[:, None])

    def details(self, run: Run) -> dict:
        out = self._base_details(run)
        out["uses_of_differing_example"] = self._uses(run)
        return out


class Chourasia(YeShokriNaive):
    """Chourasia, Ye & Shokri's full-batch noisy gradient descent bound."""

    name = "chourasia"
    citation = _CHOURASIA_CITATION
    batchings = ("full",)
    eta_limit_name = "1/M"

    @staticmethod
    def _eta_limit(m: float, M: float) -> float:
        return 1.0 / M

    def assumptions(self) -> list[str]:
        return [
            "only the final iterate is released; every intermediate iterate stays hidden",
            "every example's loss is m-strongly convex (m > 0), M-smooth and L-Lipschitz on a "
            "closed convex set C the iterates are projected onto (or C = R^d)",
            "full-batch gradients; constant step size η < 1/M",
            "the start point θ₀ ~ Π_C(N(0, (2σ²/m)·I)) with σ = z·L·√(η/2)/n (their Theorem 2)",
            "each step adds N(0, (z·L/n)²I) to the full-batch mean gradient",
        ]

    def why_not(self, run: Run) -> str | None:
        reason = super().why_not(run)
        if reason is None and run.initialization != "gaussian":
            return (
                "assumes the start θ₀ ~ Π_C(N(0, (2σ²/m)·I)) (their Theorem 2); declare "
                "initialization='gaussian' and have the trainer draw it so; found "
                f"initialization={run.initialization!r}"
            )
        return reason

    def details(self, run: Run) -> dict:
        out = super().details(run)
        sigma = run.sigma("ye-shokri")
        out["initialization"] = (
            f"θ₀ ~ Π_C(N(0, {2.0 * sigma * sigma / run.strong_convexity:.6g}·I)) (2σ²/m)"
        )
        return out
