"""Ryffel, Bach & Pointcheval: Langevin-diffusion bound for DP-SGLD (**not sound**).

T. Ryffel, F. Bach and D. Pointcheval, *Differential Privacy Guarantees for
Stochastic Gradient Langevin Dynamics* (preprint, HAL hal-03547726v1 /
arXiv:2201.11980, 2022; ``shared/papers/002``).  Numbers below are that
version's.

Their algorithm (Algorithm 1, eq. (1)), with batch size m = b:

    θ_{k+1} = Π_C(θ_k − η_k ∇L_{B_k}(θ_k) + √(2η_k σ²)·N(0, I)),  k = 0, …, K−1,

with B_k a fresh uniform subset of exactly m examples at every step
("sampled with replacement": chosen at random, then put back), one noise level
σ for all steps, and θ₀ ~ Π_C(N(0, (2σ²/λ)·I)) (Lemma 3.4).

What they prove (replace-one adjacency, |D| = |D'| = n):

* Lemma 3.3: the drift of the tracing diffusion (2)–(3), averaged over the
  batch, has sensitivity S_g = (m/n)·(2L/m) = 2L/n.
* Theorem 3.1: if the tracing diffusion is c-LSI throughout, then with γ = 1/2
  in (4)–(5),  ε(α) = 2αL²/(c n² σ⁴) · (1 − exp(−σ² c Σ_k η_k)).
* Lemma 3.4: for λ-strongly convex, β-smooth losses, η_k < 1/β and the
  initialisation above, c = λ/(2σ²).
* Theorem 3.2 (Theorem 3.1 with Lemma 3.4) — what is implemented:

      ε(α) = 4αL²/(λ n² σ²) · (1 − exp(−(λ/2)·Σ_{k≤K} η_k)).

* Corollary 3.2 (constant η):  ε(α) = 4αL²/(λn²σ²)·(1 − e^{−ληK/2}).
* Corollary 3.3 (η_k = 1/(2β + λk/2)):  ε(α) = 4αL²/(λn²σ²)·λK/(4β + λK),
  obtained by replacing Σ η_k with ∫₀^K dt/(2β + λt/2) = (2/λ)·log(1 + λK/4β).

Σ_{k≤K} η_k is the total diffusion time t_K of the K iterations (the proof of
Theorem 3.1: step k lasts η_k).  The theorem writes Σ_{k=1}^K while
Algorithm 1 runs η_0, …, η_{K−1}; we sum the K step sizes actually used.  With
that indexing the sum exceeds the integral, so Corollary 3.3's closed form is
slightly *below* Theorem 3.2 (with the literal η_1, …, η_K it is above); the
two index ranges differ in the exponent by (λ/2)(η_0 − η_K) < λ/(4β), so all
three agree to within α·4L²/(λn²σ²)·λ/(4β) (:func:`corollary_3_3_rdp`).

Noise convention.  Algorithm 1 adds √(2η_k)·σ·N(0, I) to the parameters; this
library's run adds η_k·z·L/b (:mod:`noisysgd.run`).  Equating the two gives
the per-step

    σ_k = z·L·√(η_k/2)/b          (``run.sigma("ye-shokri")`` for constant η).

With a constant step size σ is constant and Theorem 3.2 becomes

    ε(α) = 8αb²/(λ n² z² η) · (1 − e^{−ληK/2})     (L cancels).

A step-size *schedule* with a fixed noise multiplier z gives a σ_k that varies
with η_k, while Theorem 3.2 (Algorithm 1's single input σ², the SDE (3), and
Lemma 3.4's LSI constant λ/(2σ²) tied to the initialisation) assumes one σ for
all steps: such runs are refused.  Their own schedules (constant σ, varying
η_k, e.g. Corollary 3.3) are available through :func:`theorem_3_2_rdp`, which
takes σ and the step sizes directly.

What is covered and refused (:meth:`Ryffel.why_not`):

* batching ``sample`` (Algorithm 1) and ``full`` (its m = n case); ``poisson``
  (random batch size), ``shuffle`` and ``cyclic`` (not drawn afresh each step)
  are refused;
* adjacency ``replace`` only: the paper's neighbours differ in one item and
  both have n items (Lemma 3.3); ``add-remove`` is refused;
* strong convexity m = λ > 0 and smoothness M = β given, with η < 1/β
  (Theorem 3.2, Lemma 3.4; strict);
* the convex set C may be unbounded (``diameter=None``) or bounded: D does not
  enter the theorem.

**Not sound.**  Ye & Shokri (NeurIPS 2022, footnote 2 and Appendix C) show that
Lemma 3.4 takes the log-Sobolev constant that Chourasia et al. (2021, Lemma 5)
prove for *full-batch* noisy gradient descent and applies it to DP-SGLD, whose
iterates are mixtures over the random batches, where it is not shown to hold;
Theorem 3.2 rests on it.  (The proof of Lemma 3.3 also weighs the batch
difference by P[B_k ≠ B'_k] = m/n although the drift it bounds is conditioned
on the current iterate, which carries information about past batches.)
The analysis is kept to reproduce the paper's numbers and for comparison
plots, and never counts as a guarantee.

Counting K.  The default analysis (``ryffel``) follows the theorem: K is the
number of iterations.  The authors' public code passes the number of *epochs*
as K; ``ryffel-epochs`` (:class:`RyffelEpochs`) reproduces that accounting
(Σ η over ``run.epochs`` "steps"), which understates the diffusion time by the
factor ``steps_per_epoch``.
"""

from __future__ import annotations

import math

import numpy as np

from ..rdp import validate_orders
from ..run import Run, checked_integer, checked_real, sigma_from_noise_multiplier
from .base import RDPAnalysis

__all__ = [
    "Ryffel",
    "RyffelEpochs",
    "theorem_3_2_rdp",
    "corollary_3_2_rdp",
    "corollary_3_3_rdp",
    "decreasing_step_sizes",
    "UNSOUND_REASON",
]

_CITATION = (
    "Ryffel, Bach & Pointcheval, Differential Privacy Guarantees for Stochastic Gradient "
    "Langevin Dynamics (2022, hal-03547726v1 / arXiv:2201.11980), Theorem 3.2 (Theorem 3.1 "
    "with Lemmas 3.3 and 3.4), Corollaries 3.2 and 3.3; flagged by Ye & Shokri (NeurIPS 2022), "
    "footnote 2 and Appendix C"
)

#: Why the bound never counts as a guarantee.
UNSOUND_REASON = (
    "Lemma 3.4 reuses the log-Sobolev constant λ/(2σ²) that Chourasia et al. (2021) prove only "
    "for full-batch noisy gradient descent for the stochastic DP-SGLD process, whose iterates "
    "are mixtures over the random batches, where it is not shown to hold (Ye & Shokri, "
    "NeurIPS 2022, footnote 2 and Appendix C); Theorem 3.2 rests on it"
)


# --------------------------------------------------------------------------- pure math


def _positive(name: str, value) -> float:
    return checked_real(name, value)


def _count(name: str, value) -> int:
    return checked_integer(name, value)


def _step_sizes(learning_rate, iterations) -> np.ndarray:
    """The K step sizes: a constant η repeated K times, or an explicit schedule."""
    if isinstance(learning_rate, (str, bytes)) or not hasattr(learning_rate, "__len__"):
        eta = _positive("learning_rate", learning_rate)
        if iterations is None:
            raise ValueError("iterations (K) is required with a constant learning_rate. Found None.")
        return np.full(_count("iterations", iterations), eta)
    try:
        rates = np.asarray([float(v) for v in learning_rate], dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"learning_rate must be a positive number or a sequence of them. Found {learning_rate!r}."
        ) from None
    if rates.size == 0:
        raise ValueError("learning_rate must hold at least one step size. Found an empty sequence.")
    bad = ~np.isfinite(rates) | (rates <= 0)
    if bad.any():
        raise ValueError(f"learning_rate entries must be positive finite numbers. Found {rates[bad][0]!r}.")
    if iterations is not None and _count("iterations", iterations) != rates.size:
        raise ValueError(
            f"iterations must equal the schedule's length ({rates.size}) when both are given. "
            f"Found {iterations!r}."
        )
    return rates


def _bound(alpha: np.ndarray, *, lipschitz: float, lam: float, sigma: float, n: float,
           diffusion_time: float) -> np.ndarray:
    """Theorem 3.2 at diffusion time t = Σ η_k: 4αL²/(λn²σ²)·(1 − e^{−λt/2})."""
    limit = 4.0 * lipschitz * lipschitz / (lam * n * n * sigma * sigma)
    return alpha * limit * -math.expm1(-0.5 * lam * diffusion_time)


def theorem_3_2_rdp(orders, *, lipschitz: float, strong_convexity: float, sigma: float, n: int,
                    learning_rate, iterations: int | None = None,
                    smoothness: float | None = None) -> np.ndarray:
    """ε(α) of Theorem 3.2 from the paper's own parameters, at each order.

        ε(α) = 4αL²/(λ n² σ²) · (1 − exp(−(λ/2)·Σ_k η_k))

    (Theorem 3.1 with Lemma 3.4's c = λ/(2σ²)).  **Not a sound bound**: see
    the module docstring (:data:`UNSOUND_REASON`).

    Parameters
    ----------
    orders : array_like
        Rényi orders α > 1.
    lipschitz : float
        L > 0, the bound on per-example gradient norms (Lemma 3.3: S_g = 2L/n).
    strong_convexity : float
        λ > 0.
    sigma : float
        σ > 0 in the paper's convention: each step adds √(2η_k σ²)·N(0, I)
        (eq. (1)); one σ for all steps.  From a run's noise multiplier z:
        σ = z·L·√(η/2)/b.
    n : int
        Dataset size, >= 1.  The batch size m does not enter: Lemma 3.3
        bounds the drift difference by (m/n)·(2L/m) = 2L/n.
    learning_rate : float or sequence of float
        A constant η (then ``iterations`` = K is required), or the K step sizes
        η_0, …, η_{K−1} used by Algorithm 1 (their sum is the diffusion time).
    iterations : int, optional
        K >= 1, the number of iterations (must equal the schedule's length if
        both are given).
    smoothness : float, optional
        β; if given, every η_k < 1/β is checked (Lemma 3.4).

    Returns
    -------
    numpy.ndarray
        ε(α) at each order.

    Examples
    --------
    >>> float(theorem_3_2_rdp([2.0], lipschitz=1.0, strong_convexity=1.0, sigma=1.0, n=2,
    ...                        learning_rate=0.5, iterations=10**6)[0])
    2.0
    """
    alpha = validate_orders(orders)
    L = _positive("lipschitz", lipschitz)
    lam = _positive("strong_convexity", strong_convexity)
    s = _positive("sigma", sigma)
    size = _count("n", n)
    etas = _step_sizes(learning_rate, iterations)
    if smoothness is not None:
        beta = _positive("smoothness", smoothness)
        if etas.max() >= 1.0 / beta:
            raise ValueError(
                f"learning_rate must be below 1/β = {1.0 / beta:.6g} at every step (Lemma 3.4). "
                f"Found {float(etas.max())!r}."
            )
    return _bound(alpha, lipschitz=L, lam=lam, sigma=s, n=size, diffusion_time=float(np.sum(etas)))


def corollary_3_2_rdp(orders, *, lipschitz: float, strong_convexity: float, sigma: float, n: int,
                      learning_rate: float, iterations: int) -> np.ndarray:
    """Corollary 3.2 (constant η): 4αL²/(λn²σ²)·(1 − e^{−ληK/2}).

    >>> bool(np.allclose(
    ...     corollary_3_2_rdp([4.0], lipschitz=1.0, strong_convexity=0.1, sigma=0.5, n=100,
    ...                       learning_rate=0.2, iterations=50),
    ...     theorem_3_2_rdp([4.0], lipschitz=1.0, strong_convexity=0.1, sigma=0.5, n=100,
    ...                     learning_rate=[0.2] * 50)))
    True
    """
    alpha = validate_orders(orders)
    L = _positive("lipschitz", lipschitz)
    lam = _positive("strong_convexity", strong_convexity)
    s = _positive("sigma", sigma)
    size = _count("n", n)
    eta = _positive("learning_rate", learning_rate)
    K = _count("iterations", iterations)
    return _bound(alpha, lipschitz=L, lam=lam, sigma=s, n=size, diffusion_time=eta * K)


def decreasing_step_sizes(iterations: int, *, smoothness: float, strong_convexity: float) -> np.ndarray:
    """η_k = 1/(2β + λk/2) for k = 0, …, K−1 (§4.2, Corollary 3.3, Lemma 4.3).

    >>> decreasing_step_sizes(3, smoothness=1.0, strong_convexity=1.0).tolist()
    [0.5, 0.4, 0.3333333333333333]
    """
    K = _count("iterations", iterations)
    beta, lam = _beta_lambda(smoothness, strong_convexity)
    return 1.0 / (2.0 * beta + 0.5 * lam * np.arange(K, dtype=float))


def _beta_lambda(smoothness, strong_convexity) -> tuple[float, float]:
    beta = _positive("smoothness", smoothness)
    lam = _positive("strong_convexity", strong_convexity)
    if lam > beta:
        raise ValueError(
            f"strong_convexity must be at most smoothness ({beta!r}). Found {strong_convexity!r}."
        )
    return beta, lam


def corollary_3_3_rdp(orders, *, lipschitz: float, strong_convexity: float, smoothness: float,
                      sigma: float, n: int, iterations: int) -> np.ndarray:
    """Corollary 3.3 as printed: 4αL²/(λn²σ²)·λK/(4β + λK).

    It replaces Σ η_k of Theorem 3.2 for η_k = 1/(2β + λk/2) with the integral
    ∫₀^K dt/(2β + λt/2) = (2/λ)·log(1 + λK/(4β)), so that
    1 − e^{−(λ/2)·integral} = λK/(4β + λK).  The integral lies between the
    sums over k = 1, …, K (the theorem's indices) and k = 0, …, K−1
    (Algorithm 1's), so this closed form lies between Theorem 3.2 evaluated
    with those two index ranges.  The two sums differ by η_0 − η_K < 1/(2β),
    so (|e^{−a} − e^{−b}| ≤ |a − b|) all three agree to within
    α·4L²/(λn²σ²)·λ/(4β) — a relative 1/(4β/λ) of the limit, 5·10⁻⁶ for the
    paper's β/λ ≈ 5.5·10⁴ (Table 4).

    >>> float(corollary_3_3_rdp([2.0], lipschitz=1.0, strong_convexity=1.0, smoothness=1.0,
    ...                         sigma=1.0, n=1, iterations=4)[0])
    4.0
    """
    alpha = validate_orders(orders)
    L = _positive("lipschitz", lipschitz)
    beta, lam = _beta_lambda(smoothness, strong_convexity)
    s = _positive("sigma", sigma)
    size = _count("n", n)
    K = _count("iterations", iterations)
    limit = 4.0 * L * L / (lam * size * size * s * s)
    return alpha * limit * (lam * K / (4.0 * beta + lam * K))


# --------------------------------------------------------------------------- the analysis


def _constant_step(run: Run) -> float | None:
    """The step size if every step uses the same one, else ``None``."""
    if run.constant_learning_rate:
        return float(run.learning_rate)
    sizes = run.step_sizes()
    return float(sizes[0]) if np.all(sizes == sizes[0]) else None


class Ryffel(RDPAnalysis):
    """Ryffel, Bach & Pointcheval's Theorem 3.2 for DP-SGLD, as published — computed
    for comparison and to reproduce their numbers, **not sound** (:data:`UNSOUND_REASON`).

    K is the number of iterations, as in the theorem.  σ = z·L·√(η/2)/b
    (constant step sizes only; see the module docstring).
    """

    name = "ryffel"
    citation = _CITATION
    sound = False
    unsound_reason = UNSOUND_REASON
    #: What K counts: ``"steps"`` (the theorem) or ``"epochs"`` (the authors' code).
    count = "steps"

    def assumptions(self) -> list[str]:
        return [
            "only the final iterate θ_K is released; every intermediate iterate stays hidden",
            "every example's loss is λ-strongly convex (λ = m > 0) and β-smooth (β = M) on a closed "
            "convex set C, and its gradient norm is at most L (replace-one sensitivity 2L; a shared "
            "regulariser adds strong convexity without changing it)",
            "iterates are projected onto C after every step (C = R^d when no diameter is given; "
            "the diameter does not enter the bound)",
            "initialisation θ₀ ~ Π_C(N(0, (2σ²/λ)·I)) with σ = z·L·√(η/2)/b (Lemma 3.4): the trainer "
            "must draw θ₀ this way, independently of the data",
            "constant step size η < 1/β (Theorem 3.2, Lemma 3.4)",
            "each step draws a fresh uniform batch of exactly b examples (Algorithm 1; b = n for full "
            "batches) and adds N(0, (η·z·L/b)²I) to the parameters, i.e. √(2ησ²)·N(0, I)",
            "neighbouring datasets differ by replacing one example (both of size n)",
            "NOT SOUND: " + UNSOUND_REASON,
        ]

    def why_not(self, run: Run) -> str | None:
        if run.adjacency != "replace":
            return (
                "Ryffel et al. define neighbouring datasets as differing in one item, both of size n "
                "(Lemma 3.3: sensitivity (m/n)·(2L/m) = 2L/n); add/remove adjacency is not covered. "
                "Use adjacency='replace'"
            )
        if run.batching not in ("sample", "full"):
            return (
                "Algorithm 1 draws every batch afresh as a uniform subset of exactly m = b examples "
                f"('sample', or 'full' when m = n); {run.batching} batching is not covered"
            )
        if run.strong_convexity <= 0:
            return (
                "needs strong convexity m > 0 (Theorem 3.2; Lemma 3.4's LSI constant is λ/(2σ²)); "
                f"found m = {run.strong_convexity:g}"
            )
        if run.smoothness is None:
            return "needs the smoothness M (their β) to check η < 1/β (Lemma 3.4); found None"
        eta = run.max_learning_rate
        limit = 1.0 / run.smoothness
        if eta >= limit:
            return (
                f"needs learning rate < 1/β = 1/M = {limit:.6g} (Theorem 3.2, Lemma 3.4); "
                f"found {eta:g}"
            )
        if _constant_step(run) is None:
            sizes = run.step_sizes()
            z, L, b = run.noise_multiplier, run.lipschitz, run.batch_size
            lo = z * L * math.sqrt(float(sizes.min()) / 2.0) / b
            hi = z * L * math.sqrt(float(sizes.max()) / 2.0) / b
            return (
                "Theorem 3.2 assumes one noise level σ for all steps (Algorithm 1's σ², the SDE (3), "
                "Lemma 3.4's LSI constant λ/(2σ²)); a step-size schedule with a fixed noise "
                f"multiplier z has σ_k = z·L·√(η_k/2)/b ranging from {lo:.6g} to {hi:.6g}. Use a "
                "constant learning rate, or theorem_3_2_rdp with a constant σ for their schedules"
            )
        if run.initialization != "gaussian":
            return (
                "Lemma 3.4 needs the start θ₀ ~ Π_C(N(0, (2σ²/λ)·I)); declare "
                f"initialization='gaussian'; found initialization={run.initialization!r}"
            )
        return None

    # ------------------------------------------------------------ parameters

    def _inputs(self, run: Run) -> dict:
        eta = _constant_step(run)
        sigma = sigma_from_noise_multiplier(
            run.noise_multiplier, convention="ye-shokri", lipschitz=run.lipschitz,
            batch_size=run.batch_size, learning_rate=eta,
        )
        K = float(run.steps) if self.count == "steps" else float(run.epochs)
        return dict(eta=eta, sigma=sigma, K=K, time=eta * K)

    def rdp(self, run: Run, orders) -> np.ndarray:
        reason = self.why_not(run)
        if reason is not None:
            raise ValueError(f"run does not satisfy the assumptions of {self.name}: {reason}")
        alpha = validate_orders(orders)
        g = self._inputs(run)
        return _bound(alpha, lipschitz=run.lipschitz, lam=run.strong_convexity, sigma=g["sigma"],
                      n=run.n, diffusion_time=g["time"])

    def details(self, run: Run) -> dict:
        g = self._inputs(run)
        lam, L, n, sigma = run.strong_convexity, run.lipschitz, run.n, g["sigma"]
        limit = 4.0 * L * L / (lam * n * n * sigma * sigma)
        out = {
            "not_sound": self.unsound_reason,
            "sigma_ye_shokri": sigma,
            "lsi_constant": lam / (2.0 * sigma * sigma),
            "gradient_sensitivity": 2.0 * L / n,
            "gradient_sensitivity_note": "Lemma 3.3: (b/n)·(2L/b) = 2L/n on the batch-averaged drift",
            "iterations_K": g["K"],
            "K_counts": self.count,
            "diffusion_time": g["time"],
            "rdp_limit_per_order": limit,
            "rdp_limit_note": "ε(α) → α·4L²/(λn²σ²) as K → ∞ (Theorem 3.2)",
            "fraction_of_limit": -math.expm1(-0.5 * lam * g["time"]),
            "initialization": (
                f"θ₀ ~ Π_C(N(0, s²I)) with s = σ·√(2/λ) = {sigma * math.sqrt(2.0 / lam):.6g} "
                "(Lemma 3.4); the trainer must draw it so"
            ),
            "initialization_std": sigma * math.sqrt(2.0 / lam),
        }
        if run.batching == "full":
            out["full_batch_note"] = (
                "with b = n there are no random batches: the formula equals Ye & Shokri's Theorem 2.1 "
                "at b = n (Chourasia et al.'s full-batch setting)"
            )
        if self.count == "epochs":
            out["count_note"] = (
                "K is the number of epochs, as the authors' code passes it, not the number of "
                "iterations of Theorem 3.2; it understates Σ η_k by the factor steps_per_epoch"
            )
        return out


class RyffelEpochs(Ryffel):
    """Theorem 3.2 with K = the number of *epochs* (``run.epochs``), as the authors'
    public code counts it — to reproduce their published accounting.  Not the
    theorem (which counts iterations), and not sound either."""

    name = "ryffel-epochs"
    count = "epochs"
