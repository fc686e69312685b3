"""Categorical columns with publicly declared categories (issue 27 §4).

A categorical column becomes one 0/1 column per *declared* category: nothing
about the encoding is learnt from the data, so it costs no privacy.  A cell
outside the declaration is refused with a message naming the flag; an
undeclared text column is refused with a hint to declare it.  The model file
records the encoding and ``noisysgd predict`` applies it.  In scikit-learn, a
``OneHotEncoder`` with declared categories (in a ``ColumnTransformer``) before
a noisysgd estimator learns nothing from the data either, so it raises no
``PrivacyLeakWarning``; one that infers its categories does.  The estimators take
the same declaration (``categorical=``, issue 43 §5): the CLI's encoding and errors.
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
    cert = json.loads((out / "certificate.json").read_text())  # the range query saw "age" only: 6 indicators public
    ranges = next(p for p in cert["preprocessing"]["parts"] if "scales" in p)
    assert len(ranges["scales"]) == 1 and ranges["public_indicator_columns"] == 6
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


# The estimators take the same declarations (categorical=): the CLI's encoding, the CLI's errors.

def _frame(n=600, seed=0):
    import pandas as pd

    rng = np.random.default_rng(seed)
    age = rng.uniform(0.2, 1.0, n)
    smoker = rng.choice(CATS["smoker"], n)
    region = rng.choice(CATS["region"], n)
    y = ((smoker == "Yes") | ((age > 0.7) & (region == "east"))).astype(int)
    return pd.DataFrame({"age": age, "smoker": smoker, "region": region}), y


@pytest.mark.slow
def test_the_estimator_encodes_as_the_cli_does(tmp_path, capsys):
    """The same table, the same declarations, the same seed: the estimator's released coefficients
    are the CLI's model.json coefficients, bit for bit (one encoding, one pipeline)."""
    import pandas as pd

    data = tmp_path / "t.csv"
    _table(data)
    out = tmp_path / "m"
    assert cli_main(["train", str(data), "--target", "y", "--out", str(out), "--classes", "0,1", "--seed", "0",
                     "--epsilon", "3", "--quiet", "--categorical", "smoker=No,Yes",
                     "--categorical", "region=north,south,east,west"]) == 0
    capsys.readouterr()
    doc = json.loads((out / "model.json").read_text())
    frame = pd.read_csv(data)
    clf = noisysgd.NoisySGDClassifier(epsilon=3.0, classes=[0, 1], random_state=0, categorical=CATS)
    clf.fit(frame.drop(columns="y"), frame["y"])
    np.testing.assert_array_equal(clf.fit_.result.coef, np.asarray(doc["coef"]))
    assert list(clf.encoded_feature_names_) == doc["feature_names"] and clf.coef_.shape == (1, 7)
    assert list(clf.feature_names_in_) == ["age", "smoker", "region"] and clf.n_features_in_ == 3
    cert = json.loads((out / "certificate.json").read_text())
    assert clf.privacy_report_["encoding"]["categorical"] == cert["encoding"]["categorical"] == CATS
    assert "no privacy cost" in clf.privacy_report_["encoding"]["privacy"]
    json.dumps(clf.privacy_report_)
    # predict encodes new rows as fit did; a category outside the declaration is refused there too
    held = load_table(data, target="y", categorical=CATS)
    np.testing.assert_array_equal(clf.predict(frame.drop(columns="y")), noisysgd.load_model(out).predict(held.X))
    odd = frame.drop(columns="y").head(5).assign(region=["north", "mars", "east", "west", "south"])
    with pytest.raises(ValueError, match=r"categorical column 'region'. Found 'mars' in row 1 of X"):
        clf.predict(odd)


@pytest.mark.slow
def test_positions_name_the_columns_of_an_array_and_give_the_same_model():
    frame, y = _frame()
    by_name = noisysgd.NoisySGDClassifier(epsilon=3.0, classes=[0, 1], random_state=0, categorical=CATS).fit(frame, y)
    by_position = noisysgd.NoisySGDClassifier(epsilon=3.0, classes=[0, 1], random_state=0,
                                              categorical={1: CATS["smoker"], 2: CATS["region"]})
    by_position.fit(frame.to_numpy(), y)
    np.testing.assert_array_equal(by_position.coef_, by_name.coef_)
    assert list(by_position.encoded_feature_names_)[:3] == ["x0", "x1=No", "x1=Yes"]
    # numeric codes declared as numbers match cells 0.0, 1.0, 2.0 (a number is a number)
    codes = np.column_stack([frame["age"], [CATS["region"].index(r) for r in frame["region"]]]).astype(float)
    clf = noisysgd.NoisySGDRegressor(epsilon=3.0, random_state=0, categorical={1: [0, 1, 2, 3]},
                                     feature_range=([0.0, -5.0], [1.0, 5.0])).fit(codes, y)
    assert clf.coef_.shape == (5,) and clf.privacy_report_["encoding"]["categorical"] == {"x1": [0, 1, 2, 3]}
    low, high = clf.feature_map_.ranges  # a category's 0/1 column lies in [0, 1]: the -5, 5 given there is not used
    np.testing.assert_array_equal(low, [0, 0, 0, 0, 0])
    np.testing.assert_array_equal(high, [1, 1, 1, 1, 1])


@pytest.mark.parametrize("estimator", [noisysgd.NoisySGDClassifier, noisysgd.NoisySGDRegressor])
def test_an_undeclared_text_column_is_named_not_numpy_s_error(estimator):
    """As noisysgd train: the column, the row, the cell and how to declare it; not 'could not convert
    string to float'."""
    frame, y = _frame(n=50)
    with pytest.raises(ValueError) as caught:
        estimator(epsilon=1.0).fit(frame, y)
    assert str(caught.value) == (
        f"X must hold finite numbers in every feature cell. Found {frame['smoker'][0]!r} (not a number) in row 0, "
        "column 'smoker' of X; if it is a categorical column, declare its categories (categorical={'smoker': "
        f"[...]}} in {estimator.__name__}).")
    with pytest.raises(ValueError, match=r"Found '(north|south|east|west)' \(not a number\) in row 0, column 2 of "
                                         r"X; .*categorical=\{2: \[...\]\}"):
        estimator(epsilon=1.0, categorical={1: CATS["smoker"]}).fit(frame.to_numpy(), y)


@pytest.mark.parametrize("categorical,message", [
    ({"smoker": ["No"], "region": CATS["region"]},
     r"X must hold a declared category in every cell of the categorical column 'smoker'. Found 'Yes' in row \d+ "
     r"of X; the declared categories are 'No'\."),
    ({"nope": ["a"]}, r"The 'categorical' parameter of NoisySGDClassifier must be .*'nope' is not a column of X "
                      r"\(its columns: 'age', 'smoker', 'region'\)"),
    ({7: ["a"]}, r"7 is not one of X's 3 columns"),
    ({1: ["No", "Yes"], "smoker": ["No", "Yes"]}, r"each column once; column 'smoker' is given twice"),
    ({"smoker": ["No", "No"]}, r"categorical\['smoker'\] must list distinct, non-empty categories"),
    ({"smoker": "No,Yes"}, r"categorical\['smoker'\] must be a list of categories"),
    (["smoker"], r"The 'categorical' parameter of NoisySGDClassifier must be a dict"),
])
def test_bad_declarations_and_cells_are_refused_by_the_estimator(categorical, message):
    frame, y = _frame(n=80)
    with pytest.raises(ValueError, match=message):
        noisysgd.NoisySGDClassifier(epsilon=1.0, classes=[0, 1], categorical=categorical).fit(frame, y)


def test_names_need_a_dataframe():
    frame, y = _frame(n=40)
    with pytest.raises(ValueError, match=r"X has no column names, so 'smoker' must be given by its position"):
        noisysgd.NoisySGDClassifier(epsilon=1.0, categorical={"smoker": ["No", "Yes"]}).fit(frame.to_numpy(), y)


def test_the_tuner_refuses_a_base_estimator_with_categorical():
    """NoisySGDClassifierCV trains its candidates on the rows as given: a base estimator's categorical= would be
    ignored silently, so it is refused (the message names the parameter and the remedy)."""
    import noisysgd

    X = np.random.default_rng(0).normal(size=(300, 3))
    y = (X[:, 0] > 0).astype(int)
    base = noisysgd.NoisySGDClassifier(classes=[0, 1], categorical={2: [0, 1]})
    cv = noisysgd.NoisySGDClassifierCV({"alpha": [0.01, 0.1]}, estimator=base, epsilon=2.0, random_state=0)
    with pytest.raises(ValueError, match=r"estimator\.categorical must be None for tuning .*OneHotEncoder"):
        cv.fit(X, y)
