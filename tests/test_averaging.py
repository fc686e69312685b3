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
    with pytest.raises(ValueError, match="The 'average' parameter of NoisySGDClassifier must be True or False"):
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
    with pytest.raises(ValueError, match="average must be True or False"):
        train_replicas(run, BinaryLogistic(), X, y, replicas=1, feature_clip=2.0, average="yes")


def test_the_tuner_refuses_an_averaged_base_estimator():
    """NoisySGDClassifierCV accounts every candidate's final iterate: an average (base or grid)
    is refused, never silently ignored."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 3)), rng.integers(0, 2, 300)
    for base, grid in ((dict(average=True), {"alpha": [0.01, 0.1]}), ({}, {"alpha": [0.01], "average": [True]})):
        cv = noisysgd.NoisySGDClassifierCV(grid, estimator=noisysgd.NoisySGDClassifier(classes=[0, 1], **base),
                                           epsilon=1.0, random_state=0)
        with pytest.raises(ValueError, match="average must be False for tuning"):
            cv.fit(X, y)
