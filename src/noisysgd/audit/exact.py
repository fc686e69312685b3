"""The law of the final iterate of the 1-D construction, computed numerically.

In Altschuler & Talwar's construction (:func:`~noisysgd.audit.at_1d_datasets`)
every loss is zero but the last, so the run is a one-dimensional Markov
chain: ω ← Π_[−r, r][ω − η_t·(G_t + ξ_t)], ξ_t ~ N(0, σ²), σ = zL/b,
r = D/2, where G_t = y_n/b when the last example is in the batch and 0
otherwise.  Its law after T steps is a density on (−r, r) plus two atoms at
±r (the projection).  :func:`at_1d_law` propagates it on a grid of ``cells``
equal cells (the mass of a cell is carried at its centre; the Gaussian
kernel is integrated exactly over each target cell), which is accurate when
the noise per step ησ spans many cells.

Covered batchings: ``full`` (G_t = y_n/n every step), ``sample`` and
``poisson`` (the last example is in the batch with probability b/n,
independently every step: a two-component kernel), ``cyclic`` (one random
order: the example is used at one uniformly random step of every epoch, the
same step each epoch, or never when it falls among the n mod b dropped
ones: a mixture over positions).  ``shuffle`` is not covered.  No L2 term
(the construction's losses are linear; λ = 0).

What it is for: the privacy profile of the pair of final iterates
(:func:`privacy_epsilon`) is the ε of this pair of datasets — a lower bound on
the ε of the algorithm, up to the discretization — so the gap between the
certified ε and an audit's empirical lower bound can be split into the slack
of the analysis (certified vs this) and the statistical cost of the audit
(this vs the empirical bound).  It also gives the exact law the replica
engine must sample from (a test of the engine).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import signal, special

from ..run import Run
from .adversaries import at_1d_datasets

__all__ = ["Law1D", "at_1d_law", "privacy_delta", "privacy_epsilon", "threshold_rates", "ideal_lower_bound"]


@dataclass(frozen=True)
class Law1D:
    """A law on [−r, r]: ``atoms`` = (P[ω = −r], P[ω = r]) and ``cells`` the
    masses of M equal cells of (−r, r) (centres ``centres``)."""

    radius: float
    centres: np.ndarray
    cells: np.ndarray
    atoms: tuple[float, float]

    @property
    def support(self) -> np.ndarray:
        return np.concatenate([[-self.radius], self.centres, [self.radius]])

    @property
    def masses(self) -> np.ndarray:
        return np.concatenate([[self.atoms[0]], self.cells, [self.atoms[1]]])

    def cdf(self, x) -> np.ndarray:
        """P[ω ≤ x] (cells counted at their centres)."""
        x = np.asarray(x, dtype=float)
        cum = np.cumsum(self.masses)
        k = np.searchsorted(self.support, x, side="right")
        return np.where(k > 0, cum[np.maximum(k - 1, 0)], 0.0)


def _phi(x):
    return special.ndtr(x)


class _Kernel:
    """One step ω ← Π[ω − shift + s·N(0, 1)] on the grid, for a fixed shift."""

    def __init__(self, r, M, shift, s):
        h = 2.0 * r / M
        self.M = M
        d = np.arange(-(M - 1), M, dtype=float)  # target cell − source cell
        # mass from a cell centre to the cell d away: Φ(((d+½)h + shift')/s) − Φ(((d−½)h + shift')/s)
        # where the mean moves by −shift: (e − m)/s with m = x − shift
        self.conv = _phi(((d + 0.5) * h + shift) / s) - _phi(((d - 0.5) * h + shift) / s)
        i = np.arange(M, dtype=float)
        self.low = _phi((-(i + 0.5) * h + shift) / s)            # below −r
        self.high = _phi(-((M - i - 0.5) * h + shift) / s)       # above r: 1 − Φ(((M−i−½)h + shift)/s)
        e = -r + h * np.arange(M + 1)
        rows = []
        for a in (-r, r):
            m = a - shift
            cdf = _phi((e - m) / s)
            rows.append((np.diff(cdf), _phi((-r - m) / s), _phi(-(r - m) / s)))
        self.from_atoms = rows

    def apply(self, cells, atoms):
        M = self.M
        new = signal.fftconvolve(cells, self.conv, mode="full")[M - 1:2 * M - 1]
        np.maximum(new, 0.0, out=new)  # FFT round-off
        lo = float(cells @ self.low)
        hi = float(cells @ self.high)
        for w, (to_cells, to_lo, to_hi) in zip(atoms, self.from_atoms):
            if w:
                new += w * to_cells
                lo += w * to_lo
                hi += w * to_hi
        return new, (lo, hi)


def _check_run(run: Run) -> None:
    if not isinstance(run, Run):
        raise ValueError(f"run must be a noisysgd.Run. Found {type(run).__name__}.")
    if run.diameter is None:
        raise ValueError("run.diameter must be set: the law is computed on K = [-D/2, D/2]. Found None.")
    if run.strong_convexity != 0.0:
        raise ValueError(f"run.strong_convexity must be 0 (linear losses). Found {run.strong_convexity!r}.")
    if run.batching == "shuffle":
        raise ValueError("batching must be full, sample, poisson or cyclic; shuffle is not covered. "
                         "Found 'shuffle'.")


def at_1d_law(run: Run, *, dataset: str = "D", variant: str = "opposed", cells: int = 4000) -> Law1D:
    """The law of ω_T for the 1-D construction under ``run`` (module docstring).

    Under ``run.adjacency == "add-remove"`` the pair is the add/remove audit's
    (:func:`~noisysgd.audit.adversaries.audit_at_1d`): D′ holds the example of
    slope −L, D is D′ without it — whose law is that of the ``"paper"``
    variant's D (slope 0: under ``poisson`` and ``sample`` the other,
    zero-slope examples' batches do not move ω), so ``variant`` is not used.

    >>> from noisysgd.audit.adversaries import at_1d_run
    >>> run = at_1d_run(n=10, batch_size=10, batching="full", steps=50, learning_rate=1.0,
    ...                 noise_multiplier=8.0, diameter=4.0)
    >>> law = at_1d_law(run, dataset="D", cells=2000)
    >>> round(float(law.masses.sum()), 9), bool(law.cdf(0.0) > 0.5)   # drifts down on D
    (1.0, True)
    """
    _check_run(run)
    if dataset not in ("D", "D'"):
        raise ValueError(f"dataset must be 'D' or \"D'\". Found {dataset!r}.")
    if isinstance(cells, bool) or not isinstance(cells, (int, np.integer)) or cells < 16:
        raise ValueError(f"cells must be an integer >= 16. Found {cells!r}.")
    M = int(cells)
    if run.adjacency == "add-remove":
        variant = "paper"
    _, y, y_prime = at_1d_datasets(run.n, lipschitz=run.lipschitz, variant=variant)
    slope = float((y if dataset == "D" else y_prime)[-1])
    slope = float(np.clip(slope, -run.lipschitz, run.lipschitz))
    r = run.diameter / 2.0
    b, n = run.batch_size, run.n
    sigma = run.noise_multiplier * run.lipschitz / b
    etas = run.step_sizes()
    kernels: dict = {}

    def kernel(eta, used):
        key = (float(eta), bool(used))
        if key not in kernels:
            kernels[key] = _Kernel(r, M, eta * slope / b if used else 0.0, eta * sigma)
        return kernels[key]

    def propagate(start_cells, start_atoms, steps_used):
        """steps_used[t]: probability that step t uses the example (0, 1 or q)."""
        c, a = start_cells, start_atoms
        for t, p_use in enumerate(steps_used):
            eta = etas[t]
            if p_use == 1.0:
                c, a = kernel(eta, True).apply(c, a)
            elif p_use == 0.0 or slope == 0.0:
                c, a = kernel(eta, False).apply(c, a)
            else:
                c1, a1 = kernel(eta, True).apply(c, a)
                c0, a0 = kernel(eta, False).apply(c, a)
                c = p_use * c1 + (1.0 - p_use) * c0
                a = (p_use * a1[0] + (1.0 - p_use) * a0[0], p_use * a1[1] + (1.0 - p_use) * a0[1])
        return c, a

    start = np.zeros(M)
    if M % 2 == 0:  # ω₀ = 0 sits on the edge between the two middle cells: split it
        start[M // 2 - 1] = start[M // 2] = 0.5
    else:
        start[M // 2] = 1.0
    T = run.steps
    if run.batching == "full":
        cells_, atoms = propagate(start, (0.0, 0.0), [1.0] * T)
    elif run.batching in ("sample", "poisson"):
        q = b / n
        cells_, atoms = propagate(start, (0.0, 0.0), [q] * T)
    else:  # cyclic: mixture over the example's position
        K = n // b
        cells_ = np.zeros(M)
        lo = hi = 0.0
        options = [(j, b / n) for j in range(K)] + [(None, (n - K * b) / n)]
        for j, w in options:
            if w == 0.0:
                continue
            used = [1.0 if (j is not None and t % K == j) else 0.0 for t in range(T)]
            c, a = propagate(start, (0.0, 0.0), used)
            cells_ += w * c
            lo += w * a[0]
            hi += w * a[1]
        atoms = (lo, hi)
    h = 2.0 * r / M
    centres = -r + h * (np.arange(M) + 0.5)
    total = cells_.sum() + atoms[0] + atoms[1]
    return Law1D(radius=r, centres=centres, cells=cells_ / total, atoms=(atoms[0] / total, atoms[1] / total))


def privacy_delta(p: Law1D, q: Law1D, epsilon: float) -> float:
    """δ(ε) = max(Σ(Q − e^ε P)₊, Σ(P − e^ε Q)₊) of the two (discretized) laws."""
    P, Q = p.masses, q.masses
    e = math.exp(epsilon)
    return float(max(np.maximum(Q - e * P, 0.0).sum(), np.maximum(P - e * Q, 0.0).sum()))


def privacy_epsilon(p: Law1D, q: Law1D, delta: float) -> float:
    """The smallest ε with δ(ε) ≤ ``delta`` (bisection; inf if none below 200)."""
    if privacy_delta(p, q, 0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while privacy_delta(p, q, hi) > delta:
        lo, hi = hi, 2.0 * hi
        if hi > 200.0:
            return math.inf
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if privacy_delta(p, q, mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def threshold_rates(p: Law1D, q: Law1D, threshold: float, direction: int = 1) -> tuple[float, float]:
    """(FPR, FNR) of "ω ≥ threshold ⇒ D′" (``direction`` +1; −1: ω ≤ threshold)
    when D has law ``p`` and D′ law ``q``."""
    s = p.support
    pos = s >= threshold if direction == 1 else s <= threshold
    return float(p.masses[pos].sum()), float(q.masses[~pos].sum())


def ideal_lower_bound(p: Law1D, q: Law1D, *, runs: int, delta: float, confidence: float = 0.95) -> float:
    """The ε lower bound an audit with ``runs`` runs per dataset reports when its
    observed error counts equal their expectations (rounded), with the best
    threshold test on ω (either direction): what a perfectly tuned audit of
    this size typically shows — the statistical ceiling of the audit, to set
    beside the exact ε of the pair (:func:`privacy_epsilon`)."""
    from .stats import epsilon_lower_bound

    best = 0.0
    s = p.support
    P, Q = p.masses, q.masses
    cp, cq = np.cumsum(P), np.cumsum(Q)
    for i in range(s.size):
        below_p, below_q = cp[i], cq[i]             # P[ω ≤ s_i]
        for fpr, fnr in ((1.0 - below_p, below_q),  # "ω > s_i ⇒ D′"
                         (below_p, 1.0 - below_q)):  # "ω ≤ s_i ⇒ D′"
            k0 = int(round(runs * min(max(fpr, 0.0), 1.0)))
            k1 = int(round(runs * min(max(fnr, 0.0), 1.0)))
            if k0 + k1 >= runs:  # no better than guessing
                continue
            lb = epsilon_lower_bound(false_positives=k0, negatives=runs, false_negatives=k1, positives=runs,
                                     delta=delta, confidence=confidence).epsilon
            best = max(best, lb)
    return best
