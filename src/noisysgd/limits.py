r"""The limit line: the exact last-iterate privacy of the linear + ridge instance.

Every sound analysis of a run must also hold for the *easiest-to-analyse* loss
in its class.  Linear losses plus the λ-ridge are in the class of most of our
analyses, and for them the final iterate has an explicit law, so its exact
(ε, δ) is a **lower bound on the ε that any sound analysis can certify for the
same run** ("the limit line"; the same idea as the linear
heuristic of Steinke et al. 2024, which is exact for linear losses).

Derivation
----------
Loss f(θ; x) = ⟨g_x, θ⟩ + (λ/2)‖θ‖² with ‖g_x‖ ≤ L: L bounds the
*unregularized* per-example gradient (the library's convention; the trainer
clips exactly that gradient at L), λ = ``run.strong_convexity``.  Each example's
loss is λ-strongly convex and λ-smooth, so the instance satisfies every
analysis that assumes strong convexity m = λ and smoothness M ≥ λ with a
gradient bound L and **no** constraint set (``composition``,
``composition-pld``, ``ye-shokri``, ``chourasia``, ``shifted-interpolation``
on runs with ``diameter=None``).  It does *not* bound
``altschuler-talwar``: that analysis needs a projection onto a set of
diameter D, and the unprojected iterates below are not those of the projected
run.  With a projection Π_K the final iterate is no longer a linear function
of the noise (the law is a reflected/clamped chain, like
:mod:`noisysgd.audit.exact` computes in 1-D for λ = 0); this module refuses
runs with a diameter rather than give a number that is not a lower bound.

The trainer's step (``noisysgd.train.engine``; ``poisson`` also divides by the
fixed b) is

    θ ← θ − η·(λθ + (1/b)·Σ_{i∈B_t} g_i + ξ_t),   ξ_t ~ N(0, (zL/b)²·I),

so with c = 1 − ηλ (constant η; we require 0 < c ≤ 1, i.e. ηλ < 1, which
every hidden-state analysis needs anyway: η < 2/(m+M) ≤ 1/λ)

    θ_T = c^T θ₀ − (η/b)·Σ_t c^{T−1−t}·Σ_{i∈B_t} g_i − η·Σ_t c^{T−1−t} ξ_t.

Take every example but the differing one with g = 0 and the differing one
with g = +L·e (dataset D) or g = −L·e (D', **replace**), or absent
(**add-remove**, which :class:`~noisysgd.run.Run` admits only for ``poisson``
batches at the fixed rate b/n of the declared public n: the other examples'
batches have the same law on both datasets).  Orthogonally to e the two laws are
identical and independent of the e-coordinate, so the privacy of the pair is
that of the e-coordinate.  With B_t the membership indicator of the
differing example at step t, W = Σ_t c^{T−1−t}·B_t, S² = Σ_{j<T} c^{2j} and
dividing by the noise scale η·zL/b·S:

    replace:     P = E_W[N(−κW, 1)]  vs  Q = E_W[N(+κW, 1)],     κ = 1/(z·S),
    add-remove:  P = E_W[N(+κW, 1)]  vs  Q = N(0, 1)             (both directions),

the mean gap being 2κW under replace and κW under add-remove.  With
``initialization="gaussian"`` (θ₀ ~ N(0, 2σ²/λ·I), σ = zL√(η/2)/b in Ye &
Shokri's convention, no projection without a diameter) the start adds
c^{2T}·2σ²/λ = c^{2T}/(ηλ) to the normalized variance: κ = 1/(z·√(S² +
c^{2T}/(ηλ))).  With a fixed θ₀ the term c^T θ₀ is the same on both datasets.

The law of W, by batching (K = steps per epoch, rem = n − K·b):

* ``poisson`` and ``sample``: B_t ~ Bern(b/n) independent across steps (for
  ``sample`` a fresh uniform batch of size b holds a given example with
  probability b/n, independently of the other steps).  Under add-remove
  (poisson only) q = b/n with n the declared public size.
* ``full``: B_t = 1, W = Σ_j c^j is deterministic: the pair is a pair of
  Gaussians, exactly μ-GDP with μ = 2κW (replace only).
* ``cyclic``: one fixed, known order; an analysis must cover every position p
  of the differing example, so the limit takes the worst,
  W = max_p Σ_{t ≡ p (mod K)} c^{T−1−t} (deterministic: GDP).
* ``shuffle-once``: one secret uniform order reused every epoch: the example
  sits in batch k (k < K) with probability b/n each, or among the rem dropped
  ones (W = 0): W is a mixture of K + 1 atoms.
* ``shuffle``: a fresh order each epoch: independently in each epoch e the
  example is at position k_e (probability b/n each, or dropped): W is a sum of
  independent (K+1)-point variables, one per epoch.

Exact (ε, δ)
------------
For W ≥ 0 the likelihood ratio of the replace pair, E[e^{−κWx}e^{−κ²W²/2}] /
E[e^{κWx}e^{−κ²W²/2}], is decreasing in x, so the optimal test is a half-line:

    δ(ε) = sup_t  E[Φ(t + κW)] − e^ε·E[Φ(t − κW)],

attained where the densities satisfy p(t) = e^ε q(t) (found by a root search
of the log-ratio).  Under add-remove, H_ε(P‖Q) uses {x > t}
(E[Φ(κW − t)] − e^ε Φ(−t)) and H_ε(Q‖P) uses {x < t}
(Φ(t) − e^ε E[Φ(t − κW)]); δ is the larger.

**Lower-bound numerics.**  For each fixed t, E[Φ(t+κW)] is increasing and
E[Φ(t−κW)] decreasing in W, so replacing W by any W_lo ≤ W (on the same
probability space) can only *decrease* P(A_t) − e^ε Q(A_t); and any fixed t
gives a lower bound on the supremum.  So the computed δ is a lower bound on the
true δ(ε), whatever the discretization, as long as W_lo ≤ W.  Where W has more
than a few thousand atoms (``poisson``, ``sample``, ``shuffle``) its law is
propagated on a lattice h·{0, …, N}: every summand's value is rounded *down*
to the lattice, terms with c^j below the lattice step fall to 0, and mass
above the top is clamped to the top cell — each a coupling W_lo ≤ W.  The
same computation with values rounded *up* (and the dropped tail added) gives
W_hi ≥ W and an upper estimate (:func:`limit_bracket`), which measures how
tight the lower value is.  ε(δ) is found by bisection along the curve
t ↦ (ε(t), δ(t)) of optimal half-lines, returning an ε(t) at which
δ_lo > δ (so the true ε(δ) exceeds it).  Remaining error: double-precision
rounding of the masses and of sums of at most ~10⁵ terms (relative ~1e-12),
covered by subtracting 1e-11·(P(A) + e^ε·Q(A)) ≤ 2e-11 from δ; lattice
atoms of mass below 1e-40 are dropped and their mass added to Q(A).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from .quadrature import log_sum_exp
from .run import Run

__all__ = ["limit_delta", "limit_epsilon", "limit_epsilons", "limit_noise_multiplier", "limit_bracket", "shift_law"]

_FLOAT_SLACK = 1e-11
_GRID = 1 << 16


def _check_run(run) -> None:
    if not isinstance(run, Run):
        raise ValueError(f"run must be a noisysgd.Run. Found {type(run).__name__}.")
    run.require("steps", "learning_rate", "noise_multiplier", why="for the limit line")
    if not run.constant_learning_rate:
        raise ValueError(
            "run.learning_rate must be constant (no schedule, lr_decay = 0) for the limit line: "
            f"the linear+ridge instance is derived for a constant step. Found learning_rate="
            f"{run.learning_rate!r}, lr_decay={run.lr_decay!r}.")
    if run.diameter is not None:
        raise ValueError(
            f"run.diameter must be None for the limit line (found {run.diameter!r}): with a projection "
            "the linear+ridge iterates are not Gaussian mixtures and the unprojected instance does not "
            "lower-bound the projected run (altschuler-talwar).")
    c = 1.0 - run.learning_rate * run.strong_convexity
    if not c > 0.0:
        raise ValueError(
            "learning_rate * strong_convexity must be below 1 for the limit line (c = 1 - eta*lambda > 0). "
            f"Found {run.learning_rate!r} * {run.strong_convexity!r}.")


def _kappa(run: Run, noise_multiplier: float) -> float:
    eta, lam, T = run.learning_rate, run.strong_convexity, run.steps
    c = 1.0 - eta * lam
    if lam == 0.0:
        s2 = float(T)
        init = 0.0
    else:
        s2 = -math.expm1(2 * T * math.log(c)) / (eta * lam * (2.0 - eta * lam))
        init = math.exp(2 * T * math.log(c)) / (eta * lam) if run.initialization == "gaussian" else 0.0
    return 1.0 / (noise_multiplier * math.sqrt(s2 + init))


def _weights(run: Run) -> np.ndarray:
    """c^{T−1−t} for t = 0..T−1."""
    eta, lam, T = run.learning_rate, run.strong_convexity, run.steps
    c = 1.0 - eta * lam
    return np.exp((T - 1 - np.arange(T)) * math.log(c)) if lam > 0 else np.ones(T)


def _epoch_variables(run: Run):
    """Per-epoch (values, probs) for ``shuffle``: position k of epoch e at step e·K + k < T."""
    K, T, n, b = run.steps_per_epoch, run.steps, run.n, run.batch_size
    w = _weights(run)
    out = []
    for e in range(math.ceil(T / K)):
        vals = w[e * K:min((e + 1) * K, T)]
        p = np.full(vals.size, b / n)
        out.append((np.concatenate([[0.0], vals]), np.concatenate([[1.0 - p.sum()], p])))
    return out


def _lattice_law(variables, up: bool, cells: int):
    """Law of Σ of independent discrete variables (values ≥ 0) on h·{0..cells}:
    values rounded down (up=False: W_lo ≤ W, mass above the top clamped to the
    top) or up (up=True: W_hi ≥ W; mass above the top is reported as lost)."""
    mean = sum(float(np.dot(v, p)) for v, p in variables)
    var = sum(float(np.dot(v * v, p) - np.dot(v, p) ** 2) for v, p in variables)
    vmax = max(float(v.max()) for v, _ in variables)
    total = sum(float(v.max()) for v, _ in variables)
    top = min(total, mean + 15.0 * math.sqrt(max(var, 0.0)) + 5.0 * vmax)
    h = top / cells if top > 0 else 1.0
    if up:   # room for the upward rounding (at most h per variable)
        cells += len(variables)
    law = np.zeros(cells + 1)
    law[0] = 1.0
    lost = 0.0
    scratch = np.empty(cells + 1)
    sup = 1                                           # law is 0 beyond index sup - 1
    for v, p in variables:
        k = (np.ceil(v / h) if up else np.floor(v / h)).astype(np.int64)
        if not up:
            k = np.minimum(k, cells)
        new = np.zeros_like(law)
        # suffix[i] = mass of law at indices >= i (summed from the small end of the tail up)
        suffix = np.concatenate([np.cumsum(law[sup - 1::-1])[::-1], np.zeros(cells + 2 - sup)])
        for kk, pp in zip(k, p):
            if pp == 0.0:
                continue
            if kk > cells:
                lost += pp * suffix[0]
                continue
            stop = min(sup, cells + 1 - kk)
            _axpy(law[:stop], new[kk:kk + stop], pp, scratch)  # new[kk + i] += pp·law[i]
            tail = suffix[cells + 1 - kk]
            if up:
                lost += pp * tail
            else:
                new[cells] += pp * tail
        law = new
        kmax = int(k[p > 0].max()) if np.any(p > 0) else 0
        sup = min(cells + 1, sup + kmax)
    return h * np.arange(cells + 1), law, lost


def _axpy(x: np.ndarray, y: np.ndarray, a: float, scratch: np.ndarray) -> None:
    """y += a·x in place, the product in ``scratch`` (no temporary allocated per call)."""
    t = scratch[:x.size]
    np.multiply(x, a, out=t)
    y += t


def _binomial_pmf(m: int, q: float) -> np.ndarray:
    j = np.arange(m + 1)
    if q >= 1:
        return np.eye(m + 1)[m]
    return np.exp(special.gammaln(m + 1) - special.gammaln(j + 1) - special.gammaln(m - j + 1)
                  + j * math.log(q) + (m - j) * math.log1p(-q))


def _add_binomial(law, sup: int, kk: int, m: int, q: float, up: bool, scratch):
    """The law of (lattice sum) + kk·Bin(m, q), mass beyond the top clamped (``up=False``)
    or reported lost (``up=True``); returns (law, its support bound, lost mass)."""
    cells = law.size - 1
    pmf = _binomial_pmf(m, q)
    j = np.arange(m + 1)
    # negligible atoms (pmf < 1e-30): W_lo counts them as no shift (a coupling W_lo <= W);
    # W_hi reports their mass as lost
    small = pmf < 1e-30
    neg = float(pmf[small].sum())
    new = np.zeros_like(law)
    lost = 0.0
    if up:
        lost += neg
    elif neg:
        _axpy(law[:sup], new[:sup], neg, scratch)
    for jj in j[~small]:
        pj = float(pmf[jj])
        s = int(jj * kk)
        if s > cells:
            if up:
                lost += pj * law.sum()
            else:
                new[cells] += pj * law.sum()
        else:
            stop = min(sup, cells + 1 - s)
            _axpy(law[:stop], new[s:s + stop], pj, scratch)  # new[s + i] += pj·law[i]
            tail = law[cells + 1 - s:sup].sum() if sup > cells + 1 - s else 0.0
            if up:
                lost += pj * tail
            else:
                new[cells] += pj * tail
    used = j[~small]
    # a bound on the support, kept instead of searched (the search cost O(cells) per value)
    sup = min(cells + 1, sup + int(used.max()) * int(kk)) if used.size else sup
    return new, sup, lost


def _poisson_lattice(run: Run, cells: int):
    """(weights, lattice step) of poisson/sample: the top is the mean + 15 sd + 5 max of W."""
    q = run.batch_size / run.n
    w = _weights(run)
    mean, var, vmax = q * w.sum(), q * (1 - q) * float(np.dot(w, w)), float(w.max())
    top = min(float(w.sum()), mean + 15.0 * math.sqrt(var) + 5.0 * vmax)
    return w, top / cells


def _grouped_poisson_law(run: Run, up: bool, cells: int):
    """Poisson/sample: the same as :func:`_lattice_law` over the T two-point
    variables, with the m steps of equal lattice value k merged into one
    binomial (k·Bin(m, q), exact on the lattice)."""
    q = run.batch_size / run.n
    w, h = _poisson_lattice(run, cells)
    k = (np.ceil(w / h) if up else np.floor(w / h)).astype(np.int64)
    if up:   # room for the upward rounding (at most h per member)
        cells += int(min(w.size, 10 * (q * w.size + 10 * math.sqrt(q * w.size) + 10)))
    if not up:
        k = np.minimum(k, cells)
    law = np.zeros(cells + 1)
    law[0] = 1.0
    lost = 0.0
    vals, counts = np.unique(k, return_counts=True)
    scratch = np.empty(cells + 1)
    sup = 1                                           # law is 0 beyond index sup - 1
    for kk, m in zip(vals, counts):
        if kk == 0:
            continue
        law, sup, dl = _add_binomial(law, sup, int(kk), int(m), q, up, scratch)
        lost += dl
    return h * np.arange(cells + 1), law, lost


def _poisson_laws_lo(run: Run, steps, cells: int):
    """The W_lo laws (``up=False``) of ``run`` after each of ``steps`` (ascending), on one
    lattice — the one :func:`_grouped_poisson_law` uses for the largest: built in one pass.

    After T steps W = Σ_{s<T} c^s·B_s (s counts back from the last step), so W after T' > T
    adds the independent terms s ∈ [T, T'): each law is the previous one convolved with the
    new terms' binomials.  On a lattice chosen for the largest T the smaller ones are rounded
    down on a grid that is not their own: still a coupling W_lo ≤ W (a lower bound), a little
    less tight than :func:`shift_law`'s own grid."""
    q = run.batch_size / run.n
    w, h = _poisson_lattice(run.replace(steps=int(steps[-1])), cells)
    k = np.minimum(np.floor(w[::-1] / h).astype(np.int64), cells)   # k[s]: c^s rounded down
    law = np.zeros(cells + 1)
    law[0] = 1.0
    scratch = np.empty(cells + 1)
    sup, start, out = 1, 0, []
    for stop in steps:
        vals, counts = np.unique(k[start:int(stop)], return_counts=True)
        for kk, m in zip(vals, counts):
            if kk:
                law, sup, _ = _add_binomial(law, sup, int(kk), int(m), q, False, scratch)
        out.append(law.copy())
        start = int(stop)
    return h * np.arange(cells + 1), out


def shift_law(run: Run, *, up: bool = False, cells: int = _GRID):
    """(values, masses, lost) of W_lo ≤ W (``up=False``) or W_hi ≥ W (``up=True``;
    ``lost`` is mass pushed beyond the top of the lattice) for ``run``'s batching.
    Deterministic and finite-mixture cases are exact."""
    _check_run(run)
    w = _weights(run)
    K, T = run.steps_per_epoch, run.steps
    if run.batching == "full":
        return np.array([float(w.sum())]), np.array([1.0]), 0.0
    if run.batching in ("cyclic", "shuffle-once"):
        per_pos = np.array([float(w[p::K].sum()) for p in range(min(K, T))] + [0.0] * max(0, K - T))
        if run.batching == "cyclic":
            return np.array([float(per_pos.max())]), np.array([1.0]), 0.0
        p = np.full(K, run.batch_size / run.n)
        return np.concatenate([per_pos, [0.0]]), np.concatenate([p, [1.0 - p.sum()]]), 0.0
    if run.batching in ("poisson", "sample"):
        return _grouped_poisson_law(run, up, cells)
    return _lattice_law(_epoch_variables(run), up, cells)


class _Direction:
    """One hockey-stick direction of the pair as the family of half-lines {x < t}:
    numerator law E[N(−a_num)] (or N(0)), denominator E[N(−a_den)] (or N(0));
    the log density ratio r(t) is decreasing in t, and the optimal set at ε is
    {x < t} with r(t) = ε.  ``dropped``: pruned mass, added to the denominator."""

    def __init__(self, a, p, num_sign, den_sign, dropped):
        self.a, self.p, self.logp = a, p, np.log(p)
        self.ns, self.ds, self.dropped = num_sign, den_sign, dropped

    def _logd(self, t, s):
        if s == 0.0:
            return -0.5 * t * t
        x = self.logp - 0.5 * (t - s * self.a) ** 2
        return log_sum_exp(x)   # scipy's logsumexp costs 3x more on 65,536 atoms

    def ratio(self, t):
        return self._logd(t, self.ns) - self._logd(t, self.ds)

    def _mass(self, t, s):
        return float(special.ndtr(t)) if s == 0.0 else float(np.dot(self.p, special.ndtr(t - s * self.a)))

    def delta_at(self, t, eps):
        pa = self._mass(t, self.ns)
        qa = self._mass(t, self.ds) + (self.dropped if self.ds != 0.0 else 0.0)
        # e^ε·Q(A) in log space: for ε beyond ~709 e^ε alone overflows; where e^ε·Q(A) > e^700
        # it exceeds P(A) ≤ 1 anyway, so the cap changes no sign (δ < 0 either way)
        eq = math.exp(min(eps + math.log(qa), 700.0)) if qa > 0.0 else 0.0
        return pa - eq - _FLOAT_SLACK * (pa + eq)

    def _bracket(self, target):
        lo, hi = -1.0, 1.0
        for _ in range(60):
            if self.ratio(lo) > target:
                break
            lo *= 2
        for _ in range(60):
            if self.ratio(hi) < target:
                break
            hi *= 2
        return lo, hi

    def delta(self, eps):
        lo, hi = self._bracket(eps)
        if not (self.ratio(lo) > eps > self.ratio(hi)):
            return 0.0
        t = optimize.brentq(lambda t: self.ratio(t) - eps, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=500)
        return max(0.0, self.delta_at(t, eps))

    def epsilon(self, delta):
        """Largest ε(t) found with δ(t) > delta (so the true ε(δ) is at least it)."""
        def f(t):
            e = self.ratio(t)
            return (self.delta_at(t, max(e, 0.0)) if e > 0 else math.inf) - delta
        lo, hi = self._bracket(0.0)          # t where ratio = 0 lies in (lo, hi)
        if not self.ratio(lo) > 0.0:
            return 0.0
        t0 = optimize.brentq(lambda t: self.ratio(t), lo, hi, xtol=1e-15, maxiter=500)
        if self.delta_at(t0, 0.0) <= delta:
            return 0.0
        # δ(t) increases with t along the curve; walk down to a t with δ(t) < delta
        left = t0 - 1.0
        while f(left) > 0:
            left = t0 - 2 * (t0 - left)
            if t0 - left > 1e6:
                return math.inf
        a, b = left, t0                     # f(a) <= 0 < f(b)
        tol = 1e-13 * max(1.0, abs(b))
        if f(a) < 0:                        # Brent's method to the crossing, then the first t
            r = optimize.brentq(f, a, b, xtol=tol, rtol=1e-15, maxiter=500)  # past it with f > 0
            step = tol
            while r < b and not f(r) > 0:
                r, step = min(b, r + step), 2 * step
            if f(r) > 0:
                b = r
        return max(0.0, self.ratio(b))


def _directions(values, masses, kappa: float, adjacency: str, prune: float = 1e-40):
    keep = masses > prune
    dropped = float(masses[~keep].sum())
    a, p = kappa * values[keep], masses[keep]
    if adjacency == "replace":
        # P = E N(−a), Q = E N(+a); symmetric under x -> −x, one direction suffices
        return [_Direction(a, p, -1.0, +1.0, dropped)]
    # add-remove: H(P||Q) with P = E N(+a), Q = N(0), reflected: E N(−a) vs N(0) on {x < t};
    # H(Q||P): N(0) vs E N(+a) on {x < t}
    return [_Direction(a, p, -1.0, 0.0, dropped), _Direction(a, p, 0.0, +1.0, dropped)]


def _validate_delta(delta) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not (0.0 < float(delta) < 1.0):
        raise ValueError(f"delta must be a number in (0, 1). Found {delta!r}.")
    return float(delta)


def _validate_eps(epsilon, name="epsilon") -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not (
            0.0 <= float(epsilon) < math.inf):
        raise ValueError(f"{name} must be a finite number >= 0. Found {epsilon!r}.")
    return float(epsilon)


class _Law:
    def __init__(self, run: Run, up: bool, cells: int, law=None):
        self.values, self.masses, self.lost = shift_law(run, up=up, cells=cells) if law is None else law
        self.run = run

    def _dirs(self, z):
        kappa = _kappa(self.run, z)
        return _directions(self.values, self.masses, kappa, self.run.adjacency)

    def delta(self, eps: float, z: float) -> float:
        d = max(x.delta(eps) for x in self._dirs(z))
        return d + (1.0 + math.exp(min(eps, 700))) * self.lost if self.lost else d

    def epsilon(self, delta: float, z: float) -> float:
        if self.lost:      # upper estimate only: fold the lost mass into delta
            delta = max(delta - 2 * self.lost, 1e-300)
        return max(x.epsilon(delta) for x in self._dirs(z))


def limit_delta(run: Run, epsilon: float, *, cells: int = _GRID) -> float:
    """δ(ε) of the linear+ridge instance of ``run``: a lower bound (up to the
    documented 1e-12 float slack, which is subtracted) on the δ at ``epsilon``
    of every analysis whose class contains the instance (see module docstring).

    >>> from noisysgd import Run
    >>> run = Run(n=100, batch_size=100, batching="full", steps=10, learning_rate=0.1,
    ...           noise_multiplier=2.0, lipschitz=1.0, strong_convexity=0.0)
    >>> round(limit_delta(run, 1.0), 6)   # μ = 2·10/(2·√10) = √10: μ-GDP
    0.818518
    """
    _check_run(run)
    eps = _validate_eps(epsilon)
    return float(_Law(run, False, _validate_cells(cells)).delta(eps, run.noise_multiplier))


def _eps_from(law: _Law, delta: float, z: float) -> float:
    return float(law.epsilon(delta, z))


def _validate_cells(cells) -> int:
    if isinstance(cells, bool) or not isinstance(cells, (int, np.integer)) or not 16 <= cells <= 1 << 22:
        raise ValueError(f"cells must be an integer in [16, 2**22]. Found {cells!r}.")
    return int(cells)


def limit_epsilon(run: Run, delta: float, *, cells: int = _GRID) -> float:
    """ε(δ) of the linear+ridge instance: no sound analysis of ``run`` (in the
    instance's class: not ``altschuler-talwar``) can certify a smaller ε.
    ``cells``: lattice size for poisson/sample/shuffle (any size gives a lower
    bound; more is tighter and slower).

    >>> from noisysgd import Run
    >>> run = Run(n=100, batch_size=100, batching="full", steps=10, learning_rate=0.1,
    ...           noise_multiplier=2.0, lipschitz=1.0)
    >>> round(limit_epsilon(run, 1e-5), 6)   # = gdp_epsilon(√10, 1e-5)
    17.856587
    """
    _check_run(run)
    d = _validate_delta(delta)
    return _eps_from(_Law(run, False, _validate_cells(cells)), d, run.noise_multiplier)


def limit_epsilons(run: Run, steps, delta: float, *, cells: int = _GRID) -> list[float]:
    """:func:`limit_epsilon` of ``run`` (its own ``steps`` ignored) after each of ``steps``, in one pass for
    poisson/sample batches (their laws share the largest one's lattice,
    :func:`_poisson_laws_lo`: each is still a lower bound, a little below
    :func:`limit_epsilon` at the smaller step counts); other batchings one by one."""
    steps = [int(t) for t in steps]
    if not steps or any(t < 1 for t in steps) or steps != sorted(set(steps)):
        raise ValueError(f"steps must be increasing integers >= 1. Found {steps!r}.")
    run = run.replace(steps=steps[-1]) if isinstance(run, Run) else run   # (run.steps is not used)
    _check_run(run)
    d = _validate_delta(delta)
    cells = _validate_cells(cells)
    if run.batching not in ("poisson", "sample"):
        return [limit_epsilon(run.replace(steps=t), d, cells=cells) for t in steps]
    values, laws = _poisson_laws_lo(run, steps, cells)
    return [_eps_from(_Law(run.replace(steps=t), False, cells, (values, law, 0.0)), d, run.noise_multiplier)
            for t, law in zip(steps, laws)]


def limit_bracket(run: Run, delta: float, *, cells: int = _GRID) -> tuple[float, float]:
    """(ε computed with W_lo ≤ W, ε computed with W_hi ≥ W): the first is the
    limit (a lower bound); the second is an upper estimate of the exact
    instance's ε, so their gap bounds the discretization loss."""
    _check_run(run)
    d = _validate_delta(delta)
    cells = _validate_cells(cells)
    return (_eps_from(_Law(run, False, cells), d, run.noise_multiplier),
            _eps_from(_Law(run, True, cells), d, run.noise_multiplier))


def limit_noise_multiplier(run: Run, epsilon: float, delta: float, *, tol: float = 1e-4,
                           cells: int = _GRID) -> float:
    """A lower bound on the noise multiplier any sound analysis (in the
    instance's class) needs for (``epsilon``, ``delta``) on ``run``: the
    largest z (to relative ``tol``) at which the limit still exceeds
    ``epsilon``.  ``run.noise_multiplier`` is ignored."""
    if not isinstance(run, Run):
        raise ValueError(f"run must be a noisysgd.Run. Found {type(run).__name__}.")
    eps = _validate_eps(epsilon)
    if eps == 0.0:
        raise ValueError("epsilon must be > 0 for limit_noise_multiplier. Found 0.")
    d = _validate_delta(delta)
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0.0 < tol <= 0.1:
        raise ValueError(f"tol must be a number in (0, 0.1]. Found {tol!r}.")
    run = run.replace(noise_multiplier=1.0)
    _check_run(run)
    law = _Law(run, False, _validate_cells(cells))

    def above(z):
        return law.delta(eps, z) > d   # then the exact ε at z exceeds epsilon

    lo, hi = 1e-3, 1.0
    if not above(lo):
        return 0.0
    while above(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > tol * lo:
        mid = 0.5 * (lo + hi)
        if above(mid):
            lo = mid
        else:
            hi = mid
    return lo
