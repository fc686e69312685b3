"""`noisysgd.load_model` and `noisysgd predict`: a released model predicts exactly as the trainer did."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_iris

from noisysgd import load_model
from noisysgd.cli import main
from noisysgd.model import model_document
from noisysgd.train import BinaryLogistic, Huber, OneVsRestLogistic, Softmax, Squared


def _write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


@pytest.fixture(scope="module")
def iris_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("iris")
    X, y = load_iris(return_X_y=True)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    names = ["sl", "sw", "pl", "pw"]
    _write_csv(d / "train.csv", names + ["label"], [list(x) + [lab] for x, lab in zip(X, labels)])
    # the same features, columns in another order and without the label
    _write_csv(d / "shuffled.csv", names[::-1], [list(x[::-1]) for x in X])
    return d, X, labels


def _read_predictions(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


@pytest.fixture(scope="module")
def trained(iris_files):
    d, X, labels = iris_files
    out = d / "model"
    assert main(["train", str(d / "train.csv"), "--target", "label", "--feature-clip", "8", "--epsilon", "50",
                 "--epochs", "20", "--batch-size", "30", "--batching", "cyclic", "--alpha", "0.01",
                 "--seed", "3", "--out", str(out), "--quiet"]) == 0
    return out


def test_load_model_predicts_as_the_trainer(trained, iris_files):
    """The loaded model reproduces the training accuracy that `train` computed with the engine itself."""
    _, X, labels = iris_files
    model = load_model(trained)
    metrics = json.loads((trained / "metrics.json").read_text())
    assert model.task == "classification" and model.classes == ["setosa", "versicolor", "virginica"]
    # centered by default (--center auto): rows clipped to 8, minus the private mean, clipped to R_c
    assert model.n_features == 4 and model.center is not None and model.center[1] == 8.0
    assert 0 < model.feature_clip < 8.0
    assert model.certificate is not None and "certificate" in model.certificate
    acc = float(np.mean(model.predict(X) == labels))
    assert acc == pytest.approx(metrics["not_private"]["train_accuracy"], abs=0)
    P = model.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    assert (np.asarray(model.classes, dtype=object)[P.argmax(axis=1)] == model.predict(X)).all()
    assert repr(model).startswith("LinearModel(task='classification', loss=Softmax(n_classes=3)")
    # the model file alone works too (its certificate is read from beside it)
    assert load_model(trained / "model.json").certificate == model.certificate


def test_predict_cli_matches_columns_by_name(trained, iris_files, tmp_path, capsys):
    d, X, labels = iris_files
    out1, out2 = tmp_path / "p1.csv", tmp_path / "p2.csv"
    assert main(["predict", str(trained), str(d / "train.csv"), "--target", "label", "--proba",
                 "--out", str(out1)]) == 0
    text = capsys.readouterr().out
    header, rows = _read_predictions(out1)
    assert header == ["prediction", "p_setosa", "p_versicolor", "p_virginica"] and len(rows) == 150
    model = load_model(trained)
    assert [r[0] for r in rows] == list(model.predict(X))
    np.testing.assert_allclose(np.array([r[1:] for r in rows], dtype=float), model.predict_proba(X), rtol=1e-15)
    acc = float(np.mean(model.predict(X) == labels))
    assert f"accuracy on {d / 'train.csv'} = {acc:.4f}" in text and "not covered by the certificate" in text
    # another column order, no label column: the same predictions
    assert main(["predict", str(trained), str(d / "shuffled.csv"), "--out", str(out2)]) == 0
    assert [r[0] for r in _read_predictions(out2)[1]] == [r[0] for r in rows]
    # a text label column the model does not use is ignored without --target
    assert main(["predict", str(trained), str(d / "train.csv"), "--out", str(out2)]) == 0
    assert [r[0] for r in _read_predictions(out2)[1]] == [r[0] for r in rows]


def test_predict_cli_json(trained, iris_files, tmp_path, capsys):
    d, X, labels = iris_files
    assert main(["predict", str(trained), str(d / "train.csv"), "--target", "label", "--json",
                 "--out", str(tmp_path / "p.csv")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == 150
    assert summary["accuracy"] == pytest.approx(float(np.mean(load_model(trained).predict(X) == labels)))


@pytest.mark.parametrize("argv_tail, message", [
    (["nothere.csv"], "no such file"),
    (["{d}/train.csv", "--target", "sl"], "must not be one of the model's features"),
    (["{d}/train.csv", "--proba", "--target", "nope"], "target must be a column"),
])
def test_predict_cli_errors_are_one_line(trained, iris_files, tmp_path, capsys, argv_tail, message):
    d, _, _ = iris_files
    out = tmp_path / "p.csv"
    argv = ["predict", str(trained)] + [a.format(d=d) for a in argv_tail] + ["--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()  # nothing half-written


def test_predict_cli_missing_feature_column(trained, tmp_path, capsys):
    _write_csv(tmp_path / "bad.csv", ["sl", "sw", "pl"], [[1, 2, 3]])
    assert main(["predict", str(trained), str(tmp_path / "bad.csv"), "--out", str(tmp_path / "p.csv")]) == 2
    assert "data must have the feature columns 'pw'. Found bad.csv without them." in capsys.readouterr().err


@pytest.mark.parametrize("loss, coef", [
    (BinaryLogistic(), np.array([1.0, -2.0, 0.25])),
    (Softmax(3), np.arange(9.0).reshape(3, 3) - 4),
    (OneVsRestLogistic(3), np.arange(9.0).reshape(3, 3) / 7 - 0.5),
    (Huber(0.5), np.array([0.5, 1.5, -1.0])),
    (Squared(), np.array([2.0, -1.0, 0.5])),
])
def test_round_trip_every_loss(tmp_path, loss, coef):
    """model_document → JSON → load_model predicts what the loss predicts on the clipped, augmented features."""
    from noisysgd.train.losses import augment

    task = "regression" if isinstance(loss, (Huber, Squared)) else "classification"
    k = 2 if coef.ndim == 1 else coef.shape[1]
    classes = None if task == "regression" else [f"c{i}" for i in range(k)]
    doc = model_document(task=task, loss=loss, target="y", feature_names=["a", "b"], classes=classes,
                         feature_clip=2.0, coef=coef, version="test")
    (tmp_path / "model.json").write_text(json.dumps(doc))
    m = load_model(tmp_path)
    assert m.certificate is None and repr(m.loss) == repr(loss)
    X = np.random.default_rng(0).normal(scale=3, size=(50, 2))
    raw = loss.predict(coef, augment(X, 2.0))
    if task == "regression":
        np.testing.assert_array_equal(m.predict(X), raw)
    else:
        idx = (raw > 0).astype(int) if k == 2 else raw
        assert list(m.predict(X)) == [classes[i] for i in idx]
    # a file written before loss_spec existed: the loss is read from its repr
    del doc["loss_spec"]
    (tmp_path / "model.json").write_text(json.dumps(doc))
    assert repr(load_model(tmp_path).loss) == repr(loss)


def test_load_model_errors(tmp_path):
    with pytest.raises(ValueError, match="no model.json"):
        load_model(tmp_path)
    (tmp_path / "model.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a JSON model file"):
        load_model(tmp_path)
    (tmp_path / "model.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="noisysgd-linear-model/4 file .*linear-model/1 or .*linear-model/2 or .*linear-model/3"):
        load_model(tmp_path)
    doc = model_document(task="classification", loss=BinaryLogistic(), target="y", feature_names=["a"],
                         classes=["n", "y"], feature_clip=1.0, coef=np.array([1.0, 0.0]), version="t")
    (tmp_path / "model.json").write_text(json.dumps(doc))
    m = load_model(tmp_path)
    with pytest.raises(ValueError, match="X must have 1 feature columns"):
        m.predict(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="X must hold finite numbers"):
        m.predict(np.array([[np.nan]]))


@pytest.mark.slow
def test_train_cli_auto_configuration_is_the_estimators(iris_files, tmp_path):
    """With no schedule flags, `noisysgd train` trains the run NoisySGDClassifier() trains by default."""
    from noisysgd import NoisySGDClassifier

    d, X, labels = iris_files
    out = tmp_path / "auto"
    assert main(["train", str(d / "train.csv"), "--target", "label", "--feature-clip", "8", "--epsilon", "2",
                 "--seed", "5", "--out", str(out), "--quiet"]) == 0
    cert = json.loads((out / "certificate.json").read_text())
    est = NoisySGDClassifier(epsilon=2, feature_clip=8, random_state=5).fit(X, labels)
    assert cert["config"]["auto"] == ["batching", "batch_size", "epochs", "alpha"]
    assert cert["config"]["chosen"] == est.privacy_report_["config"]["chosen"]
    assert cert["run"] == est.privacy_report_["run"]
    np.testing.assert_allclose(load_model(out).coef, est.fit_.result.coef, rtol=1e-12, atol=1e-12)
    # an explicit flag is kept and the rest is chosen around it
    out2 = tmp_path / "fixed"
    assert main(["train", str(d / "train.csv"), "--target", "label", "--feature-clip", "8", "--epsilon", "2",
                 "--seed", "5", "--epochs", "7", "--out", str(out2), "--quiet"]) == 0
    cert2 = json.loads((out2 / "certificate.json").read_text())
    assert cert2["config"]["auto"] == ["batching", "batch_size", "alpha"] and cert2["run"]["steps"] % 7 == 0


@pytest.mark.slow
def test_train_cli_holdout(iris_files, tmp_path, capsys):
    """The held-out rows are not trained on (the certificate's n is the rest) and the reported
    hold-out accuracy is the released model's accuracy on exactly those rows."""
    import argparse

    from noisysgd.cli.train import _split_holdout

    d, X, labels = iris_files
    out = tmp_path / "h"
    assert main(["train", str(d / "train.csv"), "--target", "label", "--feature-clip", "8", "--epsilon", "20",
                 "--seed", "11", "--holdout", "0.2", "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    cert = json.loads((out / "certificate.json").read_text())
    assert metrics["holdout"]["rows"] == 30 and cert["run"]["n"] == 120 and metrics["n"] == 120
    train_rows, held = _split_holdout(argparse.Namespace(holdout=0.2, seed=11, secure_mode=False), 150)
    assert np.intersect1d(train_rows, held).size == 0 and train_rows.size + held.size == 150
    model = load_model(out)
    acc = float(np.mean(model.predict(X[held]) == labels[held]))
    assert metrics["holdout"]["accuracy"] == pytest.approx(acc, abs=0)
    assert metrics["not_private"]["train_accuracy"] == pytest.approx(
        float(np.mean(model.predict(X[train_rows]) == labels[train_rows])), abs=0)
    assert f"hold-out accuracy = {acc:.4f}, balanced accuracy = {metrics['holdout']['balanced_accuracy']:.4f} (30 rows" in text


@pytest.mark.parametrize("flags, message", [
    (["--holdout", "1.5"], "--holdout must be a fraction in (0, 1). Found 1.5"),
    (["--holdout", "0.001"], "leaves 0 held-out"),
    (["--epochs", "many"], "a whole number or 'auto' was expected. Found 'many'"),
    (["--alpha", "-1"], "--alpha: l2 must be a non-negative finite number. Found -1.0"),
    (["--intercept-scaling", "0"], "--intercept-scaling: intercept_scaling must be a positive finite number. "
                                   "Found 0.0"),
])
def test_train_cli_new_flags_refuse_bad_values(iris_files, tmp_path, capsys, flags, message):
    d, _, _ = iris_files
    out = tmp_path / "x"
    assert main(["train", str(d / "train.csv"), "--target", "label", "--out", str(out), "--quiet", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("frange", ["private", pytest.param("0,8", marks=pytest.mark.slow)])
def test_train_cli_feature_range_is_saved_and_applied_by_the_model(iris_files, tmp_path, frange):
    """--feature-range: the ranges travel in model.json, load_model scales new rows with them (its
    accuracy on the training rows is the trainer's), and a private range's cost is in the certificate."""
    d, X, labels = iris_files
    out = tmp_path / "fr"
    assert main(["train", str(d / "train.csv"), "--target", "label", "--feature-range", frange, "--epsilon", "20",
                 "--seed", "2", "--center", "none", "--quiet", "--out", str(out)]) == 0
    doc = json.loads((out / "model.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    cert = json.loads((out / "certificate.json").read_text())
    assert doc["feature_range"]["kind"] == ("private" if frange == "private" else "public")
    model = load_model(out)
    assert float(np.mean(model.predict(X) == labels)) == metrics["not_private"]["train_accuracy"]
    if frange == "private":
        pre = cert["preprocessing"]  # the ranges, and the curvature query of the composition regime's step
        ranges = next(q for q in pre.get("parts", [pre]) if "feature_range" in q)
        assert ranges["epsilon"] == pytest.approx(2.0) and pre["epsilon"] >= 2.0
        # composed tighter than basic composition, and the training calibrated to the composed total
        assert metrics["epsilon"] <= 20.0 < metrics["epsilon_training"] + pre["epsilon"]
        assert cert["epsilon_total_basic"] == pytest.approx(metrics["epsilon_training"] + pre["epsilon"])
        assert metrics["epsilon"] == pytest.approx(20.0, rel=1e-3) and metrics["epsilon_training"] > 18.0
        assert "private feature ranges" in cert["certificate"]["guarantee"]
    else:
        np.testing.assert_array_equal(doc["feature_range"]["high"], [8.0] * 4)


@pytest.mark.parametrize("flags, message", [
    (["--feature-range", "3"], "--feature-range must be LOW,HIGH (two numbers), 'private', 'auto' or 'none'. Found '3'"),
    (["--feature-range", "5,1"], "--feature-range must have finite LOW < HIGH"),
    (["--feature-range", "private", "--noise-multiplier", "3"], "cannot be combined with --noise-multiplier"),
])
def test_train_cli_feature_range_errors(iris_files, tmp_path, capsys, flags, message):
    d, _, _ = iris_files
    assert main(["train", str(d / "train.csv"), "--target", "label", "--quiet", "--out", str(tmp_path / "x"),
                 *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("loss, coef", [
    (BinaryLogistic(), np.array([1.0, -2.0, 0.25])),
    (Softmax(3), np.arange(9.0).reshape(3, 3) - 4),
    (Huber(0.5), np.array([0.5, 1.5, -1.0])),
])
def test_intercept_scaling_round_trip(tmp_path, loss, coef):
    """With a bias coordinate s, the score is clip(x)·coef[:-1] + s·coef[-1], in the file and back;
    a format-1 file (no intercept_scaling) is read with s = 1."""
    task = "regression" if isinstance(loss, Huber) else "classification"
    k = 2 if coef.ndim == 1 else coef.shape[1]
    classes = None if task == "regression" else [f"c{i}" for i in range(k)]
    doc = model_document(task=task, loss=loss, target="y", feature_names=["a", "b"], classes=classes,
                         feature_clip=2.0, coef=coef, version="test", intercept_scaling=0.3)
    assert doc["format"] == "noisysgd-linear-model/4" and doc["intercept_scaling"] == 0.3
    (tmp_path / "model.json").write_text(json.dumps(doc))
    m = load_model(tmp_path)
    X = np.random.default_rng(1).normal(scale=3, size=(40, 2))
    norms = np.linalg.norm(X, axis=1)
    clipped = X * np.minimum(1.0, 2.0 / norms)[:, None]
    np.testing.assert_allclose(m.decision_function(X), clipped @ coef[:-1] + 0.3 * coef[-1], rtol=1e-13,
                               atol=1e-13)
    old = {**doc, "format": "noisysgd-linear-model/1"}
    del old["intercept_scaling"]
    (tmp_path / "model.json").write_text(json.dumps(old))
    np.testing.assert_allclose(load_model(tmp_path).decision_function(X), clipped @ coef[:-1] + coef[-1],
                               rtol=1e-13, atol=1e-13)
    (tmp_path / "model.json").write_text(json.dumps({**old, "format": "noisysgd-linear-model/2",
                                                     "intercept_scaling": 0.3}))
    np.testing.assert_allclose(load_model(tmp_path).decision_function(X), clipped @ coef[:-1] + 0.3 * coef[-1],
                               rtol=1e-13, atol=1e-13)
    (tmp_path / "model.json").write_text(json.dumps({**doc, "intercept_scaling": -1}))
    with pytest.raises(ValueError, match="invalid intercept_scaling -1.0"):
        load_model(tmp_path)


@pytest.mark.parametrize("frange", [None, (np.array([-4.0, 0.0]), np.array([4.0, 10.0]))])
def test_center_round_trip(tmp_path, frange):
    """A centered model scores clip_R(clip_R0(x) - mean)·coef[:-1] + s·coef[-1] (after the public
    scaling, into the R0-ball, when there is one), in the file and back."""
    coef = np.array([1.0, -2.0, 0.25])
    mean = np.array([0.3, -0.1])
    doc = model_document(task="classification", loss=BinaryLogistic(), target="y", feature_names=["a", "b"],
                         classes=["n", "y"], feature_clip=0.4, coef=coef, version="test", intercept_scaling=0.1,
                         center=mean, center_clip=2.0, feature_range=frange, feature_range_kind="public")
    assert doc["center"] == {"mean": [0.3, -0.1], "clip": 2.0} and "center.mean" in doc["predict"]
    (tmp_path / "model.json").write_text(json.dumps(doc))
    m = load_model(tmp_path)
    X = np.random.default_rng(2).normal(scale=3, size=(40, 2))

    def clip(Z, r):
        return Z * np.minimum(1.0, r / np.linalg.norm(Z, axis=1))[:, None]

    Z = X
    if frange is not None:
        low, high = frange
        Z = (2 * np.clip(X, low, high) - (low + high)) / (high - low) * (2.0 / (0.5 * np.sqrt(3)))  # spread ½ (scale_to_ball)
    Z = clip(clip(Z, 2.0) - mean, 0.4)
    np.testing.assert_allclose(m.decision_function(X), Z @ coef[:-1] + 0.1 * coef[-1], rtol=1e-13, atol=1e-13)
    (tmp_path / "model.json").write_text(json.dumps({**doc, "center": {"mean": [0.3], "clip": 2.0}}))
    with pytest.raises(ValueError, match="has a center that does not fit its 2 features"):
        load_model(tmp_path)


@pytest.mark.slow
def test_train_cli_intercept_scaling_default_and_model(iris_files, tmp_path):
    """`noisysgd train` uses the estimator's default bias coordinate R/4 (classification), records it in the
    certificate and the model file, and the loaded model reproduces the estimator's scores."""
    from noisysgd import NoisySGDClassifier

    d, X, labels = iris_files
    out = tmp_path / "s"
    assert main(["train", str(d / "train.csv"), "--target", "label", "--feature-clip", "8", "--epsilon", "2",
                 "--seed", "5", "--center", "none", "--out", str(out), "--quiet"]) == 0
    cert = json.loads((out / "certificate.json").read_text())
    model = load_model(out)
    assert model.intercept_scaling == 2.0 and model.center is None
    assert cert["certificate"]["trainer_enforced"]["intercept_scaling"] == 2.0
    est = NoisySGDClassifier(epsilon=2, feature_clip=8, center=None, random_state=5).fit(X, labels)
    assert est.intercept_scaling_ == 2.0
    np.testing.assert_allclose(model.decision_function(X), est.decision_function(X), rtol=1e-10, atol=1e-10)


@pytest.mark.slow
def test_train_cli_centers_as_the_estimator_does(iris_files, tmp_path):
    """The default --center auto is the estimator's center="auto": the same private mean (same seed, same
    stream), the same R_c and s = R_c/4, the same certificate total; the model file carries the mean."""
    from noisysgd import NoisySGDClassifier

    d, X, labels = iris_files
    out = tmp_path / "c"
    assert main(["train", str(d / "train.csv"), "--target", "label", "--feature-clip", "8", "--epsilon", "2",
                 "--seed", "5", "--out", str(out), "--quiet"]) == 0
    cert = json.loads((out / "certificate.json").read_text())
    model = load_model(out)
    est = NoisySGDClassifier(epsilon=2, feature_clip=8, random_state=5).fit(X, labels)
    assert est.center_ is not None and model.center is not None
    np.testing.assert_allclose(model.center[0], est.center_, rtol=1e-13)
    assert model.center[1] == 8.0 and model.feature_clip == pytest.approx(est.feature_clip_, rel=1e-13)
    assert model.intercept_scaling == pytest.approx(est.feature_clip_ / 4)
    assert cert["preprocessing"]["center"] == "private" and "centering" in cert["certificate"]["guarantee"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epsilon"] == pytest.approx(est.epsilon_, rel=1e-12) and metrics["epsilon"] <= 2.0
    np.testing.assert_allclose(model.decision_function(X), est.decision_function(X), rtol=1e-10, atol=1e-10)
    # refused where it cannot be paid for
    assert main(["train", str(d / "train.csv"), "--target", "label", "--noise-multiplier", "3", "--center",
                 "private", "--out", str(tmp_path / "n"), "--quiet"]) == 2


def test_feature_range_spread_round_trip(tmp_path):
    """A model file records scale_to_ball's spread (format /4) and predicts with it: the score of x is
    clip_R((2·clip(x, low, high) − low − high)/(high − low) · R/(spread·√(d + 1)))·coef[:-1] + coef[-1],
    computed here by hand; a format-/3 file (no spread) is read with spread 1, as it was written."""
    from noisysgd.preprocessing import SPREAD

    low, high = np.array([0.0, -5.0, 10.0]), np.array([16.0, 5.0, 1000.0])
    coef = np.array([0.7, -1.2, 0.4, 0.1])
    doc = model_document(task="classification", loss=BinaryLogistic(), target="y", feature_names=["a", "b", "c"],
                         classes=["n", "y"], feature_clip=2.0, coef=coef, version="t", feature_range=(low, high),
                         feature_range_kind="public")
    assert doc["format"] == "noisysgd-linear-model/4" and doc["feature_range"]["spread"] == SPREAD == 0.5
    X = np.random.default_rng(4).uniform(-20, 1200, size=(50, 3))

    def by_hand(spread):
        Z = (2 * np.clip(X, low, high) - low - high) / (high - low) * 2.0 / (spread * np.sqrt(4))
        Z = Z * np.minimum(1.0, 2.0 / np.linalg.norm(Z, axis=1))[:, None]
        return Z @ coef[:-1] + coef[-1]

    (tmp_path / "model.json").write_text(json.dumps(doc))
    np.testing.assert_allclose(load_model(tmp_path).decision_function(X), by_hand(0.5), rtol=1e-12, atol=1e-12)
    old = {**doc, "format": "noisysgd-linear-model/3", "feature_range": {k: v for k, v in doc["feature_range"].items()
                                                                         if k != "spread"}}
    (tmp_path / "model.json").write_text(json.dumps(old))
    np.testing.assert_allclose(load_model(tmp_path).decision_function(X), by_hand(1.0), rtol=1e-12, atol=1e-12)
    assert not np.allclose(by_hand(1.0), by_hand(0.5))  # the test tells the two apart
    for bad in (0, 1.5, "half", True):
        (tmp_path / "model.json").write_text(json.dumps({**doc, "feature_range": {**doc["feature_range"],
                                                                                   "spread": bad}}))
        with pytest.raises(ValueError, match="spread"):
            load_model(tmp_path)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(3, 300), d=st.integers(1, 9), fraction=st.floats(0.01, 0.9), seed=st.integers(0, 2**16),
       block=st.sampled_from([1, 2, 7, 64]))
def test_holdout_moves_the_training_rows_in_place(n, d, fraction, seed, block):
    """--holdout on the reader's own writable X: the training rows, in their order, are a view of
    X's first rows (no copy of them: issue 28 §4), the held-out rows a copy, both exactly the rows
    the split names, whatever the block size of the moves; a read-only X is copied and left as it was."""
    import argparse

    import noisysgd.train.rows as rows_module
    from noisysgd.cli.train import _split_holdout, _take_holdout

    k = int(round(fraction * n))
    if k < 1 or n - k < 2:
        return
    rng = np.random.default_rng(seed)
    X0 = rng.normal(size=(n, d))
    y0 = rng.integers(0, 3, size=n)
    train_rows, held = _split_holdout(argparse.Namespace(holdout=fraction, seed=seed, secure_mode=False), n)
    original = rows_module.block_rows
    rows_module.block_rows = lambda _d: block
    try:
        X = X0.copy()
        Xt, yt, (Xh, yh) = _take_holdout(X, y0, train_rows, held)
    finally:
        rows_module.block_rows = original
    np.testing.assert_array_equal(Xt, X0[train_rows])
    np.testing.assert_array_equal(yt, y0[train_rows])
    np.testing.assert_array_equal(Xh, X0[held])
    np.testing.assert_array_equal(yh, y0[held])
    assert np.shares_memory(Xt, X) and Xt.base is X and not np.shares_memory(Xh, X)
    frozen = X0.copy()
    frozen.setflags(write=False)
    Xt, yt, (Xh, yh) = _take_holdout(frozen, y0, train_rows, held)
    np.testing.assert_array_equal(Xt, X0[train_rows])
    np.testing.assert_array_equal(frozen, X0)
    assert not np.shares_memory(Xt, frozen)


# ------------------------------------------------------------------ what predict loads

#: modules that `noisysgd predict` must not import: the accountant and its analyses, the trainer,
#: the estimators' preprocessing (scikit-learn), scipy's optimisers, torch, dp_accounting
NOT_FOR_PREDICT = ("noisysgd.accountant", "noisysgd.analyses", "noisysgd.rdp", "noisysgd.gdp", "noisysgd.pld",
                   "noisysgd.planning", "noisysgd.train", "noisysgd.preprocessing", "noisysgd.estimators",
                   "scipy.optimize", "scipy.stats", "torch", "dp_accounting", "sklearn", "matplotlib", "tqdm")


def _modules_after_cli(argv: list[str]) -> tuple[int, list[str]]:
    """(exit status, sorted(sys.modules) at exit) of ``python -m noisysgd *argv`` in a fresh interpreter."""
    import subprocess
    import sys

    probe = ("import atexit, json, runpy, sys\n"
             "atexit.register(lambda: print('\\nMODULES ' + json.dumps(sorted(sys.modules))))\n"
             f"sys.argv = ['noisysgd', *{argv!r}]\n"
             "runpy.run_module('noisysgd', run_name='__main__', alter_sys=True)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("MODULES ")]
    assert line, (done.stdout, done.stderr)
    return done.returncode, json.loads(line[-1][len("MODULES "):])


def _modules_of(code: str) -> list[str]:
    """sorted(sys.modules) after ``code``, in a fresh interpreter."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code + "\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def _forbidden(modules: list[str], names=NOT_FOR_PREDICT) -> list[str]:
    return [m for m in modules if any(m == f or m.startswith(f + ".") for f in names)]


def test_predict_loads_no_accountant_trainer_or_scipy(trained, iris_files, tmp_path):
    """`noisysgd predict` reads the model file and the data and scores them with numpy alone: before,
    it imported the trainer, and with it the accountant, scipy.stats and scipy.optimize (2-3 s)."""
    d, _, _ = iris_files
    status, modules = _modules_after_cli(["predict", str(trained), str(d / "shuffled.csv"),
                                          "--out", str(tmp_path / "p.csv")])
    assert status == 0 and (tmp_path / "p.csv").exists()
    assert "noisysgd.model" in modules and "numpy" in modules  # the probe saw the command run
    assert not _forbidden(modules, NOT_FOR_PREDICT + ("scipy",)), _forbidden(modules, NOT_FOR_PREDICT + ("scipy",))
    # nor what writing atomically once took (tempfile and random, ~1.5 ms of its start), nor pathlib
    # (with urllib.parse and ipaddress) or shutil (which argparse's formatter imports for the terminal's
    # width; with bz2 and lzma: ~5 ms together), where this interpreter's argparse, csv, json, dataclasses
    # and numpy do not bring them anyway, nor the other commands' modules (their parsers are not built)
    extra = ("tempfile", "random", "noisysgd.cli.train", "noisysgd.cli.epsilon", "noisysgd.cli.plan")
    assert not _forbidden(modules, extra), _forbidden(modules, extra)
    stdlib = _modules_of("import argparse, csv, json, dataclasses, numpy\n"
                         "argparse.ArgumentParser(formatter_class=lambda prog: argparse.HelpFormatter(prog, width=78))"
                         ".add_argument('-x')")
    avoidable = [m for m in ("pathlib", "shutil") if m not in stdlib]
    assert not _forbidden(modules, avoidable), _forbidden(modules, avoidable)
    # nor the csv module (~0.5 ms): a plain file is read by numpy's parser, and plain cells written as they are
    assert not _forbidden(modules, ("csv", "_csv")), _forbidden(modules, ("csv", "_csv"))
    # scoring against a label column, with class probabilities (scipy.special's expit and softmax)
    status, modules = _modules_after_cli(["predict", str(trained), str(d / "train.csv"), "--target", "label",
                                          "--proba", "--json", "--out", str(tmp_path / "q.csv")])
    assert status == 0 and not _forbidden(modules), _forbidden(modules)


def test_prediction_maps_are_the_trainers_to_the_last_bit():
    """The feature maps a loaded model applies without importing the trainer are the trainer's own
    (noisysgd.rowmaps), and its X̄ equals train.augment bit for bit, huge rows (whose squares
    overflow) and zero rows included; what it does not handle gets the trainer's answer."""
    import noisysgd.model as model
    from noisysgd import preprocessing
    from noisysgd.train import augment
    from noisysgd.train import rows

    assert model.scale_to_ball is preprocessing.scale_to_ball and model.center_rows is rows.center_rows
    rng = np.random.default_rng(7)
    X = rng.normal(scale=3, size=(500, 6)) * rng.choice([1e-3, 1.0, 1e3], size=(500, 1))
    X[0], X[1], X[2, :2] = 0.0, 1e200, [-1e300, 1e300]
    for clip, s in ((1.0, 1.0), (0.3, 0.075), (1e4, 2.0)):
        assert np.array_equal(model._augment(X, clip, s), augment(X, clip, intercept_scaling=s))
    with pytest.raises(ValueError, match="X must be finite"):
        model._augment(np.array([[np.inf, 0.0]]), 1.0, 1.0)


@pytest.mark.parametrize("spec", [
    {"name": "logistic"}, {"name": "softmax", "n_classes": 4}, {"name": "ovr", "n_classes": "3"},
    {"name": "huber", "delta": 0.25}, {"name": "squared"},
    {"name": "softmax", "n_classes": 1}, {"name": "ovr", "n_classes": True}, {"name": "softmax"},
    {"name": "ovr", "n_classes": "x"}, {"name": "huber", "delta": 0}, {"name": "huber", "delta": float("nan")},
    {"name": "huber", "delta": None}, {"name": "hinge"}, ["logistic"],
])
def test_a_loss_read_without_the_trainer_is_the_trainers(spec):
    """load_model defers building the trainer's loss; the loss it then builds, its repr, and every
    error on a bad loss_spec are those of building it at once."""
    from noisysgd.model import _deferred_loss, _loss_from_spec

    try:
        now = _loss_from_spec(spec, "'m.json'")
    except ValueError as exc:
        with pytest.raises(ValueError) as deferred:
            _deferred_loss(spec, "'m.json'")
        assert str(deferred.value) == str(exc)
        return
    later = _deferred_loss(spec, "'m.json'")
    assert repr(later) == repr(now) and repr(later.build()) == repr(now) and type(later.build()) is type(now)


def test_a_loaded_models_loss_is_the_trainers(trained, iris_files):
    d, X, _ = iris_files
    model = load_model(trained)
    assert "Softmax" in repr(model) and isinstance(model.loss, Softmax)  # built on first read
    assert model.loss is model.loss and isinstance(model.loss, Softmax)
    np.testing.assert_array_equal(model.decision_function(X), model.loss.scores(model.coef, model._features(X)))


#: CSV cells: finite numbers as both parsers read them (the first 13), then what either refuses or
#: only float() reads
_CELLS = ["1", "-2.5", " 3 ", "\t4", "1e5", "1E-3", ".5", "5.", "+1", "0001", "-0", "4.9e-324",
          "0.1000000000000000055511151231257827",
          "nan", "inf", "-Infinity", "1e400", "1_000", "0x10", "abc", "", " ", "1 2", '"7"', '"8,9"', "\u0661", "\x1c1",
          "1\x0b", "1d5", "--1"]


@settings(max_examples=300, deadline=None)
@given(d=st.integers(1, 4), data=st.data(), breaks=st.sampled_from(["\n", "\r\n", "\n", "\r\n", "mixed", "\r"]),
       final=st.booleans())
def test_a_plain_csv_is_read_as_the_csv_module_reads_it(tmp_path_factory, d, data, breaks, final):
    """load_table without a target reads a plain CSV file with numpy's parser (noisysgd predict): the
    table is the csv module's, to the last bit, and a file it does not take is read by the csv path."""
    from noisysgd.io import _load_csv, _load_plain_csv

    header = [f"c{j}" if data.draw(st.booleans()) else f" c{j} " for j in range(d)]
    numbers = st.lists(st.sampled_from(_CELLS[:13]), min_size=d, max_size=d)
    blank = st.sampled_from([[""], [" "], ["", ""], [" ", "\t"]])
    if data.draw(st.booleans()):  # numbers and blank rows: mostly plain
        rows = data.draw(st.lists(st.one_of(numbers, numbers, numbers, blank), min_size=1, max_size=6))
    else:  # anything: a cell float() reads and numpy does not, a quote, a row of another width
        rows = data.draw(st.lists(st.one_of(
            numbers, blank, st.lists(st.sampled_from(_CELLS), min_size=d, max_size=d),
            st.lists(st.sampled_from(_CELLS[:13]), min_size=max(1, d - 1), max_size=d + 1)), max_size=6))
    lines = [",".join(header)] + [",".join(r) for r in rows]
    if breaks == "mixed":
        text = "".join(line + ("\n" if i % 2 else "\r\n") for i, line in enumerate(lines))
    else:
        text = breaks.join(lines) + (breaks if final else "")
    features = data.draw(st.one_of(st.none(), st.permutations([h.strip() for h in header]).map(lambda f: f[:2]),
                                   st.none(), st.just(["c0", "zz"])))
    path = tmp_path_factory.mktemp("plain") / "data.csv"
    path.write_bytes(text.encode("utf-8"))
    fast = _load_plain_csv(path, features)
    event("numpy's parser" if fast is not None else "the csv module")
    try:
        slow = _load_csv(path, None, features)
    except ValueError as exc:
        assert fast is None, (text, str(exc))
        return
    if fast is not None:
        assert fast.X.dtype == slow.X.dtype == np.float64 and fast.X.flags.c_contiguous
        assert fast.X.shape == slow.X.shape and np.array_equal(fast.X, slow.X), text
        assert (fast.y, fast.feature_names, fast.target, fast.path, fast.categorical, fast.input_columns) == (
            slow.y, slow.feature_names, slow.target, slow.path, slow.categorical, slow.input_columns)


def test_a_plain_csv_takes_the_fast_path(tmp_path):
    from noisysgd.io import _load_plain_csv, load_table

    path = tmp_path / "d.csv"
    _write_csv(path, ["a", "b", "label"], [[0.5, -1e-3, "yes"], [2, 3.25, "no"]])  # \r\n, a text column
    fast = _load_plain_csv(path, ["b", "a"])
    assert fast is not None and fast.X.tolist() == [[-1e-3, 0.5], [3.25, 2.0]]
    assert load_table(path, target=None, features=["b", "a"]).X.tolist() == fast.X.tolist()
    _write_csv(path, ["a", "b"], [["1_000", 2]])  # float() reads it, numpy does not: the csv path does
    assert _load_plain_csv(path, None) is None and load_table(path, target=None).X.tolist() == [[1000.0, 2.0]]
    # \n files: a blank first line (the header is the first row with a cell), blank rows
    for text, names, X in (("\n1\n2\n", ["1"], [[2.0]]), (" ,\na,b\n1,2\n", ["a", "b"], [[1.0, 2.0]]),
                           ("a\n1\n\n2\n", ["a"], [[1.0], [2.0]]),
                           ("a,b\n1,2\n,\n3,4", ["a", "b"], [[1.0, 2.0], [3.0, 4.0]])):
        path.write_bytes(text.encode())
        table, fast = load_table(path, target=None), _load_plain_csv(path, None)
        assert (table.feature_names, table.X.tolist()) == (names, X)
        assert fast is None or (fast.feature_names, fast.X.tolist()) == (names, X)
    path.write_bytes(b"a,b,c\n1,2,x\n3,4,y\n")  # a text column not read: the fast path
    fast = _load_plain_csv(path, ["b", "a"])
    assert fast is not None and fast.X.tolist() == [[2.0, 1.0], [4.0, 3.0]]


def test_a_plain_csv_beside_a_label_column_is_read_whole(tmp_path):
    """Where all but a tenth of the columns are features, the plain path parses every column (numpy's
    parser then checks every row's cells) and keeps the features: the csv module's table, and a row
    of another width or a text cell outside the features as before (None, or the counted path)."""
    from noisysgd.io import _load_csv, _load_plain_csv

    names = [f"f{j}" for j in range(10)]
    rng = np.random.default_rng(5)
    rows = [[repr(v) for v in rng.normal(size=10).tolist()] + [str(rng.integers(2))] for _ in range(30)]
    path = tmp_path / "d.csv"
    features = names[::-1]  # another order: the columns are picked after the parse
    for label, widths, expect_fast in (("label", False, True), ("label", True, False), ("text", False, True)):
        body = [r[:-1] + (["yes"] if label == "text" else r[-1:]) for r in rows]
        if widths:
            body[17] = body[17] + ["1"]  # a row with one cell more: the csv module refuses it
        _write_csv(path, names + ["label"], body)
        fast = _load_plain_csv(path, features)
        assert (fast is not None) == expect_fast
        if fast is None:
            with pytest.raises(ValueError, match="cells in every row"):
                _load_csv(path, None, features)
            continue
        slow = _load_csv(path, None, features)
        assert np.array_equal(fast.X, slow.X) and fast.X.flags.c_contiguous and fast.feature_names == features


def test_the_csv_field_limit_is_read_without_importing_csv():
    """io reads the csv module's field size limit only where a program imported it (only then can it
    have been changed); else it is _csv's own default."""
    import subprocess
    import sys

    from noisysgd import io

    fresh = subprocess.run([sys.executable, "-c", "import _csv; print(_csv.field_size_limit())"],
                           capture_output=True, text=True, check=True)
    assert int(fresh.stdout) == io._CSV_FIELD_LIMIT
    before = csv.field_size_limit(1000)
    try:
        assert io._csv_field_limit() == 1000
    finally:
        csv.field_size_limit(before)
    assert io._csv_field_limit() == csv.field_size_limit()


_PLAIN_CELLS = st.sampled_from(["1", "0", "-2.5", "1e-05", "nan", "inf", "setosa", "p_yes", "a b", " x ", "0.25"])
_WRITTEN = st.one_of(_PLAIN_CELLS, st.sampled_from(
    ["", ",", '"', "a,b", 'say "hi"', "x\ny", "x\rz", "é", "\t", "\x00", "\x7f"]),
    st.text(max_size=3), st.integers(-5, 5), st.floats(-10, 10), st.none())


@settings(max_examples=300, deadline=None)
@given(data=st.data(), k=st.integers(0, 3), n=st.integers(0, 5))
def test_predictions_are_written_as_the_csv_module_writes_them(data, k, n):
    """predict writes plain cells itself, keeping csv out of its start: the bytes of
    csv.writer(lineterminator="\\n"); what it does not take (quoting, empty cells, not text) it leaves
    to the csv module, and the predictions' own cells (numbers and plain labels) it takes."""
    import io

    from noisysgd.cli.predict import _plain_csv_text

    cells = data.draw(st.sampled_from([_PLAIN_CELLS, _WRITTEN]))  # plain cells only, or anything
    header = data.draw(st.lists(cells, min_size=k, max_size=k))
    columns = [data.draw(st.lists(cells, min_size=n, max_size=n)) for _ in range(k)]
    text = _plain_csv_text(header, columns)
    event("written as they are" if text is not None else "the csv module")
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(zip(*columns))
    assert text is None or text == buffer.getvalue()
    plain = _plain_csv_text(["prediction", "p_0.0", "p_1.0"], [["1", "0"], ["0.25", "0.5"], ["0.75", "0.5"]])
    assert plain == "prediction,p_0.0,p_1.0\n1,0.25,0.75\n0,0.5,0.5\n"


def test_create_exclusive_never_reuses_a_name(tmp_path, monkeypatch):
    """io.create_exclusive (what predict writes through instead of tempfile.mkstemp): a new file
    opened for writing (mode 0600) or a new directory, named prefix + random + suffix; a name that
    exists is never opened (O_EXCL), another is drawn; when none is free it says so."""
    import os
    import stat

    from noisysgd import io

    fd, path = io.create_exclusive(tmp_path, ".p.", ".csv")
    os.write(fd, b"x")
    os.close(fd)
    name = os.path.basename(path)
    assert name.startswith(".p.") and name.endswith(".csv") and len(name) == len(".p.") + 16 + len(".csv")
    if os.name == "posix":
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    d = io.create_exclusive(tmp_path, ".d.", directory=True)
    assert os.path.isdir(d) and os.listdir(d) == []
    taken = iter([bytes(8)] * 3 + [bytes([1] * 8)])  # the first name three times: it exists after the first
    monkeypatch.setattr(os, "urandom", lambda k: next(taken))
    fd1, first = io.create_exclusive(tmp_path, "f.")
    os.close(fd1)
    fd2, second = io.create_exclusive(tmp_path, "f.")
    os.close(fd2)
    assert first != second and os.path.basename(second) == "f." + "01" * 8
    monkeypatch.setattr(os, "urandom", lambda k: bytes(8))
    with pytest.raises(FileExistsError):
        io.create_exclusive(tmp_path, "f.")


@pytest.mark.parametrize("text", ["p.csv", "./p.csv", "a//b.csv", "a/./b.csv/", "/tmp/x/", "../up/x.csv", ".", "",
                                  "a/../b", "/", "./model/model.json"])
def test_plain_path_is_what_pathlib_makes_of_it(text):
    """noisysgd predict works on string paths (no pathlib in its start): io.plain_path spells a path
    as str(pathlib.Path(path)) does, from str, bytes or a path-like."""
    import pathlib

    from noisysgd.io import plain_path

    assert plain_path(text) == str(pathlib.Path(text))
    assert plain_path(text.encode()) == str(pathlib.Path(text)) == plain_path(pathlib.Path(text))


def test_predict_refuses_an_empty_out_and_writes_through_a_trailing_slash(trained, iris_files, tmp_path, capsys):
    """--out '' is refused before anything is read (it named the working directory's parent as the
    temporary's home); --out p.csv/ writes p.csv, as before; a data path with a trailing slash reads
    the file; the summary names the paths as given, without './'."""
    from noisysgd.cli import main

    d, _, _ = iris_files
    assert main(["predict", str(trained), str(d / "shuffled.csv"), "--out", ""]) == 2
    assert "out must be a file path. Found ''" in capsys.readouterr().err
    out = tmp_path / "p.csv"
    assert main(["predict", str(trained) + "/", str(d / "shuffled.csv") + "/", "--out", str(out) + "/", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert out.is_file() and summary["out"] == str(out) and not summary["model"].endswith("//model.json")
