"""Releasing the mean of the second half of the iterates (issue 26 §2).

An average of the iterates is a function of every iterate: post-processing of
what the composition analyses account, and of nothing the hidden-state
analyses cover (they bound the final iterate alone).  So ``release=
"tail-average"`` (``average=True``, ``noisysgd train --average``) is certified by
composition only, refused with any other named analysis, and the certificate
says what was released.

The check that would catch a wrong certificate: a linear instance (Poisson
batches with b = n, so every step uses every row; gradient sums that differ by
2L between the two datasets) whose averaged output is an exact Gaussian pair —
its ε is computed in mpmath from the averaging weights and must not exceed the
certificate.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import noisysgd
from mp_reference import gdp_epsilon_mp
from noisysgd import Run
from noisysgd.audit.losses import Linear
from noisysgd.cli import main as cli_main
from noisysgd.private_fit import (Bounds, Calibrated, Execution, Privacy, Schedule, execute, fit_private)
from noisysgd.train import BinaryLogistic, train

DELTA = 1e-5


def test_the_averaged_output_of_a_linear_instance_stays_within_its_certificate():
    """D: n rows of slope +1; D': the same with one of slope −1 (replace: the mean gradient moves
    by 2L/b at every step).  θ_t = θ_0 − η Σ_{s≤t} (ḡ + ξ_s), so the mean of θ_F..θ_T is
    θ_0 − η Σ_s c_s (ḡ + ξ_s) with c_s = (T − max(s, F) + 1)/K, K = T − F + 1: the two outputs
    are Gaussians of standard deviation ησ·√(Σc_s²) whose means differ by η(2L/b)·Σc_s — exactly
    μ-GDP with μ = (2L/b)·Σc_s / (σ√(Σc_s²)), σ = zL/b.  The real pipeline (same seed: same
    noise) moves by exactly that gap, and the composition certificate covers the pair."""
    n, T, z, eta = 10, 60, 6.0, 0.5
    run = Run(n=n, batch_size=n, batching="poisson", steps=T, learning_rate=eta, noise_multiplier=z, lipschitz=1.0)
    report = noisysgd.epsilon(run, delta=DELTA, analyses=["composition", "composition-pld"])
    X = np.zeros((n, 0))
    y_d = np.ones(n)
    y_e = y_d.copy()
    y_e[-1] = -1.0
    outs = [execute(Calibrated(run, report, None), Linear(), X, y, Bounds(feature_clip=1.0, clip_norm=1.0),
                    Execution(random_state=7), {}, release="tail-average") for y in (y_d, y_e)]
    first = T // 2 + 1
    K = T - first + 1
    c = np.array([(T - max(s, first) + 1) / K for s in range(1, T + 1)])
    gap = float(outs[1].coef[0] - outs[0].coef[0])
    assert gap == pytest.approx(eta * (2.0 / n) * c.sum(), rel=1e-9)
    assert "tail average" in outs[0].enforced["released"] and f"steps {first}..{T}" in outs[0].enforced["released"]
    sigma = z / n
    mu = (2.0 / n) * c.sum() / (sigma * math.sqrt(float(c @ c)))
    assert mu < 2.0 * math.sqrt(T) / z  # below the every-iterate pair: an average releases less
    assert report.epsilon >= gdp_epsilon_mp(mu, DELTA)


def test_the_released_coefficients_are_the_mean_of_the_second_half_of_the_iterates():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] > 0).astype(int)
    fit = fit_private(X, y, BinaryLogistic(), Schedule(epochs=4, batch_size=40, batching="poisson",
                                                        learning_rate=2.0, l2=1e-4),
                      Bounds(feature_clip=2.0), Privacy(epsilon=2.0, delta=DELTA, release="tail-average"),
                      Execution(random_state=3))
    seen = []
    last = train(fit.run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=3,
                 callback=lambda t, W: seen.append((t, W.copy())))
    T = fit.run.steps
    tail = [W for t, W in seen if t >= T // 2 + 1]
    assert len(tail) == T - T // 2
    np.testing.assert_allclose(fit.result.coef, np.mean(tail, axis=0), rtol=1e-12, atol=1e-15)
    assert not np.allclose(fit.result.coef, last.coef)  # the average, not the last iterate
    cert = fit.certificate
    assert cert["certificate"]["rests_on"] and set(cert["certificate"]["rests_on"]) <= {"composition",
                                                                                      "composition-pld"}
    assert "released tail average of the iterates" in cert["certificate"]["guarantee"]
    assert cert["certificate"]["released"].startswith("tail average")
    plain = fit_private(X, y, BinaryLogistic(), Schedule(epochs=4, batch_size=40, batching="poisson",
                                                          learning_rate=2.0, l2=1e-4),
                        Bounds(feature_clip=2.0), Privacy(epsilon=2.0, delta=DELTA), Execution(random_state=3))
    assert plain.certificate["certificate"]["released"].startswith("the final iterate")


@pytest.mark.parametrize("privacy,execution,message", [
    (dict(analyses=["shifted-interpolation"]), {}, "analyses must account every iterate with release='tail-average'"),
    ({}, dict(checkpoint="x.ckpt"), "without a checkpoint"),
    (dict(release="mean"), {}, "release must be one of"),
])
def test_refusals_name_the_reason(tmp_path, privacy, execution, message):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 2)), rng.integers(0, 2, 200)
    if "checkpoint" in execution:
        execution = dict(checkpoint=str(tmp_path / execution["checkpoint"]))
    with pytest.raises(ValueError, match=re_escape(message)):
        fit_private(X, y, BinaryLogistic(), Schedule(epochs=2, batch_size=20, batching="cyclic", l2=1e-3),
                    Bounds(feature_clip=2.0), Privacy(**{"epsilon": 1.0, "delta": DELTA, "release": "tail-average",
                                                         **privacy}), Execution(random_state=0, **execution))
    assert not (tmp_path / "x.ckpt").exists()


def re_escape(text):
    import re

    return re.escape(text)


@pytest.mark.slow
def test_estimator_and_cli_average(tmp_path, capsys):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 4))
    y = (X[:, 0] - X[:, 1] > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("error", noisysgd.CompositionFallbackWarning)  # composition is the choice here
        clf = noisysgd.NoisySGDClassifier(epsilon=2.0, classes=[0, 1], average=True, feature_clip=3.0,
                                          random_state=0).fit(X, y)
    assert clf.run_.batching == "poisson" and clf.privacy_report_["best_analysis"] in ("composition",
                                                                                      "composition-pld")
    assert clf.privacy_report_["certificate"]["released"].startswith("tail average")
    assert clf.score(X, y) > 0.8
    with pytest.raises(ValueError, match="The 'average' parameter of NoisySGDClassifier must be True, False or 'auto'"):
        noisysgd.NoisySGDClassifier(average="yes").fit(X, y)
    data = tmp_path / "d.csv"
    np.savetxt(data, np.column_stack([X, y]), delimiter=",", header="a,b,c,d,y", comments="")
    out = tmp_path / "m"
    assert cli_main(["train", str(data), "--target", "y", "--classes", "0,1", "--seed", "0", "--out", str(out),
                     "--average", "--feature-clip", "3"]) == 0
    text = capsys.readouterr().out
    assert "released: tail average" in text and "for the released tail average of the iterates" in text
    cert = json.loads((out / "certificate.json").read_text())
    assert cert["run"]["batching"] == "poisson" and cert["certificate"]["released"].startswith("tail average")
    assert cli_main(["train", str(data), "--target", "y", "--out", str(tmp_path / "w"), "--average",
                     "--workers", "1"]) == 2
    assert "--average is not available for data-parallel training" in capsys.readouterr().err


def test_replicas_average_as_the_engine_does():
    """train_replicas(average=True), which the audits run, releases per replica exactly the mean of
    the engine's own iterates after steps ⌊T/2⌋+1..T (same seeds, odd T)."""
    from noisysgd.train.replicas import train_replicas

    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    y = (X[:, 0] > 0).astype(int)
    c = BinaryLogistic().constants(feature_clip=2.0, clip_norm=1.0)
    run = Run(n=100, batch_size=10, batching="poisson", steps=31, learning_rate=0.5, noise_multiplier=1.0,
              lipschitz=c.lipschitz)
    res = train_replicas(run, BinaryLogistic(), X, y, replicas=2, feature_clip=2.0, random_state=[11, 12],
                         average=True)
    for r, seed in enumerate((11, 12)):
        seen = []
        train(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=seed,
              callback=lambda t, W: seen.append((t, W.copy())))
        np.testing.assert_allclose(res.coef[r], np.mean([W for t, W in seen if t >= 16], axis=0),
                                   rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="average must be True, False or 'auto'"):
        train_replicas(run, BinaryLogistic(), X, y, replicas=1, feature_clip=2.0, average="yes")


def test_replicas_release_as_the_engines_auto_rule_does():
    """train_replicas(average="auto"), which the audits run, releases per replica what the engine's
    release="auto" releases under a composition certificate: the tail mean for the replicas whose
    iterates settled, the last iterate for the others (λ = 1 settles them, λ = 0 leaves a walk)."""
    from noisysgd.train.replicas import train_replicas

    n, T, seeds = 10, 64, (4, 5, 6, 7)  # (seed 3 with λ = 1: c = +0.11, the 1-D statistic is noisy)
    for lam in (1.0, 0.0):
        run = Run(n=n, batch_size=n, batching="poisson", steps=T, learning_rate=0.5, noise_multiplier=3.0,
                  lipschitz=1.0, strong_convexity=lam, smoothness=lam or None)
        report = noisysgd.epsilon(run, delta=DELTA, analyses=["composition", "composition-pld"])
        X, y = np.zeros((n, 0)), np.ones(n)
        res = train_replicas(run, Linear(), X, y, replicas=len(seeds), feature_clip=1.0, random_state=list(seeds),
                             average="auto")
        kinds = []
        for r, seed in enumerate(seeds):
            one = execute(Calibrated(run, report, None), Linear(), X, y, Bounds(feature_clip=1.0, clip_norm=1.0),
                          Execution(random_state=seed), {}, release="auto")
            np.testing.assert_allclose(res.coef[r].ravel(), np.ravel(one.coef), rtol=1e-12, atol=1e-14)
            assert res.enforced["release"]["statistics"][r] == pytest.approx(one.enforced["release"]["statistic"],
                                                                              rel=1e-9, abs=1e-12)
            kinds.append(one.enforced["release"]["released"])
        assert res.enforced["release"]["averaged"] == kinds.count("tail-average")
        assert kinds == (["tail-average"] * len(seeds) if lam else ["last"] * len(seeds))


def test_the_tuner_refuses_an_averaged_base_estimator():
    """NoisySGDClassifierCV accounts every candidate's final iterate: an average (base or grid)
    is refused, never silently ignored."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 3)), rng.integers(0, 2, 300)
    for base, grid in ((dict(average=True), {"alpha": [0.01, 0.1]}), ({}, {"alpha": [0.01], "average": [True]})):
        cv = noisysgd.NoisySGDClassifierCV(grid, estimator=noisysgd.NoisySGDClassifier(classes=[0, 1], **base),
                                           epsilon=1.0, random_state=0)
        with pytest.raises(ValueError, match="average must be False or 'auto' for tuning"):
            cv.fit(X, y)


# --- average="auto" (noisysgd.train.release) ---------------------------------------------------


def _block_means(iterates, T):
    """The means of the 8 blocks of consecutive steps, written out here (steps 1..T; block j holds the
    steps t with (t − 1)·8 // T == j)."""
    blocks = [[] for _ in range(8)]
    for t, W in iterates:
        blocks[(t - 1) * 8 // T].append(np.asarray(W, dtype=float).ravel())
    return [np.mean(b, axis=0) for b in blocks]


def _correlation_of_increments(means):
    d = np.diff(np.stack(means), axis=0)
    return float(np.sum(d[:-1] * d[1:]) / math.sqrt(np.sum(d[:-1] ** 2) * np.sum(d[1:] ** 2)))


def _ar_weights(T, a, eta, first=None):
    """θ_t = a·θ_{t−1} − η(ḡ + ξ_t): the weights w_s of ξ_s (and of ḡ) in the final iterate, or in the
    mean of θ_first..θ_T."""
    s = np.arange(1, T + 1)
    if first is None:
        return -eta * a ** (T - s)
    K = T - first + 1
    return np.array([-eta * sum(a ** (t - si) for t in range(max(si, first), T + 1)) / K for si in s])


def _linear_pair(run, analyses, seed=7):
    """The auto release of a one-coordinate linear instance on D (n slopes +1) and D' (one slope −1),
    same seed, with the iterates of D recorded by the engine itself."""
    n = run.n
    report = noisysgd.epsilon(run, delta=DELTA, analyses=analyses)
    X = np.zeros((n, 0))
    y_d = np.ones(n)
    y_e = y_d.copy()
    y_e[-1] = -1.0
    outs = [execute(Calibrated(run, report, None), Linear(), X, y, Bounds(feature_clip=1.0, clip_norm=1.0),
                    Execution(random_state=seed), {}, release="auto") for y in (y_d, y_e)]
    seen = []
    last = train(run, Linear(), X, y_d, feature_clip=1.0, random_state=seed,
                 analyses=report.certificate()["certificate"]["rests_on"],
                 callback=lambda t, W: seen.append((t, W.copy())))
    return report, outs, seen, last


def test_auto_releases_the_mean_of_settled_iterates_within_the_exact_epsilon_of_the_whole_trajectory():
    """A linear instance with λ = 1, η = 1/2 (θ_t = θ_{t−1}/2 − η(ḡ + ξ_t): settled after a few steps),
    Poisson batches at rate 1, certified by composition.  The released output is exactly the tail mean
    the engine's own iterates give where their increments anticorrelate (computed here, not read from
    the release); it is a function of the trajectory, whose two laws differ by a mean gap of 2/n in every
    noisy gradient of std z/n — exactly μ = 2√T/z-GDP (mpmath), which the certificate must cover; and
    the averaged output alone is an exact Gaussian pair whose μ is below it."""
    n, T, z, eta, lam = 10, 64, 3.0, 0.5, 1.0
    run = Run(n=n, batch_size=n, batching="poisson", steps=T, learning_rate=eta, noise_multiplier=z,
              lipschitz=1.0, strong_convexity=lam, smoothness=lam)
    report, outs, seen, last = _linear_pair(run, "best")
    assert report.best.analysis in ("composition", "composition-pld")
    c = _correlation_of_increments(_block_means(seen, T)[2:])
    assert c < 0  # settled: about −1/2 for blocks of 8 steps of a process with memory 1/log 2 steps
    first = T // 2 + 1
    np.testing.assert_allclose(outs[0].coef, np.mean([W for t, W in seen if t >= first], axis=0), rtol=1e-12)
    assert not np.allclose(outs[0].coef, last.coef)
    rule = outs[0].enforced["release"]
    assert rule["released"] == "tail-average" and rule["statistic"] == pytest.approx(c, rel=1e-12)
    assert outs[0].enforced["released"].startswith("tail average") and "average='auto'" in outs[0].enforced["released"]
    w = _ar_weights(T, 1 - eta * lam, eta, first)
    assert float(outs[1].coef[0] - outs[0].coef[0]) == pytest.approx(-(2.0 / n) * w.sum(), rel=1e-9)
    mu_average = (2.0 / n) * abs(w.sum()) / ((z / n) * math.sqrt(float(w @ w)))
    mu_trajectory = 2.0 * math.sqrt(T) / z
    assert mu_average < mu_trajectory
    # composition of T Gaussian steps is exactly the trajectory's μ: tight, equal up to rounding
    assert report.epsilon >= gdp_epsilon_mp(mu_trajectory, DELTA) * (1 - 1e-9)


def test_auto_under_add_remove_stays_within_the_exact_epsilon_of_the_whole_trajectory():
    """The same settled instance under add/remove (n public, Poisson at rate 1): D has n − 1 rows of
    slope +1, D' adds one of slope −1, so every mean gradient moves by L/n against noise z·L/n — the
    trajectory pair is exactly √T/z-GDP (mpmath), which the composition certificate covers; both
    releases are the tail means of the engine's own iterates on their data, a gap of exactly the AR
    weights' sum times 1/n apart."""
    n, T, z, eta, lam = 10, 64, 3.0, 0.5, 1.0
    run = Run(n=n, batch_size=n, batching="poisson", steps=T, learning_rate=eta, noise_multiplier=z,
              lipschitz=1.0, strong_convexity=lam, smoothness=lam, adjacency="add-remove")
    report = noisysgd.epsilon(run, delta=DELTA)
    assert report.best.analysis in ("composition", "composition-pld")
    pairs = ((np.zeros((n - 1, 0)), np.ones(n - 1)), (np.zeros((n, 0)), np.r_[np.ones(n - 1), -1.0]))
    outs = []
    for X, y in pairs:
        out = execute(Calibrated(run, report, None), Linear(), X, y, Bounds(feature_clip=1.0, clip_norm=1.0),
                      Execution(random_state=7), {}, release="auto")
        seen = []
        train(run, Linear(), X, y, feature_clip=1.0, random_state=7,
              analyses=report.certificate()["certificate"]["rests_on"], callback=lambda t, W: seen.append((t, W.copy())))
        assert _correlation_of_increments(_block_means(seen, T)[2:]) < 0
        np.testing.assert_allclose(out.coef, np.mean([W for t, W in seen if t >= T // 2 + 1], axis=0), rtol=1e-12)
        assert out.enforced["release"]["released"] == "tail-average"
        outs.append(out)
    w = _ar_weights(T, 1 - eta * lam, eta, T // 2 + 1)
    assert float(outs[1].coef[0] - outs[0].coef[0]) == pytest.approx((1.0 / n) * abs(w.sum()), rel=1e-9)
    assert report.epsilon >= gdp_epsilon_mp(math.sqrt(T) / z, DELTA) * (1 - 1e-9)  # tight, up to rounding


def test_auto_keeps_the_final_iterate_under_a_hidden_state_certificate_whose_epsilon_an_average_would_exceed():
    """The same settled instance with full batches: shifted interpolation certifies the final iterate at an
    ε far below composition's.  The iterates settled (c < 0), yet "auto" releases the final iterate —
    and it must: the tail average is an exact Gaussian pair (weights of the AR recursion) whose ε
    (mpmath) exceeds that certificate, while the final iterate's exact ε stays within it."""
    n, T, z, eta, lam = 10, 64, 3.0, 0.5, 1.0
    run = Run(n=n, batch_size=n, batching="full", steps=T, learning_rate=eta, noise_multiplier=z,
              lipschitz=1.0, strong_convexity=lam, smoothness=lam)
    report, outs, seen, last = _linear_pair(run, "best")
    assert report.best.analysis not in ("composition", "composition-pld")
    assert _correlation_of_increments(_block_means(seen, T)[2:]) < 0
    np.testing.assert_array_equal(outs[0].coef, last.coef)
    assert outs[0].enforced["release"]["released"] == "last" and "released" not in outs[0].enforced
    assert "final iterate alone" in outs[0].enforced["release"]["why"]
    a = 1 - eta * lam
    exact = {}
    for name, weights in (("last", _ar_weights(T, a, eta)), ("average", _ar_weights(T, a, eta, T // 2 + 1))):
        exact[name] = gdp_epsilon_mp(2.0 * abs(weights.sum()) / (z * math.sqrt(float(weights @ weights))), DELTA)
    # the certificate is tight for the final iterate (equal up to rounding) and four times too small for the mean
    assert exact["last"] <= report.epsilon * (1 + 1e-9) and exact["average"] > 4 * report.epsilon


def test_auto_keeps_the_final_iterate_of_a_travelling_walk():
    """Without λ the linear instance is a random walk with drift: c ≥ 0, the final iterate."""
    n, T, z = 10, 64, 3.0
    run = Run(n=n, batch_size=n, batching="poisson", steps=T, learning_rate=0.5, noise_multiplier=z, lipschitz=1.0)
    _, outs, seen, last = _linear_pair(run, "best")
    c = _correlation_of_increments(_block_means(seen, T)[2:])
    assert c >= 0 and outs[0].enforced["release"]["statistic"] == pytest.approx(c, rel=1e-12)
    np.testing.assert_array_equal(outs[0].coef, last.coef)
    assert "still travelling" in outs[0].enforced["release"]["why"]


def _expected_correlation(weights_per_block):
    """E⟨δ_j, δ_{j+1}⟩ summed over the pairs, over √(Σ E‖δ_j‖² · Σ E‖δ_{j+1}‖²), for block means that are
    linear maps of i.i.d. standard noise (rows of ``weights_per_block``): exact second moments."""
    d = np.diff(weights_per_block, axis=0)
    num = float(np.sum(d[:-1] * d[1:]))
    return num / math.sqrt(float(np.sum(d[:-1] ** 2)) * float(np.sum(d[1:] ** 2)))


@pytest.mark.parametrize("process,expected", [("independent", -0.5), ("walk", 0.25)])
def test_the_statistic_of_a_large_process_is_its_exact_expected_correlation(process, expected):
    """p = 20,000 coordinates, each an independent copy of the process over 6 blocks of 50 steps: the
    statistic concentrates on the ratio of the exact second moments of the increments (the block means
    are linear maps of the noise; computed from the maps), which is −1/2 for independent block means
    and (L² − 1)/(4L² + 2) → 1/4 for a random walk."""
    from noisysgd.train.release import mean_reversion

    L, blocks, p = 50, 6, 20_000
    rng = np.random.default_rng(0)
    noise = rng.standard_normal((blocks * L, p))
    if process == "independent":
        means = [noise[j * L:(j + 1) * L].mean(axis=0) for j in range(blocks)]
        maps = np.kron(np.eye(blocks), np.full((1, L), 1.0 / L))
    else:
        walk = np.cumsum(noise, axis=0)
        means = [walk[j * L:(j + 1) * L].mean(axis=0) for j in range(blocks)]
        cum = np.tril(np.ones((blocks * L, blocks * L)))
        maps = np.stack([cum[j * L:(j + 1) * L].mean(axis=0) for j in range(blocks)])
    exact = _expected_correlation(maps)
    if process == "walk":
        assert exact == pytest.approx((L * L - 1) / (4 * L * L + 2), rel=1e-12)
    assert exact == pytest.approx(expected, abs=1e-3)
    assert mean_reversion(means) == pytest.approx(exact, abs=0.02)


@given(st.lists(st.lists(st.integers(-1000, 1000), min_size=3, max_size=3), min_size=3, max_size=8),
       st.integers(-10, 10), st.integers(-50, 50))
@settings(max_examples=200, deadline=None)
def test_the_statistic_is_a_correlation_blind_to_shift_scale_and_rotation(rows, log_scale, shift):
    """(Integer means, power-of-two scales and integer shifts: the moved means are exact but for the
    rotation's rounding.)"""
    from noisysgd.train.release import mean_reversion

    scale = 2.0 ** log_scale
    means = [np.array(r, dtype=float) for r in rows]
    c = mean_reversion(means)
    assert -1.0 <= c <= 1.0
    d = np.diff(np.stack(means), axis=0)
    num = float(np.sum(d[:-1] * d[1:]))
    if abs(num) > 1e-9 * max(1.0, float(np.sum(d * d))):
        assert (c < 0) == (num < 0)
    theta = 0.7
    Q = np.array([[math.cos(theta), -math.sin(theta), 0], [math.sin(theta), math.cos(theta), 0], [0, 0, 1]])
    moved = [scale * (Q @ m) + shift for m in means]
    assert mean_reversion(moved) == pytest.approx(c, abs=1e-7)


@pytest.mark.slow
def test_auto_is_the_classifiers_default_and_the_tuners_final_iterate(tmp_path, capsys):
    """The classifier releases by "auto" unless told otherwise and says what and why; the regressor keeps
    the final iterate by default; a checkpointed fit keeps it; the tuner reads "auto" as the final iterate
    and refuses True; the CLI follows the estimators (--average auto|yes|no)."""
    assert noisysgd.NoisySGDClassifier().average == "auto" and noisysgd.NoisySGDRegressor().average is False
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 4))
    y = (X[:, 0] - X[:, 1] > 0).astype(int)
    clf = noisysgd.NoisySGDClassifier(epsilon=2.0, classes=[0, 1], feature_clip=3.0, random_state=0).fit(X, y)
    rule = clf.privacy_report_["certificate"]["trainer_enforced"]["release"]
    assert rule["rule"] == "auto" and rule["released"] in ("last", "tail-average")
    released = clf.privacy_report_["certificate"]["released"]
    assert released.startswith("tail average") if rule["released"] == "tail-average" else "average='auto' kept it" in released
    ckpt = noisysgd.NoisySGDClassifier(epsilon=2.0, classes=[0, 1], feature_clip=3.0, random_state=0,
                                       checkpoint=str(tmp_path / "c.ckpt")).fit(X, y)
    kept = ckpt.privacy_report_["certificate"]["trainer_enforced"]["release"]
    assert kept["released"] == "last" and kept["statistic"] is None
    assert kept["why"] == "a checkpointed run keeps no block means" or "final iterate alone" in kept["why"]
    assert ckpt.privacy_report_["certificate"]["released"].startswith("the final iterate")
    cv = noisysgd.NoisySGDClassifierCV({"alpha": [0.01, 0.1]}, estimator=noisysgd.NoisySGDClassifier(classes=[0, 1]),
                                       epsilon=1.0, expected_runs=3, random_state=0).fit(X, y)  # "auto" accepted
    assert cv.privacy_report_["certificate"]["guarantee"]
    data = tmp_path / "d.csv"
    np.savetxt(data, np.column_stack([X, y]), delimiter=",", header="a,b,c,d,y", comments="")
    for flag, expected in (([], rule["released"]), (["--average", "no"], None)):
        out = tmp_path / f"m{len(flag)}"
        assert cli_main(["train", str(data), "--target", "y", "--classes", "0,1", "--seed", "0", "--epsilon", "2",
                         "--out", str(out), "--feature-clip", "3", *flag]) == 0
        cert = json.loads((out / "certificate.json").read_text())
        got = cert["certificate"]["trainer_enforced"].get("release", {}).get("released")
        assert got == expected
    assert cli_main(["train", str(data), "--target", "y", "--out", str(tmp_path / "x"), "--average", "maybe"]) == 2
    assert "--average" in capsys.readouterr().err


def test_auto_release_refuses_to_decide_on_missing_iterates():
    """A statistic over blocks the engine did not fill completely is refused, not computed."""
    from noisysgd.train.release import AutoRelease

    rule = AutoRelease(64, None)
    for t in range(1, 65):
        if t != 40:  # one step of block 4 never reported
            rule(t, np.array([float(t % 3)]))
    with pytest.raises(RuntimeError, match="block means saw"):
        rule.statistic()
