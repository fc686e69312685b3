"""Empirical privacy audits: the statistics, the replica engine, the adversaries, the CLI.

False alarms.  Every assertion below whose outcome depends on random draws
(a law test, an audit's lower bound, a coverage simulation) is made at
level ALPHA = 1e-5: its probability of failing when nothing is wrong is at
most 1e-5.  There are 17 such checks in the fast suite and 9 more in the slow
one (``test_false_alarm_budget``), so by the union bound the fast suite raises
a false alarm with probability at most 1.7e-4 and the whole file at most
2.6e-4 — below 1 in 1,000 runs — over the choice of seeds, which are fixed
(and can be changed with NOISYSGD_AUDIT_SEED) so that a failure reproduces.
Checks that a *broken* trainer is caught have miss probabilities computed in
their docstrings (below 1e-15).
The audits use confidence 1 − ALPHA: an empirical lower bound exceeds a
*correct* certified ε with probability at most ALPHA.

Long audits are marked ``slow`` and skipped unless NOISYSGD_SLOW=1
(``benchmarks/audit_gap.py`` measures the gap at full scale).
"""

from __future__ import annotations

import json
import math
import os
import warnings

import numpy as np
import pytest
from scipy import stats

import noisysgd
from noisysgd import Run
from noisysgd.audit import (
    Linear,
    Threshold,
    at_1d_datasets,
    audit_at_1d,
    audit_canary,
    choose_threshold,
    clopper_pearson,
    clopper_pearson_lower,
    clopper_pearson_upper,
    digits_canary,
    epsilon_lower_bound,
    evaluate_threshold,
)
from noisysgd.audit.adversaries import at_1d_run, canary_run
from noisysgd.audit.exact import at_1d_law, privacy_epsilon, threshold_rates
from noisysgd.train import BinaryLogistic, Huber, OneVsRestLogistic, Softmax, Squared, train
from noisysgd.train.replicas import replica_batches, train_replicas

ALPHA = 1e-5
CONFIDENCE = 1.0 - ALPHA
SEED = int(os.environ.get("NOISYSGD_AUDIT_SEED", "20240611"))
SLOW = os.environ.get("NOISYSGD_SLOW") == "1"
skip_unless_slow = pytest.mark.skipif(not SLOW, reason="long audit: set NOISYSGD_SLOW=1")

#: Random checks in this file, each at level ALPHA (see the module docstring).
RANDOM_CHECKS: list[str] = []


def random_check(name: str) -> float:
    """Register one random check and return its level."""
    RANDOM_CHECKS.append(name)
    return ALPHA


def rng(offset: int) -> np.random.Generator:
    return np.random.default_rng([SEED, offset])


# =========================================================================== statistics


@pytest.mark.parametrize("n", [1, 7, 50, 1000])
@pytest.mark.parametrize("conf", [0.9, 0.95, 0.999])
def test_clopper_pearson_matches_scipy_exact_intervals(n, conf):
    """scipy's binomtest finds the exact (Clopper–Pearson) limits by root finding, to
    about 1e-10 relative; ours are Beta quantiles (exact to double precision, below)."""
    for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
        less = stats.binomtest(k, n, alternative="less").proportion_ci(conf, method="exact")
        greater = stats.binomtest(k, n, alternative="greater").proportion_ci(conf, method="exact")
        two = stats.binomtest(k, n).proportion_ci(conf, method="exact")
        assert clopper_pearson_upper(k, n, conf) == pytest.approx(less.high, rel=1e-8, abs=1e-14)
        assert clopper_pearson_lower(k, n, conf) == pytest.approx(greater.low, rel=1e-8, abs=1e-14)
        lo, hi = clopper_pearson(k, n, conf)
        assert lo == pytest.approx(two.low, rel=1e-8, abs=1e-14)
        assert hi == pytest.approx(two.high, rel=1e-8, abs=1e-14)


def test_clopper_pearson_solves_the_binomial_tail_equation():
    """p̄(k) solves P[Bin(n, p̄) ≤ k] = 1 − c exactly (mpmath, 40 digits)."""
    import mpmath as mp

    mp.mp.dps = 40
    for k, n, c in ((0, 50, 0.95), (1, 50, 0.975), (7, 300, 0.99), (250, 300, 0.9)):
        p = mp.mpf(clopper_pearson_upper(k, n, c))
        tail = mp.fsum(mp.binomial(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))
        assert abs(tail - (1 - c)) < 1e-12
        q = mp.mpf(clopper_pearson_lower(k + 1, n, c))  # P[Bin(n, q) ≥ k + 1] = 1 − c
        upper_tail = 1 - mp.fsum(mp.binomial(n, i) * q**i * (1 - q) ** (n - i) for i in range(k + 1))
        assert abs(upper_tail - (1 - c)) < 1e-12


def test_clopper_pearson_closed_forms():
    # k = 0: 1 − (1−c)^(1/n); k = n: 1
    for n in (1, 10, 1000):
        assert clopper_pearson_upper(0, n, 0.95) == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-12)
        assert clopper_pearson_upper(n, n, 0.95) == 1.0
        assert clopper_pearson_lower(0, n, 0.95) == 0.0
        assert clopper_pearson_lower(n, n, 0.95) == pytest.approx(0.05 ** (1 / n), rel=1e-12)


@pytest.mark.parametrize("n", [5, 40, 300])
@pytest.mark.parametrize("conf", [0.95, 0.99])
def test_clopper_pearson_upper_bound_exact_coverage(n, conf):
    """P_p[p ≤ p̄(K)] ≥ conf for every p, computed exactly over K ~ Bin(n, p):
    the coverage is a step function of p, lowest just above each p̄(k)."""
    uppers = np.array([clopper_pearson_upper(k, n, conf) for k in range(n + 1)])
    ps = np.concatenate([np.linspace(1e-6, 1 - 1e-6, 400), np.minimum(uppers[:-1] * (1 + 1e-9), 1 - 1e-12)])
    worst = 1.0
    for p in ps:
        covered = uppers >= p
        worst = min(worst, float(stats.binom.pmf(np.arange(n + 1), n, p)[covered].sum()))
    assert worst >= conf - 1e-9
    assert worst < conf + 0.5 * (1 - conf)  # and not absurdly conservative at its worst p


def test_clopper_pearson_coverage_by_simulation():
    """Simulated coverage of the one-sided upper bound at 95%: with 20,000 draws
    per p the observed coverage must not be significantly below 0.95 (one-sided
    binomial test at ALPHA each, Bonferroni over the ps)."""
    n, conf, draws = 60, 0.95, 20_000
    ps = [0.001, 0.02, 0.1, 0.37, 0.8]
    uppers = np.array([clopper_pearson_upper(k, n, conf) for k in range(n + 1)])
    level = random_check("clopper-pearson simulated coverage") / len(ps)
    g = rng(1)
    for p in ps:
        k = g.binomial(n, p, size=draws)
        hits = int(np.count_nonzero(uppers[k] >= p))
        pvalue = stats.binomtest(hits, draws, conf, alternative="less").pvalue
        assert pvalue > level, (p, hits / draws)


def test_epsilon_lower_bound_formula():
    fp, n0, fn, n1, delta, conf = 12, 2000, 700, 2000, 1e-5, 0.95
    lb = epsilon_lower_bound(false_positives=fp, negatives=n0, false_negatives=fn, positives=n1,
                             delta=delta, confidence=conf)
    each = 1 - (1 - conf) / 2
    p0 = stats.beta.ppf(each, fp + 1, n0 - fp)
    p1 = stats.beta.ppf(each, fn + 1, n1 - fn)
    expected = max(0.0, math.log((1 - delta - p0) / p1), math.log((1 - delta - p1) / p0))
    assert lb.epsilon == pytest.approx(expected, rel=1e-12)
    assert (lb.fpr_upper, lb.fnr_upper) == (pytest.approx(p0), pytest.approx(p1))
    assert lb.per_rate_confidence == pytest.approx(0.975)
    assert lb.point_estimate > lb.epsilon  # the confidence bound is below the plug-in value
    # symmetric in the roles of the two errors
    swapped = epsilon_lower_bound(false_positives=fn, negatives=n1, false_negatives=fp, positives=n0,
                                  delta=delta, confidence=conf)
    assert swapped.epsilon == pytest.approx(lb.epsilon, rel=1e-12)
    # a useless test gives 0, never a negative number
    zero = epsilon_lower_bound(false_positives=1000, negatives=2000, false_negatives=1000, positives=2000,
                               delta=delta)
    assert zero.epsilon == 0.0
    json.dumps(lb.to_dict())


def _exact_false_alarm(rate0, rate1, n, true_eps, delta, conf):
    """P[lower bound > true ε] exactly, over K0 ~ Bin(n, rate0), K1 ~ Bin(n, rate1).
    The bound on the grid of counts is computed from the Clopper–Pearson bounds of each
    count, and checked against epsilon_lower_bound itself at a few points."""
    ks = np.arange(n + 1)
    pm0, pm1 = stats.binom.pmf(ks, n, rate0), stats.binom.pmf(ks, n, rate1)
    k0s, k1s = ks[pm0 > 1e-18], ks[pm1 > 1e-18]
    each = 1 - (1 - conf) / 2
    u0 = np.array([clopper_pearson_upper(int(k), n, each) for k in k0s])[:, None]
    u1 = np.array([clopper_pearson_upper(int(k), n, each) for k in k1s])[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(1 - delta - u0 > 0, np.log((1 - delta - u0) / u1), 0.0)
        b = np.where(1 - delta - u1 > 0, np.log((1 - delta - u1) / u0), 0.0)
    lb = np.maximum(np.maximum(a, b), 0.0)
    for i, j in ((0, 0), (len(k0s) // 2, len(k1s) // 3), (-1, -1)):
        ref = epsilon_lower_bound(false_positives=int(k0s[i]), negatives=n, false_negatives=int(k1s[j]),
                                  positives=n, delta=delta, confidence=conf).epsilon
        assert lb[i, j] == pytest.approx(ref, rel=1e-12, abs=1e-15)
    return float((pm0[k0s][:, None] * pm1[k1s][None, :] * (lb > true_eps)).sum())


@pytest.mark.parametrize("eps0", [0.5, 2.0])
def test_lower_bound_is_sound_for_randomized_response(eps0):
    """Randomized response with ε₀ is exactly (ε₀, 0)-DP and the test "output = 1"
    meets FPR + e^ε₀·FNR = 1: the probability that the lower bound exceeds ε₀
    is at most 1 − confidence, computed exactly over the binomial counts."""
    p = 1.0 / (1.0 + math.exp(eps0))  # FPR = FNR
    for n, conf in ((40, 0.9), (200, 0.95)):
        miss = _exact_false_alarm(p, p, n, eps0, 0.0, conf)
        assert miss <= 1 - conf
        assert miss > 0.0 or n < 60  # the bound does get near ε₀ sometimes


def test_lower_bound_is_sound_for_the_gaussian_mechanism():
    """N(0,1) vs N(μ,1) is (ε, δ(ε))-DP with δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2); the
    threshold test at μ/2 + t has FPR = Φ(−μ/2 − t), FNR = Φ(t − μ/2)."""
    mu, delta = 2.0, 1e-3
    dfun = lambda e: stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2)  # noqa: E731
    lo, hi = 0.0, 20.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if dfun(mid) > delta else (lo, mid)
    true_eps = hi
    for t in (0.0, 1.0, 2.0):
        fpr, fnr = stats.norm.cdf(-mu / 2 - t), stats.norm.cdf(t - mu / 2)
        assert _exact_false_alarm(fpr, fnr, 150, true_eps, delta, 0.95) <= 0.05


def test_statistics_reject_bad_input():
    with pytest.raises(ValueError, match="k must be at most n"):
        clopper_pearson_upper(5, 4)
    with pytest.raises(ValueError, match="confidence must be"):
        clopper_pearson_upper(1, 4, 1.0)
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        clopper_pearson_lower(0, 0)
    with pytest.raises(ValueError, match="false_positives must be at most negatives"):
        epsilon_lower_bound(false_positives=5, negatives=4, false_negatives=0, positives=4, delta=0.0)
    with pytest.raises(ValueError, match="delta must be"):
        epsilon_lower_bound(false_positives=0, negatives=4, false_negatives=0, positives=4, delta=1.0)
    with pytest.raises(ValueError, match="direction"):
        Threshold(0.0, 2)
    with pytest.raises(ValueError, match="NaN"):
        choose_threshold([np.nan], [1.0], delta=0.0)


def test_threshold_choice_and_evaluation():
    g = rng(2)
    a, b = g.normal(0, 1, 3000), g.normal(3, 1, 3000)
    t = choose_threshold(a, b, delta=1e-5)
    assert t.direction == 1 and 0.5 < t.threshold < 6
    assert choose_threshold(b, a, delta=1e-5).direction == -1
    res = evaluate_threshold(g.normal(0, 1, 3000), g.normal(3, 1, 3000), t, delta=1e-5)
    assert res.negatives == res.positives == 3000
    # the Gaussian mechanism with μ = 3: its ε at δ = 1e-5 is about 12.4, far above any
    # bound 3000 runs can show, and this bound holds at 95%
    assert 1.0 < res.epsilon < 12.4


# =========================================================================== the linear loss


def test_linear_loss_runs_in_the_engine_and_is_clipped():
    loss = Linear()
    c = loss.constants(feature_clip=1.0, clip_norm=0.5)
    assert (c.convex, c.smoothness, c.lipschitz, c.clipped) == (True, 0.0, 0.5, True)
    X = np.zeros((3, 0))
    y = np.array([0.0, 2.0, -0.2])
    run = Run(n=3, batch_size=3, batching="full", steps=4, learning_rate=1.0, noise_multiplier=1.0,
              lipschitz=0.5, smoothness=2.0, convex=True, diameter=10.0)
    res = noisysgd.train.sgd(run, loss, X, y, feature_clip=1.0, clip=True)
    # each step: ω −= (clip(0) + clip(2) + clip(−0.2))/3 = (0 + 0.5 − 0.2)/3 (up to the ulp margin)
    assert res.coef.shape == (1,)
    assert res.coef[0] == pytest.approx(-4 * 0.3 / 3, rel=1e-12)
    W = np.array([0.7])
    assert loss.value(W, np.ones((3, 1)), y) == pytest.approx(np.mean(y) * 0.7)
    np.testing.assert_allclose(loss.gradient(W, np.ones((3, 1)), y, clip_norm=0.5), [0.1])
    assert Linear().constants(feature_clip=2.0, target_bound=1.0).natural_lipschitz == pytest.approx(math.sqrt(5))


def test_at_1d_datasets():
    X, y, y2 = at_1d_datasets(5, lipschitz=2.0, variant="paper")
    assert X.shape == (5, 0) and y.tolist() == [0.0] * 5 and y2.tolist() == [0, 0, 0, 0, -2.0]
    with pytest.raises(ValueError, match="variant"):
        at_1d_datasets(5, variant="other")


# =========================================================================== the replica engine


def _logistic_problem(n=37, d=3, seed=0):
    g = np.random.default_rng(seed)
    X = g.normal(size=(n, d))
    return X, (X[:, 0] + 0.3 * g.normal(size=n) > 0).astype(int)


SCHEMES = [("full", None), ("cyclic", 5), ("shuffle", 5), ("sample", 5), ("poisson", 5)]


@pytest.mark.parametrize("scheme,b", SCHEMES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_replicas_with_engine_seeds_reproduce_the_engine(scheme, b, dtype):
    """random_state = one seed per replica: replica r *is* train(..., random_state=seed_r)."""
    X, y = _logistic_problem()
    yk = np.random.default_rng(1).integers(0, 3, size=X.shape[0])
    for loss, labels, init in ((BinaryLogistic(), y, "fixed"), (OneVsRestLogistic(3), yk, "gaussian")):
        run = Run(n=37, batch_size=b or 37, batching=scheme, steps=23, learning_rate=0.3, noise_multiplier=1.5,
                  lipschitz=0.7, diameter=3.0, strong_convexity=0.1, smoothness=5.0, initialization=init)
        seeds = [3, 4, 5]
        many = train_replicas(run, loss, X, labels, replicas=3, feature_clip=1.0, random_state=seeds, dtype=dtype)
        assert many.coef.dtype == np.dtype(dtype)
        for r, s in enumerate(seeds):
            ref = train(run, loss, X, labels, feature_clip=1.0, random_state=s, dtype=dtype).coef
            tol = 1e-12 if dtype == np.float64 else 2e-6
            np.testing.assert_allclose(many.coef[r], ref, rtol=tol, atol=tol)
    plain = Run(n=37, batch_size=b or 37, batching=scheme, steps=15, learning_rate=0.3, noise_multiplier=1.5,
                lipschitz=0.7, diameter=3.0)
    for loss, labels in ((Softmax(3), yk), (Huber(0.5), X[:, 0])):
        many = train_replicas(plain, loss, X, labels, replicas=2, feature_clip=1.0, random_state=[8, 9],
                              dtype=dtype)
        for r, s in enumerate((8, 9)):
            ref = train(plain, loss, X, labels, feature_clip=1.0, random_state=s, dtype=dtype).coef
            tol = 1e-12 if dtype == np.float64 else 2e-6
            np.testing.assert_allclose(many.coef[r], ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("scheme,b", [("full", None), ("poisson", 5), ("sample", 5)])
def test_replica_chunks_do_not_change_the_result(monkeypatch, scheme, b):
    """Replicas are processed in chunks to bound memory; the chunking is invisible."""
    import noisysgd.train.replicas as rep

    X, y = _logistic_problem()
    run = Run(n=37, batch_size=b or 37, batching=scheme, steps=10, learning_rate=0.3, noise_multiplier=1.0,
              lipschitz=0.7)
    whole = train_replicas(run, OneVsRestLogistic(3), X, y % 3, replicas=9, feature_clip=1.0, random_state=4)
    monkeypatch.setattr(rep, "_GATHER_BUDGET", 150)  # 1 or 2 replicas per chunk
    chunked = train_replicas(run, OneVsRestLogistic(3), X, y % 3, replicas=9, feature_clip=1.0, random_state=4)
    np.testing.assert_allclose(chunked.coef, whole.coef, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("scheme,b", [("full", None), ("cyclic", 5), ("shuffle", 5)])
def test_one_vectorised_replica_is_the_engine(scheme, b):
    """R = 1 with one seed: the shared streams are consumed exactly as train() does for
    full, cyclic and shuffle batches (sample and poisson only agree in law)."""
    X, y = _logistic_problem()
    for lam, D, init in ((0.0, None, "fixed"), (0.05, 1.0, "gaussian")):
        run = Run(n=37, batch_size=b or 37, batching=scheme, steps=40, learning_rate=0.4, noise_multiplier=0.8,
                  lipschitz=0.6, strong_convexity=lam, smoothness=2.0 if lam else None, diameter=D,
                  initialization=init)
        one = train_replicas(run, BinaryLogistic(), X, y, replicas=1, feature_clip=1.2, random_state=11)
        ref = train(run, BinaryLogistic(), X, y, feature_clip=1.2, random_state=11)
        np.testing.assert_allclose(one.coef[0], ref.coef, rtol=1e-12, atol=1e-14)
        if D is not None:
            assert np.linalg.norm(one.coef[0]) <= D / 2


def test_replicas_are_independent_and_noise_free_runs_coincide():
    X, y = _logistic_problem()
    run = Run(n=37, batch_size=37, batching="full", steps=30, learning_rate=0.5, noise_multiplier=1.0,
              lipschitz=1.0)
    many = train_replicas(run, Squared(), X, y.astype(float), replicas=50, feature_clip=1.0, random_state=0)
    assert len({tuple(np.round(w, 12)) for w in many.coef}) == 50  # independent noise
    # noise-free runs (z → tiny) of full batches are the deterministic sgd path for every replica
    quiet = run.replace(noise_multiplier=1e-300)
    det = train_replicas(quiet, Squared(), X, y.astype(float), replicas=4, feature_clip=1.0, random_state=0)
    ref = noisysgd.train.sgd(run, Squared(), X, y.astype(float), feature_clip=1.0, clip=True).coef
    for w in det.coef:
        np.testing.assert_allclose(w, ref, rtol=1e-12, atol=1e-14)


def test_vectorised_batches_follow_the_schemes():
    """Structural properties of the batches the replicas draw (exact, no randomness)."""
    n, b, R = 23, 4, 50
    base = dict(n=n, learning_rate=0.1, noise_multiplier=1.0, lipschitz=1.0)
    K = n // b
    for scheme in ("cyclic", "shuffle"):
        run = Run(batch_size=b, batching=scheme, steps=3 * K, **base)
        out = replica_batches(run, R, rng(3))
        for r in range(R):
            epochs = [np.concatenate([out[e * K + j][r] for j in range(K)]) for e in range(3)]
            for ep in epochs:
                assert len(ep) == K * b and len(np.unique(ep)) == K * b
            same = all(np.array_equal(epochs[0], ep) for ep in epochs[1:])
            assert same if scheme == "cyclic" else not same
    run = Run(batch_size=b, batching="sample", steps=200, **base)
    for step in replica_batches(run, R, rng(4)):
        for batch in step:
            assert len(batch) == b and len(np.unique(batch)) == b and batch.min() >= 0 and batch.max() < n


def test_vectorised_batch_laws():
    """Inclusion frequencies and batch sizes have the laws of the engine's schemes
    (chi-square tests, each at ALPHA/number of tests)."""
    n, R, steps = 23, 400, 50
    base = dict(n=n, learning_rate=0.1, noise_multiplier=1.0, lipschitz=1.0)
    level = random_check("batch laws") / 5
    g = rng(5)
    # sample, both algorithms (Floyd for small b, keys otherwise): uniform inclusion, uniform pairs
    for b in (2, 15):
        run = Run(batch_size=b, batching="sample", steps=steps, **base)
        out = replica_batches(run, R, g)
        counts = np.bincount(np.concatenate([x for step in out for x in step]), minlength=n)
        assert stats.chisquare(counts).pvalue > level
        # the first two indices of each batch (as sets): every unordered pair equally likely
        pairs = [tuple(sorted(x[:2])) if b == 2 else tuple(sorted(np.sort(x)[:2])) for step in out for x in step]
        if b == 2:
            idx = np.array([i * n + j for i, j in pairs])
            pc = np.bincount(idx, minlength=n * n).reshape(n, n)[np.triu_indices(n, 1)]
            assert stats.chisquare(pc).pvalue > level
    # poisson: each index included with probability b/n, independently: sizes ~ Binomial(n, b/n)
    run = Run(batch_size=5, batching="poisson", steps=steps, **base)
    sizes = np.array([len(x) for step in replica_batches(run, R, g) for x in step])
    k = np.arange(n + 1)
    expected = stats.binom.pmf(k, n, 5 / n) * sizes.size
    observed = np.bincount(sizes, minlength=n + 1)
    keep = expected >= 5  # pool the sparse tails
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    assert stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > level
    # shuffle: example 0 sits at a uniform position of the epoch's order (or among the
    # n mod b dropped ones): each of the K·b used positions with probability 1/n
    b = 5
    K = n // b
    run = Run(batch_size=b, batching="shuffle", steps=K, **base)
    out = replica_batches(run, 4000, g)
    pos = []
    for r in range(4000):
        order = np.concatenate([out[j][r] for j in range(K)])
        where = np.flatnonzero(order == 0)
        pos.append(int(where[0]) if where.size else K * b)
    observed = np.bincount(pos, minlength=K * b + 1)
    expected = np.append(np.full(K * b, 1 / n), (n - K * b) / n) * 4000
    assert stats.chisquare(observed, expected).pvalue > level


@pytest.mark.parametrize("scheme,b", [pytest.param("sample", 3, marks=pytest.mark.slow),
                                      pytest.param("poisson", 3, marks=pytest.mark.slow), ("shuffle", 3)])
def test_replicas_agree_in_law_with_the_engine(scheme, b):
    """Two-sample Kolmogorov–Smirnov tests, replicas (4000, vectorised) vs 1000 engine runs,
    on each coordinate of the final model (Bonferroni); and the same test detects a noise
    multiplier 1.5x or 0.7x off."""
    X, y = _logistic_problem(n=12, d=2, seed=3)
    run = Run(n=12, batch_size=b, batching=scheme, steps=20, learning_rate=0.5, noise_multiplier=1.0,
              lipschitz=0.8, diameter=2.0)
    level = random_check(f"replicas vs engine in law, {scheme}") / 3
    E = np.array([train(run, BinaryLogistic(), X, y, feature_clip=1.5, random_state=rng(100 + s)).coef
                  for s in range(1000)])

    def pvalue(r):
        R = train_replicas(r, BinaryLogistic(), X, y, replicas=4000, feature_clip=1.5, random_state=rng(6))
        return min(stats.ks_2samp(E[:, j], R.coef[:, j]).pvalue for j in range(3))

    assert pvalue(run) > level
    assert pvalue(run.replace(noise_multiplier=1.5)) < level
    assert pvalue(run.replace(noise_multiplier=0.7)) < level


@pytest.mark.parametrize("scheme,b,z", [pytest.param("full", 10, 4.0, marks=pytest.mark.slow), ("sample", 1, 0.4),
                                        pytest.param("poisson", 2, 0.8, marks=pytest.mark.slow),
                                        pytest.param("cyclic", 2, 0.8, marks=pytest.mark.slow)])
def test_replicas_sample_the_exact_law_of_the_1d_construction(scheme, b, z):
    """The 1-D walk's law computed independently (:mod:`noisysgd.audit.exact`) vs 20,000
    replicas: the Dvoretzky–Kiefer–Wolfowitz bound P[sup|F_N − F| > r] ≤ 2e^{−2Nr²} at
    ALPHA, plus 1e-3 for the discretization (measured below 1e-5 at these settings); a
    noise multiplier 1.25x or 0.8x off is rejected by the same test."""
    run = at_1d_run(n=10, batch_size=b, batching=scheme, steps=100, learning_rate=1.0, noise_multiplier=z,
                    diameter=4.0)
    X, _, y2 = at_1d_datasets(10)
    N = 20_000
    radius = math.sqrt(math.log(2 / random_check(f"exact 1-D law, {scheme}")) / (2 * N)) + 1e-3
    law = at_1d_law(run, dataset="D'", cells=2000)
    r = run.diameter / 2
    edges = np.linspace(-r, r, 2001)[1:-1]
    points = np.concatenate([[-r * (1 - 1e-9)], edges, [r * (1 - 1e-9)]])
    F = np.concatenate([[law.atoms[0]], law.cdf(edges), [1 - law.atoms[1]]])

    def sup(factor):
        res = train_replicas(run.replace(noise_multiplier=z * factor), Linear(), X, y2, replicas=N,
                             feature_clip=1.0, random_state=rng(7))
        w = np.sort(res.coef[:, 0])
        return np.max(np.abs(np.searchsorted(w, points, side="right") / N - F))

    assert sup(1.0) < radius
    # a wrong noise scale is rejected: the true laws at z and 1.25z (0.8z) differ by 0.09 to 0.14
    # in sup norm here, so the statistic lands far above the rejection radius (about 0.019)
    assert sup(1.25) > radius and sup(0.8) > radius


def test_replicas_validate_like_the_engine():
    X, y = _logistic_problem()
    run = Run(n=37, batch_size=5, batching="sample", steps=5, learning_rate=0.3, noise_multiplier=1.0,
              lipschitz=1.0, diameter=2.0, convex=True, smoothness=0.1)
    with pytest.raises(ValueError, match="replicas must be"):
        train_replicas(run, BinaryLogistic(), X, y, replicas=0, feature_clip=1.0)
    with pytest.raises(ValueError, match="one seed per replica"):
        train_replicas(run, BinaryLogistic(), X, y, replicas=3, feature_clip=1.0, random_state=[1, 2])
    with pytest.raises(ValueError, match="smoothness must be at least"):  # M = 0.5 for R = 1
        train_replicas(run, BinaryLogistic(), X, y, replicas=3, feature_clip=1.0)
    ok = run.replace(smoothness=1.0)
    with pytest.raises(ValueError, match="does not apply"):
        train_replicas(ok, BinaryLogistic(), X, y, replicas=3, feature_clip=1.0, analyses=["ye-shokri"])
    with pytest.raises(ValueError, match="X must have run.n"):
        train_replicas(ok, BinaryLogistic(), X[:5], y[:5], replicas=3, feature_clip=1.0)
    res = train_replicas(ok, BinaryLogistic(), X, y, replicas=3, feature_clip=1.0, random_state=0,
                         analyses=["altschuler-talwar"])
    assert res.enforced["noise_std"] == pytest.approx(1.0 / 5) and res.enforced["replicas"] == 3
    assert res.scores(X[:4]).shape == (3, 4)
    losses = res.example_losses(X[:2], y[:2])
    assert losses.shape == (3, 2)
    assert losses[1, 0] == pytest.approx(BinaryLogistic().value(res.coef[1], noisysgd.train.augment(X[:1], 1.0),
                                                                BinaryLogistic().encode_labels(y[:1])))


def test_replicas_are_fast():
    """The 1-D construction: 10,000 runs of 500 steps on each of two datasets in seconds."""
    run = at_1d_run(n=10, batch_size=10, batching="full", steps=500, learning_rate=1.0, noise_multiplier=4.0,
                    diameter=4.0)
    X, y, _ = at_1d_datasets(10)
    res = train_replicas(run, Linear(), X, y, replicas=10_000, feature_clip=1.0, random_state=0)
    assert res.enforced["seconds"] < 5.0


# =========================================================================== the audits


#: Settings audited in the fast suite: (name, run, audit keyword arguments).
def _at(scheme, b, z, steps=200, D=4.0, n=10, adjacency="replace"):
    return at_1d_run(n=n, batch_size=b, batching=scheme, steps=steps, learning_rate=1.0, noise_multiplier=z,
                     diameter=D, adjacency=adjacency)


AUDITS = [
    ("at-1d full, tuned", _at("full", 10, 4.0), dict(threshold="tuned")),
    ("at-1d full, paper variant, omega >= 0", _at("full", 10, 8.0), dict(threshold=0.0, variant="paper")),
    ("at-1d sample b=1, tuned", _at("sample", 1, 1.0), dict(threshold="tuned")),
    ("at-1d poisson b=2, tuned", _at("poisson", 2, 1.0), dict(threshold="tuned")),
    ("at-1d cyclic b=2, tuned", _at("cyclic", 2, 0.8), dict(threshold="tuned")),
    ("at-1d shuffle b=2, tuned", _at("shuffle", 2, 0.8), dict(threshold="tuned")),
    # add/remove (issue 24): D = D' without its last example, on the n − 1 others
    ("at-1d poisson b=2, add-remove, tuned", _at("poisson", 2, 0.5, adjacency="add-remove"),
     dict(threshold="tuned")),
    ("at-1d poisson b=n, add-remove, tuned", _at("poisson", 10, 2.0, adjacency="add-remove"),
     dict(threshold="tuned")),
]


@pytest.mark.parametrize("name,run,kwargs", AUDITS, ids=[a[0] for a in AUDITS])
def test_empirical_lower_bound_never_exceeds_the_certified_epsilon(name, run, kwargs):
    level = random_check(f"audit: {name}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = audit_at_1d(run, delta=1e-5, runs=5000, confidence=1 - level, random_state=[SEED, 8],
                          certify=["altschuler-talwar", "composition"], **kwargs)
    assert res.certified_epsilon is not None
    assert not res.violation, (name, res.epsilon_lower, res.certified_epsilon, res.certified_by)
    assert res.epsilon_lower > 0.2  # and the audit does find something
    json.dumps(res.to_dict())


def test_canary_lower_bound_never_exceeds_the_certified_epsilon():
    level = random_check("audit: canary")
    run = canary_run(n=60, batch_size=60, batching="full", steps=40, learning_rate=None, noise_multiplier=8.0,
                     feature_clip=3.0, clip_norm=1.0, diameter=4.0)
    res = audit_canary(run, delta=1e-5, feature_clip=3.0, runs=1000, confidence=1 - level,
                       random_state=[SEED, 9])
    assert not res.violation, (res.epsilon_lower, res.certified_epsilon)
    assert res.epsilon_lower > 0.3
    assert res.test.direction == -1  # a low loss on the canary says D′


def test_a_trainer_with_10x_less_noise_is_caught():
    """The broken trainer runs z/10 while the certificate is for z.  Power: with the
    declared test ω ≥ 0, the broken walk's error rates are FPR = FNR = 5.9e-4 (exact law),
    and P[lower bound ≤ certified ε] over the binomial counts is below 1e-15."""
    run = _at("full", 10, 24.0)
    certified = noisysgd.epsilon(run, delta=1e-5).epsilon
    assert 3.0 < certified < 3.6
    broken = run.replace(noise_multiplier=2.4)
    p, q = at_1d_law(broken, dataset="D", cells=2000), at_1d_law(broken, dataset="D'", cells=2000)
    fpr, fnr = threshold_rates(p, q, 0.0)
    assert fpr == pytest.approx(5.9e-4, rel=0.05) and fnr == pytest.approx(fpr, rel=1e-6)
    res = audit_at_1d(run, delta=1e-5, runs=5000, confidence=CONFIDENCE, threshold=0.0, random_state=[SEED, 10],
                      trainer_run=broken)
    assert res.violation and res.epsilon_lower > certified + 1.0
    # the honest trainer, same audit: no violation, and the exact ε of the pair is far below
    honest = audit_at_1d(run, delta=1e-5, runs=5000, confidence=1 - random_check("honest twin"),
                         threshold=0.0, random_state=[SEED, 11])
    assert not honest.violation
    exact = privacy_epsilon(at_1d_law(run, dataset="D", cells=2000), at_1d_law(run, dataset="D'", cells=2000), 1e-5)
    assert honest.epsilon_lower <= exact + 0.05 and exact < certified / 10


@pytest.mark.slow
def test_add_remove_audit_catches_a_trainer_with_10x_less_noise():
    """The add/remove pair (D' = D plus one example of slope −L) through the real trainer on n
    and n − 1 examples: the honest Poisson run stays below its certificate (composition with
    sensitivity L), the same run with z/10 is caught."""
    run = _at("poisson", 2, 8.0, adjacency="add-remove")
    certified = noisysgd.epsilon(run, delta=1e-5).epsilon
    broken = run.replace(noise_multiplier=0.8)
    res = audit_at_1d(run, delta=1e-5, runs=5000, confidence=CONFIDENCE, threshold="tuned",
                      random_state=[SEED, 12], trainer_run=broken)
    assert res.violation and res.epsilon_lower > certified
    assert res.details["adjacency"] == "add-remove"
    honest = audit_at_1d(run, delta=1e-5, runs=5000, confidence=1 - random_check("honest add-remove twin"),
                         threshold="tuned", random_state=[SEED, 13])
    assert not honest.violation


@pytest.mark.parametrize("average", [pytest.param(False, marks=pytest.mark.slow), True,
                                     pytest.param("auto", marks=pytest.mark.slow)])
def test_poisson_runs_certified_by_composition_are_audited_with_and_without_averaging(average):
    """Issue 26 §5: the DP-SGD regime — Poisson batches, a large step (lr = 4), no projection,
    certified by composition — through the real replica trainer, releasing the
    last iterate, the mean of the second half of the iterates, or per run what average="auto"
    chooses: the honest run stays below its composition certificate, and the same run with a tenth
    of the noise is caught."""
    run = at_1d_run(n=10, batch_size=2, batching="poisson", steps=200, learning_rate=4.0, noise_multiplier=6.0,
                    diameter=None)
    certified = noisysgd.epsilon(run, delta=1e-5, analyses=["composition", "composition-pld"]).epsilon
    broken = run.replace(noise_multiplier=0.6)
    offset = {False: 0, True: 1, "auto": 4}[average]
    res = audit_at_1d(run, delta=1e-5, runs=3000, confidence=CONFIDENCE, threshold="tuned",
                      random_state=[SEED, 30 + offset], trainer_run=broken, average=average,
                      certify=["composition", "composition-pld"])
    assert res.violation and res.epsilon_lower > certified
    honest = audit_at_1d(run, delta=1e-5, runs=3000, confidence=1 - random_check(f"honest poisson {average}"),
                         threshold="tuned", random_state=[SEED, 32 + offset], average=average)
    assert not honest.violation and honest.certified_epsilon == pytest.approx(certified, rel=1e-12)
    assert honest.certified_by in ("composition", "composition-pld")
    assert ("tail average" in honest.statistic) is bool(average)
    if average:
        with pytest.raises(ValueError, match="certify must name composition analyses with average=True"):
            audit_at_1d(run, delta=1e-5, runs=10, average=True, certify=["altschuler-talwar"])


def test_exact_law_of_the_add_remove_pair_stays_below_its_certificate():
    """The exact law of ω_T on D (without the extra example) and D' (with it), add/remove,
    Poisson: it is the paper variant's pair, and its exact ε is below the certificate
    (composition, sensitivity L)."""
    run = _at("poisson", 2, 1.0, adjacency="add-remove")
    p, q = at_1d_law(run, dataset="D", cells=2000), at_1d_law(run, dataset="D'", cells=2000)
    paper = run.replace(adjacency="replace")
    np.testing.assert_array_equal(p.masses, at_1d_law(paper, dataset="D", variant="paper", cells=2000).masses)
    exact = privacy_epsilon(p, q, 1e-5)
    certified = noisysgd.epsilon(run, delta=1e-5).epsilon
    assert 0.5 < exact < certified


def test_audit_validates_before_running():
    run = _at("full", 10, 4.0)
    with pytest.raises(ValueError, match="delta must be"):
        audit_at_1d(run, delta=0.0, runs=10)
    with pytest.raises(ValueError, match="runs must be"):
        audit_at_1d(run, delta=1e-5, runs=0)
    with pytest.raises(ValueError, match="threshold must be"):
        audit_at_1d(run, delta=1e-5, runs=10, threshold="best")
    with pytest.raises(ValueError, match="calibration_runs must be None"):
        audit_at_1d(run, delta=1e-5, runs=10, threshold=0.0, calibration_runs=5)
    with pytest.raises(ValueError, match="trainer_run must have the same n"):
        audit_at_1d(run, delta=1e-5, runs=10, trainer_run=_at("full", 5, 4.0, n=5))
    with pytest.raises(ValueError, match="n must be at most 1797"):
        digits_canary(n=5000)


def test_exact_law_basics():
    run = _at("full", 10, 8.0, steps=50)
    p, q = at_1d_law(run, dataset="D", cells=1000), at_1d_law(run, dataset="D'", cells=1000)
    assert p.masses.sum() == pytest.approx(1.0) and q.masses.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(p.masses, q.masses[::-1], atol=1e-12)  # the opposed variant is symmetric
    eps = privacy_epsilon(p, q, 1e-5)
    assert 0 < eps < noisysgd.epsilon(run, delta=1e-5).epsilon
    with pytest.raises(ValueError, match="shuffle"):
        at_1d_law(_at("shuffle", 2, 1.0), dataset="D")


# =========================================================================== the command line


def _main(argv):
    """noisysgd.cli.main (the audit sub-command lives in noisysgd/cli/audit.py)."""
    from noisysgd import cli

    return cli.main(argv)


def test_cli_audit_text_and_json(capsys):
    status = _main(["audit", "--adversary", "at-1d", "--runs", "2000", "--seed", "3", "--steps", "100"])
    out = capsys.readouterr().out
    assert status == 0
    assert "empirical lower bound: epsilon >=" in out and "certified:" in out and "false positives" in out
    status = _main(["audit", "--adversary", "at-1d", "--runs", "1000", "--seed", "3", "--threshold", "0",
                    "--batching", "sample", "--batch-size", "1", "--noise-multiplier", "1", "--json",
                    "--analysis", "altschuler-talwar"])
    data = json.loads(capsys.readouterr().out)
    assert status == 0
    assert data["threshold"] == 0.0 and data["calibration_runs_per_dataset"] == 0
    assert data["certified_by"] == "altschuler-talwar" and data["violation"] is False
    assert data["lower_bound"]["negatives"] == 1000 and data["delta"] == 1e-5
    status = _main(["audit", "--adversary", "at-1d", "--runs", "500", "--seed", "3", "--batching", "poisson",
                    "--batch-size", "2", "--steps", "64", "--lr", "4", "--noise-multiplier", "6",
                    "--average", "auto", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert status == 0 and data["certified_by"] in ("composition", "composition-pld")
    assert "average='auto'" in data["statistic"]
    status = _main(["audit", "--adversary", "canary", "--n", "60", "--steps", "20", "--runs", "300",
                    "--seed", "1", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert status == 0 and data["adversary"] == "canary" and data["epsilon_lower_bound"] >= 0


@pytest.mark.parametrize("argv,needle", [
    (["--adversary", "at-1d", "--alpha", "0.1"], "--alpha applies to --adversary canary only"),
    (["--adversary", "canary", "--variant", "paper"], "--variant applies to --adversary at-1d only"),
    (["--adversary", "at-1d", "--runs", "0"], "--runs must be an integer >= 1"),
    (["--adversary", "at-1d", "--n", "0"], "n must be an integer >= 1"),
    (["--adversary", "at-1d", "--threshold", "abc"], "expected a number or 'tuned'"),
    (["--adversary", "at-1d", "--batching", "sample"], "--batch-size is required"),
    (["--adversary", "at-1d", "--delta", "2"], "delta must be"),
    (["--adversary", "at-1d", "--confidence", "1"], "--confidence must be in (0, 1)"),
    (["--adversary", "at-1d", "--no-diameter"], "--no-diameter applies to --adversary canary only"),
    (["--adversary", "canary", "--n", "5000"], "n must be at most 1797"),
    (["--adversary", "at-1d", "--lr", "-1"], "learning_rate must be"),
    (["--adversary", "nope"], "invalid choice"),
])
def test_cli_audit_bad_input_is_one_line_and_status_2(capsys, argv, needle):
    status = _main(["audit", *argv])
    err = capsys.readouterr().err
    assert status == 2
    assert needle in err and err.count("\n") == 1 and err.startswith("noisysgd audit: error:")


def test_cli_audit_violation_exit_status(monkeypatch, capsys):
    """A failed audit exits with status 3 (simulated: a trainer with 10x less noise)."""
    from noisysgd.audit import adversaries
    from noisysgd.cli import audit as audit_cli

    real = adversaries.audit_at_1d

    def broken(run, **kwargs):
        return real(run, trainer_run=run.replace(noise_multiplier=run.noise_multiplier / 10), **kwargs)

    monkeypatch.setattr(adversaries, "audit_at_1d", broken)
    status = _main(["audit", "--adversary", "at-1d", "--noise-multiplier", "24", "--runs", "3000",
                    "--threshold", "0", "--seed", "5"])
    out = capsys.readouterr().out
    assert status == audit_cli.VIOLATION_STATUS and "VIOLATION" in out


# =========================================================================== slow: full-scale audits


@pytest.mark.parametrize("scheme,b,z", [("full", 10, 2.0), ("full", 10, 4.0), ("full", 10, 8.0),
                                        ("sample", 1, 0.5), ("poisson", 1, 0.5), ("cyclic", 2, 0.5),
                                        ("shuffle", 2, 0.5)])
@pytest.mark.slow
@skip_unless_slow
def test_slow_full_scale_audits_stay_below_the_certificate(scheme, b, z):
    level = random_check(f"slow audit {scheme} z={z}")
    res = audit_at_1d(_at(scheme, b, z, steps=500), delta=1e-5, runs=50_000, confidence=1 - level,
                      threshold="tuned", random_state=[SEED, 12])
    assert not res.violation, (scheme, z, res.epsilon_lower, res.certified_epsilon)


@pytest.mark.slow
@skip_unless_slow
def test_slow_theorem_4_1_regime():
    """Theorem 4.1's own regime (D = 1000ηL, σ² ≤ 1e-3·D²/(η²T̄), T = T̄, sample batches of 1,
    the paper's test ω_T ≥ 0): the walks separate completely, the audit's bound is then
    limited by the number of runs only; it stays below the certified ε."""
    run = at_1d_run(n=10, batch_size=1, batching="sample", steps=7500, learning_rate=1.0,
                    noise_multiplier=0.36, diameter=1000.0)
    from noisysgd.analyses.altschuler_talwar import lower_bound_rdp

    assert lower_bound_rdp(run)[0] is not None  # the theorem's assumptions hold
    res = audit_at_1d(run, delta=1e-5, runs=10_000, confidence=1 - random_check("slow theorem 4.1"), threshold=0.0, variant="paper",
                      random_state=[SEED, 13], certify=["altschuler-talwar", "composition"])
    assert not res.violation and res.epsilon_lower > 5.0


@pytest.mark.slow
@skip_unless_slow
def test_slow_canary_full_scale():
    run = canary_run(n=200, batch_size=200, batching="full", steps=100, learning_rate=None,
                     noise_multiplier=16.0, feature_clip=3.0, clip_norm=1.0, diameter=4.0)
    res = audit_canary(run, delta=1e-5, feature_clip=3.0, runs=5000, confidence=1 - random_check("slow canary"),
                       random_state=[SEED, 14])
    assert not res.violation and res.epsilon_lower > 1.0
    broken = audit_canary(run, delta=1e-5, feature_clip=3.0, runs=5000, confidence=CONFIDENCE,
                          random_state=[SEED, 15], trainer_run=run.replace(noise_multiplier=1.6))
    assert broken.violation


def test_false_alarm_budget():
    """Every random check is at level ALPHA; their number keeps the file's family-wise
    false-alarm rate below 1e-3 (union bound).  Counted statically, per parametrization:"""
    fast = (1          # coverage simulation
            + 1        # batch laws
            + 3        # replicas vs engine in law
            + 4        # exact 1-D law
            + len(AUDITS) + 1 + 1  # audits, canary, the honest twin of the broken trainer
            + 1        # the honest twin of the broken add/remove trainer
            + 3)       # the honest Poisson runs: last iterate, tail average, average="auto"
    slow_ = 7 + 1 + 1  # full-scale audits, Theorem 4.1 regime, canary
    assert fast == 23 and (fast + slow_) * ALPHA < 1e-3
    assert len(set(RANDOM_CHECKS)) <= fast + slow_  # (those run so far in this session)
