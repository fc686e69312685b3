"""Declared classes (issue 24 §2): the labels are public, or a warning says they were not.

One row with a label nobody else has changes the model's output space (a new
column of coefficients): a privacy loss no certificate covers.  Like
diffprivlib, the classifiers take ``classes`` and warn with
``PrivacyLeakWarning`` when the labels are read off the data.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import noisysgd
from noisysgd.cli import main as cli_main
from noisysgd.train import PrivacyLeakWarning, encode_labels
from noisysgd.train.leaks import LABELS_DECLARED, LABELS_FROM_DATA


def _data(n=240, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) / 3.0
    y = np.where(X[:, 0] > 0, "yes", "no")
    return X, y


def _fit(**kw):
    X, y = kw.pop("data", _data())
    params = dict(epsilon=None, noise_multiplier=2.0, epochs=5, batch_size=40, batching="cyclic", alpha=0.01,
                  random_state=3)
    params.update(kw)
    return noisysgd.NoisySGDClassifier(**params).fit(X, y)


def test_labels_from_the_data_warn_and_say_so_in_the_certificate():
    with pytest.warns(PrivacyLeakWarning, match=r"classes not given: the 2 classes were taken from the data"):
        clf = _fit()
    assert clf.privacy_report_["classes"] == {"source": LABELS_FROM_DATA, "classes": ["no", "yes"]}


def test_declared_classes_give_the_same_model_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        declared = _fit(classes=["yes", "no"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        found = _fit()
    assert declared.classes_.tolist() == ["no", "yes"]       # sorted, as np.unique
    np.testing.assert_array_equal(declared.coef_, found.coef_)  # the same labels: the same run
    assert declared.privacy_report_["classes"]["source"] == LABELS_DECLARED


def test_a_declared_class_absent_from_the_data_keeps_its_output():
    """The output space is the declared one: a third class with no rows still gets a column,
    so a dataset with one more row of that class has a model of the same shape."""
    clf = _fit(classes=["maybe", "no", "yes"])
    assert clf.classes_.tolist() == ["maybe", "no", "yes"]
    assert clf.coef_.shape == (3, 3)
    assert set(clf.predict(_data()[0])) <= {"maybe", "no", "yes"}


@pytest.mark.parametrize("classes,needle", [
    (["no"], "at least two distinct labels"),
    (["no", "no", "yes"], "repeats a label"),
    ("no,yes", "must be a list"),
    (["yes", "maybe"], "y holds a label that classes does not declare: 'no' (row "),
])
def test_bad_classes_are_refused_with_the_argument_named(classes, needle):
    with pytest.raises(ValueError) as err:
        _fit(classes=classes)
    assert needle in str(err.value)


def test_encode_labels_numbers_and_rows():
    classes, enc, source = encode_labels(np.array([2.0, 0.0, 2.0]), [0, 1, 2])
    assert classes.tolist() == [0, 1, 2] and enc.tolist() == [2, 0, 2] and source == LABELS_DECLARED
    with pytest.raises(ValueError, match=r"does not declare: 7 \(row 1\) and 1 more row\."):
        encode_labels(np.array([0, 7, 7, 1]), [0, 1])


def _csv(path, X, y):
    with open(path, "w") as fh:
        fh.write("a,b,c,label\n")
        for row, lab in zip(X, y):
            fh.write(",".join(f"{v:.6f}" for v in row) + f",{lab}\n")


def test_train_cli_classes_end_to_end(tmp_path, capsys):
    X, y = _data()
    data = tmp_path / "t.csv"
    _csv(data, X, y)
    flags = ["--target", "label", "--noise-multiplier", "2", "--epochs", "3", "--batch-size", "40",
             "--batching", "cyclic", "--alpha", "0.01", "--seed", "1", "--center", "none"]
    out = tmp_path / "declared"
    assert cli_main(["train", str(data), "--out", str(out), "--classes", "no,yes", *flags]) == 0
    _, err = capsys.readouterr()
    assert "classes not given" not in err
    cert = json.loads((out / "certificate.json").read_text())
    model = json.loads((out / "model.json").read_text())
    assert cert["classes"] == {"source": LABELS_DECLARED, "classes": ["no", "yes"]}
    assert model["classes"] == ["no", "yes"] and model["classes_source"] == LABELS_DECLARED
    # without --classes: one warning line, and the certificate says where the labels came from
    out2 = tmp_path / "found"
    assert cli_main(["train", str(data), "--out", str(out2), *flags]) == 0
    _, err = capsys.readouterr()
    assert "warning: --classes not given: the 2 classes were taken from the data" in err
    assert json.loads((out2 / "certificate.json").read_text())["classes"]["source"] == LABELS_FROM_DATA
    # an undeclared label: refused in one line, nothing written
    out3 = tmp_path / "refused"
    assert cli_main(["train", str(data), "--out", str(out3), "--classes", "no,maybe", *flags]) == 2
    _, err = capsys.readouterr()
    assert "--classes does not declare: 'yes'" in err and err.count("\n") == 1
    assert not out3.exists() or not any(out3.iterdir())


def test_train_cli_numeric_labels(tmp_path, capsys):
    X, y = _data()
    data = tmp_path / "n.csv"
    _csv(data, X, (y == "yes").astype(int))
    out = tmp_path / "o"
    assert cli_main(["train", str(data), "--target", "label", "--out", str(out), "--classes", "0,1",
                     "--noise-multiplier", "2", "--epochs", "2", "--batch-size", "40", "--batching", "cyclic",
                     "--alpha", "0.01", "--seed", "1", "--center", "none"]) == 0
    capsys.readouterr()
    assert json.loads((out / "model.json").read_text())["classes"] == [0.0, 1.0]
    assert cli_main(["train", str(data), "--target", "label", "--out", str(tmp_path / "x"), "--classes",
                     "zero,one", "--noise-multiplier", "2"]) == 2
    assert "classes must be numbers for a numeric target" in capsys.readouterr().err


def test_tuner_uses_the_estimators_classes():
    X, y = _data(400)
    base = noisysgd.NoisySGDClassifier(epochs=3, batch_size=40, batching="cyclic", alpha=0.01,
                                       classes=["no", "yes"])
    cv = noisysgd.NoisySGDClassifierCV({"alpha": [0.01, 0.1]}, estimator=base, epsilon=2.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        try:
            cv.fit(X, y)
        except noisysgd.tuning.NoRunsDrawn:
            pass
    assert cv.privacy_report_["classes"]["source"] == LABELS_DECLARED
    with pytest.warns(PrivacyLeakWarning, match="estimator.classes not given"):
        try:
            noisysgd.NoisySGDClassifierCV({"alpha": [0.01]}, estimator=base.set_params(classes=None), epsilon=2.0,
                                          random_state=0).fit(X, y)
        except noisysgd.tuning.NoRunsDrawn:
            pass
