"""Class weights, declared publicly and at most 1 (issue 27 §5).

Each example's loss is multiplied by its class's weight w ≤ 1: the weighted loss
keeps the base loss's Lipschitz constant, smoothness and convexity, and a clipped
gradient scaled by w ≤ 1 stays within the clip norm — so the sensitivity and
every analysis are unchanged.  Checked as properties (hypothesis) against the
base loss; ``"balanced"`` is refused (it needs the private class counts).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import noisysgd
from noisysgd.train import BinaryLogistic, ClassWeighted, OneVsRestLogistic, Softmax


@settings(max_examples=60, deadline=None)
@given(k=st.integers(2, 4), b=st.integers(1, 30), seed=st.integers(0, 2**31 - 1),
       kind=st.sampled_from(["binary", "softmax", "ovr"]))
def test_weighted_gradients_are_the_base_ones_scaled_and_stay_within_the_clip(k, b, seed, kind):
    rng = np.random.default_rng(seed)
    if kind == "binary":
        k = 2
        base = BinaryLogistic()
        Y = rng.choice([-1.0, 1.0], size=b)
        S = rng.normal(scale=5, size=b)
        cls = (Y > 0).astype(int)
    else:
        base = Softmax(k) if kind == "softmax" else OneVsRestLogistic(k)
        Y = rng.integers(0, k, size=b)
        S = rng.normal(scale=5, size=(b, k))
        cls = Y
    w = rng.uniform(0.01, 1.0, size=k)
    w /= w.max()
    loss = ClassWeighted(base, w)
    scale = w[cls] if S.ndim == 1 else w[cls][:, None]
    np.testing.assert_allclose(loss.derivative(S.copy(), Y), scale * base.derivative(S.copy(), Y), rtol=1e-15)
    norms = rng.uniform(0.1, 3.0, size=b)  # ‖x̄_i‖
    thr = 1.0 / norms                      # clip norm L = 1
    D = loss.clipped_derivative(S.copy(), Y, thr)
    np.testing.assert_allclose(D, scale * base.clipped_derivative(S.copy(), Y, thr), rtol=1e-15)
    per_example = (np.abs(D) if D.ndim == 1 else np.linalg.norm(D, axis=1)) * norms
    assert np.all(per_example <= 1.0 + 1e-12)  # the clipped gradient norm ≤ L: the sensitivity is unchanged
    c1, c0 = loss.constants(feature_clip=2.0), base.constants(feature_clip=2.0)
    assert (c1.lipschitz, c1.smoothness, c1.convex) == (c0.lipschitz, c0.smoothness, c0.convex)


@pytest.mark.parametrize("weights", [[0.0, 1.0], [0.5, 1.5], [1.0], [np.nan, 1.0]])
def test_weights_outside_zero_one_are_refused(weights):
    with pytest.raises(ValueError, match=r"weights must be 2 numbers in \(0, 1\]"):
        ClassWeighted(BinaryLogistic(), weights)


def _imbalanced(n=6000, seed=0):
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=n, n_features=10, n_informative=4, weights=[0.95], class_sep=1.5,
                               random_state=seed)
    return X / 4, y


@pytest.mark.slow
def test_estimator_class_weight_is_declared_normalized_and_lifts_the_rare_class():
    """5 % positives at epsilon = 3: unweighted, the model nearly predicts the majority (balanced
    accuracy 0.56); weighting the rare class (here 5x, normalized to {0: 0.2, 1: 1}) lifts it well above."""
    from sklearn.metrics import balanced_accuracy_score

    X, y = _imbalanced()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = noisysgd.NoisySGDClassifier(epsilon=3.0, classes=[0, 1], random_state=0,
                                            prior=None).fit(X, y)  # (class weights turn the class prior off)
        weighted = noisysgd.NoisySGDClassifier(epsilon=3.0, classes=[0, 1], random_state=0,
                                               class_weight={0: 1.0, 1: 5.0}).fit(X, y)
    assert weighted.privacy_report_["class_weight"]["weights"] == {"0": 0.2, "1": 1.0}
    assert "class_weight" not in plain.privacy_report_
    assert weighted.noise_multiplier_ == plain.noise_multiplier_  # same run, same noise: same privacy
    plain_ba, weighted_ba = balanced_accuracy_score(y, plain.predict(X)), balanced_accuracy_score(y, weighted.predict(X))
    assert plain_ba < 0.6 and weighted_ba > 0.6 and weighted_ba > plain_ba + 0.08  # 0.563 and 0.671 measured


@pytest.mark.parametrize("value,expected", [
    ("balanced", "'balanced' needs the class counts, which are private"),
    ({2: 1.0}, "whose keys are among the classes"),
    ({0: -1.0}, "positive finite weights"),
    ([1.0, 2.0], "None or a dict"),
])
def test_bad_class_weights_are_refused_by_name(value, expected):
    X, y = _imbalanced(n=300)
    with pytest.raises(ValueError, match="The 'class_weight' parameter of NoisySGDClassifier") as err:
        noisysgd.NoisySGDClassifier(classes=[0, 1], class_weight=value).fit(X, y)
    assert expected in str(err.value)


def test_the_torch_backend_refuses_a_weighted_loss():
    pytest.importorskip("torch")
    from noisysgd.train.torch_backend import derivative_for

    with pytest.raises(ValueError, match="for the torch backend"):
        derivative_for(ClassWeighted(BinaryLogistic(), [0.5, 1.0]))


def test_the_tuner_refuses_class_weights():
    X, y = _imbalanced(n=300)
    cv = noisysgd.NoisySGDClassifierCV({"alpha": [0.01, 0.1]},
                                       estimator=noisysgd.NoisySGDClassifier(classes=[0, 1], class_weight={1: 2.0}),
                                       epsilon=1.0, random_state=0)
    with pytest.raises(ValueError, match="class_weight must be None for tuning"):
        cv.fit(X, y)


@settings(max_examples=60, deadline=None)
@given(truth=st.lists(st.integers(0, 3), min_size=2, max_size=40), seed=st.integers(0, 2**31 - 1))
def test_balanced_accuracy_is_scikit_learns(truth, seed):
    """The diagnostics' balanced accuracy (train/predict metrics, the near-chance warning) equals
    scikit-learn's, and a constant prediction is always near chance."""
    from sklearn.metrics import balanced_accuracy_score

    from noisysgd.train.diagnostics import balanced_accuracy, near_chance

    truth = np.array(truth)
    pred = np.random.default_rng(seed).integers(0, 4, size=truth.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn warns about classes predicted but absent
        assert balanced_accuracy(truth, pred) == pytest.approx(balanced_accuracy_score(truth, pred), abs=1e-12)
    if np.unique(truth).size > 1:
        found = near_chance(truth, np.full(truth.size, truth[0]))
        assert found is not None and found["balanced"] == pytest.approx(1.0 / np.unique(truth).size)
        assert found["share"] == 1.0 and found["label"] == truth[0]


@settings(max_examples=200, deadline=None)
@given(n_major=st.integers(1, 400), n_minor=st.integers(1, 60), found_major=st.floats(0, 1), found_minor=st.floats(0, 1))
def test_near_chance_is_said_within_two_points_of_the_majority(n_major, n_minor, found_major, found_minor):
    """Issue 27's target: a model within 2 points of the majority class's accuracy (within a
    fifth of its error rate where that is smaller) or within 5 points of chance in balanced
    accuracy is said to be near chance; a model clear of both is not."""
    from noisysgd.train.diagnostics import near_chance

    truth = np.array([0] * n_major + [1] * n_minor)
    right_major, right_minor = round(found_major * n_major), round(found_minor * n_minor)
    pred = np.array([0] * right_major + [1] * (n_major - right_major) + [1] * right_minor + [0] * (n_minor - right_minor))
    accuracy = (right_major + right_minor) / truth.size
    majority = max(n_major, n_minor) / truth.size
    balanced = (right_major / n_major + right_minor / n_minor) / 2
    expected = balanced <= 0.55 + 1e-12 or accuracy <= majority + min(0.02, (1 - majority) / 5) + 1e-12
    found = near_chance(truth, pred)
    if abs(balanced - 0.55) > 1e-9 and abs(accuracy - majority - min(0.02, (1 - majority) / 5)) > 1e-9:
        assert (found is not None) == expected  # (away from the two boundaries' rounding)
    if found is not None:
        assert found["accuracy"] == pytest.approx(accuracy) and found["majority"] == pytest.approx(majority)


@pytest.mark.slow
def test_train_cli_class_weight(tmp_path, capsys):
    """--class-weight 1=5 on a 5 %-positive table: recorded (normalized) in the certificate, the
    model file predicts as the base loss does, and bad flags are one line each."""
    import json

    from noisysgd.cli import main as cli_main

    X, y = _imbalanced()
    data = tmp_path / "imb.csv"
    np.savetxt(data, np.column_stack([X, y]), delimiter=",", comments="",
               header=",".join([f"f{i}" for i in range(10)] + ["y"]))
    out = tmp_path / "m"
    assert cli_main(["train", str(data), "--target", "y", "--classes", "0,1", "--seed", "0", "--epsilon", "3",
                     "--out", str(out), "--class-weight", "1=5", "--quiet"]) == 0
    capsys.readouterr()
    cert = json.loads((out / "certificate.json").read_text())
    assert cert["class_weight"]["weights"] == {"0.0": 0.2, "1.0": 1.0}
    assert json.loads((out / "model.json").read_text())["loss_spec"] == {"name": "logistic"}
    assert json.loads((out / "metrics.json").read_text())["not_private"]["train_balanced_accuracy"] > 0.6
    for flag, message in (("2=5", "--class-weight must name classes among [0.0, 1.0]. Found 2.0."),
                          ("1=-5", "--class-weight must be LABEL=WEIGHT,... with positive weights"),
                          ("1", "--class-weight must be LABEL=WEIGHT")):
        assert cli_main(["train", str(data), "--target", "y", "--classes", "0,1", "--out", str(tmp_path / "x"),
                         "--class-weight", flag]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 40), st.floats(-6, 6), st.integers(0, 10**6))
def test_dominant_columns_is_a_property_of_relative_scales(d, log_scale, seed):
    # a statistic of the rows' squared norms: the same for the table in any unit, none for columns
    # of one scale, and the blown-up column found when one column is 10^4 times the others
    from noisysgd.train.diagnostics import dominant_columns

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(200, d))
    assert dominant_columns(X) is None
    j = int(rng.integers(d))
    Y = X.copy()
    Y[:, j] *= 1e4
    found = dominant_columns(Y)
    assert found is not None and found["columns"] == [j] and found["share"] >= 0.99
    scaled = dominant_columns(Y * 10.0 ** log_scale)
    assert scaled["columns"] == found["columns"] and scaled["share"] == pytest.approx(found["share"], rel=1e-9)
