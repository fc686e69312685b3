"""Statistics of a privacy audit: Clopper–Pearson bounds and an ε lower bound.

An audit runs a randomized algorithm many times on each of two adjacent
datasets D and D′ and applies a fixed distinguishing test to each output
("guess D′" or "guess D").  With N₀ runs on D, of which FP were called D′,
and N₁ runs on D′, of which FN were called D, the false-positive rate
FPR = P_D[test says D′] and the false-negative rate FNR = P_D′[test says D]
obey, for an (ε, δ)-DP algorithm (post-processing of the output),

    FPR + e^ε·FNR ≥ 1 − δ   and   FNR + e^ε·FPR ≥ 1 − δ

(Kairouz et al. 2015; the form used by Jagielski et al. 2020 and Nasr et al.
2021).  With one-sided Clopper–Pearson *upper* bounds p̄₀ ≥ FPR and p̄₁ ≥ FNR,
each at level 1 − a/2 (Bonferroni over the two rates, so both hold together
with probability ≥ 1 − a),

    ε ≥ max( log((1 − δ − p̄₀)/p̄₁),  log((1 − δ − p̄₁)/p̄₀) )

holds with probability ≥ 1 − a over the runs, for every (ε, δ)-DP
algorithm.  (Replacing the rates by *larger* numbers only lowers both
expressions, so the upper bounds are what is needed.)  The bound is valid
only if the test — threshold and direction included — is fixed before the
counted runs are drawn: declared up front, or chosen on other runs
(:func:`choose_threshold` on a calibration set, :func:`evaluate_threshold` on
fresh runs).  Choosing the threshold on the counted runs themselves biases
the estimate upwards.

>>> round(clopper_pearson_upper(0, 100, 0.95), 6)   # 1 − 0.05^(1/100)
0.029513
>>> lb = epsilon_lower_bound(false_positives=5, negatives=1000, false_negatives=500,
...                          positives=1000, delta=1e-5, confidence=0.95)
>>> round(lb.epsilon, 3), round(lb.fpr_upper, 5), round(lb.fnr_upper, 5)
(3.696, 0.01163, 0.53145)
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

__all__ = [
    "clopper_pearson",
    "clopper_pearson_upper",
    "clopper_pearson_lower",
    "epsilon_lower_bound",
    "EpsilonLowerBound",
    "Threshold",
    "choose_threshold",
    "evaluate_threshold",
    "test_counts",
]


def _count(name: str, value, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}. Found {value!r}.")
    return int(value)


def confidence_level(name: str, value) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number in (0, 1). Found {value!r}.")
    try:
        c = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1). Found {value!r}.") from None
    if not 0.0 < c < 1.0:
        raise ValueError(f"{name} must be a number in (0, 1). Found {value!r}.")
    return c


def _delta(value) -> float:
    if isinstance(value, bool):
        raise ValueError(f"delta must be a number in [0, 1). Found {value!r}.")
    try:
        d = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"delta must be a number in [0, 1). Found {value!r}.") from None
    if not 0.0 <= d < 1.0:
        raise ValueError(f"delta must be a number in [0, 1). Found {value!r}.")
    return d


def _kn(k, n):
    n = _count("n", n, minimum=1)
    k = _count("k", k)
    if k > n:
        raise ValueError(f"k must be at most n ({n}). Found {k!r}.")
    return k, n


def clopper_pearson_upper(k: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper–Pearson upper bound on a binomial proportion.

    The smallest p̄ with P[Bin(n, p̄) ≤ k] ≤ 1 − confidence, i.e. the
    ``confidence`` quantile of Beta(k + 1, n − k) (1 when k = n):
    P_p[p ≤ p̄(K)] ≥ ``confidence`` for every p, K ~ Bin(n, p).

    >>> round(clopper_pearson_upper(3, 100, 0.95), 6)
    0.075711
    """
    k, n = _kn(k, n)
    c = confidence_level("confidence", confidence)
    if k == n:
        return 1.0
    return float(stats.beta.ppf(c, k + 1, n - k))


def clopper_pearson_lower(k: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper–Pearson lower bound: the 1 − ``confidence`` quantile of
    Beta(k, n − k + 1) (0 when k = 0).

    >>> round(clopper_pearson_lower(3, 100, 0.95), 6)
    0.008226
    """
    k, n = _kn(k, n)
    c = confidence_level("confidence", confidence)
    if k == 0:
        return 0.0
    return float(stats.beta.ppf(1.0 - c, k, n - k + 1))


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided Clopper–Pearson interval at ``confidence`` (each side at
    (1 + confidence)/2), as ``scipy.stats.binomtest(k, n).proportion_ci(confidence,
    method="exact")``.

    >>> tuple(round(v, 6) for v in clopper_pearson(3, 100, 0.95))
    (0.00623, 0.085176)
    """
    c = confidence_level("confidence", confidence)
    side = (1.0 + c) / 2.0
    return clopper_pearson_lower(k, n, side), clopper_pearson_upper(k, n, side)


@dataclass(frozen=True)
class EpsilonLowerBound:
    """An ε lower bound from a distinguishing test's error counts.

    ``epsilon`` holds with probability ≥ ``confidence`` over the counted
    runs, for the ``delta`` given, if the algorithm is (ε', δ)-DP for any
    ε' < ``epsilon`` … i.e. it is *not* (ε', δ)-DP for ε' < ``epsilon`` unless
    an event of probability ≤ 1 − ``confidence`` occurred.  0 means the test
    found nothing.
    """

    epsilon: float
    delta: float
    confidence: float
    negatives: int          # N₀: runs on D
    false_positives: int    # of them, called D′
    positives: int          # N₁: runs on D′
    false_negatives: int    # of them, called D
    fpr_upper: float        # p̄₀ at level 1 − (1 − confidence)/2
    fnr_upper: float        # p̄₁ at level 1 − (1 − confidence)/2
    per_rate_confidence: float

    @property
    def fpr(self) -> float:
        return self.false_positives / self.negatives

    @property
    def fnr(self) -> float:
        return self.false_negatives / self.positives

    @property
    def point_estimate(self) -> float:
        """The same expression at the observed rates (no confidence; biased up)."""
        return _bound(self.fpr, self.fnr, self.delta)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["fpr"] = self.fpr
        out["fnr"] = self.fnr
        pe = self.point_estimate
        out["point_estimate"] = pe if math.isfinite(pe) else None
        out["bonferroni"] = "two one-sided Clopper-Pearson bounds, each at 1 - (1 - confidence)/2"
        return out


def _bound(p0: float, p1: float, delta: float) -> float:
    """max(0, log((1−δ−p0)/p1), log((1−δ−p1)/p0)) with log(x/0) = +inf for x > 0."""
    best = 0.0
    for a, b in ((p0, p1), (p1, p0)):
        top = 1.0 - delta - a
        if top <= 0.0:
            continue
        if b <= 0.0:
            return math.inf
        best = max(best, math.log(top / b))
    return best


def epsilon_lower_bound(
    *,
    false_positives: int,
    negatives: int,
    false_negatives: int,
    positives: int,
    delta: float,
    confidence: float = 0.95,
) -> EpsilonLowerBound:
    """ε lower bound at ``confidence`` from a test's error counts (module docstring).

    Parameters
    ----------
    false_positives, negatives : int
        Runs on D called D′, out of ``negatives`` runs on D.
    false_negatives, positives : int
        Runs on D′ called D, out of ``positives`` runs on D′.
    delta : float
        The δ at which ε is bounded, in [0, 1).
    confidence : float
        Joint confidence of the two Clopper–Pearson bounds (Bonferroni: each at
        1 − (1 − confidence)/2).
    """
    n0 = _count("negatives", negatives, minimum=1)
    n1 = _count("positives", positives, minimum=1)
    fp = _count("false_positives", false_positives)
    fn = _count("false_negatives", false_negatives)
    if fp > n0:
        raise ValueError(f"false_positives must be at most negatives ({n0}). Found {fp!r}.")
    if fn > n1:
        raise ValueError(f"false_negatives must be at most positives ({n1}). Found {fn!r}.")
    d = _delta(delta)
    c = confidence_level("confidence", confidence)
    each = 1.0 - (1.0 - c) / 2.0
    p0 = clopper_pearson_upper(fp, n0, each)
    p1 = clopper_pearson_upper(fn, n1, each)
    return EpsilonLowerBound(
        epsilon=_bound(p0, p1, d), delta=d, confidence=c, negatives=n0, false_positives=fp,
        positives=n1, false_negatives=fn, fpr_upper=p0, fnr_upper=p1, per_rate_confidence=each,
    )


# --------------------------------------------------------------------------- tests on a score


@dataclass(frozen=True)
class Threshold:
    """The test "score ≥ threshold ⇒ D′" (``direction`` = +1) or
    "score ≤ threshold ⇒ D′" (``direction`` = −1)."""

    threshold: float
    direction: int = 1

    def __post_init__(self):
        if self.direction not in (1, -1):
            raise ValueError(f"direction must be +1 or -1. Found {self.direction!r}.")
        t = float(self.threshold)
        if math.isnan(t):
            raise ValueError(f"threshold must be a number. Found {self.threshold!r}.")
        object.__setattr__(self, "threshold", t)

    def says_positive(self, scores) -> np.ndarray:
        s = np.asarray(scores, dtype=float)
        return s >= self.threshold if self.direction == 1 else s <= self.threshold

    def describe(self, name: str = "score") -> str:
        op = ">=" if self.direction == 1 else "<="
        return f"{name} {op} {self.threshold:.6g}"


def _scores(name, values) -> np.ndarray:
    s = np.asarray(values, dtype=float).reshape(-1)
    if s.size == 0:
        raise ValueError(f"{name} must hold at least one score. Found none.")
    if np.isnan(s).any():
        raise ValueError(f"{name} must not hold NaN. Found NaN.")
    return s


def test_counts(scores_d, scores_d_prime, test: Threshold) -> tuple[int, int, int, int]:
    """(false_positives, negatives, false_negatives, positives) of ``test``
    on scores of runs on D and on D′."""
    s0 = _scores("scores_d", scores_d)
    s1 = _scores("scores_d_prime", scores_d_prime)
    fp = int(np.count_nonzero(test.says_positive(s0)))
    fn = int(np.count_nonzero(~test.says_positive(s1)))
    return fp, s0.size, fn, s1.size


test_counts.__test__ = False  # not a pytest test (the module is collected with --doctest-modules)


def evaluate_threshold(scores_d, scores_d_prime, test: Threshold, *, delta: float,
                       confidence: float = 0.95) -> EpsilonLowerBound:
    """The ε lower bound of a test fixed *before* these runs were drawn."""
    if not isinstance(test, Threshold):
        raise ValueError(f"test must be a Threshold. Found {test!r}.")
    fp, n0, fn, n1 = test_counts(scores_d, scores_d_prime, test)
    return epsilon_lower_bound(false_positives=fp, negatives=n0, false_negatives=fn, positives=n1,
                               delta=delta, confidence=confidence)


def choose_threshold(scores_d, scores_d_prime, *, delta: float, confidence: float = 0.95,
                     max_candidates: int = 512) -> Threshold:
    """The threshold and direction whose Clopper–Pearson ε lower bound is largest
    on *these* (calibration) runs — to be evaluated on fresh runs with
    :func:`evaluate_threshold`.  Candidates: midpoints between the sorted
    pooled scores (about ``max_candidates``: at evenly spaced ranks and at
    geometrically spaced ranks from either end), both directions.  Scoring with the confidence bound rather than the raw rates
    avoids far-tail thresholds whose zero counts are luck.

    >>> t = choose_threshold([0.0, 0.1, 0.2, 0.3], [0.9, 1.0, 1.1, 1.2], delta=0.0)
    >>> t.direction, round(t.threshold, 3)
    (1, 0.6)
    >>> choose_threshold([5.0, 6.0, 7.0], [1.0, 2.0], delta=1e-5).describe()
    'score <= 3.5'
    """
    s0 = np.sort(_scores("scores_d", scores_d))
    s1 = np.sort(_scores("scores_d_prime", scores_d_prime))
    d = _delta(delta)
    c = confidence_level("confidence", confidence)
    m = _count("max_candidates", max_candidates, minimum=1)
    pooled = np.unique(np.concatenate([s0, s1]))
    if pooled.size == 1:
        return Threshold(float(pooled[0]), 1)
    mids = (pooled[:-1] + pooled[1:]) / 2.0
    mids = mids[np.isfinite(mids)] if np.isfinite(mids).any() else mids
    if mids.size > m:  # evenly spaced ranks, denser towards both tails (where the best tests sit)
        last = mids.size - 1
        tail = np.geomspace(1, last + 1, m // 2) - 1
        ranks = np.concatenate([np.linspace(0, last, m - m // 2), tail, last - tail])
        mids = mids[np.unique(np.clip(np.round(ranks), 0, last).astype(np.int64))]
    n0, n1 = s0.size, s1.size
    above0 = n0 - np.searchsorted(s0, mids, side="left")  # #{s ≥ t}
    above1 = n1 - np.searchsorted(s1, mids, side="left")
    below0, below1 = n0 - above0, n1 - above1
    each = 1.0 - (1.0 - c) / 2.0
    up = lambda k, n: np.where(k >= n, 1.0, stats.beta.ppf(each, k + 1, np.maximum(n - k, 1)))  # noqa: E731
    best, best_test = (-1.0, -2.0), Threshold(float(mids[0]), 1)
    for direction, fp, fn in ((1, above0, below1), (-1, below0, above1)):
        p0, p1 = up(fp, n0), up(fn, n1)
        with np.errstate(divide="ignore", invalid="ignore"):
            a = np.where(1.0 - d - p0 > 0, np.log(np.maximum(1.0 - d - p0, 1e-300) / p1), 0.0)
            b = np.where(1.0 - d - p1 > 0, np.log(np.maximum(1.0 - d - p1, 1e-300) / p0), 0.0)
        value = np.maximum(np.maximum(a, b), 0.0)
        separation = 1.0 - fp / n0 - fn / n1  # tie-break: the best observed separation
        i = int(np.lexsort((-separation, -value))[0])
        key = (float(value[i]), float(separation[i]))
        if key > best:
            best, best_test = key, Threshold(float(mids[i]), direction)
    return best_test
