"""A private estimate of the data's curvature: the step size of the composition regime.

The smoothness M the analyses use is the worst case over all data sets: a generalised linear
loss with ψ'' ≤ κ on rows of norm ≤ R̄ (R̄² = R² + s², the feature clip and the bias coordinate)
is M = κR̄²-smooth (``Loss.constants``).  The objective the trainer minimises is smoother on most
data: its Hessian is (1/n)·Σ ψ''_i ⊗ x̄_i x̄_iᵀ ⪯ κ·A, A = (1/n)·Σ x̄_i x̄_iᵀ (for the softmax
diag(p) − ppᵀ ⪯ ½·I, Ye & Shokri 2022, Prop. 5.1), so it is M·λ_max(A)/R̄²-smooth.  On the
clipped, centered Fashion-MNIST rows λ_max(A)/R̄² is 0.19 (pixels) and 0.23 (ScatterNet).

Under a composition certificate the step size plays no part in the privacy guarantee (every
iterate is covered), so the amplified-composition regime of :mod:`noisysgd.config` may take its
step from the data's curvature rather than the worst case, provided the curvature is released
privately and charged.  This module releases it:

**Noisy power iteration** (Hardt & Price 2014, *The noisy power method*).  v₀ is a random unit
vector drawn independently of the data; for k = 1..K the answer y_k = A·v_{k−1} + N(0, σ²I_p) is
released and v_k = y_k/‖y_k‖ (p = d + 1).  Sensitivity: replacing one row changes A by
(x̄x̄ᵀ − x̄'x̄'ᵀ)/n, a difference of two positive semi-definite matrices each ⪯ R̄²·I, whose
eigenvalues therefore lie in [−R̄², R̄²]: ‖(A − A')v‖ ≤ R̄²/n for a unit v.  Adding or removing
a row (n public: the trainer's declared ``public_n``) changes A by ±x̄x̄ᵀ/n: the same bound.
Each answer is a Gaussian mechanism of L2 sensitivity Δ = R̄²/n, hence (Δ/σ)-GDP (Dong, Roth &
Su 2022, Thm 2.7), and the K answers, each chosen from the previous ones, are √K·Δ/σ-GDP
(ibid., Cor. 3.3): σ = √K·Δ/μ_c for a budget μ_c.  Rows are clipped to R̄ inside the query (a
no-op in exact arithmetic), so the bound holds for the rows as the query computes them.

**The estimate** (post-processing of y_K): ρ = √max(‖y_K‖² − pσ², 0) estimates ‖A·v_{K−1}‖ ≤
λ_max(A) (E‖y_K‖² = ‖Av‖² + pσ²), and λ̂ = min(R̄², ρ + σ√p) adds the noise's expected norm as a
margin: the power iteration approaches λ_max from below, and the margin keeps λ̂ above it where
the noise, not the iteration, limits the estimate.  Measured on Fashion-MNIST (60,000 rows,
μ_c = 0.05, K = 8, 5 draws each): ρ/λ_max = 0.98 ± 0.01 (pixels) and 0.96 ± 0.02 (ScatterNet),
λ̂/λ_max 1.12 and 1.22.  It is an estimate, not a bound: a spectrum with one eigenvalue barely
above a large bulk converges slowly, and K = 8 rounds from a random start can then stop up to
~25 % below λ_max; the step it sets stays within the smooth bound's range only up to that.

The query is asked only where it can tell something (:func:`curvature_applies`): the
composition regime is searched (``learning_rate="auto"``, a convex loss with a smoothness
constant, batching "auto" or "poisson", a target ε) and the noise's expected norm σ√p is at
most :data:`INFORMATIVE`·R̄², so that λ̂ can fall well below the worst case — decided from n, p
and the budget, all public, before anything is read.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["CURVATURE_SHARE", "CURVATURE_DELTA_SHARE", "ROUNDS", "INFORMATIVE", "curvature_noise",
           "curvature_applies", "private_curvature", "private_curvature_within", "curvature_for"]

#: The curvature query's share of the target's GDP μ (the private mean takes 0.3): alone it
#: would cost the training √(1 − 0.15²) of its μ, 1.1 % more noise.
CURVATURE_SHARE = 0.15
#: Its share of δ.
CURVATURE_DELTA_SHARE = 0.05
#: Rounds of the noisy power iteration.
ROUNDS = 8
#: The query is asked only if the noise's expected norm σ√p is at most this share of R̄²: the
#: estimate λ̂ ≥ σ√p could not otherwise fall much below the worst case.
INFORMATIVE = 0.125


def curvature_noise(*, n: int, p: int, mu: float, radius2: float, rounds: int = ROUNDS) -> float:
    """σ of every answer of the noisy power iteration: √K·Δ/μ, Δ = R̄²/n (module docstring).

    >>> curvature_noise(n=1000, p=10, mu=0.5, radius2=2.0, rounds=4)
    0.008
    """
    return math.sqrt(rounds) * (radius2 / n) / mu


def curvature_applies(*, n: int, p: int, mu: float, radius2: float, rounds: int = ROUNDS) -> bool:
    """Whether the query's noise lets λ̂ fall below :data:`INFORMATIVE`·R̄² + λ_max (public inputs only).

    >>> curvature_applies(n=60000, p=785, mu=0.05, radius2=0.5), curvature_applies(n=455, p=31, mu=0.05, radius2=0.5)
    (True, False)
    """
    return curvature_noise(n=n, p=p, mu=mu, radius2=radius2, rounds=rounds) * math.sqrt(p) <= INFORMATIVE * radius2


def private_curvature(rows, *, n: int, radius2: float, mu: float, rng, rounds: int = ROUNDS) -> tuple[float, dict]:
    """The noisy power iteration of the module docstring on ``rows`` (a
    :class:`noisysgd.train.rows.Rows`: the rows as the trainer reads them, bias included), for
    A = (1/n)·Σ x̄_i x̄_iᵀ with ``n`` the public row count, every row clipped to norm √``radius2``
    (R̄²), at budget ``mu`` (μ_c-GDP) with noise from ``rng``.  Returns (λ̂, details)."""
    from .train.rows import block_rows

    if not (isinstance(mu, (int, float)) and mu > 0 and math.isfinite(mu)):
        raise ValueError(f"mu must be a positive number. Found {mu!r}.")
    m, p = rows.shape
    sigma = curvature_noise(n=n, p=p, mu=mu, radius2=radius2, rounds=rounds)
    # the query's own clip to R̄ (a no-op in exact arithmetic: the trainer's rows have norm ≤ R̄),
    # from rows.norms, an upper bound on each row's computed norm: its answers are a function of
    # rows of norm ≤ R̄ whatever rounding did
    weight = np.minimum(1.0, radius2 / np.maximum(rows.norms * rows.norms, 1e-300))
    weight = (weight * (1.0 - 4.0 * float(np.finfo(rows.dtype).eps))).astype(rows.dtype)  # rounded down
    v = rng.standard_normal(p)  # v₀: drawn before anything of the data is read
    v /= np.linalg.norm(v)
    step = block_rows(p)
    part = np.empty((p, 1), dtype=rows.dtype)
    y = None
    for _ in range(rounds):
        V = v.astype(rows.dtype)[:, None]
        Av = np.zeros(p)
        for i in range(0, m, step):
            block = rows.gather(slice(i, min(i + step, m)))
            S = rows.scores(block, V)
            S *= weight[i:i + step, None]
            Av += rows.gradient_sum(block, S, part)[:, 0]
        y = Av / n + sigma * rng.standard_normal(p)
        v = y / max(np.linalg.norm(y), 1e-300)
    rho = math.sqrt(max(float(y @ y) - p * sigma * sigma, 0.0))
    noise_norm = sigma * math.sqrt(p)
    estimate = min(float(radius2), rho + noise_norm)
    details = {
        "curvature": "private", "rounds": int(rounds), "mu": float(mu), "noise_std": float(sigma),
        "query": (f"noisy power iteration, {rounds} Gaussian answers A·v + N(0, σ²I) of L2 sensitivity "
                  f"R̄²/n = {radius2 / n:.4g} each (A the second moment of the rows as trained, R̄² = {radius2:.4g})"),
        "power_norm": rho, "expected_noise_norm": noise_norm, "lambda_max_estimate": estimate,
        "radius2": float(radius2), "ratio": estimate / float(radius2),
        "citation": ("Hardt & Price 2014 (noisy power method); Dong, Roth & Su 2022, Thm 2.7 and Cor. 3.3 "
                     "(Gaussian mechanisms, adaptive GDP composition)"),
    }
    return estimate, details


def private_curvature_within(X, epsilon: float, delta: float, *, feature_clip: float, intercept_scaling: float,
                             n: int, seed=None, secure_mode: bool = False, recorded: dict | None = None,
                             dtype=np.float64) -> tuple:
    """Spend :data:`CURVATURE_SHARE` of the target's μ (μ = :func:`noisysgd.gdp.gdp_mu` of
    (``epsilon``, ``delta``)) and :data:`CURVATURE_DELTA_SHARE` of δ on :func:`private_curvature`
    of the rows ``X`` as trained (an array or a :class:`~noisysgd.train.rows.CenteredRows`, clipped to
    ``feature_clip`` R, bias ``intercept_scaling`` s; ``n`` the public row count).  Returns (the
    ratio λ̂/R̄² or None when the query does not apply, query details or None, epsilon and delta
    left for training under basic composition — the trainer then calibrates to the composed
    total).  ``recorded``: a checkpoint's query (its answer is reused, not drawn again)."""
    from .gdp import gdp_epsilon, gdp_mu
    from .preprocessing import query_rng, recorded_part
    from .train.rows import rows_of, source_norms

    part = recorded_part(recorded, "curvature")
    if part is not None:
        return float(part["ratio"]), part, epsilon - part["epsilon"], delta - part["delta"]
    radius2 = float(feature_clip) ** 2 + float(intercept_scaling) ** 2
    p = X.shape[1] + 1
    mu = CURVATURE_SHARE * gdp_mu(epsilon, delta)
    if not (mu > 0 and curvature_applies(n=n, p=p, mu=mu, radius2=radius2)):
        return None, None, epsilon, delta
    dq = CURVATURE_DELTA_SHARE * delta
    eq = gdp_epsilon(mu, dq)
    if not eq < epsilon:
        return None, None, epsilon, delta
    rows = rows_of(X, feature_clip, np.dtype(dtype), source_norms(X), bias=intercept_scaling)
    _, query = private_curvature(rows, n=n, radius2=radius2, mu=mu,
                                 rng=query_rng(seed, secure_mode, 0xC0A7E))
    query.update(epsilon=float(eq), delta=float(dq), share_of_mu=CURVATURE_SHARE)
    return query["ratio"], query, epsilon - eq, delta - dq


def curvature_for(p: dict, X, loss, n: int, target_bound=None, *, seed=None, secure_mode: bool = False,
                  recorded: dict | None = None) -> tuple:
    """The curvature query of a fit about to choose its configuration, where the composition regime
    will be searched (``p``: the estimator's checked parameters, as :func:`noisysgd.config.configure`
    reads them; ``X`` the rows as trained; ``n`` the public row count):
    :func:`noisysgd.config.composition_searched`, a convex loss with a smoothness constant — and
    :func:`curvature_applies`.  Lowers ``p``'s target to what is left
    for training.  Returns (the ratio λ̂/R̄² or None, the query's details or None)."""
    from .config import composition_searched, declared_clip_norm
    from .private_fit import default_delta

    if not composition_searched(p):
        return None, None
    c = loss.constants(feature_clip=p["feature_clip"], clip_norm=declared_clip_norm(p["clip_norm"]),
                       diameter=p["diameter"],
                       target_bound=target_bound, intercept_scaling=p["intercept_scaling"])
    if c.smoothness is None or not c.convex:
        return None, None
    delta = default_delta(n) if p["delta"] is None else p["delta"]
    dtype = np.float32 if np.dtype(getattr(X, "dtype", np.float64)) == np.float32 else np.float64
    ratio, query, epsilon, delta = private_curvature_within(
        X, p["epsilon"], delta, feature_clip=p["feature_clip"], intercept_scaling=p["intercept_scaling"], n=n,
        seed=seed, secure_mode=secure_mode, recorded=recorded, dtype=dtype)
    if query is not None:
        p["epsilon"], p["delta"] = epsilon, delta
    return ratio, query
