"""The trainer's rows described, not formed (noisysgd.train.rows, issue 28 §4).

x̄_i = (a_i·x_i − c_i·m, s) is read from the caller's array a batch at a time.  What must hold:
the scores and gradient sums are those of the formed X̄ (:func:`noisysgd.train.augment` of the
centered rows), the norms the clip thresholds use bound the exact norm of the rows the
arithmetic uses (exact rational arithmetic on the rounded a_i, c_i, m and x_i), a fit makes
no copy of the data, and the model is the formed path's up to rounding.
"""

from __future__ import annotations

import tracemalloc
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import noisysgd
from noisysgd.preprocessing import center_rows
from noisysgd.train import BinaryLogistic, Softmax, augment, noisy_sgd_core, train
from noisysgd.train.rows import CenteredRows, rows_of, source_norms

DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def _data(seed, n, d, dtype):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.01, 10.0, size=(n, 1)) + rng.normal(size=d)
    return X.astype(dtype), rng.normal(size=d) * 0.3


def _source(X, m, radius, centered):
    return CenteredRows(X, m, radius) if centered else X


def _formed(X, m, radius, clip, bias, centered, dt):
    rows = center_rows(X, m, radius) if centered else X
    return augment(rows, clip, intercept_scaling=bias, dtype=dt)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 30), d=st.integers(1, 6), radius=st.floats(0.1, 5.0), clip=st.floats(0.1, 5.0),
       bias=st.floats(0.01, 3.0), seed=st.integers(0, 2**31 - 1), centered=st.booleans(),
       x32=st.booleans(), dt=st.sampled_from(DTYPES), k=st.sampled_from([0, 3]))
def test_the_described_rows_compute_what_the_formed_rows_compute(n, d, radius, clip, bias, seed, centered, x32,
                                                                 dt, k):
    X, m = _data(seed, n, d, np.float32 if x32 else np.float64)
    source = _source(X, m, radius, centered)
    rows = rows_of(source, clip, dt, source_norms(source), bias=bias)
    formed = _formed(X, m, radius, clip, bias, centered, np.float64)
    tol = 1e-12 if dt == np.float64 and not x32 else 2e-6
    scale = np.abs(formed).max()
    assert np.allclose(np.asarray(rows, dtype=np.float64), formed, rtol=0, atol=tol * 10 * scale)
    rng = np.random.default_rng(seed + 1)
    W = rng.normal(size=(d + 1, k) if k else (d + 1,)).astype(dt)
    batch = rng.choice(n, size=max(1, n // 2), replace=False)
    Xb = rows.gather(batch)
    S = rows.scores(Xb, W)
    expect = formed[batch] @ W.astype(np.float64)
    assert S.dtype == dt and np.allclose(S, expect, rtol=0, atol=tol * 100 * scale * (1 + np.abs(W).sum()))
    D = rng.normal(size=S.shape).astype(dt)
    G = rows.gradient_sum(Xb, D, out=np.empty_like(W))
    assert np.allclose(G, formed[batch].T @ D.astype(np.float64), rtol=0,
                       atol=tol * 100 * scale * len(batch) * (1 + np.abs(D).max()))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 12), d=st.integers(1, 64), radius=st.floats(0.1, 5.0), clip=st.floats(0.1, 5.0),
       bias=st.floats(0.01, 3.0), seed=st.integers(0, 2**31 - 1), centered=st.booleans(), x32=st.booleans(),
       dt=st.sampled_from(DTYPES))
def test_the_norms_bound_the_rows_the_arithmetic_uses_exactly(n, d, radius, clip, bias, seed, centered, x32, dt):
    """The clip thresholds are L/norms: each norm must be at least the exact ‖(a_i·x_i − c_i·m, s)‖ of the
    rounded a_i, c_i, m and of x_i as the trainer reads it (cast to the training dtype), so that no
    per-example gradient the trainer sums is longer than L (computed in exact rationals)."""
    X, m = _data(seed, n, d, np.float32 if x32 else np.float64)
    source = _source(X, m, radius, centered)
    rows = rows_of(source, clip, dt, source_norms(source), bias=bias)
    xs = X.astype(dt)
    s = Fraction(float(dt.type(bias)))
    for i in range(n):
        a = Fraction(float(rows.a[i]))
        u = [a * Fraction(float(v)) for v in xs[i]]
        if rows.m is not None:
            c = Fraction(float(rows.c[i]))
            u = [ui - c * Fraction(float(mj)) for ui, mj in zip(u, rows.m)]
        exact = sum(ui * ui for ui in u) + s * s
        assert Fraction(float(rows.norms[i])) ** 2 >= exact
        # and not loose: within a few units of the dtype's rounding of the true clipped norm
        assert float(rows.norms[i]) ** 2 <= float(exact) * (1 + 1e3 * np.finfo(dt).eps)


def _run(n, steps=60, batching="poisson"):
    return noisysgd.Run(n=n, batch_size=max(1, n // 10), steps=steps, batching=batching, learning_rate=0.5,
                        noise_multiplier=1.0, lipschitz=3.0, strong_convexity=1e-3)


@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("k", [0, 3])
def test_a_fit_on_described_rows_is_the_fit_on_formed_rows(centered, k):
    """The same run, seed and rows, X̄ formed (``noisy_sgd_core`` on an array) or described (what
    ``train`` passes): the same model up to rounding (the sums are ordered differently)."""
    X, m = _data(3, 400, 5, np.float64)
    y = np.random.default_rng(4).integers(0, 3 if k else 2, size=400)
    loss = Softmax(n_classes=3) if k else BinaryLogistic()
    run = _run(400)
    source = _source(X, m, 2.0, centered)
    described = train(run, loss, source, y, feature_clip=1.5, intercept_scaling=0.5, random_state=7, record=True)
    formed = train(run, loss, center_rows(X, m, 2.0) if centered else X, y, feature_clip=1.5,
                   intercept_scaling=0.5, random_state=7, record=True)
    assert np.allclose(described.coef, formed.coef, rtol=1e-9, atol=1e-12)
    assert [h["objective"] for h in described.history] == pytest.approx([h["objective"] for h in formed.history],
                                                                         rel=1e-9)
    # and noisy_sgd_core on the formed X̄ (the public core's other input) agrees as well
    Xbar = _formed(X, m, 2.0, 1.5, 0.5, centered, np.float64)
    loss_y = loss.encode_labels(y)
    rows = rows_of(source, 1.5, np.dtype(np.float64), source_norms(source), bias=0.5)
    batches = [np.arange(i, i + 40) for i in range(0, 400, 40)]
    kw = dict(batches=batches, step_sizes=[0.5] * 10, denominator=40, init=np.zeros(loss.param_shape(5)), l2=1e-3)
    assert np.allclose(noisy_sgd_core(loss, rows, loss_y, **kw)[0], noisy_sgd_core(loss, Xbar, loss_y, **kw)[0],
                       rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("centered", [False, True])
def test_training_makes_no_copy_of_the_data(centered):
    """Issue 28 §4: what ``train`` allocates beyond the caller's array grows with n by O(1) vectors per
    row (norms, clip scales, thresholds, Poisson draws), not by a copy of the row (8·d bytes): the peak
    on 16,000 × 200 rows exceeds that on 8,000 by less than a quarter of the 12.8 MB of rows added
    (tracemalloc sees numpy's buffers)."""
    X, m = _data(0, 16_000, 200, np.float64)
    y = np.random.default_rng(1).integers(0, 2, size=16_000)

    def peak(n):
        run = noisysgd.Run(n=n, batch_size=n // 100, steps=50, batching="poisson", learning_rate=0.5,
                           noise_multiplier=1.0, lipschitz=1.0, strong_convexity=1e-3)
        tracemalloc.start()
        try:
            train(run, BinaryLogistic(), _source(X[:n], m, 2.0, centered), y[:n], feature_clip=1.0, random_state=0)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert peak(16_000) - peak(8_000) < 0.25 * X[8_000:].nbytes


@pytest.fixture
def seen(monkeypatch):
    """The X̄ every call of the step loop gets, in order (the loop itself runs as it would)."""
    from noisysgd.train import engine

    calls = []
    core = engine.noisy_sgd_core

    def spying(loss, Xbar, *args, **kwargs):
        calls.append(Xbar)
        return core(loss, Xbar, *args, **kwargs)

    monkeypatch.setattr(engine, "noisy_sgd_core", spying)
    return calls


@pytest.mark.parametrize("center", [None, pytest.param("private", marks=pytest.mark.slow)])
def test_a_fit_trains_on_the_caller_s_rows(center, seen):
    """The estimator hands the trainer the caller's array (centered or not, described): the rows the
    step loop reads are X itself, not a copy."""
    from noisysgd import NoisySGDClassifier
    from noisysgd.train.rows import Rows

    rng = np.random.default_rng(0)
    X = rng.random((2_000, 20))
    y = (X[:, 0] + 0.1 * rng.normal(size=2_000) > 0.5).astype(int)
    clf = NoisySGDClassifier(epsilon=1.0, batching="poisson", batch_size=100, epochs=2, learning_rate=1.0,
                             alpha=1e-5, center=center, classes=[0, 1], random_state=0).fit(X, y)
    assert len(seen) == 1 and isinstance(seen[0], Rows) and seen[0].X is X
    assert (seen[0].m is not None) == (center == "private") == (clf.center_ is not None)


@pytest.mark.parametrize("center", [None, pytest.param("private", marks=pytest.mark.slow)])
def test_float32_features_are_read_as_they_are(center, seen):
    """float32 features are not converted to a float64 copy: the trainer reads the caller's float32
    array (a batch at a time, each cast to float64, which is exact), so the model is the one of the
    same features given in float64, up to the order of a few sums (the private mean's is taken a
    block at a time)."""
    from noisysgd import NoisySGDClassifier
    from noisysgd.train.rows import Rows

    rng = np.random.default_rng(0)
    X = rng.random((3_000, 20)).astype(np.float32)
    y = (X[:, 0] + 0.1 * rng.normal(size=3_000) > 0.5).astype(int)
    kw = dict(epsilon=1.0, batching="poisson", batch_size=100, epochs=2, learning_rate=1.0, alpha=1e-5,
              center=center, classes=[0, 1], random_state=0)
    single = NoisySGDClassifier(**kw).fit(X, y)
    assert isinstance(seen[0], Rows) and seen[0].X is X
    double = NoisySGDClassifier(**kw).fit(X.astype(np.float64), y)
    # (equal up to the rounding of sums whose order may differ between the two inputs' code paths)
    assert np.allclose(single.coef_, double.coef_, rtol=0, atol=1e-12)
    assert np.allclose(single.intercept_, double.intercept_, rtol=0, atol=1e-12)
    assert np.mean(single.predict(X) == double.predict(X.astype(np.float64))) >= 0.999


def test_a_full_batch_of_float32_rows_is_cast_once():
    """Full batches read every row at every step: a float32 X is cast to the training dtype once
    (the batch is the data), and the run is the float64 input's up to rounding."""
    X, m = _data(5, 300, 4, np.float32)
    y = np.random.default_rng(6).integers(0, 2, size=300)
    rows = rows_of(X, 1.0, np.dtype(np.float64), source_norms(X))
    first, second = rows.gather(slice(0, 300))[0], rows.gather(slice(0, 300))[0]
    assert first is second and first.dtype == np.float64 and np.array_equal(first, X.astype(np.float64))
    assert rows.gather(np.arange(10))[0] is not first
    run = noisysgd.Run(n=300, batch_size=300, steps=30, batching="full", learning_rate=0.5, noise_multiplier=1.0,
                       lipschitz=1.0, strong_convexity=1e-3)
    single = train(run, BinaryLogistic(), X, y, feature_clip=1.0, random_state=0)
    double = train(run, BinaryLogistic(), X.astype(np.float64), y, feature_clip=1.0, random_state=0)
    assert np.allclose(single.coef, double.coef, rtol=0, atol=1e-12)


def test_described_rows_are_validated_like_an_array():
    X, m = _data(0, 50, 3, np.float64)
    run = _run(50)
    with pytest.raises(ValueError, match="center must be 3 finite numbers"):
        train(run, BinaryLogistic(), CenteredRows(X, m[:2], 1.0), np.zeros(50), feature_clip=1.0)
    with pytest.raises(ValueError, match="radius must be a positive"):
        train(run, BinaryLogistic(), CenteredRows(X, m, -1.0), np.zeros(50), feature_clip=1.0)
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="X must be finite"):
        train(run, BinaryLogistic(), CenteredRows(X, m, 1.0), np.zeros(50), feature_clip=1.0)
