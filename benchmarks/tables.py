"""Tables as users have them (issue 27 §6): statsmodels' bundled tables, raw columns in mixed
units, categorical codes declared publicly, imbalanced labels — defaults against the majority
class and non-private logistic regression.

Data (shipped with statsmodels, read without network; ``pip install statsmodels``, not a
project dependency):

* ``fair`` (6,366 rows): had an affair (affairs > 0, 32 % positive); occupation and the
  husband's occupation are categorical codes 1–6 (declared), the rest numbers in their units
  (age in years, education in years, ratings 1–5);
* ``randhie`` (20,190 rows): ten or more medical visits (mdvis ≥ 10, imbalanced); log
  coinsurance, log income, a disease count up to ~60 and 0/1 dummies;
* ``anes96`` (944 rows): voted for Dole (vote); party identification (0–6), education (1–7)
  and income (1–24) as declared categories, population in thousands up to ~7,300, age;
* scikit-learn's ``make_classification(20000, 50)`` with its columns in mixed units (each
  multiplied by 10^U(−3, 3)) and ``breast_cancer``'s raw columns (issue 27's targets).

Models, 3 seeds of a stratified 75/25 split, ε ∈ {0.5, 1, 3} (δ the defaults'):

* ``majority``: the training majority class;
* ``non-private LR``: scikit-learn's LogisticRegression on StandardScaler'd columns (not private);
* ``defaults``: ``NoisySGDClassifier(epsilon=ε, classes=...)`` after a ``OneHotEncoder`` with the
  declared categories (a ``ColumnTransformer``; it learns nothing from the data and raises no
  ``PrivacyLeakWarning``), raw numeric columns;
* ``feature_range="private"``: the same with private per-feature ranges (10 % of ε and δ).

For each: accuracy, balanced accuracy and whether a ``UserWarning`` said the model is near
chance.  Writes ``benchmarks/results/tables.json``::

    python benchmarks/tables.py        # ~6 min

The same tables, splits and encoding against peers: ``benchmarks/peer_diffprivlib.py --tables``
and ``benchmarks/peer_opacus.py --centered --tables``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "tables.json"
EPSILONS = (0.5, 1.0, 3.0)
SEEDS = (0, 1, 2)


def tables():
    """(name, X (DataFrame of numbers), y, {categorical column: declared codes})."""
    import statsmodels.api as sm

    d = sm.datasets.fair.load_pandas().data
    yield ("fair: affairs > 0", d.drop(columns="affairs"), (d["affairs"] > 0).astype(int).to_numpy(),
           {"occupation": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "occupation_husb": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]})
    d = sm.datasets.randhie.load_pandas().data
    yield ("randhie: mdvis >= 10", d.drop(columns="mdvis"), (d["mdvis"] >= 10).astype(int).to_numpy(), {})
    d = sm.datasets.anes96.load_pandas().data
    yield ("anes96: vote", d.drop(columns=["vote", "logpopul"]), d["vote"].astype(int).to_numpy(),
           {"PID": [float(v) for v in range(7)], "educ": [float(v) for v in range(1, 8)],
            "income": [float(v) for v in range(1, 25)]})
    yield from _sklearn_tables()


def _sklearn_tables():
    """The two tables of issue 27's targets: make_classification(20000, 50) with every column
    multiplied by 10^U(-3, 3) (benchmarks/private_scaling.py's mixed units) and breast_cancer's
    raw columns; no categorical column."""
    import pandas as pd
    from sklearn.datasets import load_breast_cancer, make_classification

    X, y = make_classification(n_samples=20000, n_features=50, n_informative=20, random_state=0)
    X = X * 10.0 ** np.random.default_rng(1).uniform(-3, 3, size=50)
    yield "make_classification, mixed units", pd.DataFrame(X, columns=[f"x{j}" for j in range(50)]), y, {}
    X, y = load_breast_cancer(return_X_y=True)
    yield "breast_cancer (raw)", pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])]), y, {}


def _encoder(categories):
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import OneHotEncoder

    cols = list(categories)
    return ColumnTransformer([("cat", OneHotEncoder(categories=[categories[c] for c in cols],
                                                    handle_unknown="ignore"), cols)],
                             remainder="passthrough", sparse_threshold=0.0)


def _private(X_tr, y_tr, X_te, categories, eps, seed, **kw):
    from sklearn.pipeline import make_pipeline

    from noisysgd import NoisySGDClassifier

    pipe = make_pipeline(_encoder(categories),
                         NoisySGDClassifier(epsilon=eps, classes=[0, 1], random_state=seed, **kw))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pipe.fit(X_tr, y_tr)
    near = any("barely better than predicting one class" in str(w.message) for w in caught)
    leak = any(type(w.message).__name__ == "PrivacyLeakWarning" for w in caught)
    return pipe.predict(X_te), near, leak


def markdown_table(results=OUT.parent) -> list[str]:
    """docs/accuracy.md §4a's table, rendered from tables.json and the peers' JSON files
    (tests/test_docs_tables.py checks that the docs show it as the files say)."""
    results = Path(results)
    ours = json.loads((results / "tables.json").read_text())["rows"]
    dpl = json.loads((results / "peer_diffprivlib_tables.json").read_text())["rows"]
    opacus = json.loads((results / "peer_opacus_centered_tables.json").read_text())["datasets"]

    def cell(r):
        extra = [f"bal. {r['balanced_accuracy_mean']:.3f}"]
        if sum(r.get("warned", [])):
            extra.append(f"warned {sum(r['warned'])}/3")
        return f"{r['accuracy_mean']:.3f} ± {r['accuracy_std']:.3f} ({', '.join(extra)})"

    lines = ['| table | ε | majority | non-private LR | defaults | `feature_range="private"` | diffprivlib '
             '| Opacus ORACLE (same private mean) |', "|---|---|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["data"] for r in ours):
        for eps in EPSILONS:
            rows = {r["method"]: r for r in ours if r["data"] == name and r["epsilon"] == eps}
            d = next(r for r in dpl if r["data"] == name and r["epsilon"] == eps)
            o = opacus[name]["oracle"][f"{eps:g}"]
            lr = rows["non-private LR"]
            lines.append(f"| {name} | {eps:g} | {rows['majority']['accuracy_mean']:.3f} "
                         f"| {lr['accuracy_mean']:.3f} (bal. {lr['balanced_accuracy_mean']:.3f}) "
                         f"| {cell(rows['defaults'])} | {cell(rows['feature_range=' + chr(34) + 'private' + chr(34)])} "
                         f"| {d['accuracy_mean']:.3f} ± {d['accuracy_std']:.3f} (bal. {d['balanced_accuracy_mean']:.3f}) "
                         f"| {o['mean']:.3f} ± {o['std']:.3f} |")
    return lines


def main() -> int:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rows = []
    for name, X, y, cats in tables():
        print(f"{name}: {X.shape[0]} rows, {X.shape[1]} columns, {y.mean():.1%} positive")
        for eps in EPSILONS:
            res: dict = {}
            for seed in SEEDS:
                X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)
                major = int(np.bincount(y_tr).argmax())
                out = {"majority": (np.full(y_te.shape, major), False, False)}
                lr = make_pipeline(_encoder(cats), StandardScaler(), LogisticRegression(max_iter=2000))
                out["non-private LR"] = (lr.fit(X_tr, y_tr).predict(X_te), False, False)
                for label, kw in (("defaults", {}), ('feature_range="private"', {"feature_range": "private"})):
                    pred, near, leak = _private(X_tr, y_tr, X_te, cats, eps, seed, **kw)
                    out[label] = (pred, near, leak)
                for label, (pred, near, leak) in out.items():
                    r = res.setdefault(label, {"accuracy": [], "balanced_accuracy": [], "warned": [], "leak": []})
                    r["accuracy"].append(float(np.mean(pred == y_te)))
                    r["balanced_accuracy"].append(float(balanced_accuracy_score(y_te, pred)))
                    r["warned"].append(bool(near))
                    r["leak"].append(bool(leak))
            for label, r in res.items():
                rows.append({"data": name, "epsilon": eps, "method": label, **r,
                             "accuracy_mean": float(np.mean(r["accuracy"])),
                             "accuracy_std": float(np.std(r["accuracy"])),
                             "balanced_accuracy_mean": float(np.mean(r["balanced_accuracy"]))})
                print(f"  eps={eps:<4g} {label:26s} acc {np.mean(r['accuracy']):.3f} ± {np.std(r['accuracy']):.3f}  "
                      f"balanced {np.mean(r['balanced_accuracy']):.3f}  near-chance warning {sum(r['warned'])}/3"
                      + ("  PrivacyLeakWarning!" if any(r["leak"]) else ""), flush=True)
    OUT.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
