"""``noisysgd train``: files written all at once, bad files refused in one line (the demo: tests/test_demo.py)."""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import noisysgd
from noisysgd.cli import main
from noisysgd.io import atomic_directory, load_table


def write_csv(path, X, y, names=None, target="label"):
    names = names or [f"f{i}" for i in range(X.shape[1])]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*names, target])
        for xi, yi in zip(X, y):
            w.writerow([*xi, yi])
    return path


@pytest.fixture
def blobs(tmp_path):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, size=600)
    X = rng.normal(size=(600, 4)) + 1.5 * y[:, None]
    labels = np.where(y == 1, "yes", "no")
    return write_csv(tmp_path / "data.csv", X, labels), X, y


def test_train_writes_model_certificate_and_metrics(tmp_path, capsys, blobs):
    path, X, y = blobs
    out = tmp_path / "model"
    # --center, --feature-range and --prior none: the model file and the certificate of the training run alone
    # (with the queries: test_private_center.py, test_predict.py, test_prior.py)
    assert main(["train", str(path), "--target", "label", "--epsilon", "1", "--delta", "1e-5",
                 "--feature-clip", "4", "--epochs", "20", "--batch-size", "100", "--seed", "0", "--center", "none",
                 "--feature-range", "none", "--prior", "none", "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "(1, 1e-05)-DP" in text or "-DP for the final model only" in text
    assert sorted(os.listdir(out)) == ["certificate.json", "metrics.json", "model.json"]
    model = json.loads((out / "model.json").read_text())
    cert = json.loads((out / "certificate.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    assert model["classes"] == ["no", "yes"] and model["feature_names"] == ["f0", "f1", "f2", "f3"]
    # the model file alone reproduces the predictions: clip, append 1, score, threshold
    W = np.array(model["coef"])
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    Xbar = np.hstack([X * np.minimum(1.0, model["feature_clip"] / norms), np.ones((len(X), 1))])
    pred = np.where(Xbar @ W > 0, 1, 0)
    assert np.mean(pred == y) == pytest.approx(metrics["not_private"]["train_accuracy"])
    assert metrics["not_private"]["train_accuracy"] > 0.8
    # the certificate is the accountant's for exactly the run that was trained
    run = noisysgd.Run(**{k: v for k, v in cert["run"].items()
                          if k not in ("sampling_rate", "steps_per_epoch", "epochs")})
    assert noisysgd.epsilon(run, delta=1e-5).epsilon == pytest.approx(cert["epsilon"])
    assert cert["epsilon"] <= 1.0
    assert metrics["noise_multiplier"] == run.noise_multiplier == cert["calibration"]["noise_multiplier"]
    assert cert["certificate"]["trainer_enforced"]["steps"] == run.steps == metrics["steps"]


def test_train_npz_regression_with_fixed_noise_and_json(tmp_path, capsys):
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(800, 3))
    y = X @ [1.0, -1.0, 0.5]
    np.savez(tmp_path / "d.npz", X=X, y=y)
    out = tmp_path / "fit"
    assert main(["train", str(tmp_path / "d.npz"), "--target", "y", "--task", "regression",
                 "--noise-multiplier", "5", "--feature-clip", "2", "--alpha", "0.001",
                 "--out", str(out), "--json", "--quiet", "--seed", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["noise_multiplier"] == 5.0 and data["out"] == str(out)
    cert = json.loads((out / "certificate.json").read_text())
    assert cert["epsilon"] == pytest.approx(data["epsilon"]) and "calibration" not in cert
    assert "Huber" in json.loads((out / "model.json").read_text())["loss"]


def bad_files(tmp_path):
    X = np.arange(12.0).reshape(6, 2)
    y = np.array([0, 1, 0, 1, 0, 1])
    cases = {}
    cases["missing target"] = (write_csv(tmp_path / "a.csv", X, y), ["--target", "nope"],
                               "--target: target must be a column of a.csv. Found 'nope'")
    bad = tmp_path / "nan.csv"
    bad.write_text("f0,f1,label\n1,2,0\n3,nan,1\n4,5,0\n")
    cases["NaN feature"] = (bad, [], "Found 'nan' (not finite) in row 3, column 'f1' of nan.csv")
    text = tmp_path / "text.csv"
    text.write_text("f0,f1,label\n1,2,0\n3,abc,1\n")
    cases["non-numeric cell"] = (text, [], "Found 'abc' (not a number) in row 3, column 'f1'")
    empty = tmp_path / "empty.csv"
    empty.write_text("f0,f1,label\n1,,0\n")
    cases["empty cell"] = (empty, [], "Found '(empty)' (not a number) in row 2, column 'f1'")
    cases["single class"] = (write_csv(tmp_path / "one.csv", X, np.zeros(6, int)), [],
                             "target must hold at least two classes for classification. Found 1 class")
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("f0,f1,label\n1,2,0\n3,1\n")
    cases["ragged row"] = (ragged, [], "data must have 3 cells in every row. Found 2 in row 3")
    cases["no such file"] = (tmp_path / "nope.csv", [], "DATA: data must be an existing file")
    cases["wrong suffix"] = (write_csv(tmp_path / "a.txt", X, y), [], "data must be a .csv, .npz or .parquet file")
    cases["bad epsilon"] = (tmp_path / "a.csv", ["--epsilon", "-1"], "epsilon must be a positive finite number")
    cases["bad delta"] = (tmp_path / "a.csv", ["--delta", "1.5"], "delta must be in (0, 1)")
    cases["batch 0"] = (tmp_path / "a.csv", ["--batch-size", "0"], "--batch-size: batch_size must be an integer >= 1. Found 0")
    cases["bad lr"] = (tmp_path / "a.csv", ["--lr", "fast"], "learning_rate must be 'auto', 'max' or a positive number")
    cases["eta beyond the analysis"] = (tmp_path / "a.csv", ["--lr", "50", "--analysis", "ye-shokri"],
                                        "ye-shokri does not apply: needs learning rate < 2/(m+M)")
    cases["regression on labels"] = (write_csv(tmp_path / "s.csv", X, np.array(list("abcabc"))),
                                     ["--task", "regression"], "target must be numeric for --task regression")
    return cases


BAD_CASES = ["missing target", "NaN feature", "non-numeric cell", "empty cell", "single class",
             "ragged row", "no such file", "wrong suffix", "bad epsilon", "bad delta", "batch 0",
             "bad lr", "eta beyond the analysis", "regression on labels"]


@pytest.mark.parametrize("case", BAD_CASES)
def test_bad_files_and_flags_give_one_line_and_no_output(tmp_path, capsys, case):
    path, extra, message = bad_files(tmp_path)[case]
    out = tmp_path / "out"
    argv = ["train", str(path), "--target", "label", "--out", str(out), "--quiet", "--epochs", "2", *extra]
    if "--target" in extra:
        argv = ["train", str(path), "--out", str(out), "--quiet", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert err.count("\n") == 1 and err.startswith("noisysgd train: error:")
    assert not out.exists()
    assert [p for p in os.listdir(tmp_path) if p.startswith(".out")] == []


def test_out_must_be_new_or_empty_and_writable(tmp_path, capsys, blobs):
    path, _, _ = blobs
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    assert main(["train", str(path), "--target", "label", "--out", str(full), "--quiet"]) == 2
    assert "--out: out must be a new or empty directory (nothing is overwritten)" in capsys.readouterr().err
    assert os.listdir(full) == ["keep.txt"]
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        assert main(["train", str(path), "--target", "label", "--out", str(locked / "m"), "--quiet"]) == 2
        assert "must be in a writable directory" in capsys.readouterr().err


def test_a_failure_while_writing_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic_directory(tmp_path / "x") as tmp:
            (tmp / "model.json").write_text("{}")
            raise RuntimeError("disk full")
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_a_killed_train_leaves_no_output(tmp_path, blobs):
    """SIGKILL during training: the destination never appears (the temporary
    directory is only created when everything is computed)."""
    path, _, _ = blobs
    out = tmp_path / "m"
    code = (
        "import sys, os, signal\n"
        "from noisysgd import private_fit\n"
        "orig = private_fit.train\n"
        "def killer(*a, **k):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "private_fit.train = killer\n"
        "from noisysgd.cli import main\n"
        f"sys.exit(main(['train', {str(path)!r}, '--target', 'label', '--out', {str(out)!r}, '--quiet']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert proc.returncode == -9
    assert not out.exists() and os.listdir(tmp_path) == ["data.csv"]


def test_load_table_reads_csv_labels_and_npz(tmp_path):
    X = np.array([[1.0, 2.0], [3.0, 4.0]])
    t = load_table(write_csv(tmp_path / "a.csv", X, ["x", "y"]), target="label")
    np.testing.assert_array_equal(t.X, X)
    assert t.y.tolist() == ["x", "y"] and t.feature_names == ["f0", "f1"]
    np.savez(tmp_path / "b.npz", X=X, lab=np.array([0, 1]))
    t = load_table(tmp_path / "b.npz", target="lab")
    assert t.y.tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match=r"target must name an array of b.npz besides 'X'. Found 'y'"):
        load_table(tmp_path / "b.npz", target="y")


def _mixed_units(path, n=900):
    """Issue 27's first table: 16 columns, one in the thousands (the issue's was in the hundreds,
    where the defaults' model now clears the near-chance line, just), 61 % of one class."""
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=n, n_features=16, n_informative=6, weights=[0.61], random_state=0)
    X = np.abs(X) / 4
    X[:, 0] *= 3000
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", comments="",
               header=",".join([f"c{i}" for i in range(16)] + ["y"]))
    return X, y


@pytest.mark.slow
def test_a_model_near_chance_is_never_silent(tmp_path, capsys, blobs):
    """Raw mixed units at epsilon = 1: the clipped rows are mostly the large column, so the
    model is no better than the majority class.  Two warning lines say so — one from the
    private mean (which column takes the norm), one from the training balanced accuracy —
    and the metrics carry the balanced accuracy.  Separable blobs get neither."""
    data = tmp_path / "mixed.csv"
    _mixed_units(data)
    out = tmp_path / "raw"
    assert main(["train", str(data), "--target", "y", "--classes", "0,1", "--seed", "0", "--feature-range", "none",
                 "--prior", "none", "--out", str(out)]) == 0  # (the rows as given, the model always released)
    captured = capsys.readouterr()
    warned = [line for line in captured.err.splitlines() if "warning" in line]
    assert any("feature column 0 ('c0') carries" in line for line in warned)  # named as in the header
    near = [line for line in warned if "barely better than predicting one class" in line]
    assert len(near) == 1 and "not private" in near[0] and "--feature-range COL=LOW:HIGH" in near[0]
    metrics = json.loads((out / "metrics.json").read_text())["not_private"]
    assert metrics["train_balanced_accuracy"] <= 0.55
    assert f"balanced accuracy = {metrics['train_balanced_accuracy']:.4f}" in captured.out
    path, X, y = blobs
    good = tmp_path / "blobs"
    assert main(["train", str(path), "--target", "label", "--classes", "no,yes", "--seed", "0", "--feature-clip",
                 "4", "--out", str(good)]) == 0
    captured = capsys.readouterr()
    assert "barely better" not in captured.err and "carries" not in captured.err
    balanced = json.loads((good / "metrics.json").read_text())["not_private"]["train_balanced_accuracy"]
    from sklearn.metrics import balanced_accuracy_score

    labels = np.where(y == 1, "yes", "no")
    assert balanced == pytest.approx(balanced_accuracy_score(labels, noisysgd.load_model(good).predict(X)), abs=1e-12)
    assert balanced > 0.8


@pytest.mark.slow
def test_raw_columns_in_mixed_units_are_said_once(tmp_path, capsys):
    # centered columns in mixed units: the private mean cannot show them, the rows' statistic does
    # (one line, not private); --feature-range private is silent about it
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 6)) * np.array([1e3, 1.0, 0.01, 1.0, 0.1, 1.0])
    y = (X[:, 1] + X[:, 3] > 0).astype(int)
    path = tmp_path / "mixed0.csv"
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", comments="",
               header=",".join([f"c{i}" for i in range(6)] + ["y"]))
    assert main(["train", str(path), "--target", "y", "--classes", "0,1", "--seed", "0", "--feature-range", "none",
                 "--out", str(tmp_path / "m")]) == 0  # (the rows as given, by the user's choice)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "squared norm" in line]
    assert len(lines) == 1 and "feature column 0 ('c0') carries" in lines[0] and "not private" in lines[0]
    assert main(["train", str(path), "--target", "y", "--classes", "0,1", "--seed", "0",
                 "--out", str(tmp_path / "a")]) == 0  # the default: at most one line about the rows, whatever it says
    assert sum("squared norm" in line or "barely better" in line for line in capsys.readouterr().err.splitlines()) <= 1
    assert main(["train", str(path), "--target", "y", "--classes", "0,1", "--seed", "0", "--feature-range",
                 "private", "--epsilon", "3", "--out", str(tmp_path / "p")]) == 0
    assert "training rows' squared norm" not in capsys.readouterr().err


def test_a_fit_that_releases_the_prior_says_so_in_one_line(tmp_path, capsys):
    """No signal, one column a thousand times the others, rows kept as given: the release check releases
    the class prior, and its line is the only one (the private mean's finding is recorded, not repeated)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4)) + 3.0
    X[:, 1] *= 1000.0
    y = rng.integers(0, 2, size=400)
    path = write_csv(tmp_path / "noise.csv", X, y)
    # seed 3: the check's noisy difference is -25 rows against the margin +18.7 (noise std 37): far from
    # the margin, so a row more or less on another machine's arithmetic does not flip it
    assert main(["train", str(path), "--target", "label", "--classes", "0,1", "--epsilon", "1", "--seed", "3",
                 "--feature-range", "none", "--out", str(tmp_path / "m"), "--quiet"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    cert = json.loads((tmp_path / "m" / "certificate.json").read_text())
    assert cert["release_check"]["kept_model"] is False and cert["preprocessing"]["dominant_columns"] == [1]
    assert len(lines) == 1 and "the class prior was released instead" in lines[0], lines


def test_the_cli_takes_the_release_checks_margin_from_the_pipeline(tmp_path, capsys):
    """Three balanced classes: `noisysgd train` runs the estimator's pipeline, so its certificate records the
    margin noisysgd.prior.check_margin gives (+½σ_c, also on a near-uniform prior since README §26) and the
    summary says what was released."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=900)
    X = rng.normal(size=(900, 3))
    X[np.arange(900), y] += 2.0
    path = write_csv(tmp_path / "three.csv", X, y)
    assert main(["train", str(path), "--target", "label", "--classes", "0,1,2", "--epsilon", "1", "--seed", "0",
                 "--out", str(tmp_path / "m")]) == 0
    text = " ".join(capsys.readouterr().out.split())
    check = json.loads((tmp_path / "m" / "certificate.json").read_text())["release_check"]
    assert check["margin"] == 0.5 and "ahead by at least 0.5 noise std" in check["margin_rule"]
    assert check["kept_model"] and check["released"] == "the model: it beat the class prior on the check"
    assert f"release check: {check['released']}" in text
