"""feature_range="private" against raw features and two non-private oracles.

Data: make_classification(20000, 50, 20 informative) with every column multiplied by 10^U(-3, 3)
(raw tabular data whose units differ and have no public bounds), and breast_cancer (n = 455).
Models: NoisySGDClassifier with its defaults (auto configuration) on
* raw features,
* feature_range="private" (10 % of (ε, δ) on the range query; the certificate covers both),
* ORACLE ranges: the 95 % quantile of |x_j| on the training part (not private),
* ORACLE StandardScaler fitted on the training part (not private).
3 seeds of an 80/20 split, ε ∈ {1, 3}.  Results: benchmarks/results/private_scaling.json.

    python benchmarks/private_scaling.py     # ~2 min
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "private_scaling.json"


def _datasets():
    from sklearn.datasets import load_breast_cancer, make_classification

    X, y = make_classification(n_samples=20000, n_features=50, n_informative=20, random_state=0)
    X = X * 10.0 ** np.random.default_rng(1).uniform(-3, 3, size=50)
    yield "make_classification(20000, 50), columns x 10^U(-3,3)", X, y
    X, y = load_breast_cancer(return_X_y=True)
    yield "breast_cancer (455 training rows)", X, y


def main() -> int:
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    from noisysgd import NoisySGDClassifier

    warnings.simplefilter("ignore")
    rows = []
    for name, X, y in _datasets():
        for eps in (1.0, 3.0):
            acc: dict = {}
            for seed in range(3):
                Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=seed, stratify=y)
                q = np.quantile(np.abs(Xtr), 0.95, axis=0)
                s = StandardScaler().fit(Xtr)
                runs = {
                    "raw": (NoisySGDClassifier(epsilon=eps, random_state=seed), Xtr, Xte),
                    "private ranges": (NoisySGDClassifier(epsilon=eps, feature_range="private",
                                                          random_state=seed), Xtr, Xte),
                    "ORACLE ranges (not private)": (NoisySGDClassifier(epsilon=eps, feature_range=(-q, q),
                                                                       random_state=seed), Xtr, Xte),
                    "ORACLE StandardScaler (not private)": (NoisySGDClassifier(epsilon=eps, random_state=seed),
                                                            s.transform(Xtr), s.transform(Xte)),
                }
                for method, (clf, A, B) in runs.items():
                    acc.setdefault(method, []).append(float(clf.fit(A, ytr).score(B, yte)))
            for method, v in acc.items():
                rows.append({"data": name, "epsilon": eps, "method": method, "mean": float(np.mean(v)),
                             "std": float(np.std(v)), "seeds": v})
                print(f"{name[:34]:34s} eps={eps:g}  {method:38s} {np.mean(v):.3f} ± {np.std(v):.3f}")
    OUT.write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
