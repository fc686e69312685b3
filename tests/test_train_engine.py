"""The trainer runs exactly the algorithm the analyses assume: batches, noise
scale, clipping, projection, step sizes and λ, all read from the Run."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import special, stats

from noisysgd import Run
from noisysgd.train import (
    BinaryLogistic,
    Huber,
    OneVsRestLogistic,
    PrivacyLeakWarning,
    Softmax,
    Squared,
    augment,
    batches,
    rng_streams,
    run_batches,
    sgd,
    train,
)

# --------------------------------------------------------------------------- batching


def _collect(scheme, n, b, steps, seed=0):
    return [np.arange(n)[batch].copy() for batch in batches(scheme, n=n, batch_size=b, steps=steps,
                                                               rng=np.random.default_rng(seed))]


@pytest.mark.parametrize("scheme", ["shuffle", "cyclic"])
def test_shuffle_and_cyclic_partition_each_epoch(scheme):
    n, b = 103, 10
    per_epoch = n // b
    out = _collect(scheme, n, b, steps=3 * per_epoch + 4)
    assert len(out) == 3 * per_epoch + 4
    epochs = [out[e * per_epoch:(e + 1) * per_epoch] for e in range(3)]
    for epoch in epochs:
        assert all(len(batch) == b for batch in epoch)
        used = np.concatenate(epoch)
        assert len(np.unique(used)) == per_epoch * b  # ⌊n/b⌋·b distinct indices, each once
        assert used.min() >= 0 and used.max() < n
    orders = [np.concatenate(epoch) for epoch in epochs]
    if scheme == "cyclic":
        assert all(np.array_equal(orders[0], o) for o in orders[1:])  # the same order every epoch
        assert not np.array_equal(np.sort(orders[0]), orders[0])  # not the data's own order
        np.testing.assert_array_equal(np.concatenate(out[3 * per_epoch:]), orders[0][: 4 * b])
    else:
        assert not np.array_equal(orders[0], orders[1]) and not np.array_equal(orders[1], orders[2])
        assert all(len(batch) == b for batch in out[3 * per_epoch:])  # a partial last epoch


def test_sample_batches_have_exactly_b_distinct_uniform_indices():
    n, b, steps = 50, 7, 4000
    out = _collect("sample", n, b, steps)
    assert len(out) == steps
    assert all(len(batch) == b and len(np.unique(batch)) == b for batch in out)
    counts = np.bincount(np.concatenate(out), minlength=n)
    # each index is in a batch with probability b/n; counts ~ Binomial(steps, b/n)
    chi2 = np.sum((counts - steps * b / n) ** 2 / (steps * b / n * (1 - b / n)))
    assert stats.chi2.sf(chi2, n - 1) > 1e-6


def test_poisson_batch_sizes_are_binomial():
    n, b, steps = 1000, 50, 20000
    q = b / n
    sizes = np.array([len(batch) for batch in _collect("poisson", n, b, steps)])
    assert len(sizes) == steps
    se_mean = math.sqrt(n * q * (1 - q) / steps)
    assert abs(sizes.mean() - b) < 6 * se_mean
    var = n * q * (1 - q)
    # the sample variance of a binomial has standard error ≈ var·√(2/steps) (near-normal)
    assert abs(sizes.var(ddof=1) - var) < 6 * var * math.sqrt(2 / steps)
    out = _collect("poisson", 200, 20, 3000, seed=1)
    assert all(len(np.unique(batch)) == len(batch) for batch in out)
    counts = np.bincount(np.concatenate(out), minlength=200)
    chi2 = np.sum((counts - 3000 * 0.1) ** 2 / (3000 * 0.1 * 0.9))
    assert stats.chi2.sf(chi2, 199) > 1e-6


def test_full_batches_and_run_batches():
    out = list(batches("full", n=5, batch_size=5, steps=3, rng=np.random.default_rng(0)))
    assert len(out) == 3 and all(np.array_equal(np.arange(5)[s], np.arange(5)) for s in out)
    run = Run(n=20, batch_size=6, batching="shuffle", steps=7, learning_rate=0.1,
              noise_multiplier=1.0, lipschitz=1.0)
    out = [np.array(x) for x in run_batches(run, np.random.default_rng(3))]
    assert len(out) == run.steps and all(len(x) == 6 for x in out)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(scheme="random", n=5, batch_size=2, steps=1), "batching"),
        (dict(scheme="sample", n=5, batch_size=6, steps=1), "batch_size"),
        (dict(scheme="full", n=5, batch_size=4, steps=1), "batch_size"),
        (dict(scheme="sample", n=5, batch_size=2, steps=0), "steps"),
        (dict(scheme="sample", n=5, batch_size=2, steps=1, rng=np.random.RandomState(0)), "rng"),
    ],
)
def test_batches_errors(kwargs, match):
    kwargs.setdefault("rng", np.random.default_rng(0))
    with pytest.raises(ValueError, match=match):
        batches(**kwargs)


# --------------------------------------------------------------------------- exact algorithm


def _naive_logistic_grads(W, Xbar, y):
    """Per-example gradients of log(1 + exp(−y·x̄ᵀW)), one row per example."""
    s = Xbar @ W
    return (-y * special.expit(-y * s))[:, None] * Xbar


def _naive_softmax_grads(W, Xbar, y):
    s = Xbar @ W
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1.0
    return np.einsum("ij,ik->ijk", Xbar, p)


def _naive_projected_sgd(run, grads, Xbar, y, W0, *, clip, seed, noise_std=0.0, dtype=np.float64):
    """Projected (noisy) SGD written out per example, batches and noise from the same streams."""
    streams = rng_streams(seed)
    W = np.array(W0, dtype=float)
    etas = run.step_sizes()
    for t, batch in enumerate(run_batches(run, streams.batches)):
        idx = np.arange(run.n)[batch]
        total = np.zeros_like(W)
        for i in idx:
            g = grads(W, Xbar[i:i + 1], y[i:i + 1])[0]
            if clip is not None:
                g = g * min(1.0, clip / np.linalg.norm(g))
            total += g
        xi = streams.noise.standard_normal(W.shape, dtype=dtype) * noise_std if noise_std else 0.0
        W = W - etas[t] * (total / run.batch_size + run.strong_convexity * W + xi)
        if run.diameter is not None and np.linalg.norm(W) > run.diameter / 2:
            W = W * (run.diameter / 2 / np.linalg.norm(W))
    return W


def _classification_data(seed, n, d, k=None):
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=1.5, size=(n, d))
    if k is None:
        return X, np.where(X[:, 0] + 0.3 * rng.normal(size=n) > 0, 1, 0)
    return X, rng.integers(0, k, size=n)


@pytest.mark.parametrize("batching, b", [("poisson", 8), ("poisson", 1), ("sample", 8), ("shuffle", 8),
                                         ("cyclic", 8), ("full", 37)])
def test_noiseless_run_matches_naive_projected_sgd(batching, b):
    """Poisson with b = 1 has many empty batches (the step is then λ and projection only)."""
    n, d = 37, 3
    X, y = _classification_data(0, n, d)
    run = Run(n=n, batch_size=b, batching=batching, steps=23, learning_rate=0.9, lr_decay=0.3,
              noise_multiplier=1.0, lipschitz=0.5, strong_convexity=0.05, diameter=1.0)
    W0 = np.array([0.1, -0.2, 0.05, 0.3])
    Xbar = augment(X, 2.0)
    ypm = 2.0 * y - 1.0
    expected = _naive_projected_sgd(run, _naive_logistic_grads, Xbar, ypm, W0, clip=0.5, seed=11)
    got = sgd(run, BinaryLogistic(), X, y, feature_clip=2.0, init=W0, random_state=11, clip=True)
    np.testing.assert_allclose(got.coef, expected, rtol=1e-12, atol=1e-15)
    # and the clip made a difference (the test would see a missing clip)
    unclipped = _naive_projected_sgd(run, _naive_logistic_grads, Xbar, ypm, W0, clip=None, seed=11)
    assert np.max(np.abs(unclipped - expected)) > 1e-3


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_noisy_softmax_run_matches_naive_with_the_same_noise(dtype):
    """train() with noise: the same result as the naive loop drawing N(0, (zL/b)²I)
    from the same noise stream — checks the noise scale zL/b, the fixed
    denominator b under poisson, λ, the schedule and the projection at once."""
    n, d, k = 41, 4, 3
    X, y = _classification_data(1, n, d, k)
    R = 1.5
    L = math.sqrt(2 * (R * R + 1))  # the natural constant: softmax stays convex
    run = Run(n=n, batch_size=6, batching="poisson", steps=30, learning_rate=0.2, lr_decay=0.5,
              noise_multiplier=0.8, lipschitz=L, strong_convexity=0.02, diameter=3.0)
    got = train(run, Softmax(k), X, y, feature_clip=R, random_state=5, dtype=dtype)
    expected = _naive_projected_sgd(run, _naive_softmax_grads, augment(X, R), y, np.zeros((d + 1, k)),
                                    clip=L, seed=5, noise_std=0.8 * L / 6, dtype=dtype)
    assert got.coef.dtype == dtype
    if dtype == np.float64:
        np.testing.assert_allclose(got.coef, expected, rtol=1e-11, atol=1e-13)
    else:
        np.testing.assert_allclose(got.coef, expected, rtol=1e-4, atol=1e-5)
    assert got.enforced["noise_std"] == pytest.approx(0.8 * L / 6)
    assert got.enforced["denominator"] == 6


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_noise_has_the_declared_scale(dtype):
    """Zero features and zero labels: every weight coordinate (not the bias) has
    zero gradient forever, so after T steps W_j = −Σ_t η_t·c_{>t}·ξ_t,j with
    c_{>t} = Π_{s>t}(1 − η_s λ): i.i.d. N(0, (zL/b)²·Σ_t η_t² c_{>t}²)."""
    n, d = 30, 5000
    run = Run(n=n, batch_size=4, batching="poisson", steps=15, learning_rate=0.3, lr_decay=0.4,
              noise_multiplier=2.5, lipschitz=0.7, strong_convexity=0.1)
    result = train(run, Squared(), np.zeros((n, d)), np.zeros(n), feature_clip=1.0, random_state=2, dtype=dtype)
    eta = run.step_sizes()
    shrink = np.array([np.prod(1 - eta[t + 1:] * 0.1) for t in range(run.steps)])
    var = (2.5 * 0.7 / 4) ** 2 * np.sum(eta**2 * shrink**2)
    z = result.coef[:d].astype(float) / math.sqrt(var)
    assert stats.kstest(z, "norm").pvalue > 1e-6
    chi2 = float(np.sum(z * z))
    assert min(stats.chi2.sf(chi2, d), stats.chi2.cdf(chi2, d)) > 1e-7
    # a scale off by 10% would be caught
    assert stats.chi2.sf(chi2 / 1.1**2, d) < 1e-7 or stats.chi2.cdf(chi2 / 1.1**2, d) < 1e-7


def test_gaussian_initialization_scale():
    """run.initialization='gaussian': θ₀ ~ N(0, (2σ²/λ)I), σ = zL√(η/2)/b; one step later
    the weight coordinates (zero gradient) are N(0, c²·2σ²/λ + η²(zL/b)²)."""
    n, d = 10, 2000
    run = Run(n=n, batch_size=n, batching="full", steps=1, learning_rate=0.2, noise_multiplier=1.5,
              lipschitz=0.5, strong_convexity=0.3, smoothness=2.3, initialization="gaussian")
    result = train(run, Squared(), np.zeros((n, d)), np.zeros(n), feature_clip=1.0,
                   random_state=4, analyses=["chourasia"])
    sigma = 1.5 * 0.5 * math.sqrt(0.2 / 2) / n
    assert run.sigma("ye-shokri") == pytest.approx(sigma)
    var = (1 - 0.2 * 0.3) ** 2 * 2 * sigma**2 / 0.3 + (0.2 * 1.5 * 0.5 / n) ** 2
    z = result.coef[:d] / math.sqrt(var)
    assert stats.kstest(z, "norm").pvalue > 1e-6
    chi2 = float(np.sum(z * z))
    assert min(stats.chi2.sf(chi2, d), stats.chi2.cdf(chi2, d)) > 1e-7
    assert result.enforced["init"].startswith("gaussian")


def test_projection_keeps_every_iterate_in_K():
    n, d, k = 60, 5, 4
    X, y = _classification_data(2, n, d, k)
    R = 3.0
    L = math.sqrt(2 * (R * R + 1))
    run = Run.from_epochs(epochs=4, n=n, batch_size=10, batching="sample", learning_rate=0.5,
                          noise_multiplier=3.0, lipschitz=L, diameter=1.0)
    norms = []
    result = train(run, Softmax(k), X, y, feature_clip=R, random_state=0,
                   callback=lambda t, W: norms.append(np.linalg.norm(W)))
    assert len(norms) == run.steps
    assert max(norms) <= 0.5 * (1 + 1e-12)
    assert max(norms) >= 0.5 * (1 - 1e-12)  # the projection was active
    assert np.linalg.norm(result.coef) == pytest.approx(norms[-1])


def test_high_privacy_run_stays_near_init_in_expectation():
    """With huge noise (z = 100) the mean displacement over many seeds is at
    most Σ_t η_t·L (zero-mean noise, every clipped gradient of norm ≤ L, λ = 0,
    no projection) — far below what the unclipped gradients would move."""
    n, d, seeds = 20, 2, 400
    X = np.tile([[3.0, 0.0]], (n, 1))
    y = np.ones(n)  # every example pulls the same way: a consistent drift
    L, eta, T, b, z = 0.05, 0.01, 10, 5, 100.0
    run = Run(n=n, batch_size=b, batching="sample", steps=T, learning_rate=eta, noise_multiplier=z,
              lipschitz=L)
    W0 = np.array([0.2, 0.0, -0.1])
    finals = np.array([train(run, BinaryLogistic(), X, y, feature_clip=10.0, init=W0, random_state=s).coef
                       for s in range(seeds)])
    drift = np.linalg.norm(finals.mean(axis=0) - W0)
    sd_mean = eta * z * L / b * math.sqrt(T) / math.sqrt(seeds)  # per coordinate
    bound = T * eta * L + 6 * sd_mean * math.sqrt(d + 1)
    assert drift <= bound
    assert finals.std(axis=0).min() > 0.5 * eta * z * L / b * math.sqrt(T)  # the noise was there
    unclipped = sgd(run, BinaryLogistic(), X, y, feature_clip=10.0, init=W0, random_state=0).coef
    assert np.linalg.norm(unclipped - W0) > 5 * bound  # without clipping the check would fail


@pytest.mark.slow
def test_nonprivate_softmax_matches_sklearn_on_digits():
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = X / 16.0  # features in [0, 1]: ‖x‖ ≤ 8 for 64 pixels, a data-independent clip
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    reference = LogisticRegression(max_iter=5000).fit(Xtr, ytr).score(Xte, yte)
    n = len(Xtr)
    run = Run.from_epochs(epochs=200, n=n, batch_size=32, batching="shuffle", learning_rate=0.3,
                          noise_multiplier=1.0, lipschitz=1.0, strong_convexity=1.0 / n)
    result = sgd(run, Softmax(10), Xtr, ytr, feature_clip=8.0, random_state=0)
    accuracy = np.mean(result.predict(Xte) == yte)
    assert accuracy >= reference - 0.01
    assert result.enforced["clip_norm"] is None and result.enforced["noise_std"] == 0.0


# --------------------------------------------------------------------------- contract


def _binary_setup(**changes):
    n, d = 40, 3
    X, y = _classification_data(3, n, d)
    c = BinaryLogistic().constants(feature_clip=2.0, clip_norm=1.0)
    kwargs = dict(n=n, batch_size=8, batching="cyclic", steps=20, learning_rate=0.5, noise_multiplier=2.0,
                  lipschitz=c.lipschitz, strong_convexity=0.01, smoothness=c.smoothness + 0.01, diameter=4.0)
    kwargs.update(changes)
    return Run(**kwargs), X, y


def test_enforced_record_and_history():
    run, X, y = _binary_setup()
    result = train(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=0,
                   analyses=["ye-shokri", "altschuler-talwar", "composition"], record=True)
    e = result.enforced
    assert (e["clip_norm"], e["feature_clip"], e["l2"]) == (1.0, 2.0, 0.01)
    assert 2.0 * (1 - 1e-13) < e["projection_radius"] < 2.0  # D/2, a few ulps inside
    assert (e["batching"], e["denominator"], e["steps"], e["dtype"]) == ("cyclic", 8, 20, "float64")
    assert e["noise_std"] == pytest.approx(2.0 * 1.0 / 8)
    assert e["init"].startswith("fixed: zeros")
    assert e["analyses_checked"] == ["ye-shokri", "altschuler-talwar", "composition"]
    assert "(R²+1)/4" in e["derivation"] and e["constants"]["convex"] is True
    assert [h["step"] for h in result.history] == [5, 10, 15, 20]
    assert [h["epoch"] for h in result.history] == [1.0, 2.0, 3.0, 4.0]
    assert result.run is run and result.steps == 20
    # same seed, same result; sgd sees the same batches (the noise stream is separate)
    again = train(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=0)
    np.testing.assert_array_equal(again.coef, result.coef)
    assert train(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=np.random.default_rng(0)).coef.shape == (4,)


def test_smoothness_exactly_M_plus_lambda_is_accepted_and_below_is_refused():
    run, X, y = _binary_setup(smoothness=(4 + 1) / 4 + 0.01)
    train(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=0)
    run, X, y = _binary_setup(smoothness=(4 + 1) / 4)  # forgot λ
    with pytest.raises(ValueError, match=r"run.smoothness must be at least M \+ λ = 1.25 \+ 0.01 = 1.26"):
        train(run, BinaryLogistic(), X, y, feature_clip=2.0)


def test_clipped_softmax_refuses_convex_runs_but_trains_for_composition():
    n, d, k = 30, 3, 3
    X, y = _classification_data(4, n, d, k)
    base = dict(n=n, batch_size=5, batching="sample", steps=6, learning_rate=0.1, noise_multiplier=1.0,
                lipschitz=1.0)
    with pytest.raises(ValueError, match="run declares convex=True"):
        train(Run(**base, convex=True), Softmax(k), X, y, feature_clip=2.0)
    with pytest.raises(ValueError, match="convex=True"):
        train(Run(**base, strong_convexity=0.01), Softmax(k), X, y, feature_clip=2.0)
    with pytest.raises(ValueError, match="smoothness"):
        train(Run(**base, smoothness=10.0), Softmax(k), X, y, feature_clip=2.0)
    result = train(Run(**base), Softmax(k), X, y, feature_clip=2.0, random_state=0, analyses=["composition"])
    assert result.enforced["constants"]["convex"] is False and result.enforced["constants"]["clipped"] is True


def test_privacy_leak_warnings_from_train():
    run, X, y = _binary_setup(smoothness=None, strong_convexity=0.0)
    top = float(np.max(np.linalg.norm(X, axis=1)))
    with pytest.warns(PrivacyLeakWarning, match="feature_clip"):
        train(run, BinaryLogistic(), X, y, feature_clip=top, random_state=0)
    n = 20
    yr = np.linspace(-3.0, 2.0, n)
    run = Run(n=n, batch_size=5, batching="sample", steps=3, learning_rate=0.1, noise_multiplier=1.0,
              lipschitz=1.0, diameter=2.0)
    with pytest.warns(PrivacyLeakWarning, match="target_bound"):
        train(run, Squared(), np.ones((n, 2)), yr, feature_clip=5.0, target_bound=3.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train(run, Huber(1.0), np.ones((n, 2)), yr, feature_clip=5.0, target_bound=2.5, random_state=0)


def _bad_calls():
    run, X, y = _binary_setup()
    ok = dict(run=run, loss=BinaryLogistic(), X=X, y=y, feature_clip=2.0)
    n = run.n

    def case(match, **changes):
        return pytest.param({**ok, **changes}, match, id=match[:40])

    return [
        case("run must be a noisysgd.Run", run=run.to_dict()),
        case("loss must be", loss="logistic"),
        case("feature_clip", feature_clip=0.0),
        case("feature_clip", feature_clip=None),
        case("target_bound applies to regression losses only", target_bound=1.0),
        case("dtype", dtype=np.float16),
        case("X must be a 2-D", X=X[:, 0]),
        case("X must be finite", X=np.where(np.eye(n, 3) > 0, np.nan, X)),
        case(r"X must have run.n = 40 rows. Found 39", X=X[:-1], y=y[:-1]),
        case(r"y must have one label per row of X \(40\). Found 39", y=y[:-1]),
        case("y must be finite", y=np.where(np.arange(n) == 3, np.nan, y)),
        case("y must hold binary labels", y=np.arange(n) % 3),
        case("random_state", random_state=-1),
        case("random_state", random_state=True),
        case("random_state", random_state="seed"),
        case("callback must be callable", callback=3),
        case("init must be None or an array", init="random"),
        case(r"init must have shape \(4,\)", init=np.zeros(3)),
        case("init must be finite", init=np.array([0.0, np.inf, 0.0, 0.0])),
        case("init must lie in the ball of radius D/2 = 2", init=np.array([3.0, 0.0, 0.0, 0.0])),
        case("analyses: analysis must be one of", analyses=["ye-shokri", "nope"]),
        case("analyses: ye-shokri-reshuffle is flagged not sound", analyses=["ye-shokri-reshuffle"]),
        case("analyses: chourasia does not apply", analyses=["chourasia"]),
        case("record must be True or False", record=1),
    ]


@pytest.mark.parametrize("kwargs, match", _bad_calls())
def test_bad_input_is_refused_before_anything_runs(kwargs, match):
    calls = []
    gen = np.random.default_rng(123)
    kwargs.setdefault("random_state", gen)
    kwargs.setdefault("callback", lambda t, W: calls.append(t))
    state = gen.bit_generator.state
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        with pytest.raises(ValueError, match=match):
            train(**kwargs)
    assert calls == []
    assert gen.bit_generator.state == state and gen.bit_generator.seed_seq.n_children_spawned == 0


def test_analysis_and_init_refusals():
    run, X, y = _binary_setup(learning_rate=1.7)  # above 2/(m + M) = 2/1.27
    with pytest.raises(ValueError, match=r"analyses: ye-shokri does not apply to this run: needs learning rate < 2/\(m\+M\)"):
        train(run, BinaryLogistic(), X, y, feature_clip=2.0, analyses=["ye-shokri"])
    run, X, y = _binary_setup(batching="full", batch_size=40, learning_rate=0.5)
    with pytest.raises(ValueError, match="analyses: chourasia does not apply.*initialization='gaussian'"):
        train(run, BinaryLogistic(), X, y, feature_clip=2.0, analyses=["chourasia"])
    gaussian = run.replace(initialization="gaussian")
    with pytest.raises(ValueError, match="init must be None when run.initialization is 'gaussian'"):
        train(gaussian, BinaryLogistic(), X, y, feature_clip=2.0, init=np.zeros(4))
    run, X, y = _binary_setup(strong_convexity=0.0)
    with pytest.raises(ValueError, match="'gaussian' draws from N.*needs strong_convexity"):
        train(run.replace(initialization="gaussian"), BinaryLogistic(), X, y, feature_clip=2.0)
    run, X, y = _binary_setup(lr_decay=0.5)
    with pytest.raises(ValueError, match="'gaussian' needs a constant learning_rate"):
        train(run.replace(initialization="gaussian"), BinaryLogistic(), X, y, feature_clip=2.0)


def test_squared_loss_without_a_domain_trains_with_the_clip_norm():
    n = 25
    rng = np.random.default_rng(7)
    X = rng.normal(size=(n, 2))
    yr = X @ [1.0, -2.0] + 0.5
    run = Run(n=n, batch_size=n, batching="full", steps=400, learning_rate=0.1, noise_multiplier=1.0,
              lipschitz=100.0, strong_convexity=1e-6, smoothness=10.0 ** 2 + 1 + 1e-6)
    fit = sgd(run, Squared(), X, yr, feature_clip=10.0, random_state=0)
    np.testing.assert_allclose(fit.coef, [1.0, -2.0, 0.5], atol=1e-3)
    result = train(run, Squared(), X, yr, feature_clip=10.0, random_state=0)
    assert result.enforced["constants"]["natural_lipschitz"] is None
    assert result.enforced["clip_norm"] == 100.0
    with pytest.raises(ValueError, match=r"analyses: ye-shokri does not apply.*learning rate < 2/\(m\+M\)"):
        train(run, Squared(), X, yr, feature_clip=10.0, analyses=["ye-shokri"])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bounds_survive_rounding(dtype):
    """In float32 as in float64: every clipped per-example gradient, as the engine
    computes it from its rounded features and thresholds, has norm <= L, and every
    iterate stays inside the ball of diameter D (the analyses rely on both)."""
    from noisysgd.train.engine import clip_thresholds
    from noisysgd.rowmaps import augment_rows, row_norms

    rng = np.random.default_rng(5)
    n, d, k = 400, 30, 5
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 10, size=(n, 1))
    y = rng.integers(0, k, size=n)
    L, R = 0.3, 2.0
    dt = np.dtype(dtype)
    Xbar, norms = augment_rows(X, R, dt, row_norms(X))
    tau = clip_thresholds(L, norms, dt)
    for loss in (OneVsRestLogistic(k), Softmax(k)):
        W = rng.normal(size=(d + 1, k)).astype(dt) * 3
        D = loss.clipped_derivative(Xbar @ W, y, tau)
        per_example = np.linalg.norm(D.astype(np.float64), axis=1) * np.linalg.norm(
            Xbar.astype(np.float64), axis=1)
        assert per_example.max() <= L
    run = Run(n=n, batch_size=40, batching="shuffle", steps=60, learning_rate=5.0,
              noise_multiplier=50.0, lipschitz=L, diameter=0.5)
    norms_seen = []
    train(run, OneVsRestLogistic(k), X, y, feature_clip=R, random_state=0, dtype=dtype,
          callback=lambda t, W: norms_seen.append(np.linalg.norm(W.astype(np.float64))))
    assert max(norms_seen) <= 0.25 and max(norms_seen) > 0.25 * (1 - 1e-5)  # projected, inside
