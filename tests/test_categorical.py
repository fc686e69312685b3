"""Categorical columns with publicly declared categories (issue 27 §4).

A categorical column becomes one 0/1 column per *declared* category: nothing
about the encoding is learnt from the data, so it costs no privacy.  A cell
outside the declaration is refused with a message naming the flag; an
undeclared text column is refused with a hint to declare it.  The model file
records the encoding and ``noisysgd predict`` applies it.  In scikit-learn, a
``OneHotEncoder`` with declared categories (in a ``ColumnTransformer``) before
a noisysgd estimator learns nothing from the data either, so it raises no
``PrivacyLeakWarning``; one that infers its categories does.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import noisysgd
from noisysgd.cli import main as cli_main
from noisysgd.io import load_table
from noisysgd.train import PrivacyLeakWarning

CATS = {"smoker": ["No", "Yes"], "region": ["north", "south", "east", "west"]}


def _table(path, n=600, seed=0, extra_region=None):
    rng = np.random.default_rng(seed)
    age = rng.uniform(0.2, 1.0, n)
    smoker = rng.choice(CATS["smoker"], n)
    region = rng.choice(CATS["region"], n)
    if extra_region is not None:
        region[-1] = extra_region
    y = ((smoker == "Yes") | ((age > 0.7) & (region == "east"))).astype(int)
    with open(path, "w") as f:
        f.write("age,smoker,region,y\n")
        for a, s, r, t in zip(age, smoker, region, y):
            f.write(f"{a:.4f},{s},{r},{t}\n")
    return age, smoker, region, y


def test_csv_columns_are_one_hot_encoded_in_the_declared_order(tmp_path):
    path = tmp_path / "t.csv"
    age, smoker, region, y = _table(path)
    t = load_table(path, target="y", categorical=CATS)
    assert t.feature_names == ["age", "smoker=No", "smoker=Yes", "region=north", "region=south", "region=east",
                               "region=west"]
    assert t.input_columns == ["age", "smoker", "region"] and t.categorical == CATS
    np.testing.assert_array_equal(t.X[:, 0], np.round(age, 4))
    np.testing.assert_array_equal(t.X[:, 2], (smoker == "Yes").astype(float))
    np.testing.assert_array_equal(t.X[:, 3:].argmax(axis=1), [CATS["region"].index(r) for r in region])
    np.testing.assert_array_equal(t.X[:, 1:3].sum(axis=1), 1.0)
    np.testing.assert_array_equal(t.y, y)


@settings(max_examples=30, deadline=None)
@given(cats=st.lists(st.text(st.sampled_from("abcXYZ-_ "), min_size=1, max_size=4).map(str.strip).filter(bool),
                     min_size=1, max_size=5, unique=True),
       picks=st.lists(st.integers(0, 10), min_size=1, max_size=30))
def test_every_row_has_exactly_one_category_and_it_is_the_cell(tmp_path_factory, cats, picks):
    path = tmp_path_factory.mktemp("h") / "t.csv"
    cells = [cats[p % len(cats)] for p in picks]
    with open(path, "w") as f:
        f.write("x,c,y\n" + "".join(f"{i},{c},{i % 2}\n" for i, c in enumerate(cells)))
    t = load_table(path, target="y", categorical={"c": cats})
    block = t.X[:, 1:]
    assert block.shape == (len(cells), len(cats))
    np.testing.assert_array_equal(block.sum(axis=1), 1.0)
    assert [cats[k] for k in block.argmax(axis=1)] == cells


def test_parquet_columns_are_encoded_like_csv(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    csv_path = tmp_path / "t.csv"
    age, smoker, region, y = _table(csv_path)
    pq.write_table(pa.table({"age": np.round(age, 4), "smoker": smoker.tolist(), "region": region.tolist(),
                             "y": y}), tmp_path / "t.parquet", row_group_size=128)
    a = load_table(csv_path, target="y", categorical=CATS)
    b = load_table(tmp_path / "t.parquet", target="y", categorical=CATS)
    assert a.feature_names == b.feature_names
    np.testing.assert_array_equal(a.X, b.X)
    with pytest.raises(ValueError, match=r"column 'smoker' of type string \(if it is categorical, declare"):
        load_table(tmp_path / "t.parquet", target="y")


@pytest.mark.parametrize("categorical,message", [
    (None, r"Found '(No|Yes)' \(not a number\) in row 2, column 'smoker' of t.csv; if it is a categorical column, "
           r"declare its categories \(--categorical 'smoker=a,b,...'"),
    ({"smoker": ["No"], "region": CATS["region"]}, r"categorical column 'smoker'. Found 'Yes' in row \d+ of t.csv; "
                                                   r"the declared categories are 'No'\."),
    ({"nope": ["a"]}, r"categorical must name feature columns of t.csv. Found 'nope'"),
    ({"y": ["0", "1"]}, r"categorical must not declare the target 'y'"),
    ({"smoker": ["No", "No"]}, r"categorical\['smoker'\] must list distinct, non-empty categories"),
    ({"smoker": "No,Yes"}, r"categorical\['smoker'\] must be a list of categories"),
])
def test_bad_declarations_and_cells_are_refused_by_name(tmp_path, categorical, message):
    path = tmp_path / "t.csv"
    _table(path)
    with pytest.raises(ValueError, match=message):
        load_table(path, target="y", categorical=categorical)


def test_npz_refuses_categorical(tmp_path):
    np.savez(tmp_path / "d.npz", X=np.zeros((3, 2)), y=np.zeros(3))
    with pytest.raises(ValueError, match="categorical columns apply to CSV and Parquet"):
        load_table(tmp_path / "d.npz", target="y", categorical={"x0": ["a"]})


@pytest.mark.slow
def test_train_and_predict_apply_the_declared_encoding(tmp_path, capsys):
    data, held = tmp_path / "t.csv", tmp_path / "held.csv"
    _table(data)
    _, smoker, region, y = _table(held, n=200, seed=1)
    out = tmp_path / "m"
    flags = ["--categorical", "smoker=No,Yes", "--categorical", "region=north,south,east,west"]
    assert cli_main(["train", str(data), "--target", "y", "--out", str(out), "--classes", "0,1", "--seed", "0",
                     "--epsilon", "3", "--quiet"] + flags) == 0
    capsys.readouterr()
    doc = json.loads((out / "model.json").read_text())
    assert doc["encoding"] == {"categorical": CATS, "input_columns": ["age", "smoker", "region"]}
    assert doc["feature_names"][1:3] == ["smoker=No", "smoker=Yes"] and doc["predict"].startswith("one-hot")
    model = noisysgd.load_model(out)
    assert model.categorical == CATS and model.input_columns == ["age", "smoker", "region"]
    pred = tmp_path / "p.csv"
    assert cli_main(["predict", str(out), str(held), "--out", str(pred), "--target", "y", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    got = np.loadtxt(pred, skiprows=1)
    encoded = load_table(held, target="y", categorical=CATS)
    np.testing.assert_array_equal(got, model.predict(encoded.X))
    assert summary["accuracy"] == pytest.approx(float(np.mean(got == y)))
    assert summary["accuracy"] > max(np.mean(y), 1 - np.mean(y))  # learnt the smoker column
    # a category the model did not declare is refused, naming it; nothing is written
    _table(tmp_path / "odd.csv", n=50, extra_region="mars")
    assert cli_main(["predict", str(out), str(tmp_path / "odd.csv"), "--out", str(tmp_path / "q.csv")]) == 2
    err = capsys.readouterr().err
    assert "Found 'mars' in row 51" in err and err.count("\n") == 1 and not (tmp_path / "q.csv").exists()


@pytest.mark.parametrize("argv,message", [
    (["--categorical", "smoker"], "--categorical must be COL=A,B,... (a column and its categories). Found 'smoker'."),
    (["--categorical", "smoker=No,Yes", "--categorical", "smoker=No"], "--categorical must declare each column once"),
    ([], "if it is a categorical column, declare its categories (--categorical 'smoker=a,b,...'"),
    (["--categorical", "smoker=No,Yes", "--categorical", "region=north", "--workers", "1"],
     "--categorical is not available for data-parallel training"),
])
def test_train_refuses_bad_flags_in_one_line(tmp_path, capsys, argv, message):
    data = tmp_path / "t.csv"
    _table(data)
    out = tmp_path / "m"
    assert cli_main(["train", str(data), "--target", "y", "--out", str(out), "--classes", "0,1"] + argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())


def test_a_model_whose_encoding_does_not_give_its_features_is_refused(tmp_path, capsys):
    data = tmp_path / "t.csv"
    _table(data)
    out = tmp_path / "m"
    assert cli_main(["train", str(data), "--target", "y", "--out", str(out), "--classes", "0,1", "--seed", "0",
                     "--quiet", "--categorical", "smoker=No,Yes", "--categorical", "region=north,south,east,west"]) == 0
    doc = json.loads((out / "model.json").read_text())
    doc["encoding"]["categorical"]["smoker"] = ["No"]
    (out / "model.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="has an encoding that does not give its feature names"):
        noisysgd.load_model(out)


def _mixed(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = np.empty((n, 2), dtype=object)
    X[:, 0] = rng.uniform(0, 1, n)
    X[:, 1] = rng.choice(["a", "b", "c"], n)
    y = ((X[:, 0].astype(float) > 0.5) | (X[:, 1] == "c")).astype(int)
    return X, y


@pytest.mark.slow
def test_a_declared_one_hot_encoder_in_a_pipeline_is_not_a_leak():
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    X, y = _mixed()
    declared = ColumnTransformer([("cat", OneHotEncoder(categories=[["a", "b", "c"]], sparse_output=False), [1])],
                                 remainder="passthrough")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        pipe = make_pipeline(declared, noisysgd.NoisySGDClassifier(epsilon=3.0, classes=[0, 1], random_state=0))
        pipe.fit(X, y)
    assert pipe.score(X, y) > 0.75
    for inferred in (OneHotEncoder(sparse_output=False),
                     OneHotEncoder(categories=[["a", "b", "c"]], min_frequency=5, sparse_output=False)):
        ct = ColumnTransformer([("cat", inferred, [1])], remainder="passthrough")
        with pytest.warns(PrivacyLeakWarning, match="fitted in a Pipeline after 'columntransformer'"):
            make_pipeline(ct, noisysgd.NoisySGDClassifier(epsilon=3.0, classes=[0, 1], random_state=0)).fit(X, y)
