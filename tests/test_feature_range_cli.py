"""Per-column public bounds on the command line (issue 43 §5): ``noisysgd train --feature-range
COL=LOW:HIGH`` (repeated) or ``--feature-range-file bounds.csv`` (name,low,high), beside
``--feature-range LOW,HIGH`` (every column) and ``--feature-range private``.

The bounds are declared, never read off the data: each numeric column must be given its own (a
column left out is refused in one line naming it, never left unscaled), a categorical column's
0/1 columns get [0, 1], and the bounds reach ``model.json`` as the estimators' ``feature_range``
arrays would.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from noisysgd.cli import main
from noisysgd.cli.training import feature_range_flag
from noisysgd.io import load_table

BOUNDS = {"age": (0.0, 120.0), "income": (0.0, 250000.0), "rooms": (1.0, 12.0)}


def _write(path, n=400, seed=0):
    rng = np.random.default_rng(seed)
    age = rng.uniform(18, 90, n)
    income = rng.uniform(1e4, 2e5, n)
    rooms = rng.integers(1, 10, n)
    region = rng.choice(["north", "south"], n)
    y = ((age > 50) ^ (region == "south")).astype(int)
    with open(path, "w") as f:
        f.write("age,income,region,rooms,y\n")
        for row in zip(age, income, region, rooms, y):
            f.write("{:.2f},{:.0f},{},{},{}\n".format(*row))


def _flags(bounds=BOUNDS):
    return [arg for c, (lo, hi) in bounds.items() for arg in ("--feature-range", f"{c}={lo:g}:{hi:g}")]


CATEGORICAL = ["--categorical", "region=north,south"]


@pytest.mark.slow
def test_per_column_bounds_reach_the_model(tmp_path, capsys):
    data, out = tmp_path / "t.csv", tmp_path / "m"
    _write(data)
    assert main(["train", str(data), "--target", "y", "--out", str(out), "--classes", "0,1", "--seed", "0",
                 "--quiet", *CATEGORICAL, *_flags()]) == 0
    capsys.readouterr()
    doc = json.loads((out / "model.json").read_text())
    assert doc["feature_names"] == ["age", "income", "region=north", "region=south", "rooms"]
    assert doc["feature_range"]["kind"] == "public"
    assert doc["feature_range"]["low"] == [0.0, 0.0, 0.0, 0.0, 1.0]           # the region's 0/1 columns: [0, 1]
    assert doc["feature_range"]["high"] == [120.0, 250000.0, 1.0, 1.0, 12.0]
    cert = json.loads((out / "certificate.json").read_text())
    assert cert["encoding"]["categorical"] == {"region": ["north", "south"]}
    # the same bounds from a file give the same model
    bounds = tmp_path / "bounds.csv"
    bounds.write_text("name,low,high\n" + "".join(f"{c},{lo:g},{hi:g}\n" for c, (lo, hi) in BOUNDS.items()))
    assert main(["train", str(data), "--target", "y", "--out", str(tmp_path / "f"), "--classes", "0,1", "--seed",
                 "0", "--quiet", *CATEGORICAL, "--feature-range-file", str(bounds)]) == 0
    assert json.loads((tmp_path / "f" / "model.json").read_text())["coef"] == doc["coef"]


def _args(values=None, path=None):
    return argparse.Namespace(feature_range=values, feature_range_file=path)


def test_flags_and_file_give_the_declared_arrays(tmp_path):
    data = tmp_path / "t.csv"
    _write(data, n=20)
    table = load_table(data, target="y", categorical={"region": ["north", "south"]})
    low, high = feature_range_flag(_args(["age=0:120", "rooms=1:12", "income=0:250000"]), 5, 1.0, table)
    np.testing.assert_array_equal(low, [0, 0, 0, 0, 1])
    np.testing.assert_array_equal(high, [120, 250000, 1, 1, 12])
    bounds = tmp_path / "b.csv"
    bounds.write_text("low,high,name\n0,250000,income\n\n1,12,rooms\n")  # any column order; blank rows skipped
    low2, high2 = feature_range_flag(_args(["age=0:120"], bounds), 5, 1.0, table)  # flags and file combine
    np.testing.assert_array_equal(low2, low)
    np.testing.assert_array_equal(high2, high)
    # LOW,HIGH covers every numeric column; a category's 0/1 column still lies in [0, 1]
    low, high = feature_range_flag(_args(["-1,300000"]), 5, 1.0, table)
    np.testing.assert_array_equal(low, [-1, -1, 0, 0, -1])
    np.testing.assert_array_equal(high, [300000, 300000, 1, 1, 300000])
    assert feature_range_flag(_args(["private"]), 5, 1.0, table) == "private"
    assert feature_range_flag(_args(), 5, 1.0, table) is None
    negative = feature_range_flag(_args(["x0=-40:-10.5", "x1=-1e3:1e3"]), 2, 1.0)  # no table: x0, x1, ...
    np.testing.assert_array_equal(negative[0], [-40, -1e3])
    np.testing.assert_array_equal(negative[1], [-10.5, 1e3])


@pytest.mark.parametrize("argv,message", [
    (["--feature-range", "age=0:120", "--feature-range", "income=0:250000"],
     "--feature-range must bound every feature column once it bounds one (an unbounded column would be neither "
     "scaled nor declared). Found none for 'rooms': give COL=LOW:HIGH for each"),
    (["--feature-range", "age=0:120", "--feature-range", "size=0:1"],
     "--feature-range must name feature columns of t.csv. Found 'size' ('size=0:1'); the columns are 'age', "
     "'income', 'region', 'rooms'."),
    (["--feature-range", "region=0:1"], "--feature-range must not bound the categorical column 'region'"),
    (["--feature-range", "age=0:120", "--feature-range", "age=0:100"],
     "--feature-range must bound each column once. Found 'age' twice ('age=0:100')."),
    (["--feature-range", "age=120:0"], "--feature-range must have finite LOW < HIGH. Found 'age=120:0'."),
    (["--feature-range", "age=0:inf"], "--feature-range must have finite LOW < HIGH. Found 'age=0:inf'."),
    (["--feature-range", "age=zero:1"], "--feature-range must give two numbers LOW and HIGH. Found 'age=zero:1'."),
    (["--feature-range", "age=0,120"], "--feature-range must be COL=LOW:HIGH (a column and two numbers)"),
    (["--feature-range", "age=0:120", "--feature-range", "0,1"],
     "--feature-range LOW,HIGH and --feature-range private cover every column: give one of them alone"),
    (["--feature-range", "private", "--feature-range", "age=0:1"], "cover every column: give one of them alone"),
    (["--feature-range", "3"], "--feature-range must be LOW,HIGH (two numbers), 'private', 'auto' or 'none'. Found '3'"),
    (["--feature-range-file", "missing.csv"], "--feature-range-file must be a readable UTF-8 CSV file"),
])
def test_bad_bounds_are_refused_in_one_line(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    data, out = tmp_path / "t.csv", tmp_path / "m"
    _write(data, n=30)
    assert main(["train", str(data), "--target", "y", "--out", str(out), "--classes", "0,1", *CATEGORICAL,
                 *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("text,message", [
    ("name,low,high\nage,0,120\nincome,0,250000\n", "--feature-range-file must bound every feature column once it "
                                                    "bounds one (an unbounded column would be neither scaled nor "
                                                    "declared). Found none for 'rooms'"),
    ("name,low\nage,0\n", "--feature-range-file must be a CSV file with a header row name,low,high"),
    ("name,low,high\n", "and no rows"),
    ("name,low,high\nage,0,x\n", "--feature-range-file must give two numbers LOW and HIGH. Found 'age,0,x' in row 2 "
                                 "of b.csv."),
    ("name,low,high\nage,0\n", "--feature-range-file must have 3 cells in every row. Found 2 in row 2 of b.csv."),
    ("name,low,high\nage,0,120\nage,0,100\n", "--feature-range-file must bound each column once. Found 'age' "
                                              "twice ('age,0,100' in row 3 of b.csv)."),
])
def test_a_bad_bounds_file_is_named(tmp_path, text, message):
    data = tmp_path / "t.csv"
    _write(data, n=20)
    (tmp_path / "b.csv").write_text(text)
    table = load_table(data, target="y", categorical={"region": ["north", "south"]})
    with pytest.raises(ValueError) as caught:
        feature_range_flag(_args(None, tmp_path / "b.csv"), 5, 1.0, table)
    assert message in str(caught.value), str(caught.value)


def test_data_parallel_training_refuses_a_bounds_file(tmp_path, capsys):
    data = tmp_path / "t.csv"
    _write(data, n=20)
    (tmp_path / "b.csv").write_text("name,low,high\nage,0,120\n")
    assert main(["train", str(data), "--target", "y", "--out", str(tmp_path / "m"), "--workers", "2",
                 "--feature-range-file", str(tmp_path / "b.csv")]) == 2
    assert "--feature-range-file is not available for data-parallel training" in capsys.readouterr().err
