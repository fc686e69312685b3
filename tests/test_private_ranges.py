"""feature_range="private": per-feature ranges from a Gaussian query whose cost is in the certificate."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import noisysgd
from noisysgd import NoisySGDClassifier
from noisysgd.gdp import gdp_epsilon
from noisysgd.preprocessing import EXPONENTS, exponent_histogram, private_feature_ranges


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.integers(1, 8), n=st.integers(2, 30))
def test_replacing_one_row_moves_at_most_one_count_per_feature(seed, d, n):
    """The L2 sensitivity the query is calibrated with: √(2d) under replace, √d under add/remove."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 10.0 ** rng.uniform(-8, 8, size=d)
    X[rng.random(size=X.shape) < 0.1] = 0.0
    lo, hi = EXPONENTS
    base = exponent_histogram(X, lo, hi)
    assert np.all(base.sum(axis=1) == n)
    Y = X.copy()
    Y[rng.integers(n)] = rng.normal(size=d) * 10.0 ** rng.uniform(-20, 20, size=d)
    diff = exponent_histogram(Y, lo, hi) - base
    assert np.all(np.abs(diff).sum(axis=1) <= 2) and np.linalg.norm(diff) <= np.sqrt(2 * d) + 1e-12
    removed = exponent_histogram(X[1:], lo, hi) - base
    assert np.linalg.norm(removed) <= np.sqrt(d) + 1e-12


@pytest.mark.filterwarnings("ignore:feature_range='private'")  # 500 rows: the small budget swamps most counts
@pytest.mark.parametrize("eps, delta, adjacency", [(0.1, 1e-6, "replace"), (0.5, 1e-8, "add-remove")])
def test_the_noise_meets_the_query_budget_and_no_more(eps, delta, adjacency):
    X = np.random.default_rng(0).normal(size=(500, 6))
    _, details = private_feature_ranges(X, eps, delta, adjacency=adjacency, rng=0)
    mu = details["mu"]
    sens = np.sqrt((2 if adjacency == "replace" else 1) * 6)
    assert details["noise_std"] == pytest.approx(sens / mu, rel=1e-12)
    assert gdp_epsilon(mu, delta) <= eps < gdp_epsilon(mu * 1.0001, delta)


def test_ranges_track_the_features_scales():
    """n = 20,000: each estimated range is within a factor 4 of the 95 % quantile of |x_j| for
    features spanning 12 orders of magnitude (a couple of outliers allowed: the noise is real)."""
    rng = np.random.default_rng(3)
    scales = 10.0 ** rng.uniform(-4, 4, size=20)
    X = rng.normal(size=(20000, 20)) * scales
    (low, high), _ = private_feature_ranges(X, 0.1, 1e-6, rng=5)
    ratio = high / np.quantile(np.abs(X), 0.95, axis=0)
    assert np.all(low == -high)
    assert np.mean((ratio > 0.25) & (ratio < 4.0)) >= 0.85, np.round(np.log2(ratio), 1)


def test_the_estimator_certifies_the_model_and_the_ranges_together():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=4000, n_features=10, random_state=0)
    X = X * 10.0 ** np.linspace(-3, 3, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # center=None, prior=None: the range query alone (with centering too: test_private_center.py); cyclic
        # batches: a hidden-state run (GDP composition below), no curvature query for a composition step
        clf = NoisySGDClassifier(epsilon=2.0, delta=1e-6, feature_range="private", center=None, prior=None,
                                 batching="cyclic", random_state=0).fit(X, y)
    rep = clf.privacy_report_
    pre = rep["preprocessing"]
    assert pre["feature_range"] == "private" and pre["epsilon"] == pytest.approx(0.2)
    assert pre["delta"] == pytest.approx(1e-7)
    assert clf.epsilon_ <= 2.0 and clf.delta_ == pytest.approx(1e-6)
    # the query (mu_q-GDP) and training (mu-GDP under shifted interpolation) compose to
    # sqrt(mu^2 + mu_q^2)-GDP: checked with an independent mpmath transcription of the GDP
    # tradeoff (Dong, Roth & Su 2022, Corollary 2.13): delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)
    import mpmath

    mu = clf.fit_.report.results["shifted-interpolation"].mu
    mu_q = pre["mu"]
    assert "GDP composition of shifted-interpolation" in rep["certificate"]["guarantee"]
    m = mpmath.sqrt(mpmath.mpf(mu) ** 2 + mpmath.mpf(mu_q) ** 2)

    def gdp_delta(eps):
        eps = mpmath.mpf(eps)
        return mpmath.ncdf(-eps / m + m / 2) - mpmath.e ** eps * mpmath.ncdf(-eps / m - m / 2)

    assert gdp_delta(clf.epsilon_) <= 1e-6 * (1 + 1e-9)
    assert gdp_delta(clf.epsilon_ * (1 - 1e-6)) > 1e-6  # the conversion is exact, not loose
    # the noise is calibrated to the composed total: training gets (almost) the whole budget,
    # its own epsilon above its basic-composition share of 1.8, and less noise than that share needs
    assert 1.8 < clf.fit_.epsilon < 2.0 and rep["epsilon_total_basic"] > 2.0
    share = noisysgd.calibrate(clf.run_, epsilon=1.8, delta=9e-7).noise_multiplier
    assert clf.noise_multiplier_ < share / 1.05
    # and it is the smallest such noise (to the calibration's tolerance)
    from noisysgd.accountant import composed_epsilon

    below = noisysgd.epsilon(clf.run_.replace(noise_multiplier=clf.noise_multiplier_ / 1.001), delta=9e-7)
    assert composed_epsilon(below, pre) > 2.0
    assert rep["calibration"]["composed_with_query"]["target_epsilon_total"] == pytest.approx(2.0)
    assert "private feature ranges" in rep["certificate"]["guarantee"]
    assert clf.predict(X[:5]).shape == (5,)
    from sklearn.base import clone

    assert clone(clf).get_params()["feature_range"] == "private"


def test_bad_feature_range_values_are_named():
    X, y = np.random.default_rng(0).normal(size=(50, 3)), np.arange(50) % 2
    with pytest.raises(ValueError, match="'feature_range' parameter .* 'private'"):
        NoisySGDClassifier(feature_range="bogus").fit(X, y)
    with pytest.raises(ValueError, match="needs epsilon"):
        NoisySGDClassifier(epsilon=None, noise_multiplier=3.0, feature_range="private").fit(X, y)


def _improved_conversion(orders, rdp, delta):
    """Balle et al. (2020) Proposition 12, transcribed independently of noisysgd.rdp:
    eps = min_a rdp(a) + log((a - 1)/a) - (log delta + log a)/(a - 1)."""
    a = np.asarray(orders, dtype=float)
    return float(np.min(rdp + np.log((a - 1) / a) - (np.log(delta) + np.log(a)) / (a - 1)))


@pytest.mark.parametrize("analysis", [["ye-shokri"], ["composition"]])
def test_rdp_composition_with_the_query(analysis):
    """A training bound given as an RDP curve composes with the query by adding its Gaussian RDP
    a*mu_q^2/2 order by order; the total is never above basic composition, never below either part."""
    from noisysgd.accountant import compose_query

    run = noisysgd.Run.from_epochs(epochs=20, n=5000, batch_size=250, batching="cyclic", learning_rate=0.5,
                                   noise_multiplier=8.0, lipschitz=1.5, smoothness=1.1, strong_convexity=0.1)
    report = noisysgd.epsilon(run, delta=9e-7, analyses=analysis)
    query = {"mu": 0.05, "epsilon": gdp_epsilon(0.05, 1e-7), "delta": 1e-7}
    cert = {"certificate": {"guarantee": "training"}}
    eps, delta = compose_query(cert, report.epsilon, report.delta, "replace", query, report=report)
    r = report.results[analysis[0]]
    by_hand = _improved_conversion(r.orders, np.asarray(r.rdp) + np.asarray(r.orders) * 0.05 ** 2 / 2, 1e-6)
    assert delta == pytest.approx(1e-6)
    assert eps <= report.epsilon + query["epsilon"]
    assert cert["composition"].startswith(f"RDP composition of {analysis[0]}")
    assert eps == pytest.approx(max(by_hand, 0.0), rel=1e-9, abs=1e-12)
    assert eps >= gdp_epsilon(0.05, 1e-6) and eps >= noisysgd.epsilon(run, delta=1e-6, analyses=analysis).epsilon * (1 - 1e-9)
    assert cert["certificate"]["training_guarantee"] == "training"
    assert cert["epsilon_total_basic"] == pytest.approx(report.epsilon + query["epsilon"])


def test_a_query_swamped_by_its_noise_says_so():
    """Features whose every noisy count is below the floor take the lower median of the ranges of the
    features seen at the strict floor above the lowest bucket (post-processing of the same counts),
    or the widest public range where none was; the query says how many, and says nothing when all are
    informative."""
    rng = np.random.default_rng(4)
    small = rng.normal(size=(400, 12)) * 10.0 ** rng.uniform(-3, 3, size=12)
    small[:, :3] = np.round(small[:, :3] / np.abs(small[:, :3]))  # three ±1 columns: one bucket, seen
    with pytest.warns(UserWarning, match=r"swamps every count of (\d+) of 12 features") as caught:
        (low, high), details = private_feature_ranges(small, 0.5, 1e-6, rng=1)
    k = details["uninformative_features"]
    assert 0 < k < 12 and f"of {k} of 12 features" in str(caught[0].message)
    strict = np.array(details["strict_scales"])
    trusted = np.sort(strict[strict > details["lowest_scale"]])
    assert trusted.size >= 1 and details["unseen_scale"] == trusted[(trusted.size - 1) // 2]
    assert np.sum(high == details["unseen_scale"]) >= k and "median of the seen" in str(caught[0].message)
    assert np.all(low == -high)
    # no column seen: the widest public range for the unseen, and the warning says that
    with pytest.warns(UserWarning, match=r"widest public range"):
        (_, high), details = private_feature_ranges(small[:20, 3:], 0.01, 1e-6, rng=2)
    assert details["unseen_scale"] == 2.0 ** (EXPONENTS[1] + 1)
    assert np.sum(high == 2.0 ** (EXPONENTS[1] + 1)) >= details["uninformative_features"] > 0
    big = rng.normal(size=(20000, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, details = private_feature_ranges(big, 1.0, 1e-6, rng=2)
    assert details["uninformative_features"] == 0 and details["unseen_scale"] is None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_ranges_and_the_decision_read_the_released_counts_alone(seed):
    """Two tables whose every value falls in the same binary-exponent bucket (the query's only view of
    them) get the same ranges, the same unseen columns' range and the same scaling decision from the
    same noise: both are post-processing of the released counts (docs/privacy.md, issue 43's rule)."""
    from noisysgd.preprocessing import scaling_decision

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(300, 8)) * 10.0 ** rng.uniform(-2, 3, size=8)
    X[:, :3] = np.sign(X[:, :3]) * np.array([1.0, 8.0, 64.0])     # three one-bucket columns: seen
    bucket = np.exp2(np.floor(np.log2(np.abs(X))))
    Y = np.sign(X) * bucket * rng.uniform(1.0, 2.0, size=X.shape)  # other values, the same buckets
    assert np.array_equal(exponent_histogram(X, *EXPONENTS), exponent_histogram(Y, *EXPONENTS))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (lx, hx), dx = private_feature_ranges(X, 0.3, 1e-6, rng=seed)
        (ly, hy), dy = private_feature_ranges(Y, 0.3, 1e-6, rng=seed)
    assert dx["uninformative_features"] > 0 and dx["unseen_scale"] < 2.0 ** 17  # the fallback is exercised
    assert np.array_equal(hx, hy) and np.array_equal(lx, ly)
    assert dx == dy and scaling_decision(dx) == scaling_decision(dy)


class _ChosenNoise:
    """An rng whose standard normals are given: the query's noise chosen by the test."""

    def __init__(self, noise):
        self.noise = noise

    def standard_normal(self, shape):
        return np.broadcast_to(self.noise, shape).copy()


def test_the_strict_read_the_decision_and_the_fallback_move_with_the_noise_alone():
    """The same rows under three chosen noises: with none, three columns stand out (one bucket each,
    scales 2, 16 and 1024) and the rows are scaled for their units; with noise that sinks the counts of
    two of them below the strict floor (not below 3σ), they no longer count as trusted — the one left
    is too few to show shared units, so the rows are scaled for that reason, and the unseen column's
    range follows it; with the third sunk too, no column is trusted and the rows are kept.  A read of
    the noiseless counts would not move."""
    from noisysgd.preprocessing import _bonferroni_floor, scaling_decision

    n = 4000
    X = np.ones((n, 4)) * np.array([1.0, 8.0, 512.0, 1.0])
    X[:, 3] = np.exp2(np.arange(n) % 33 - 16)            # spread over every bucket: unseen at ε = 0.1
    lo = EXPONENTS[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, quiet = private_feature_ranges(X, 0.1, 1e-6, rng=_ChosenNoise(0.0))
        sigma = quiet["noise_std"]
        noise = np.zeros((4, EXPONENTS[1] - lo + 1))
        floor = 0.5 * (3.0 + _bonferroni_floor(4 * noise.shape[1]))  # between 3σ and the strict floor
        for j, k in ((1, 3 - lo), (2, 9 - lo)):             # the buckets of 8 and 512
            noise[j, k] = (floor * sigma - n) / sigma      # the count lands between the floors
        _, sunk = private_feature_ranges(X, 0.1, 1e-6, rng=_ChosenNoise(noise))
        noise[0, 0 - lo] = (floor * sigma - n) / sigma     # and the bucket of 1
        _, none = private_feature_ranges(X, 0.1, 1e-6, rng=_ChosenNoise(noise))
    assert quiet["strict_scales"][:3] == [2.0, 16.0, 1024.0] and scaling_decision(quiet)[0]
    assert "differ by a factor 64" in scaling_decision(quiet)[1]          # 1024 over the lower median, 16
    assert quiet["unseen_scale"] == 16.0                  # lower median of 2, 16, 1024
    assert sunk["scales"][:3] == [2.0, 16.0, 1024.0]        # still seen at 3σ
    assert sunk["strict_scales"][:3] == [2.0, 0.0, 0.0] and scaling_decision(sunk)[0]
    assert scaling_decision(sunk)[1].startswith("1 of 4 columns stand out of the query's noise, too few")
    assert sunk["unseen_scale"] == 2.0
    assert none["scales"][:3] == [2.0, 16.0, 1024.0] and none["strict_scales"][:3] == [0.0, 0.0, 0.0]
    assert not scaling_decision(none)[0] and scaling_decision(none)[1].startswith("none of the 4 columns")


def test_an_unseen_column_takes_the_lower_median_of_the_seen_ones():
    """The fallback read off a chosen answer: columns whose counts clear the floor at buckets 3, 5, 5, 9
    and one nearly always 0 (the lowest bucket, left out), and two columns with no count above it: those
    two take 2^(5+1) (lower median of 3, 5, 5, 9 is the second 5), the others their own."""
    from noisysgd.preprocessing import _unseen_bucket

    k = np.array([3, 5, 0, 9, 5, 31, 31])
    empty = np.array([False, False, False, False, False, True, True])
    assert _unseen_bucket(k, empty, 33) == 5
    assert _unseen_bucket(k[[2, 5, 6]], empty[[2, 5, 6]], 33) == 32  # only the lowest bucket seen: the widest
    assert _unseen_bucket(np.array([7, 4]), np.array([False, False]), 33) == 4  # lower median of two


@pytest.mark.slow
def test_the_issue_27_table_is_never_a_silent_majority_model():
    """Issue 27's 8,000-row table (two columns in the thousands, one 0/1, ~5 % positives, the label
    set by the first): the raw rows clipped to norm 1 keep only the columns' ratio, and even
    without noise (ε = 10⁴) the optimum of the trained objective is a constant — the fit must
    say so (the near-chance line, with the remedies), never silently; with private ranges the
    columns keep their own scales and the model is not a constant."""
    from noisysgd.train.diagnostics import balanced_accuracy

    rng = np.random.default_rng(0)
    n = 8000
    x1 = rng.normal(5000, 1500, n)
    X = np.c_[x1, rng.lognormal(9.5, 0.4, n), rng.integers(0, 2, n)]
    y = (x1 + 300 * rng.normal(size=n) > 7500).astype(int)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        raw = NoisySGDClassifier(epsilon=1e4, classes=[0, 1], random_state=0, feature_range=None,
                                 prior=None).fit(X, y)  # (the rows as given, the model always released)
    said = [str(w.message) for w in caught if "barely better than predicting one class" in str(w.message)]
    assert balanced_accuracy(y, raw.predict(X)) < 0.55 and len(said) == 1
    assert "public bounds (feature_range=(low, high))" in said[0]  # the one remedy: the columns take the norm
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scaled = NoisySGDClassifier(epsilon=1e4, classes=[0, 1], feature_range="private", random_state=0).fit(X, y)
    assert balanced_accuracy(y, scaled.predict(X)) > 0.6


def test_the_scaling_decision_reads_the_answer_alone():
    """feature_range="auto": of the columns that stand out (strict floor, above the lowest bucket), keep
    the rows where there are none, or at least SCALING_TRUSTED whose scales are within SCALING_RATIO
    (one units); scale them otherwise (scales apart, or one or two columns: too few to show one units)."""
    from noisysgd.preprocessing import SCALING_RATIO, SCALING_TRUSTED, scaling_decision

    assert (SCALING_RATIO, SCALING_TRUSTED) == (2.0, 3)
    low = 2.0 ** -15
    base = {"lowest_scale": low, "uninformative_features": 0}
    mixed = {**base, "scales": [2.0, 4.0, 4096.0], "strict_scales": [2.0, 4.0, 4096.0]}
    assert scaling_decision(mixed)[0]
    one_scale = {**base, "scales": [8.0, 16.0, 16.0, 8.0], "strict_scales": [8.0, 16.0, 16.0, 8.0]}
    assert not scaling_decision(one_scale)[0]
    # digits' border pixels: nearly always 0, the lowest bucket — they do not pull the median down
    pixels = [low] * 30 + [8.0, 16.0] * 17
    assert not scaling_decision({**base, "scales": pixels, "strict_scales": pixels})[0]
    # a noise spike read at the 3σ floor only (not at the strict one) does not decide
    spiked = {**base, "scales": [4.0] * 19 + [256.0], "strict_scales": [4.0] * 19 + [4.0]}
    assert not scaling_decision(spiked)[0]
    # the threshold is strict: a ratio of exactly SCALING_RATIO keeps the rows, one bucket more scales
    same, apart = [1.0, 1.0, SCALING_RATIO], [1.0, 1.0, 2 * SCALING_RATIO]
    assert not scaling_decision({**base, "scales": same, "strict_scales": same})[0]
    assert scaling_decision({**base, "scales": apart, "strict_scales": apart})[0]
    # one or two trusted columns cannot show that the table shares its units: scaled, whatever their scales;
    # none: nothing to read the units from, kept
    for few in ([16.0, 16.0] + [low] * 62, [16.0] + [0.0] * 3):
        assert scaling_decision({**base, "scales": few, "strict_scales": few})[0]
    assert not scaling_decision({**base, "scales": [4.0, 8.0], "strict_scales": [0.0, low]})[0]
    # the ratio is read over the trusted columns alone, whatever went unseen
    unseen = {**base, "uninformative_features": 5, "scales": [2.0, 4096.0] + [2.0] * 5,
              "strict_scales": [2.0, 4096.0] + [0.0] * 5}
    assert scaling_decision(unseen)[0]
    # one trusted column cannot show one units: scaled, and the certificate says why
    few = {**base, "uninformative_features": 3, "scales": [4.0] * 4, "strict_scales": [4096.0, 0.0, 0.0, 0.0]}
    assert scaling_decision(few) == (True, "1 of 4 columns stand out of the query's noise, too few to show that "
                                           "the columns share their units: the rows were scaled by the private "
                                           "ranges")


@pytest.mark.parametrize("scale, expect", [(np.array([1.0, 1.0, 1.0, 1.0, 1.0]), False),
                                          (np.array([1.0, 1.0, 1.0, 1.0, 5000.0]), True)])
def test_auto_scales_mixed_units_and_keeps_one_scale(scale, expect):
    """The estimator's default: the same query as "private" (charged either way), the rows scaled only
    where the columns' units differ; the certificate says which and why."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6000, 5)) * scale
    y = (X[:, 0] / scale[0] + X[:, 4] / scale[4] > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = NoisySGDClassifier(epsilon=2.0, classes=[0, 1], random_state=0).fit(X, y)
    part = next(p for p in clf.privacy_report_["preprocessing"]["parts"] if "scales" in p)
    assert part["feature_range"] == "private" and part["epsilon"] > 0  # charged either way
    assert (clf.feature_map_.ranges is not None) == expect
    assert ("scaled by the private ranges" in part["decision"]) == expect


def test_declared_categories_are_left_out_of_the_range_query():
    """A declared category's 0/1 column has the public range [0, 1]: the private range query (and its
    sensitivity sqrt(2d)) covers the numeric columns only, and the indicators are scaled by [0, 1]."""
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 4000
    df = pd.DataFrame({"income": rng.normal(50000, 15000, n), "age": rng.uniform(18, 80, n),
                       "color": rng.choice(["red", "green", "blue"], n)})
    y = ((df.income > 50000) ^ (df.color == "red")).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = NoisySGDClassifier(epsilon=1.0, classes=[0, 1], random_state=0,
                                 categorical={"color": ["red", "green", "blue"]}).fit(df, y)
    part = next(p for p in clf.privacy_report_["preprocessing"]["parts"] if "scales" in p)
    assert len(part["scales"]) == 2 and part["public_indicator_columns"] == 3
    assert "sqrt(2d) = 2" in part["query"]  # d = 2 numeric columns
    low, high = clf.feature_map_.ranges
    np.testing.assert_array_equal(low[2:], 0.0)
    np.testing.assert_array_equal(high[2:], 1.0)
