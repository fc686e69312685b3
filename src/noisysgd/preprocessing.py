"""Private preprocessing: feature scaling from public ranges or a private range query,
centering on a private mean, and a warning for scalers fitted on the private data.

:func:`private_center` (the classifier's default ``center="auto"``) subtracts a
Gaussian-mechanism mean of the clipped rows and clips the centered rows to an R_c
estimated from it; :func:`private_feature_ranges` (``feature_range="private"``)
estimates per-feature ranges.  Both are μ-GDP queries; :func:`noisysgd.accountant.compose_query`
composes them with the training bound into the certificate.

The estimators clip every feature vector to norm ``feature_clip`` R.  Raw
features of very different scales (breast_cancer: areas in the thousands,
smoothness in hundredths) are then dominated by the largest; a
``StandardScaler`` fitted on the training data fixes the scale but its
means and standard deviations are statistics of the private data that no
certificate covers (they are released with the model and they shape the
training).

:class:`PublicRangeScaler` (and the estimators' ``feature_range=`` argument)
scales with bounds the user *declares* from public knowledge — a pixel lies
in [0, 255], an age in [0, 120] — not from the data: each feature is clipped
to [low_j, high_j], mapped affinely to [−1, 1], and the vector is multiplied
by R/(½·√(d + 1)), so that a row whose coordinates lie halfway between the middle
and the ends of their ranges has norm R; the trainer clips longer rows to R, as it
clips every row (:data:`SPREAD`: scaling for the worst case, every coordinate at an
end, shrinks typical rows to half the ball and halves their signal against the
noise).  This is a fixed function of each example alone: it costs no privacy
(post-processing of nothing; the trainer's sensitivity analysis only needs the
norm clipping ‖x‖ ≤ R, which it applies itself).

:func:`noisysgd.scalers.warn_if_private_preprocessing` (called by the estimators' ``fit``)
looks up the call stack for a scikit-learn ``Pipeline`` that is fitting the
estimator and warns (:class:`~noisysgd.train.PrivacyLeakWarning`) for every
step before it that learns from the data passed to ``fit`` — anything but a
:class:`~noisysgd.scalers.PublicRangeScaler`, a stateless ``FunctionTransformer``,
``"passthrough"`` or ``None``.  This detects the plain ``Pipeline`` /
``make_pipeline`` use; a transformer fitted separately by hand cannot be
detected.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from .rowmaps import SPREAD, center_rows, clip_rows, row_norms, scale_to_ball  # (the maps; exported here)
from .train.rows import block_rows

__all__ = ["scale_to_ball", "SPREAD", "private_feature_ranges", "gaussian_share", "scaling_decision", "SCALING_RATIO", "SCALING_TRUSTED",
           "exponent_histogram", "private_ranges_within", "PRIVATE_RANGE_SHARE",
           "clip_rows", "center_rows", "private_center", "private_center_within", "combine_queries", "recorded_query", "CENTER_SHARE",
           "CENTER_DELTA_SHARE"]

#: Share of the estimators' (ε, δ) that ``feature_range="private"`` spends on the range query.
PRIVATE_RANGE_SHARE = 0.1
#: Share of the target's μ (the μ whose μ-GDP meets the target (ε, δ)) that ``center="private"``
#: gives its mean query: under GDP composition training keeps √(1 − 0.3²) of μ, about 5 % more noise.
CENTER_SHARE = 0.3
#: Share of δ that ``center="private"``'s mean query takes.
CENTER_DELTA_SHARE = 0.1
#: Binary exponents the private range query distinguishes: |x| in [2^k, 2^(k+1)) for k in this
#: range (smaller magnitudes count in the lowest bucket, larger in the highest).
EXPONENTS = (-16, 16)
#: Noisy counts below this many noise standard deviations are read as empty.
NOISE_FLOOR = 3.0



def exponent_histogram(X, lo: int, hi: int) -> np.ndarray:
    """Counts (d × (hi − lo + 1)) of ⌊log₂|x_ij|⌋ per feature, clamped to [lo, hi] (0 counts in
    the lowest bucket): one count per feature and example, the query's sensitivity."""
    n, d = np.shape(X)
    counts = np.zeros((d, hi - lo + 1))
    step = max(1, (1 << 20) // max(d, 1))  # a block of rows at a time: no temporary of X's size
    for i in range(0, n, step):
        block = np.asarray(X[i:i + step], dtype=np.float64)
        with np.errstate(divide="ignore"):
            e = np.floor(np.log2(np.abs(block)))
        e = np.clip(np.nan_to_num(e, neginf=lo), lo, hi).astype(np.int64) - lo
        counts += np.stack([np.bincount(e[:, j], minlength=hi - lo + 1) for j in range(d)])
    return counts


def private_feature_ranges(X, epsilon: float, delta: float, *, adjacency: str = "replace",
                           quantile: float = 0.95, exponents=EXPONENTS, rng=None, warn: bool = True) -> tuple:
    """Per-feature ranges (−s_j, s_j) from a differentially private query, and its description.

    The query: for every feature j, the histogram of the binary exponent ⌊log₂|x_ij|⌋ over
    the public buckets ``exponents`` (clamped at both ends), all d histograms released with
    Gaussian noise of standard deviation σ on every count.  One example adds one count to each
    of the d histograms, so replacing it moves at most one count in each (L2 sensitivity
    Δ = √(2d)); adding or removing it changes one count in each (Δ = √d).  The Gaussian
    mechanism is then μ-GDP with μ = Δ/σ (Dong, Roth & Su 2022, Theorem 2.7), and σ is the
    smallest found by bisection with μ-GDP ⇒ (``epsilon``, ``delta``)-DP by the exact
    conversion (their Corollary 2.13; :func:`noisysgd.gdp.gdp_epsilon`).

    From the noisy counts (those below ``NOISE_FLOOR``·σ read as 0)
    s_j = 2^(k+1) for the smallest bucket k above which at
    most (1 − ``quantile``)·n of the noisy mass lies — post-processing, with
    n = the number of rows (public under replace adjacency; under add/remove the noisy total
    stands in for it).  Values beyond s_j are clipped by the scaling, as any range clips.
    A feature with no count above the floor (unseen) gets the lower median of the ranges read at a
    strict floor (none of the d·B empty counts above it with probability 95 %, and never below
    ``NOISE_FLOOR``) for the features seen there above the lowest bucket — its values clipped there
    rather than sent to almost nothing by the widest public range, which it gets only where no
    feature was seen so (a ``UserWarning`` says how many were unseen).  The strict read drops the
    counts between the two floors, so this range is at or below the median of the ranges those
    features got: a guess that clips rather than shrinks.  Clipping at a scale too small keeps a
    column's sign and order up to the clip; scaling by one far too large erases it
    (``benchmarks/raw_tables/README.md`` §16: ``feature_range="private"`` moved by +0.3, +1.2 and
    +0.1 points of mean accuracy on three table sets, −0.1 on the fourth).

    Returns ((low, high), details) with low = −s, high = s (arrays of shape (d,))."""
    from .gdp import gdp_mu

    n, d = np.shape(X)  # (read a block of rows at a time: exponent_histogram)
    lo, hi = int(exponents[0]), int(exponents[1])
    if not (isinstance(quantile, numbers.Real) and 0.0 < quantile < 1.0):
        raise ValueError(f"quantile must be in (0, 1). Found {quantile!r}.")
    if adjacency not in ("replace", "add-remove"):
        raise ValueError(f"adjacency must be 'replace' or 'add-remove'. Found {adjacency!r}.")
    rng = np.random.default_rng(rng) if not hasattr(rng, "standard_normal") else rng
    counts = exponent_histogram(X, lo, hi)
    B = hi - lo + 1
    sens = math.sqrt((2.0 if adjacency == "replace" else 1.0) * d)
    # the smallest σ (largest μ = sens/σ) whose exact conversion meets (epsilon, delta)
    mu = gdp_mu(epsilon, delta)
    if not mu > 1e-9:
        raise ValueError(f"epsilon {epsilon!r} at delta {delta!r} is too small for the range query.")
    sigma = sens / mu
    noisy = counts + sigma * rng.standard_normal(counts.shape)
    k, empty = _quantile_buckets(noisy, NOISE_FLOOR * sigma, n, quantile, adjacency)
    # the same read at a floor that all d·B empty counts stay under with probability 95 % (Bonferroni):
    # the scales a decision about the whole table may trust (:func:`scaling_decision`), and the one
    # an unseen column takes
    strict = max(NOISE_FLOOR, _bonferroni_floor(d * B))  # (never below the 3σ floor: at d = 1 it would be)
    k_s, unseen = _quantile_buckets(noisy, strict * sigma, n, quantile, adjacency)
    k[empty] = _unseen_bucket(k_s, unseen, B)
    s = np.exp2(k + lo + 1.0)
    k_s[unseen] = -1                                           # unseen at the strict floor
    details = {
        "feature_range": "private",
        "query": ("Gaussian histogram of each feature's binary exponent floor(log2|x|) over buckets "
                  f"2^{lo}..2^{hi} (clamped), L2 sensitivity sqrt({'2' if adjacency == 'replace' else ''}d) "
                  f"= {sens:.4g}"),
        "noise_std": sigma, "mu": mu, "epsilon": float(epsilon), "delta": float(delta),
        "quantile": float(quantile), "adjacency": adjacency,
        "citation": "Dong, Roth & Su 2022, Theorem 2.7 (Gaussian mechanism is mu-GDP), Corollary 2.13",
        "scales": s.tolist(),
        "uninformative_features": int(empty.sum()),
        # the range an unseen feature took (post-processing of the seen ones'), None where none was unseen
        "unseen_scale": float(s[empty][0]) if empty.any() else None,
        # at the strict floor: 2^(k+1) per column, 0 where unseen (post-processing of the same counts)
        "strict_scales": np.where(k_s >= 0, np.exp2(k_s + lo + 1.0), 0.0).tolist(),
        "lowest_scale": float(2.0 ** (lo + 1)),
    }
    if empty.any() and warn:  # post-processing of the released counts: saying so leaks nothing more
        fallback = (f"the median of the seen ones' ranges, read at a strict floor (±{s[empty][0]:g}), "
                    "which may clip them"
                    if s[empty][0] < 2.0 ** (hi + 1) else
                    f"the widest public range (±2^{hi + 1}), which shrinks them to almost nothing")
        warnings.warn(
            f"feature_range='private': the query's noise (std {sigma:.3g} per count"
            + (f", n = {n} rows" if adjacency == "replace" else "") + ") swamps "
            f"every count of {int(empty.sum())} of {d} features; their ranges fell back to {fallback}. Give "
            "public bounds (feature_range=(low, high) arrays; noisysgd train --feature-range COL=LOW:HIGH, "
            "repeated) or more rows", UserWarning, stacklevel=3)
    return (-s, s), details


def _unseen_bucket(k: np.ndarray, empty: np.ndarray, B: int) -> int:
    """The bucket an unseen column's range is read at: the lower median of the buckets ``k`` of the
    columns seen (not ``empty``) above the lowest (a column nearly always 0 says nothing of the others'
    units), or the highest public bucket where none was (:func:`private_feature_ranges` passes the
    read at the strict floor: one noise spike does not set every unseen column's range)."""
    seen = k[~empty]
    seen = np.sort(seen[seen > 0])
    return int(seen[(seen.size - 1) // 2]) if seen.size else B - 1


def _quantile_buckets(noisy: np.ndarray, floor: float, n: int, quantile: float, adjacency: str) -> tuple:
    """(per feature, the first bucket with at most (1 − ``quantile``) of the mass strictly above it;
    the features with no count above ``floor``), the noisy counts below ``floor`` read as empty —
    otherwise the positive noise of the many empty buckets adds up to a spurious tail and inflates the
    ranges.  The mass is n under replace adjacency (public), the kept noisy total under add/remove."""
    mass = np.where(noisy > floor, noisy, 0.0)
    total = float(n) if adjacency == "replace" else np.maximum(mass.sum(axis=1), 1.0)[:, None]
    above = np.cumsum(mass[:, ::-1], axis=1)[:, ::-1]          # above[:, k] = mass in buckets >= k
    tail = np.concatenate([above[:, 1:], np.zeros((mass.shape[0], 1))], axis=1)  # strictly above bucket k
    k = np.argmax(tail <= (1.0 - quantile) * total, axis=1)   # the first bucket with little above it
    return k, mass.sum(axis=1) == 0.0


def _bonferroni_floor(counts: int, level: float = 0.05) -> float:
    """The z above which none of ``counts`` standard normals lies with probability 1 − ``level``."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(1.0 - level / max(int(counts), 1))


#: :func:`scaling_decision`: keep the rows as given where the trusted columns' scales are within this
#: factor of each other (largest over lower median: one binary bucket apart is the same units) ...
SCALING_RATIO = 2.0
#: ... read over at least this many trusted columns (fewer cannot show that the table shares its units:
#: with one or two, the rows are scaled; with none, kept as given).
SCALING_TRUSTED = 3


def scaling_decision(details: dict) -> tuple[bool, str]:
    """``feature_range="auto"``: whether to train on the privately scaled rows (True) or on the
    rows as given, with the reason — post-processing of the range query's answer
    (:func:`private_feature_ranges`' details), nothing else.  The *trusted* columns are those that
    stand out of the query's noise at the strict (Bonferroni) floor above the lowest bucket (a
    column nearly always 0 — a rare dummy, a border pixel — says nothing of the units).  Keep the
    rows as given where no column is trusted (the answer says nothing of the units) or where at
    least :data:`SCALING_TRUSTED` are and their scales are within :data:`SCALING_RATIO` of each
    other (largest over lower median: the columns share their units, and scaling each to its own
    range would reweigh them by the query's noise); scale them by the private ranges otherwise —
    the scales differ, or one or two columns stood out, too few to show shared units.  Chosen by
    leave-one-set-out over nine sets of tables (``benchmarks/raw_tables/README.md`` §27-28: the
    rule of §16, which kept the rows where fewer than two columns stood out, lost 0.1 points of
    held-out accuracy to this one and was chosen in none of the nine rotations).

    >>> scaling_decision({"strict_scales": [2.0, 4.0, 4096.0], "scales": [2.0, 4.0, 4096.0],
    ...                   "uninformative_features": 0, "lowest_scale": 2.0 ** -15})[0]
    True
    >>> scaling_decision({"strict_scales": [2.0, 4.0, 4.0], "scales": [2.0, 4.0, 4.0],
    ...                   "uninformative_features": 0, "lowest_scale": 2.0 ** -15})[0]
    False
    """
    d = len(details["scales"])
    s = np.asarray(details["strict_scales"], dtype=float)
    trusted = s[s > details["lowest_scale"]]
    if trusted.size == 0:
        return False, (f"none of the {d} columns stands out of the query's noise, nothing to read the units from: "
                       "the rows were kept as given")
    if trusted.size < SCALING_TRUSTED:
        return True, (f"{trusted.size} of {d} columns stand out of the query's noise, too few to show that the "
                      "columns share their units: the rows were scaled by the private ranges")
    ratio = float(trusted.max() / np.sort(trusted)[(trusted.size - 1) // 2])  # the lower median
    if ratio > SCALING_RATIO:
        return True, (f"the columns' scales differ by a factor {ratio:.3g} (largest over median of the {trusted.size} "
                      f"that stand out of the query's noise, > {SCALING_RATIO:g}): the rows were scaled by the "
                      "private ranges")
    return False, (f"the columns' scales differ by a factor {ratio:.3g} only (largest over median of the "
                   f"{trusted.size} that stand out of the query's noise, ≤ {SCALING_RATIO:g}): the rows were "
                   "kept as given")


def query_rng(seed, secure_mode: bool, stream: int):
    """The noise source of a preprocessing query: the operating system's CSPRNG in
    ``secure_mode``, else ``seed`` (an int, or None for fresh entropy) on a ``stream`` of its own."""
    if secure_mode:
        from .train.secure import SecureRandom

        return SecureRandom()
    return np.random.default_rng(None if not isinstance(seed, (int, np.integer)) else [int(seed), stream])


def private_ranges_within(X, epsilon: float, delta: float, *, adjacency: str, seed=None,
                          secure_mode: bool = False, recorded: dict | None = None, warn: bool = True) -> tuple:
    """Spend :data:`PRIVATE_RANGE_SHARE` of (``epsilon``, ``delta``) on
    :func:`private_feature_ranges`; returns (ranges, query details, epsilon and delta left for
    training).  The noise comes from the operating system's CSPRNG in ``secure_mode``, else
    from ``seed`` (an int, or None for fresh entropy) on a stream of its own.  ``recorded``:
    the query as a checkpoint recorded it (:func:`recorded_query`): its answer is reused, not
    drawn again (a resumed run continues on the data it started with; one query, one answer)."""
    eq, dq = PRIVATE_RANGE_SHARE * epsilon, PRIVATE_RANGE_SHARE * delta
    part = recorded_part(recorded, "feature_range")
    if part is not None:
        s = np.asarray(part["scales"], dtype=float)
        return (-s, s), part, epsilon - eq, delta - dq
    rng = query_rng(seed, secure_mode, 0x5CA1E)
    frange, query = private_feature_ranges(X, eq, dq, adjacency=adjacency, rng=rng, warn=warn)
    return frange, query, epsilon - eq, delta - dq


def recorded_query(checkpoint) -> dict | None:
    """The preprocessing query a checkpoint's run was trained after (recorded by
    :func:`noisysgd.fit_private` in the checkpoint's context), or None (no such file, or none
    recorded).  A resumed fit reuses its answer: the checkpoint's iterate was computed on the
    data that answer shaped, and drawing the query again would answer it twice."""
    import os

    if checkpoint is None or not os.path.isfile(checkpoint):
        return None
    from .train.checkpoint import read_checkpoint

    context = read_checkpoint(checkpoint).header.get("description", {}).get("context") or {}
    query = context.get("preprocessing")
    return query if isinstance(query, dict) else None


def recorded_part(recorded: dict | None, key: str) -> dict | None:
    if recorded is None:
        return None
    for part in recorded.get("parts", [recorded]):
        if isinstance(part, dict) and key in part:
            return part
    return None


def private_center(X, mu: float, *, radius: float, adjacency: str = "replace", rng=None, names=None,
                   warn: bool = True) -> tuple:
    """The mean query of ``center="private"``, and the centering it defines.

    Every row is clipped to norm ``radius`` R₀ (x̃ = :func:`clip_rows`), and the mean of the
    clipped rows is released with Gaussian noise:

    * replace adjacency (n public): m̂ = (1/n)·Σ x̃_i + N(0, σ²I), σ = Δ/μ with Δ = 2R₀/n, the L2
      sensitivity of the mean (two rows of norm ≤ R₀ differ by at most 2R₀);
    * add/remove adjacency (n not public): the sum of (x̃_i, R₀) — the last coordinate counts
      the rows — is released with N(0, σ²I), σ = Δ/μ, Δ = √2·R₀ (the norm of one summand),
      and m̂ = sum/max(count, 1) (post-processing), of noise about σ/n per coordinate.

    A Gaussian mechanism of sensitivity Δ and noise Δ/μ is μ-GDP (Dong, Roth & Su 2022,
    Theorem 2.7).  Everything else is post-processing of the released vector: with σ_m the
    standard deviation of m̂'s noise per coordinate and d the number of features, E‖m̂‖² =
    ‖m‖² + dσ_m².  If ‖m̂‖² ≤ 2dσ_m² the mean does not stand out of its noise and the rows are
    not centered (a ``UserWarning`` says so; the budget is spent all the same).  Otherwise the
    training rows become clip_{R_c}(x̃ − m̂), where R_c estimates their root-mean-square norm:
    E‖x̃ − m̂‖² = E‖x̃‖² − ‖m‖² + dσ_m² ≤ R₀² − ‖m̂‖² + 2dσ_m² (equality when every row was
    clipped — raw pixels, raw tabular features), so R_c = min(R₀, √(R₀² − ‖m̂‖² + 2dσ_m²)),
    and at least √d·σ_m: the noise m − m̂ is in every centered row, so their norms are about
    that at least (the first estimate, a difference of two noisy squares, can come out near 0
    when the rows barely differ and n is small).  Centering removes the common direction that dominates rows of
    non-negative features, so the sensitivity R_c is spent on what tells examples apart.

    ``names``: the columns' names, for the warning; ``warn=False``: the columns that take the mean's
    norm are recorded (``details["dominant_columns"]``) but not warned about (a caller that reports
    them in its own one line: the estimators and ``noisysgd train``).  Returns (center m̂ or None,
    R_c, details).
    A ``radius`` equal to the largest row norm
    warns (:class:`~noisysgd.train.PrivacyLeakWarning`), as the trainer does for its own clip:
    after centering the trainer sees only the centered rows."""
    from .train.leaks import check_declared_constants
    from .train.losses import float_array

    X = float_array(X)
    norms = row_norms(X)
    check_declared_constants(feature_clip=radius, row_norms=norms, stacklevel=4)
    # Σ_i clip_R(x_i) = Σ_i s_i·x_i, s_i = min(1, R/‖x_i‖): products a block at a time, in float64,
    # no clipped copy of X (nor a float64 one of float32 features)
    scale = radius / np.maximum(norms, radius)
    if X.dtype == np.float64:
        clipped_sum = scale @ X
    else:
        step = block_rows(X.shape[1])
        clipped_sum = sum(scale[i:i + step] @ X[i:i + step].astype(np.float64) for i in range(0, X.shape[0], step))
    n, d = X.shape
    if adjacency not in ("replace", "add-remove"):
        raise ValueError(f"adjacency must be 'replace' or 'add-remove'. Found {adjacency!r}.")
    if not (isinstance(mu, numbers.Real) and mu > 0 and math.isfinite(mu)):
        raise ValueError(f"mu must be a positive number. Found {mu!r}.")
    rng = np.random.default_rng(rng) if not hasattr(rng, "standard_normal") else rng
    if adjacency == "replace":
        sens = 2.0 * radius / n
        sigma = sens / mu
        mean = clipped_sum / n + sigma * rng.standard_normal(d)
        sigma_mean = sigma
        query = f"Gaussian mean of the rows clipped to norm {radius:g}, L2 sensitivity 2R/n = {sens:.4g}"
    else:
        sens = math.sqrt(2.0) * radius
        sigma = sens / mu
        noisy = np.append(clipped_sum, n * radius) + sigma * rng.standard_normal(d + 1)
        count = max(noisy[-1] / radius, 1.0)
        mean = noisy[:-1] / count
        sigma_mean = sigma / count
        query = (f"Gaussian sum of (x clipped to norm {radius:g}, {radius:g}) (mean = sum / count), "
                 f"L2 sensitivity sqrt(2)R = {sens:.4g}")
    m2, noise2 = float(mean @ mean), d * sigma_mean * sigma_mean
    used = m2 > 2.0 * noise2
    clip = min(radius, math.sqrt(max(radius * radius - m2 + 2.0 * noise2, noise2)))
    details = {
        "center": "private", "query": query, "noise_std": sigma, "noise_std_mean": sigma_mean, "mu": float(mu),
        "adjacency": adjacency, "radius": float(radius), "centered": bool(used),
        "feature_clip_after_centering": clip if used else float(radius),
        "mean_norm": math.sqrt(m2), "expected_noise_norm": math.sqrt(noise2),
        "citation": "Dong, Roth & Su 2022, Theorem 2.7 (Gaussian mechanism is mu-GDP)",
    }
    if used:
        details["mean"] = mean.tolist()  # released with the model (it maps every row it scores)
        dominant = _warn_if_one_column_dominates(mean, m2, radius, names, warn)
        if dominant:  # post-processing of the released mean
            details["dominant_columns"], details["dominant_share"] = dominant
    else:  # post-processing of the released mean: saying so leaks nothing more
        warnings.warn(
            f"center='private': the noisy mean (norm {math.sqrt(m2):.3g}) does not stand out of its noise "
            f"(the noise alone has expected norm {math.sqrt(noise2):.3g}; centering needs the mean's norm above "
            f"sqrt(2) times that, {math.sqrt(2.0 * noise2):.3g}"
            + (f"; n = {n} rows" if adjacency == "replace" else "") + "); the rows were not centered",
            UserWarning, stacklevel=3)
        return None, float(radius), details
    return mean, clip, details


#: A few columns whose share of the private mean's squared norm exceeds this, with the mean's
#: norm above half the clip, are said to take the clipped rows' norm: at most
#: one fifth of the columns (and at least one).
DOMINANT_SHARE = 0.9


def _warn_if_one_column_dominates(mean: np.ndarray, m2: float, radius: float, names=None,
                                  warn: bool = True) -> list | None:
    """One warning when the released private mean shows a few columns taking the clipped
    rows' norm (post-processing of the mean: free): rows clipped to the norm ``radius`` are
    then mostly those columns, and the others, on smaller scales, keep little signal.
    ``names``: the columns' names, for the message.  Returns (those columns, the share of the
    squared norm they carry), or None where no few columns carry it."""
    from .train.diagnostics import columns_text, few_carry

    found = few_carry(mean * mean, DOMINANT_SHARE) if m2 > 0.25 * radius * radius else None
    if found is None:
        return None
    cols, carried = found
    if not warn:
        return cols, carried
    k = len(cols)
    which = f"{columns_text(cols, names, limit=len(cols))} {'carries' if k == 1 else 'carry'}"
    warnings.warn(
        f"center='private': {which} {carried:.0%} of the private mean's squared norm "
        f"(norm {math.sqrt(m2):.3g} against the clip {radius:g}): rows clipped to norm {radius:g} are mostly "
        f"{'that column' if k == 1 else 'those columns'}, and the columns on smaller scales keep little signal; "
        "rescale the columns before training, declare public per-column bounds (feature_range=(low, high) "
        "arrays; noisysgd train --feature-range COL=LOW:HIGH, repeated), or use feature_range='private' "
        "(--feature-range private)",
        UserWarning, stacklevel=4)
    return cols, carried


def private_center_within(X, epsilon: float, delta: float, *, radius: float, adjacency: str, seed=None,
                          secure_mode: bool = False, recorded: dict | None = None, names=None,
                          warn: bool = True) -> tuple:
    """Spend a share of the target on :func:`private_center`: μ_q = :data:`CENTER_SHARE`·μ
    (μ = :func:`noisysgd.gdp.gdp_mu` of (``epsilon``, ``delta``)) at δ_q =
    :data:`CENTER_DELTA_SHARE`·δ.  Returns (center, R_c, query details with its own (ε_q, δ_q),
    epsilon and delta left for training under basic composition — the trainer then calibrates
    to the composed total, :func:`noisysgd.accountant.compose_query`).  Noise and ``recorded`` as
    :func:`private_ranges_within`; ``names``: the columns' names, for the warnings."""
    mu, eq, dq = gaussian_share(epsilon, delta, CENTER_SHARE, CENTER_DELTA_SHARE, what="center='private'")
    part = recorded_part(recorded, "center")
    if part is not None:
        center = np.asarray(part["mean"], dtype=float) if part.get("centered") else None
        return center, float(part["feature_clip_after_centering"]), part, epsilon - eq, delta - dq
    center, clip, query = private_center(X, mu, radius=radius, adjacency=adjacency,
                                         rng=query_rng(seed, secure_mode, 0xCE27E4), names=names, warn=warn)
    query.update(epsilon=float(eq), delta=float(dq), share_of_mu=CENTER_SHARE)
    return center, clip, query, epsilon - eq, delta - dq


def gaussian_share(epsilon: float, delta: float, share: float, delta_share: float, *, what: str,
                   target_mu: float | None = None) -> tuple[float, float, float]:
    """(μ_q, ε_q, δ_q) of a Gaussian query given ``share`` of a target's GDP μ (``target_mu``; default
    that of (``epsilon``, ``delta``): :func:`noisysgd.gdp.gdp_mu`) at ``delta_share``·``delta``, its
    ε_q the exact conversion (:func:`noisysgd.gdp.gdp_epsilon`); refused, naming ``what``, where
    it would take the whole of ``epsilon`` under basic composition.  The budget of the private mean,
    the class counts and the release check."""
    from .gdp import gdp_epsilon, gdp_mu

    mu = share * (gdp_mu(epsilon, delta) if target_mu is None else target_mu)
    dq = delta_share * delta
    if not mu > 0:
        raise ValueError(f"epsilon {epsilon!r} at delta {delta!r} is too small for {what}.")
    eq = gdp_epsilon(mu, dq)
    if not eq < epsilon:
        raise ValueError(f"epsilon {epsilon!r} at delta {delta!r} is too small for {what} "
                         f"(its query alone costs epsilon {eq:.3g} at delta {dq:.3g}).")
    return mu, eq, dq


def combine_queries(queries: list) -> dict | None:
    """One Gaussian query standing for several answered in turn (each μ_i-GDP): it is
    √(Σμ_i²)-GDP (Dong, Roth & Su 2022, Corollary 3.3, adaptive), and (Σε_i, Σδ_i)-DP (basic
    composition); the parts are kept under "parts"."""
    if not queries:
        return None
    if len(queries) == 1:
        return queries[0]
    out = {}
    for q in queries:
        out.update({k: q[k] for k in ("feature_range", "center", "centered", "feature_clip_after_centering",
                                      "curvature", "class_prior", "release_check", "dominant_columns",
                                      "dominant_share") if k in q})
    out.update(query="; ".join(q["query"] for q in queries),
               mu=math.sqrt(sum(q["mu"] ** 2 for q in queries)),
               epsilon=float(sum(q["epsilon"] for q in queries)), delta=float(sum(q["delta"] for q in queries)),
               citation="Dong, Roth & Su 2022, Corollary 3.3 (GDP composition)", parts=list(queries))
    return out


def check_feature_range(owner, value, d: int):
    """``value`` as two float arrays of shape (d,) with low < high, or None."""
    if value is None:
        return None
    name = type(owner).__name__
    try:
        low, high = value
        low = np.broadcast_to(np.asarray(low, dtype=np.float64), (d,)).copy()
        high = np.broadcast_to(np.asarray(high, dtype=np.float64), (d,)).copy()
    except (TypeError, ValueError):
        raise ValueError(
            f"The 'feature_range' parameter of {name} must be None or a pair (low, high) of numbers or "
            f"of arrays of length n_features={d}. Got {value!r} instead.") from None
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(low < high)):
        raise ValueError(
            f"The 'feature_range' parameter of {name} must have finite bounds with low < high for "
            f"every feature. Got {value!r} instead.")
    return low, high
