"""GLM losses of the trainer: closed forms against finite differences, and the
constants (Lipschitz, smoothness, convexity) derived from the feature clip."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from noisysgd.train import (
    BinaryLogistic,
    Huber,
    LossConstants,
    OneVsRestLogistic,
    PrivacyLeakWarning,
    Softmax,
    Squared,
    augment,
    check_declared_constants,
)

K = 3  # classes of the multiclass losses
R = 2.0  # feature clip
D = 3.0  # diameter for the squared loss
Y_BOUND = 1.5  # target bound for the squared loss


def _losses():
    return [BinaryLogistic(), Softmax(K), OneVsRestLogistic(K), Squared(), Huber(0.7)]


def _labels(loss, rng, n):
    if isinstance(loss, BinaryLogistic):
        return rng.choice([-1.0, 1.0], size=n)
    if loss.n_classes is not None:
        return rng.integers(0, loss.n_classes, size=n)
    return rng.uniform(-Y_BOUND, Y_BOUND, size=n)


def _random_xbar(rng, n, d, radius=R):
    """Rows with ‖x‖ ≤ R (a third of them exactly on the sphere), augmented."""
    X = rng.normal(size=(n, d))
    X *= (radius * rng.uniform(0, 1, size=n) ** (1 / d) / np.linalg.norm(X, axis=1))[:, None]
    X[: n // 3] *= radius / np.linalg.norm(X[: n // 3], axis=1)[:, None]
    return augment(X, radius)


def _random_w(loss, rng, p, scale):
    shape = (p,) if loss.n_classes is None else (p, loss.n_classes)
    return rng.normal(scale=scale, size=shape)


def _fd_gradient(loss, W, xbar, y, h=1e-6):
    """Central finite differences of the single-example loss."""
    G = np.zeros_like(W)
    for idx in np.ndindex(W.shape):
        E = np.zeros_like(W)
        E[idx] = h
        G[idx] = (loss.value(W + E, xbar[None], y) - loss.value(W - E, xbar[None], y)) / (2 * h)
    return G


def _example_gradient(loss, W, xbar, y, clip_norm=None):
    """Closed-form gradient of one example: x̄·ψ(s)ᵀ with the loss's (clipped) derivative."""
    S = loss.scores(W, xbar[None]).astype(float)
    if clip_norm is None:
        Dv = loss.derivative(S, y)
    else:
        Dv = loss.clipped_derivative(S, y, np.array([clip_norm / np.linalg.norm(xbar)]))
    return np.multiply.outer(xbar, Dv[0])


# --------------------------------------------------------------------------- augment


def test_augment_clips_rows_and_appends_bias():
    X = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    Xbar, norms = augment(X, 1.0, return_norms=True)
    np.testing.assert_allclose(Xbar, [[0.6, 0.8, 1.0], [0.3, 0.4, 1.0], [0.0, 0.0, 1.0]], rtol=1e-15)
    np.testing.assert_allclose(norms, np.linalg.norm(Xbar, axis=1), rtol=1e-15)
    # huge entries whose squares overflow are still clipped along their direction
    np.testing.assert_allclose(augment([[1e200, -1e200]], 2.0), [[math.sqrt(2), -math.sqrt(2), 1.0]], rtol=1e-15)
    X32 = augment(X, 1.0, dtype=np.float32)
    assert X32.dtype == np.float32
    np.testing.assert_allclose(X32, Xbar, rtol=1e-7)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(X=[1.0, 2.0], feature_clip=1.0), "X"),
        (dict(X=[[np.nan, 1.0]], feature_clip=1.0), "X"),
        (dict(X=[[1.0, 1.0]], feature_clip=0.0), "feature_clip"),
        (dict(X=[[1.0, 1.0]], feature_clip=1.0, dtype=np.int64), "dtype"),
    ],
)
def test_augment_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        augment(**kwargs)


# --------------------------------------------------------------------------- labels


def test_label_encoding():
    np.testing.assert_array_equal(BinaryLogistic().encode_labels([0, 1, 1]), [-1.0, 1.0, 1.0])
    np.testing.assert_array_equal(BinaryLogistic().encode_labels([-1, 1]), [-1.0, 1.0])
    np.testing.assert_array_equal(Softmax(3).encode_labels([2, 0, 1]), [2, 0, 1])
    np.testing.assert_array_equal(Squared().encode_labels([-5.0, 0.5, 3.0], target_bound=2.0), [-2.0, 0.5, 2.0])
    np.testing.assert_array_equal(Huber(1.0).encode_labels([-5.0, 0.5]), [-5.0, 0.5])


@pytest.mark.parametrize(
    "loss, y, match",
    [
        (BinaryLogistic(), [0, 2], "y must hold binary labels"),
        (BinaryLogistic(), [[0, 1]], "y must be a 1-D"),
        (Softmax(3), [0, 3], r"y must hold integer class indices in \[0, 2\]"),
        (OneVsRestLogistic(3), [0.5], "y must hold integer class indices"),
        (Squared(), [np.inf], "y must be finite"),
    ],
)
def test_bad_labels(loss, y, match):
    with pytest.raises(ValueError, match=match):
        loss.encode_labels(y)


@pytest.mark.parametrize(
    "factory, match",
    [
        (lambda: Softmax(1), "n_classes"),
        (lambda: OneVsRestLogistic(True), "n_classes"),
        (lambda: Huber(delta=0.0), "delta"),
        (lambda: Huber(delta=math.inf), "delta"),
    ],
)
def test_bad_loss_parameters(factory, match):
    with pytest.raises(ValueError, match=match):
        factory()


# --------------------------------------------------------------------------- calculus


@pytest.mark.parametrize("loss", _losses(), ids=repr)
def test_closed_form_gradient_and_norm_match_finite_differences(loss):
    rng = np.random.default_rng(1)
    Xbar = _random_xbar(rng, 8, 4)
    y = _labels(loss, rng, 8)
    for i in range(8):
        W = _random_w(loss, rng, 5, scale=0.7)
        fd = _fd_gradient(loss, W, Xbar[i], y[i : i + 1])
        closed = _example_gradient(loss, W, Xbar[i], y[i : i + 1])
        np.testing.assert_allclose(closed, fd, rtol=1e-6, atol=1e-8)
        norm = loss.gradient_norms(W, Xbar[i : i + 1], y[i : i + 1])[0]
        assert norm == pytest.approx(np.linalg.norm(fd), rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("loss", _losses(), ids=repr)
def test_clipping_bounds_each_example_by_L(loss):
    """Clipped per-example gradients, built from the clipped derivative, against
    brute-force finite-difference gradients clipped by hand."""
    rng = np.random.default_rng(2)
    Xbar = _random_xbar(rng, 12, 4)
    y = _labels(loss, rng, 12)
    L = 0.3
    for i in range(12):
        W = _random_w(loss, rng, 5, scale=2.0)
        fd = _fd_gradient(loss, W, Xbar[i], y[i : i + 1])
        clipped = _example_gradient(loss, W, Xbar[i], y[i : i + 1], clip_norm=L)
        assert np.linalg.norm(clipped) <= L * (1 + 1e-12)
        if isinstance(loss, OneVsRestLogistic):
            # each class column clipped to L/√k separately
            for c in range(K):
                col = fd[:, c]
                expected = col * min(1.0, L / math.sqrt(K) / np.linalg.norm(col))
                np.testing.assert_allclose(clipped[:, c], expected, rtol=1e-6, atol=1e-8)
        else:
            expected = fd * min(1.0, L / np.linalg.norm(fd))
            np.testing.assert_allclose(clipped, expected, rtol=1e-6, atol=1e-8)
    # the batch gradient of the loss API equals the mean of the clipped per-example ones
    W = _random_w(loss, rng, 5, scale=2.0)
    brute = np.mean([_example_gradient(loss, W, Xbar[i], y[i : i + 1], clip_norm=L) for i in range(12)], axis=0)
    np.testing.assert_allclose(loss.gradient(W, Xbar, y, clip_norm=L), brute, rtol=1e-12, atol=1e-15)


def _worst_case_points(loss, d):
    """(W, x̄, y) at which the natural Lipschitz constant is (nearly) attained."""
    x = np.zeros(d)
    x[0] = R
    xbar = np.append(x, 1.0)
    u = xbar / np.linalg.norm(xbar)
    if isinstance(loss, BinaryLogistic):
        return 60.0 * u, xbar, np.array([-1.0])  # s ≫ 0 with y = −1: |φ'| → 1
    if isinstance(loss, Softmax):
        W = np.zeros((d + 1, K))
        W[:, 1] = 60.0 * u  # p → e_1, y = 0: ‖p − e_y‖² → 2
        return W, xbar, np.array([0])
    if isinstance(loss, OneVsRestLogistic):
        W = np.outer(u, np.full(K, 60.0))
        W[:, 0] = -60.0 * u  # true class 0 scored −∞, the others +∞
        return W, xbar, np.array([0])
    if isinstance(loss, Squared):
        return (D / 2) * u, xbar, np.array([-Y_BOUND])  # s = (D/2)‖x̄‖, y = −Y
    return 60.0 * u, xbar, np.array([0.0])  # Huber: s − y ≫ κ


@pytest.mark.parametrize("loss", _losses(), ids=repr)
def test_natural_lipschitz_constant(loss):
    d = 4
    c = loss.constants(feature_clip=R, diameter=D, target_bound=Y_BOUND)
    assert c.lipschitz == c.natural_lipschitz and not c.clipped
    rng = np.random.default_rng(3)
    Xbar = _random_xbar(rng, 200, d)
    y = _labels(loss, rng, 200)
    observed = 0.0
    for i in range(200):
        W = _random_w(loss, rng, d + 1, scale=rng.choice([0.1, 1.0, 10.0]))
        if isinstance(loss, Squared):  # the domain: the ball of diameter D
            W *= min(1.0, (D / 2) / np.linalg.norm(W))
        observed = max(observed, np.linalg.norm(_example_gradient(loss, W, Xbar[i], y[i : i + 1])))
    assert observed <= c.lipschitz * (1 + 1e-12)
    W, xbar, yw = _worst_case_points(loss, d)
    worst = np.linalg.norm(_fd_gradient(loss, W, xbar, yw, h=1e-5))
    assert worst <= c.lipschitz * (1 + 1e-6)
    assert worst >= c.lipschitz * (1 - 1e-6)  # the constant is attained: not loose


def _secant_ratios(loss, rng, Xbar, y, clip_norm=None, scale=1.0):
    """max ‖∇ℓ(W) − ∇ℓ(W')‖/‖W − W'‖ and min ⟨∇ℓ(W) − ∇ℓ(W'), W − W'⟩/‖W − W'‖²."""
    top, low = 0.0, np.inf
    for i in range(len(y)):
        W = _random_w(loss, rng, Xbar.shape[1], scale=scale)
        for step in (1e-3, 0.1, 1.0, 5.0):
            V = W + _random_w(loss, rng, Xbar.shape[1], scale=step)
            g = _example_gradient(loss, W, Xbar[i], y[i : i + 1], clip_norm)
            h = _example_gradient(loss, V, Xbar[i], y[i : i + 1], clip_norm)
            dw2 = np.sum((W - V) ** 2)
            top = max(top, np.linalg.norm(g - h) / math.sqrt(dw2))
            low = min(low, np.sum((g - h) * (W - V)) / dw2)
    return top, low


@pytest.mark.parametrize("loss", _losses(), ids=repr)
def test_smoothness_and_convexity_unclipped(loss):
    c = loss.constants(feature_clip=R, diameter=D, target_bound=Y_BOUND)
    assert c.convex
    rng = np.random.default_rng(4)
    Xbar = _random_xbar(rng, 150, 4)
    y = _labels(loss, rng, 150)
    top, low = _secant_ratios(loss, rng, Xbar, y)
    assert top <= c.smoothness * (1 + 1e-9)
    assert low >= -1e-12  # monotone gradient: convex
    # the constant is attained: at s = 0 (p = (½, ½, 0) for softmax) along the
    # eigenvector of the largest curvature, with ‖x̄‖² = R² + 1
    x = np.zeros(4)
    x[0] = R
    xbar = np.append(x, 1.0)
    if loss.n_classes is None:
        W, yw = np.zeros(5), np.array([1.0 if isinstance(loss, BinaryLogistic) else 0.0])
        E = xbar.copy()
    elif isinstance(loss, OneVsRestLogistic):
        W, yw = np.zeros((5, K)), np.array([0])
        E = np.zeros((5, K))
        E[:, 0] = xbar
    else:
        W, yw = np.zeros((5, K)), np.array([0])
        W[:, 2] = -50.0 * xbar  # class 2 out of the way: p ≈ (½, ½, 0)
        E = np.zeros((5, K))
        E[:, 0], E[:, 1] = xbar, -xbar  # Hessian eigenvalue ½ in the scores
    E *= 1e-5 / np.linalg.norm(E)
    diff = _example_gradient(loss, W + E, xbar, yw) - _example_gradient(loss, W, xbar, yw)
    assert np.linalg.norm(diff) / np.linalg.norm(E) >= c.smoothness * (1 - 1e-3)


@pytest.mark.parametrize("loss", [BinaryLogistic(), OneVsRestLogistic(K), Squared(), Huber(0.7)], ids=repr)
def test_clipped_scalar_glms_stay_convex_and_smooth(loss):
    """Clipping the scalar derivative keeps the gradient field monotone (convex)
    and M-Lipschitz (M-smooth), with M from the unclipped loss."""
    L = 0.4
    c = loss.constants(feature_clip=R, clip_norm=L, diameter=D, target_bound=Y_BOUND)
    assert c.clipped and c.convex and c.lipschitz == L
    assert c.smoothness == loss.constants(feature_clip=R, diameter=D, target_bound=Y_BOUND).smoothness
    rng = np.random.default_rng(5)
    Xbar = _random_xbar(rng, 150, 4)
    y = _labels(loss, rng, 150)
    top, low = _secant_ratios(loss, rng, Xbar, y, clip_norm=L, scale=1.0)
    assert top <= c.smoothness * (1 + 1e-9)
    assert low >= -1e-12


def test_clipped_softmax_is_not_convex():
    natural = math.sqrt(2 * (R * R + 1))
    c = Softmax(4).constants(feature_clip=R, clip_norm=0.9 * natural)
    assert c.clipped and not c.convex and c.smoothness is None
    assert any("not the gradient of a convex function" in note for note in c.notes)
    # at or above the natural constant clipping is a no-op and the constants are those of Prop. 5.1
    c = Softmax(4).constants(feature_clip=R, clip_norm=natural)
    assert not c.clipped and c.convex and c.smoothness == pytest.approx((R * R + 1) / 2)
    # A witness: with x̄ = (0, 1) (‖x̄‖ = 1, natural L = √2) and clip norm 1.2 the
    # clipped field is not monotone, so it is no convex function's gradient and a
    # gradient step expands the distance between these two points for any η.
    loss, xbar, y, L = Softmax(4), np.array([0.0, 1.0]), np.array([0]), 1.2
    W, V = np.zeros((2, 4)), np.zeros((2, 4))
    W[1] = [-1.2, 4.1, 2.0, 2.1]
    V[1] = [-0.5, 3.7, 1.9, 1.9]
    g, h = _example_gradient(loss, W, xbar, y, L), _example_gradient(loss, V, xbar, y, L)
    assert np.sum((g - h) * (W - V)) < -1e-3
    for eta in (0.01, 0.1, 1.0):
        assert np.linalg.norm((W - eta * g) - (V - eta * h)) > np.linalg.norm(W - V)
    # unclipped, the same two points are contracted (η ≤ 2/M)
    g, h = _example_gradient(loss, W, xbar, y), _example_gradient(loss, V, xbar, y)
    assert np.linalg.norm((W - 1.0 * g) - (V - 1.0 * h)) <= np.linalg.norm(W - V)


# --------------------------------------------------------------------------- constants


def test_constants_formulas():
    r2 = R * R + 1
    c = BinaryLogistic().constants(feature_clip=R)
    assert (c.lipschitz, c.smoothness) == pytest.approx((math.sqrt(r2), r2 / 4))
    c = Softmax(K).constants(feature_clip=R)
    assert (c.lipschitz, c.smoothness) == pytest.approx((math.sqrt(2 * r2), r2 / 2))
    assert "Prop. 5.1" in c.derivation
    c = OneVsRestLogistic(K).constants(feature_clip=R)
    assert (c.lipschitz, c.smoothness) == pytest.approx((math.sqrt(K * r2), r2 / 4))
    c = Squared().constants(feature_clip=R, diameter=D, target_bound=Y_BOUND)
    assert (c.lipschitz, c.smoothness) == pytest.approx(((D / 2 * math.sqrt(r2) + Y_BOUND) * math.sqrt(r2), r2))
    c = Huber(0.7).constants(feature_clip=R)
    assert (c.lipschitz, c.smoothness) == pytest.approx((0.7 * math.sqrt(r2), r2))
    # a clip norm at or above the natural constant is the L of the run, but no clipping
    c = BinaryLogistic().constants(feature_clip=R, clip_norm=10.0)
    assert c.lipschitz == 10.0 and not c.clipped and c.convex
    assert isinstance(c, LossConstants) and c.to_dict()["natural_lipschitz"] == pytest.approx(math.sqrt(r2))
    # squared loss without a domain or label bound: only a clip norm gives L
    c = Squared().constants(feature_clip=R, clip_norm=1.0)
    assert c.natural_lipschitz is None and c.clipped and c.convex and c.smoothness == pytest.approx(r2)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(feature_clip=R), "clip_norm is required for squared: its natural Lipschitz constant needs diameter and target_bound"),
        (dict(feature_clip=R, diameter=1.0), "clip_norm is required.*target_bound"),
        (dict(feature_clip=-1.0, clip_norm=1.0), "feature_clip"),
        (dict(feature_clip=R, clip_norm=0.0), "clip_norm"),
        (dict(feature_clip=R, clip_norm=1.0, diameter=-2.0), "diameter"),
        (dict(feature_clip=R, clip_norm=1.0, target_bound=np.nan), "target_bound"),
    ],
)
def test_constants_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Squared().constants(**kwargs)


def test_privacy_leak_warning_on_data_derived_constants():
    norms = np.array([1.0, 3.0, 2.5])
    with pytest.warns(PrivacyLeakWarning, match="feature_clip"):
        check_declared_constants(feature_clip=3.0 * (1 + 1e-12), row_norms=norms)
    with pytest.warns(PrivacyLeakWarning, match="target_bound"):
        check_declared_constants(feature_clip=5.0, row_norms=norms, target_bound=4.0, y=np.array([1.0, -4.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_declared_constants(feature_clip=3.001, row_norms=norms, target_bound=4.5, y=np.array([-4.0])) == []


def test_float32_features_are_used_without_a_float64_copy_and_give_the_same_xbar():
    """X passed in float32 is not converted to a float64 copy (features can be gigabytes),
    and the augmented features equal those of the same values passed in float64."""
    from noisysgd.rowmaps import augment_rows, row_norms
    from noisysgd.train.losses import feature_rows

    rng = np.random.default_rng(3)
    X32 = (rng.normal(size=(5000, 7)) * rng.uniform(0.1, 30, size=(5000, 1))).astype(np.float32)
    assert feature_rows(X32) is X32
    X64 = X32.astype(np.float64)
    for dt in (np.float32, np.float64):
        a, na = augment_rows(X32, 3.0, np.dtype(dt), row_norms(X32))
        b, nb = augment_rows(X64, 3.0, np.dtype(dt), row_norms(X64))
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(na, nb)


@pytest.mark.parametrize("loss", _losses(), ids=repr)
@pytest.mark.parametrize("s", [0.05, 0.5, 3.0])
def test_intercept_scaling_constants_bound_the_augmented_rows(loss, s):
    """With a bias coordinate s, ‖x̄‖² ≤ R² + s², so every constant is the s = 1 formula with R² + s² in
    place of R² + 1 (the same constants as a feature clip R' with R'² + 1 = R² + s²), and the gradient
    of every row augment() makes is bounded by L (checked on random rows and models)."""
    from noisysgd.train.losses import augment

    c = loss.constants(feature_clip=R, diameter=D, target_bound=Y_BOUND, intercept_scaling=s)
    same = loss.constants(feature_clip=math.sqrt(R * R + s * s - 1.0), diameter=D, target_bound=Y_BOUND)
    assert (c.lipschitz, c.smoothness) == pytest.approx((same.lipschitz, same.smoothness), rel=1e-14)
    assert f"intercept scaling s = {s:g}" in c.derivation
    rng = np.random.default_rng(8)
    X = rng.normal(size=(300, 4)) * rng.choice([0.1, 1.0, 10.0], size=(300, 1))
    Xbar, norms = augment(X, R, intercept_scaling=s, return_norms=True)
    np.testing.assert_allclose(Xbar[:, -1], s)
    np.testing.assert_allclose(np.linalg.norm(Xbar, axis=1), norms, rtol=1e-14)
    assert norms.max() <= math.sqrt(R * R + s * s) * (1 + 1e-14)
    y = _labels(loss, rng, 300)
    for scale in (0.1, 1.0, 30.0):
        W = _random_w(loss, rng, 5, scale=scale)
        if isinstance(loss, Squared):  # the domain: the ball of diameter D
            W *= min(1.0, (D / 2) / np.linalg.norm(W))
        assert loss.gradient_norms(W, Xbar, loss.encode_labels(y)).max() <= c.lipschitz * (1 + 1e-12)


def test_intercept_scaling_errors():
    from noisysgd.train.losses import augment

    with pytest.raises(ValueError, match="intercept_scaling must be a positive finite number. Found 0"):
        BinaryLogistic().constants(feature_clip=1.0, intercept_scaling=0)
    with pytest.raises(ValueError, match="intercept_scaling must be a positive finite number. Found nan"):
        augment([[1.0]], 1.0, intercept_scaling=float("nan"))
