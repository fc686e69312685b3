"""The class prior and the release check (noisysgd.prior): two Gaussian queries charged to the
certificate — their sensitivities, their noise, an exact attack on a linear instance held to the
certificate, and the fallback the check decides."""

from __future__ import annotations

import math
import warnings

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import noisysgd.pipeline as pipeline
from noisysgd import NoisySGDClassifier
from noisysgd.gdp import gdp_mu
from noisysgd.prior import (CHECK_MARGIN, CHECK_SHARE, PRIOR_SHARE, check_margin,
                            check_sensitivity, class_counts_sensitivity, class_prior_within, prior_start, private_class_counts, release_check, reserve_check,
                            rows_right)


def _mp_gdp_delta(mu, eps):
    """δ(ε) of μ-GDP (Dong, Roth & Su 2022, Corollary 2.13), in mpmath: the exact trade-off of two
    Gaussians at distance μ, i.e. the likelihood-ratio attack's."""
    m, e = mpmath.mpf(mu), mpmath.mpf(eps)
    return mpmath.ncdf(-e / m + m / 2) - mpmath.e ** e * mpmath.ncdf(-e / m - m / 2)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(2, 6), n=st.integers(1, 40))
def test_one_row_moves_the_counts_by_at_most_their_sensitivity(seed, k, n):
    rng = np.random.default_rng(seed)
    y = rng.integers(k, size=n)
    counts = lambda labels: np.bincount(labels, minlength=k).astype(float)  # noqa: E731
    other = y.copy()
    other[rng.integers(n)] = rng.integers(k)
    assert np.linalg.norm(counts(y) - counts(other)) <= class_counts_sensitivity("replace") + 1e-12
    assert np.linalg.norm(counts(y) - counts(y[1:])) <= class_counts_sensitivity("add-remove") + 1e-12
    flipped = y.copy()  # attained: a row changing class moves two counts by one each
    flipped[0] = (y[0] + 1) % k
    assert np.linalg.norm(counts(y) - counts(flipped)) == pytest.approx(math.sqrt(2))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 50), d=st.integers(1, 4), k=st.integers(2, 4))
def test_for_a_fixed_model_one_row_moves_the_check_by_at_most_its_sensitivity(seed, n, d, k):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(d + 1,) if k == 2 else (d + 1, k))
    X, y = rng.normal(size=(n, d)) * 3, rng.integers(k, size=n)
    prior_class = int(rng.integers(k))

    def D(rows, labels):
        right = rows_right(W, rows, labels, feature_clip=1.0, intercept_scaling=0.5, prior_class=prior_class)
        return right[0] - right[1]

    X2, y2 = X.copy(), y.copy()
    i = rng.integers(n)
    X2[i], y2[i] = rng.normal(size=d) * 100, rng.integers(k)
    assert abs(D(X, y) - D(X2, y2)) <= check_sensitivity("replace")
    assert abs(D(X, y) - D(X[1:], y[1:])) <= check_sensitivity("add-remove")


@pytest.mark.parametrize("adjacency", ["replace", "add-remove"])
def test_the_counts_are_the_gaussian_mechanism_of_that_sensitivity(adjacency):
    y = np.array([0] * 70 + [1] * 20 + [2] * 10)
    prior, details = private_class_counts(y, 3, 0.4, adjacency=adjacency, rng=5)
    sigma = class_counts_sensitivity(adjacency) / 0.4
    expected = np.array([70.0, 20.0, 10.0]) + sigma * np.random.default_rng(5).standard_normal(3)
    np.testing.assert_allclose(details["noisy_counts"], expected, rtol=1e-12)
    shrunk = np.maximum(expected, 0.0) + sigma
    np.testing.assert_allclose(prior, shrunk / shrunk.sum(), rtol=1e-12)
    assert details["noise_std"] == pytest.approx(sigma, rel=1e-12)


def test_the_start_predicts_the_prior_and_stays_in_the_ball():
    p = np.array([0.7, 0.2, 0.1])
    Xbar = np.c_[np.random.default_rng(0).normal(size=(5, 3)), np.full(5, 0.5)]
    W = prior_start(p, (4, 3), 0.5)
    scores = Xbar @ W
    np.testing.assert_allclose(np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True), np.tile(p, (5, 1)))
    ovr = prior_start(p, (4, 3), 0.5, ovr=True)
    np.testing.assert_allclose(1 / (1 + np.exp(-(Xbar @ ovr))), np.tile(p, (5, 1)))
    binary = prior_start([0.967, 0.033], (4,), 0.001)  # a 3.3 %-positive table, a tiny bias coordinate
    assert 0.001 * binary[-1] == pytest.approx(math.log(0.033 / 0.967))
    small = prior_start([0.967, 0.033], (4,), 0.001, radius=10.0)
    assert np.linalg.norm(small) == pytest.approx(10.0) and small[-1] < 0


def test_the_check_is_the_gaussian_mechanism_and_decides_by_its_sign():
    details, eps_left, delta_left = reserve_check(1.0, 1e-5, adjacency="replace")
    mu = CHECK_SHARE * gdp_mu(1.0, 1e-5)
    assert details["mu"] == pytest.approx(mu) and details["noise_std"] == pytest.approx(2.0 / mu)
    assert eps_left == pytest.approx(1.0 - details["epsilon"]) and delta_left == pytest.approx(1e-5 - details["delta"])
    z = np.random.default_rng(3).standard_normal()
    kept = release_check(620, 600, details, rng=np.random.default_rng(3))
    assert details["noisy_difference"] == pytest.approx(20 + details["noise_std"] * z, rel=1e-12)
    assert kept == (20 + details["noise_std"] * z >= CHECK_MARGIN * details["noise_std"])
    # far from the tie the answer is the sign of the difference, whatever the draw within 6 sigma
    sigma = details["noise_std"]
    assert release_check(1000 + int(6 * sigma), 1000, dict(details), rng=np.random.default_rng(1))
    assert not release_check(1000, 1000 + int(6 * sigma), dict(details), rng=np.random.default_rng(1))


@pytest.mark.parametrize("adjacency", ["replace", "add-remove"])
def test_an_exact_attack_on_both_answers_stays_within_the_certificate(adjacency):
    """A linear instance and a neighbour chosen to move both answers by their full sensitivity: the
    released counts move by √2 (replace) or 1, and — the model fixed — the check's count by 2 or 1.
    The likelihood-ratio attack on the two answers together sees two Gaussians at distance
    μ_a = √(Δ_p²/σ_p² + Δ_c²/σ_c²); its δ at the certificate's ε (mpmath) must not exceed the
    certificate's δ, and the certificate's query μ must be at least μ_a."""
    rng = np.random.default_rng(0)
    n = 400
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 0.3).astype(int)
    kw = {"adjacency": "add-remove", "public_n": n} if adjacency == "add-remove" else {}
    clf = NoisySGDClassifier(epsilon=1.0, classes=[0, 1], random_state=0, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y)
    cert = clf.privacy_report_
    counts = next(p_ for p_ in cert["preprocessing"]["parts"] if "class_prior" in p_)
    check = next(p_ for p_ in cert["preprocessing"]["parts"] if "noisy_difference" in p_)
    # the neighbour: row 0 changes class (two counts move by one), and, for the released model, from a row the
    # model gets right and the prior's class gets wrong to one where it is the other way round (D moves by 2)
    W = np.append(clf.coef_[0], clf.intercept_[0] / clf.intercept_scaling_)
    Z = clf.feature_map_(X)
    majority = int(np.argmax(counts["class_prior"]))
    candidates = np.flatnonzero((clf.predict(X) == y) & (y != majority))
    assert candidates.size  # (the model beats chance on this instance: such rows exist)
    y2 = y.copy()
    y2[candidates[0]] = majority  # the model now gets it wrong, the prior's class right
    right = rows_right(W, Z, y, feature_clip=clf.feature_clip_, intercept_scaling=clf.intercept_scaling_,
                       prior_class=majority)
    right2 = rows_right(W, Z, y2, feature_clip=clf.feature_clip_, intercept_scaling=clf.intercept_scaling_,
                        prior_class=majority)
    assert right[0] - right2[0] == 1 and right2[1] - right[1] == 1  # D moves by 2: replace's sensitivity, attained
    delta_p, delta_c = class_counts_sensitivity(adjacency), check_sensitivity(adjacency)
    mu_attack = math.sqrt((delta_p / counts["noise_std"]) ** 2 + (delta_c / check["noise_std"]) ** 2)
    assert cert["preprocessing"]["mu"] >= mu_attack * (1 - 1e-12)
    assert _mp_gdp_delta(mu_attack, cert["epsilon_total"]) <= cert["delta_total"]
    # and the answers are not free: without their μ the certificate's query part would be smaller
    assert cert["preprocessing"]["mu"] ** 2 >= mu_attack ** 2 + max(
        p_["mu"] ** 2 for p_ in cert["preprocessing"]["parts"] if p_ is not counts and p_ is not check) * (1 - 1e-9)


def test_a_model_that_loses_the_check_releases_the_prior(monkeypatch):
    """The fallback's plumbing: coefficients 0, the intercept at the prior's log-odds, the majority
    predicted everywhere, a warning, and the certificate saying which was released."""
    monkeypatch.setattr(pipeline, "release_check", lambda *a, **k: (a[2].update(noisy_difference=-5.0,
                                                                                 kept_model=False), False)[1])
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 4))
    y = (rng.uniform(size=600) < 0.25).astype(int)  # no signal: a quarter positive
    with pytest.warns(UserWarning, match="did not beat the majority class"):
        clf = NoisySGDClassifier(epsilon=1.0, classes=[0, 1], random_state=0).fit(X, y)
    counts = next(p_ for p_ in clf.privacy_report_["preprocessing"]["parts"] if "class_prior" in p_)
    p1 = counts["class_prior"][1]
    assert np.all(clf.coef_ == 0) and clf.intercept_[0] == pytest.approx(math.log(p1 / (1 - p1)))
    assert np.all(clf.predict(X) == 0) and not clf.privacy_report_["release_check"]["kept_model"]
    assert "class prior" in clf.privacy_report_["release_check"]["released"]
    assert clf.privacy_report_["certificate"]["released"].startswith("the class prior (coefficients 0)")


def test_prior_none_asks_neither_query_and_class_weights_turn_it_off():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        off = NoisySGDClassifier(epsilon=1.0, classes=[0, 1], random_state=0, prior=None).fit(X, y)
        weighted = NoisySGDClassifier(epsilon=1.0, classes=[0, 1], random_state=0, class_weight={0: 1, 1: 2}).fit(X, y)
        on = NoisySGDClassifier(epsilon=1.0, classes=[0, 1], random_state=0).fit(X, y)
    for clf in (off, weighted):
        assert "release_check" not in clf.privacy_report_
    assert "release_check" in on.privacy_report_
    with pytest.raises(ValueError, match="'prior' parameter of NoisySGDClassifier must be 'auto' or None"):
        NoisySGDClassifier(prior="yes").fit(X, y)


def test_the_counts_take_their_share_of_the_targets_mu():
    prior, part, eps, delta = class_prior_within(np.array([0, 1, 1, 0]), 2, 1.0, 1e-5, adjacency="replace", seed=0)
    assert part["mu"] == pytest.approx(PRIOR_SHARE * gdp_mu(1.0, 1e-5), rel=1e-12)
    assert eps == pytest.approx(1.0 - part["epsilon"]) and part["delta"] == pytest.approx(0.02e-5)
    assert _mp_gdp_delta(part["mu"], part["epsilon"]) <= part["delta"] * (1 + 1e-9)


def test_the_prior_is_reused_from_a_recorded_answer():
    recorded = {"parts": [{"class_prior": [0.9, 0.1], "mu": 0.1, "epsilon": 0.2, "delta": 1e-7}]}
    prior, part, eps, delta = class_prior_within(np.zeros(10, int), 2, 1.0, 1e-5, adjacency="replace",
                                                 recorded=recorded)
    assert prior.tolist() == [0.9, 0.1] and part is recorded["parts"][0] and eps < 1.0 and delta < 1e-5


def test_a_resumed_fit_replays_the_release_checks_answer():
    """One query, one answer: a fit given the queries a checkpoint recorded, the release check among them
    already answered, reuses that answer instead of asking the check again."""
    import json

    from noisysgd.pipeline import Declared, classification_loss, fit_declared
    from noisysgd.private_fit import Execution

    rng = np.random.default_rng(5)
    X = rng.normal(size=(2000, 4))
    y = (X[:, 0] > 0).astype(int)
    decl = Declared(task="classification", epsilon=1.0, delta=None, noise_multiplier=None, prior=True,
                    center="private", clip_norm="auto")
    first = fit_declared(X, y, classification_loss(2), decl, Execution(random_state=None))
    recorded = json.loads(json.dumps(first.fit.certificate["preprocessing"]))
    again = fit_declared(X, y, classification_loss(2), decl, Execution(random_state=None), recorded=recorded)
    a, b = first.fit.certificate["release_check"], again.fit.certificate["release_check"]
    assert b["noisy_difference"] == a["noisy_difference"] and b["kept_model"] == a["kept_model"]


@pytest.mark.parametrize("tau, below, lost", [(0.5, 0.081, 0.31), (-0.5, 0.31, 0.081), (0.0, 0.17, 0.17)])
def test_the_margins_bounds_stated_in_the_docstring(tau, below, lost):
    """noisysgd.prior's docstring: at margin τσ_c a model D = −xσ_c behind the prior is kept with
    probability Φ̄(τ + x), so the expected loss below the prior is at most max_x x·Φ̄(τ + x)·σ_c/n; a
    model xσ_c ahead is replaced with probability Φ(τ − x), losing at most max_x x·Φ(τ − x)·σ_c/n.
    Maximised in mpmath (independent of the library), to the docstring's two digits."""
    def worst(f):
        best = max(f(mpmath.mpf(i) / 1000) for i in range(1, 6000))
        return float(best)
    assert worst(lambda x: x * mpmath.ncdf(-(tau + x))) == pytest.approx(below, abs=0.005)
    assert worst(lambda x: x * mpmath.ncdf(tau - x)) == pytest.approx(lost, abs=0.005)


@settings(max_examples=60, deadline=None)
@given(k=st.integers(2, 8), seed=st.integers(0, 10_000), concentration=st.sampled_from([0.3, 1.0, 100.0]))
def test_the_margin_is_plus_half_a_noise_std_for_every_prior(k, seed, concentration):
    """Binary or multiclass, balanced or not: the check keeps the model only where its noisy lead is at least
    +½σ_c (the near-uniform rule of README §23 was withdrawn in §26: module docstring, 3)."""
    p = np.random.default_rng(seed).dirichlet(np.full(k, concentration))
    for prior in (p, np.full(k, 1.0 / k)):
        margin, why = check_margin(prior)
        assert margin == CHECK_MARGIN == 0.5 and "ahead by at least 0.5 noise std" in why


def _near_uniform(prior):
    """README §23's withdrawn rule, patched in where a test needs a margin that follows the prior:
    −½σ_c where k ≥ 3 and the prior's largest share is at most 1/k + 0.2."""
    p = np.asarray(prior, dtype=float)
    if p.size >= 3 and p.max() <= 1.0 / p.size + 0.2:
        return -CHECK_MARGIN, "near-uniform (test rule)"
    return CHECK_MARGIN, "positive"


class _Draw:
    """A generator whose one standard normal is ``z`` (the check's draw, fixed)."""

    def __init__(self, z):
        self.z = z

    def standard_normal(self, *shape):
        return self.z


def test_a_negative_margin_keeps_a_model_slightly_behind_and_not_one_far_behind():
    details = reserve_check(1.0, 1e-5, adjacency="replace")[0]
    sigma = details["noise_std"]
    behind = int(round(0.3 * sigma))  # the model 0.3 noise std behind the prior, the draw 0
    assert release_check(1000, 1000 + behind, dict(details), margin=-CHECK_MARGIN, rng=_Draw(0.0))
    assert not release_check(1000, 1000 + behind, dict(details), margin=CHECK_MARGIN, rng=_Draw(0.0))
    far = int(round(0.8 * sigma))
    assert not release_check(1000, 1000 + far, dict(details), margin=-CHECK_MARGIN, rng=_Draw(0.0))
    answered = dict(details)
    release_check(1000, 1000, answered, margin=-CHECK_MARGIN, rng=_Draw(0.0))
    assert answered["margin"] == -CHECK_MARGIN and answered["kept_model"]


def _three_classes(seed: int, n: int, shares, signal: float = 1.0):
    """Rows of three classes in the given shares, each class's mean moved along its own column."""
    rng = np.random.default_rng(seed)
    y = rng.choice(3, size=n, p=shares)
    X = rng.normal(size=(n, 4))
    X[np.arange(n), y] += signal
    return X, y


def test_a_margin_rule_of_the_prior_changes_the_decision_only(monkeypatch):
    """Balanced classes, a rule of the released prior patched in (README §23's): the certificate records the
    margin −½σ_c and why, the decision follows it, and the run, its noise and the certificate's totals equal
    those of the shipped fit at +½σ_c."""
    X, y = _three_classes(0, 1500, [1 / 3, 1 / 3, 1 / 3])

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return NoisySGDClassifier(epsilon=1.0, classes=[0, 1, 2], random_state=0).fit(X, y)

    positive = fit()
    monkeypatch.setattr(pipeline, "check_margin", _near_uniform)
    signed = fit()
    monkeypatch.undo()
    check = signed.privacy_report_["release_check"]
    assert check["margin"] == -CHECK_MARGIN and "near-uniform" in check["margin_rule"]
    assert positive.privacy_report_["release_check"]["margin"] == CHECK_MARGIN
    assert check["kept_model"] == (check["noisy_difference"] >= -CHECK_MARGIN * check["noise_std"])
    assert check["noisy_difference"] == positive.privacy_report_["release_check"]["noisy_difference"]
    for key in ("epsilon_total", "delta_total"):
        assert signed.privacy_report_[key] == positive.privacy_report_[key]
    assert signed.noise_multiplier_ == positive.noise_multiplier_
    assert signed.privacy_report_["preprocessing"]["mu"] == positive.privacy_report_["preprocessing"]["mu"]


def test_balanced_imbalanced_and_binary_fits_all_decide_at_the_positive_margin():
    X, y = _three_classes(1, 3000, [0.8, 0.1, 0.1])
    Xb, yb = _three_classes(7, 3000, [1 / 3, 1 / 3, 1 / 3])
    Xh, yh = _three_classes(2, 3000, [0.5, 0.5, 0.0])  # two balanced classes, k = 2 declared
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = [NoisySGDClassifier(epsilon=1.0, classes=[0, 1, 2], random_state=0).fit(X, y),
                NoisySGDClassifier(epsilon=1.0, classes=[0, 1, 2], random_state=0).fit(Xb, yb),
                NoisySGDClassifier(epsilon=1.0, classes=[0, 1], random_state=0).fit(X[:, :2], (y > 0).astype(int)),
                NoisySGDClassifier(epsilon=1.0, classes=[0, 1], random_state=0).fit(Xh, yh)]
    for clf in fits:
        check = clf.privacy_report_["release_check"]
        assert check["margin"] == CHECK_MARGIN and check["kept_model"] == (
            check["noisy_difference"] >= CHECK_MARGIN * check["noise_std"])


def test_the_margin_reads_the_replayed_prior_not_the_rows(monkeypatch):
    """The margin is post-processing of the class counts' answer: with a rule of the prior patched in
    (README §23's), the answers recorded on balanced rows, replayed on imbalanced rows of the same shape,
    give the negative margin there too — and the answers of the imbalanced rows, replayed on the balanced
    ones, the positive margin."""
    import json

    from noisysgd.pipeline import Declared, classification_loss, fit_declared
    from noisysgd.private_fit import Execution

    decl = Declared(task="classification", epsilon=1.0, delta=None, noise_multiplier=None, prior=True,
                    center="private", clip_norm="auto")
    loss = classification_loss(3)
    data = {"balanced": _three_classes(3, 2000, [1 / 3, 1 / 3, 1 / 3]),
            "skewed": _three_classes(4, 2000, [0.8, 0.1, 0.1])}
    monkeypatch.setattr(pipeline, "check_margin", _near_uniform)
    runs = {name: fit_declared(*rows, loss, decl, Execution(random_state=0)) for name, rows in data.items()}
    assert runs["balanced"].fit.certificate["release_check"]["margin"] == -CHECK_MARGIN
    assert runs["skewed"].fit.certificate["release_check"]["margin"] == CHECK_MARGIN
    for recorded_on, rows_of in (("balanced", "skewed"), ("skewed", "balanced")):
        answers = json.loads(json.dumps(runs[recorded_on].fit.certificate["preprocessing"]))
        for part in answers["parts"]:  # (the check itself is asked afresh: it reads the model)
            for key in ("noisy_difference", "kept_model", "margin"):
                part.pop(key, None)
        again = fit_declared(*data[rows_of], loss, decl, Execution(random_state=0), recorded=answers)
        assert again.fit.certificate["release_check"]["margin"] == (-CHECK_MARGIN if recorded_on == "balanced"
                                                                    else CHECK_MARGIN)


def test_a_resumed_fit_keeps_the_margin_its_check_was_decided_at(monkeypatch):
    """A checkpoint's recorded check is replayed with its decision and its margin — one decided at −½σ_c by
    README §23's rule (patched in for the first fit only, as a version that shipped it), and one recorded
    before the margin was (every check was then decided at +CHECK_MARGIN) — whatever this version's rule
    reads off the prior."""
    import json

    from noisysgd.pipeline import Declared, classification_loss, fit_declared
    from noisysgd.private_fit import Execution

    decl = Declared(task="classification", epsilon=1.0, delta=None, noise_multiplier=None, prior=True,
                    center="private", clip_norm="auto")
    loss = classification_loss(3)
    X, y = _three_classes(5, 2000, [1 / 3, 1 / 3, 1 / 3])
    monkeypatch.setattr(pipeline, "check_margin", _near_uniform)
    first = fit_declared(X, y, loss, decl, Execution(random_state=0))
    monkeypatch.undo()
    assert first.fit.certificate["release_check"]["margin"] == -CHECK_MARGIN
    for recorded_margin in (True, False):
        answers = json.loads(json.dumps(first.fit.certificate["preprocessing"]))
        part = next(p_ for p_ in answers["parts"] if "noisy_difference" in p_)
        if not recorded_margin:
            del part["margin"]
        again = fit_declared(X, y, loss, decl, Execution(random_state=0), recorded=answers).fit.certificate
        assert again["release_check"]["noisy_difference"] == part["noisy_difference"]
        assert again["release_check"]["kept_model"] == part["kept_model"]
        assert again["release_check"]["margin"] == (-CHECK_MARGIN if recorded_margin else CHECK_MARGIN)


@pytest.mark.parametrize("adjacency", ["replace", "add-remove"])
@pytest.mark.parametrize("shares, kept", [([1 / 3, 1 / 3, 1 / 3], True), ([0.8, 0.1, 0.1], False)])
def test_the_pipeline_decides_at_the_margin_it_records(monkeypatch, shares, kept, adjacency):
    """The check's draw fixed so that the noisy difference is exactly 0: between −½σ_c and +½σ_c, so the
    decision tells the two margins apart — with README §23's rule patched in, kept on a near-uniform prior
    (−½σ_c), the prior released on an imbalanced one (+½σ_c), and the certificate's margin is the one the
    decision used; the shipped margin releases the prior on both."""
    real = pipeline.release_check

    def at_zero(model_right, prior_right, details, **kw):
        z = -(model_right - prior_right) / details["noise_std"]
        return real(model_right, prior_right, details, margin=kw["margin"], rng=_Draw(z))

    monkeypatch.setattr(pipeline, "release_check", at_zero)
    X, y = _three_classes(6, 3000, shares)
    kw = {"adjacency": "add-remove", "public_n": len(y)} if adjacency == "add-remove" else {}

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return NoisySGDClassifier(epsilon=1.0, classes=[0, 1, 2], random_state=0, **kw).fit(X, y)

    shipped = fit()
    monkeypatch.setattr(pipeline, "check_margin", _near_uniform)
    clf = fit()
    check = clf.privacy_report_["release_check"]
    assert check["noise_std"] == pytest.approx(check_sensitivity(adjacency) / check["mu"], rel=1e-12)
    assert check["noisy_difference"] == pytest.approx(0.0, abs=1e-9)
    assert check["kept_model"] is kept and check["margin"] == (-CHECK_MARGIN if kept else CHECK_MARGIN)
    assert check["released"].startswith("the model: it was not behind" if kept else "the class prior")
    assert np.any(clf.coef_ != 0) == kept
    assert shipped.privacy_report_["release_check"]["margin"] == CHECK_MARGIN
    assert not shipped.privacy_report_["release_check"]["kept_model"] and not np.any(shipped.coef_ != 0)
