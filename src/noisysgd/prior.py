"""The class prior, privately counted: the start of a classifier's run, and what it falls back to.

A private linear classifier trained on a table with little signal can land *below* the
majority class: its noisy weights spread the scores, and a run whose bias coordinate is small
cannot move the intercept to the base rate (a 3 %-positive table needs log-odds −3.5) within its
budget.  Two Gaussian queries, each charged to the certificate, fix both:

1. **The class counts** (before training).  c_k = #{i : y_i = k}, released as c̃_k = c_k +
   N(0, σ²) for every class k.  Replacing one row moves one count down and another up
   (L2 sensitivity √2); adding or removing one moves one count by 1 (sensitivity 1).  The
   answer is (Δ/σ)-GDP (Dong, Roth & Su 2022, Thm 2.7).  The prior p̂_k ∝ max(c̃_k, 0) + σ
   (post-processing: one noise std added to every count, a pseudo-count that shrinks the prior
   toward uniform where the noise is comparable to the counts — at ε = 0.5 on 1,437 rows of ten
   classes σ ≈ 100 against ~144 rows a class, and a raw noisy count near 0 would start a class at
   log-odds −8, a bias the run then spends its steps undoing: 0.59 against 0.83 test accuracy on
   digits, one seed; on a 3.3 %-positive table of 8,000 rows at ε = 1, σ ≈ 50 moves the start from
   log-odds −3.37 to −3.2) sets the run's start: the bias row of W₀ at log p̂ (softmax, centred),
   logit p̂_k (one-vs-rest) or logit p̂₁ (binary), divided by the bias coordinate s, so the first
   iterate already predicts the base rate.  Every analysis holds for any start fixed before the
   run (the two neighbouring runs start from the same W₀: the answer is released and
   conditioned on, as for the private mean), and W₀ is projected into the run's ball where the
   run has one.
2. **The release check** (after training).  D = Σ_i [1(model right on row i) − 1(the prior's
   class right on row i)] on the training rows, released as D̃ = D + N(0, σ_c²).  The model is
   fixed when the check is asked (it is released): one row moves D by at most 2 under replace
   adjacency (its term goes from one of −1, 0, 1 to another) and by 1 under add/remove, so D̃ is
   (Δ/σ_c)-GDP, composed adaptively with everything before it (GDP and PLD composition do not
   depend on the order: Dong, Roth & Su 2022, Cor. 3.3; Zhu, Dong & Wang 2022, Thm 10).  If
   D̃ < τ the classifier releases the prior instead of the model:
   coefficients 0 and the intercept of step 1 — post-processing of the two answers and the model.
   A model that beats the prior by many more rows than σ_c is kept every time; one that loses by
   many more is replaced every time; in between the choice is a coin whose bias follows D.  With
   the margin τ = ½σ_c the expected training accuracy falls below the prior's by at most
   max_x x·Φ̄(½ + x)·σ_c/n = 0.081·σ_c/n (0.17·σ_c/n at τ = 0: a point on 645 rows at ε = 1), and
   a model better than the prior loses at most 0.31·σ_c/n of its advantage in expectation.
3. **The margin** (:func:`check_margin`: +:data:`CHECK_MARGIN`·σ_c on every fit).  A model whose
   scores carry no information about the labels predicts class j on a share q_j of the rows whatever
   their labels, so it falls below the prior's class by max π − Σ q π: 0 on balanced classes, up to
   π_max − π_min elsewhere.  A negative margin (−½σ_c where k ≥ 3 and the private prior's largest
   share is at most 1/k + 0.2) was shipped for that reason and withdrawn
   (``benchmarks/raw_tables/README.md`` §23, §26).  On the real tables it helped only where the class
   counts' noise exceeds the rows of a class (iris, wine, penguins at ε ≤ 1: 120–280 rows), where the
   released prior cannot tell balanced classes from 0.8/0.1/0.1 — every rule that fires only where
   the counts resolve the shares gains nothing over +½σ_c there.  On synthetic tables of known shares
   it cost up to 10.5 points a cell on 120 training rows and 3.6 on 400 (0.5/0.25/0.25 passes its
   test, although a model without signal can fall 0.25 below the prior's class there), and it
   turned 6 of 66 no-signal T1 cells of 400 rows or more from pass to miss.  So the check keeps the
   margin that guards against a model worse than the prior, whatever the prior reads.

Both queries spend shares of the whole target's GDP μ — that of the (ε, δ) the user asked for, not
of what other queries left (:data:`PRIOR_SHARE`, :data:`CHECK_SHARE`) — and of δ, reserved before
the noise of the run is calibrated; the run's calibration then meets the
target with both composed in (:func:`noisysgd.accountant.compose_with_query`).
"""

from __future__ import annotations

import math

import numpy as np

from .preprocessing import gaussian_share, query_rng, recorded_part
from .rowmaps import augment_blocks

__all__ = ["rows_right", "CHECK_MARGIN", "check_margin", "PRIOR_SHARE", "PRIOR_DELTA_SHARE", "CHECK_SHARE", "CHECK_DELTA_SHARE", "class_counts_sensitivity",
           "check_sensitivity", "private_class_counts", "class_prior_within", "prior_start", "reserve_check",
           "release_check"]

#: The class-count query's share of the target's GDP μ: alone it costs the run √(1 − 0.1²) of its
#: μ, 0.5 % more noise.
PRIOR_SHARE = 0.1
#: Its share of δ.
PRIOR_DELTA_SHARE = 0.02
#: The release check's share of the target's GDP μ: alone 2 % more noise on the run.  At ε = 1
#: (μ ≈ 0.27) it is σ_c ≈ 37 rows under replace adjacency (taken of the μ the mean, ranges and
#: curvature queries leave, it was 65 rows, and on 645 rows of a table without signal a model 6
#: points under the majority was kept on 2 of 3 seeds).
CHECK_SHARE = 0.2
#: Its share of δ.
CHECK_DELTA_SHARE = 0.03
#: The model is released when the check's noisy difference is at least this many noise standard
#: deviations (module docstring: the expected loss below the prior, and above it, it allows).
CHECK_MARGIN = 0.5


def class_counts_sensitivity(adjacency: str) -> float:
    """L2 sensitivity of the k class counts: √2 (replace: one count down, one up), 1 (add/remove)."""
    return math.sqrt(2.0) if adjacency == "replace" else 1.0


def check_sensitivity(adjacency: str) -> float:
    """Sensitivity of the release check's count D: 2 (replace), 1 (add/remove)."""
    return 2.0 if adjacency == "replace" else 1.0


def _labels(y, k: int) -> np.ndarray:
    """Class indices 0..k−1 of encoded labels (binary ±1 labels as 0/1)."""
    y = np.asarray(y)
    if k == 2 and y.size and np.all(np.isin(y, (-1, 1))) and np.any(y == -1):
        return (y > 0).astype(np.intp)
    return y.astype(np.intp)


def private_class_counts(y, k: int, mu: float, *, adjacency: str = "replace", rng=None) -> tuple:
    """(the prior p̂ of the k classes, the query's details): the counts with N(0, σ²) noise,
    σ = Δ/μ (module docstring, 1), p̂_k ∝ max(c̃_k, 0) + σ.  ``y``: class indices (or ±1)."""
    if not (isinstance(k, int) and k >= 2):
        raise ValueError(f"k must be an integer >= 2 (the number of classes). Found {k!r}.")
    if not mu > 0:
        raise ValueError(f"mu must be positive. Found {mu!r}.")
    labels = _labels(y, k)
    if labels.size and (labels.min() < 0 or labels.max() >= k):
        raise ValueError(f"y must hold class indices 0..{k - 1}. Found values outside that range.")
    rng = np.random.default_rng(rng) if not hasattr(rng, "standard_normal") else rng
    counts = np.bincount(labels, minlength=k).astype(np.float64)
    sigma = class_counts_sensitivity(adjacency) / mu
    noisy = counts + sigma * rng.standard_normal(k)
    kept = np.maximum(noisy, 0.0) + sigma  # shrunk toward uniform by one noise std (module docstring)
    prior = kept / kept.sum()
    return prior, {"class_prior": prior.tolist(), "noisy_counts": noisy.tolist(), "noise_std": sigma, "mu": mu,
                   "adjacency": adjacency,
                   "query": (f"Gaussian count of each of the {k} classes, L2 sensitivity "
                             f"{class_counts_sensitivity(adjacency):.4g}"),
                   "citation": "Dong, Roth & Su 2022, Theorem 2.7 (Gaussian mechanism is mu-GDP)"}


def class_prior_within(y, k: int, epsilon: float, delta: float, *, adjacency: str, seed=None,
                       secure_mode: bool = False, recorded: dict | None = None, target_mu: float | None = None) -> tuple:
    """Spend :data:`PRIOR_SHARE` of the target's μ (``target_mu``: the whole fit's, before any
    query; default that of (``epsilon``, ``delta``)), at :data:`PRIOR_DELTA_SHARE`·δ, on
    :func:`private_class_counts`; returns (prior, details with its own (ε, δ), epsilon and delta
    left for the rest under basic composition).  Noise and ``recorded`` as
    :func:`noisysgd.preprocessing.private_ranges_within`."""
    mu, eq, dq = gaussian_share(epsilon, delta, PRIOR_SHARE, PRIOR_DELTA_SHARE, what="the class prior",
                                target_mu=target_mu)
    part = recorded_part(recorded, "class_prior")
    if part is not None:
        return np.asarray(part["class_prior"], dtype=float), part, epsilon - eq, delta - dq
    prior, details = private_class_counts(y, k, mu, adjacency=adjacency,
                                          rng=query_rng(seed, secure_mode, 0xC1A55))
    details.update(epsilon=float(eq), delta=float(dq), share_of_mu=PRIOR_SHARE)
    return prior, details, epsilon - eq, delta - dq


def prior_start(prior, shape: tuple, intercept_scaling: float, *, ovr: bool = False,
                radius: float | None = None) -> np.ndarray:
    """W₀ whose scores are the prior's log-odds on every row: zeros but the bias row (the last),
    there logit p̂₁/s for a binary W of ``shape`` (d+1,), else (log p̂ − mean log p̂)/s for a
    softmax or logit p̂_k/s one-vs-rest (``ovr``), ``shape`` (d+1, k); scaled into the ball of
    ``radius`` where the run projects (the direction kept: the start stays in K).

    >>> W0 = prior_start([0.75, 0.25], (3,), 0.5)
    >>> W0[:2].tolist(), bool(round(0.5 * W0[-1], 4) == round(math.log(0.25 / 0.75), 4))
    ([0.0, 0.0], True)
    """
    s = float(intercept_scaling)
    if not s > 0:
        raise ValueError(f"intercept_scaling must be positive. Found {intercept_scaling!r}.")
    W0 = np.zeros(shape)
    kind = "binary" if len(shape) == 1 else ("ovr" if ovr else "softmax")
    W0[-1] = _log_odds(prior, kind) / s
    if radius is not None:
        norm = float(np.linalg.norm(W0))
        if norm > radius:
            W0 *= radius / norm
    return W0


def _log_odds(prior: np.ndarray, kind: str) -> np.ndarray:
    p = np.clip(np.asarray(prior, dtype=np.float64), 1e-12, 1.0)
    if kind == "binary":
        return np.array(math.log(p[1]) - math.log(p[0]))
    if kind == "ovr":
        return np.log(p) - np.log1p(-np.minimum(p, 1.0 - 1e-12))
    logs = np.log(p)
    return logs - logs.mean()


def reserve_check(epsilon: float, delta: float, *, adjacency: str, target_mu: float | None = None) -> tuple:
    """The release check's budget, reserved before the run: :data:`CHECK_SHARE` of the target's
    μ (``target_mu``, as :func:`class_prior_within`) at :data:`CHECK_DELTA_SHARE`·δ.  Returns
    (details without an answer, epsilon and delta left under basic composition)."""
    mu, eq, dq = gaussian_share(epsilon, delta, CHECK_SHARE, CHECK_DELTA_SHARE, what="the release check",
                                target_mu=target_mu)
    sens = check_sensitivity(adjacency)
    return {"release_check": "the model against the prior's class, asked after the run", "mu": mu, "epsilon": float(eq), "delta": float(dq),
            "noise_std": sens / mu, "share_of_mu": CHECK_SHARE, "adjacency": adjacency,
            "query": ("Gaussian count of the training rows the model gets right minus those the prior's "
                      f"class gets right, sensitivity {sens:g} (the model fixed: it is released)"),
            "citation": "Dong, Roth & Su 2022, Theorem 2.7 (Gaussian mechanism is mu-GDP)"}, epsilon - eq, delta - dq


def check_margin(prior) -> tuple[float, str]:
    """(the check's margin τ/σ_c, why) for the released class prior p̂: +:data:`CHECK_MARGIN` on every
    fit (module docstring, 3: a negative margin on near-uniform priors was measured and withdrawn).
    The pipeline asks here, with the released prior only, so that whatever decides the margin is
    post-processing of answers already charged.

    >>> check_margin([0.3, 0.4, 0.3])[0], check_margin([0.8, 0.1, 0.1])[0], check_margin([0.5, 0.5])[0]
    (0.5, 0.5, 0.5)
    """
    del prior  # (the same margin for every prior)
    return CHECK_MARGIN, f"the model is kept if it is ahead by at least {CHECK_MARGIN:g} noise std"


def release_check(model_right: int, prior_right: int, details: dict, *, margin: float = CHECK_MARGIN, seed=None,
                  secure_mode: bool = False, rng=None) -> bool:
    """Ask the reserved check (:func:`reserve_check`'s ``details``, filled in place with the
    answer): D̃ = model_right − prior_right + N(0, σ_c²) (:func:`rows_right`'s counts).  True when
    the model is kept (D̃ ≥ ``margin``·σ_c; :func:`check_margin`), False when the prior is released
    instead.  ``rng``: a generator (tests); else the query's own stream of ``seed``, or the OS CSPRNG
    in ``secure_mode``."""
    rng = query_rng(seed, secure_mode, 0xFA11B) if rng is None else rng
    diff = float(int(model_right) - int(prior_right))
    noisy = diff + details["noise_std"] * float(rng.standard_normal())
    kept = noisy >= float(margin) * details["noise_std"]
    details.update(noisy_difference=noisy, kept_model=bool(kept), margin=float(margin))
    return bool(kept)


def rows_right(W, X, y, *, feature_clip: float, intercept_scaling: float, prior_class: int,
               step: int = 8192) -> tuple[int, int]:
    """(rows the model W gets right, rows the prior's class gets right) among the training rows
    ``X`` as the run read them (clipped to ``feature_clip``, the bias coordinate
    ``intercept_scaling`` appended), a block at a time; ``y``: their class indices (or ±1)."""
    W = np.asarray(W, dtype=np.float64)
    k = 2 if W.ndim == 1 else W.shape[1]
    labels = _labels(y, k)
    model = 0
    for i in range(0, labels.size, step):  # (the trainer's row map: clip to R, the bias coordinate s)
        rows = np.asarray(X[i:i + step], dtype=np.float64)
        blocks, _ = augment_blocks(rows, feature_clip, np.dtype(np.float64), bias=intercept_scaling, step=step)
        scores = next(blocks)[1] @ W[:-1] + intercept_scaling * W[-1]
        pred = (scores >= 0).astype(np.intp) if W.ndim == 1 else np.argmax(scores, axis=1)
        model += int(np.count_nonzero(pred == labels[i:i + step]))
    return model, int(np.count_nonzero(labels == int(prior_class)))
