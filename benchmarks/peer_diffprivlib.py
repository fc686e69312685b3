"""diffprivlib's LogisticRegression on the data sets of ``auto_config.py`` (issue 15's peer table).

IBM's diffprivlib (0.6.6) trains logistic regression with **objective perturbation**
(Chaudhuri, Monteleoni & Sarwate 2011; its ``Vector`` mechanism): pure ε-DP (δ = 0), a
stronger guarantee than the (ε, δ = min(1e-5, 1/(10n))) of noisysgd's rows.  Multiclass is
one-vs-rest with ε/k per class (basic composition).  It needs ``data_norm``, a public bound
on every row's norm: rows are clipped to norm 1 first — the same data-independent map as
noisysgd's ``feature_clip=1`` — and ``data_norm=1``; the regularization is its default
(C = 1).  Same splits (80/20 stratified, seeds 0, 1, 2), same ε ∈ {0.5, 1, 3}.

diffprivlib 0.6.6 does not import with scikit-learn ≥ 1.6, so this runs in a separate
environment (not a project dependency)::

    python3 -m venv /tmp/dpl && . /tmp/dpl/bin/activate
    pip install diffprivlib 'scikit-learn<1.6'
    python benchmarks/peer_diffprivlib.py     # ~10 s; writes benchmarks/results/peer_diffprivlib.json
    pip install statsmodels; python benchmarks/peer_diffprivlib.py --tables
        # statsmodels' fair, randhie and anes96 (issue 27 §6), split and encoded as
        # benchmarks/tables.py does (75/25 stratified, seeds 0, 1, 2; the declared categories
        # one-hot encoded, the other columns in their units), rows clipped to norm 1:
        # benchmarks/results/peer_diffprivlib_tables.json

diffprivlib spends nothing on preprocessing (it has no private mean or range query), so on the
tables it trains with the whole ε where noisysgd's defaults spend part of theirs on the mean.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "peer_diffprivlib.json"
EPSILONS = (0.5, 1.0, 3.0)
SEEDS = (0, 1, 2)


def _clip_rows(X, R=1.0):
    norms = np.linalg.norm(X, axis=1)
    return X * (R / np.maximum(norms, R))[:, None]


def _tables(argv) -> int:
    """diffprivlib on benchmarks/tables.py's tables, its splits and its declared one-hot map."""
    import sys

    import diffprivlib
    import sklearn
    from diffprivlib.models import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.model_selection import train_test_split

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from tables import EPSILONS as T_EPS
    from tables import SEEDS as T_SEEDS
    from tables import _encoder, tables

    rows = []
    for name, X, y, cats in tables():
        for eps in T_EPS:
            accs, bal = [], []
            for seed in T_SEEDS:
                X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)
                enc = _encoder(cats).fit(X_tr)   # the declared categories: learns nothing from the rows
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    clf = LogisticRegression(epsilon=eps, data_norm=1.0, random_state=seed).fit(
                        _clip_rows(enc.transform(X_tr)), y_tr)
                pred = clf.predict(_clip_rows(enc.transform(X_te)))
                accs.append(float(np.mean(pred == y_te)))
                bal.append(float(balanced_accuracy_score(y_te, pred)))
            rows.append({"data": name, "epsilon": eps, "accuracy": accs, "balanced_accuracy": bal,
                         "accuracy_mean": float(np.mean(accs)), "accuracy_std": float(np.std(accs)),
                         "balanced_accuracy_mean": float(np.mean(bal))})
            print(f"{name:22s} eps {eps:g}: {np.mean(accs):.3f} ± {np.std(accs):.3f} (balanced {np.mean(bal):.3f})",
                  flush=True)
    out = OUT.with_name("peer_diffprivlib_tables.json")
    out.write_text(json.dumps({"diffprivlib": diffprivlib.__version__, "scikit-learn": sklearn.__version__,
                               "guarantee": "pure epsilon-DP (delta = 0), objective perturbation",
                               "preprocessing": "declared categories one-hot encoded, other columns in their "
                                                "units, rows clipped to norm 1, data_norm=1, C=1; no query",
                               "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


def main(argv=None) -> int:
    import sys

    if (sys.argv[1:] if argv is None else argv) == ["--tables"]:
        return _tables(argv)
    import diffprivlib
    import sklearn
    from diffprivlib.models import LogisticRegression
    from sklearn.datasets import load_breast_cancer, load_digits, make_classification
    from sklearn.model_selection import train_test_split

    data = {
        "digits": load_digits(return_X_y=True),
        "breast_cancer": load_breast_cancer(return_X_y=True),
        "synthetic": make_classification(n_samples=20000, n_features=50, random_state=0),
    }
    rows = {}
    for name, (X, y) in data.items():
        for eps in EPSILONS:
            accs = []
            for seed in SEEDS:
                Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=seed, stratify=y)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # convergence warnings of the perturbed objective
                    clf = LogisticRegression(epsilon=eps, data_norm=1.0, random_state=seed).fit(
                        _clip_rows(Xtr), ytr)
                accs.append(float(clf.score(_clip_rows(Xte), yte)))
            rows[f"{name} @ eps={eps:g}"] = {"mean": float(np.mean(accs)), "std": float(np.std(accs, ddof=1)),
                                             "seeds": accs}
            print(f"{name:14s} eps {eps:g}: {np.mean(accs):.3f} ± {np.std(accs, ddof=1):.3f}", flush=True)
    OUT.write_text(json.dumps({"diffprivlib": diffprivlib.__version__, "scikit-learn": sklearn.__version__,
                               "guarantee": "pure epsilon-DP (delta = 0), objective perturbation",
                               "preprocessing": "rows clipped to norm 1, data_norm=1, C=1",
                               "rows": rows}, indent=1) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
