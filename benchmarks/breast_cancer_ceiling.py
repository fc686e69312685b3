"""How far scaling can take breast_cancer at ε = 1 (issue 15's target: ≥ 0.94).

breast_cancer's 30 raw features differ in scale by 10⁵ and have no public bounds.  This measures
NoisySGDClassifier with its defaults (auto configuration) on

* the raw features (what a private pipeline can do today),
* a fixed public transform, sign(x)·log(1 + |x|) (no privacy cost),
* an ORACLE: a StandardScaler fitted on the training part — NOT private (its statistics are not
  covered by the certificate); it bounds what any private scaler could reach,
* the oracle, features then clipped to [−3, 3] and divided by 3,

at ε ∈ {1, 3}, δ default, feature_clip ∈ {1, 3}, 3 seeds of a stratified 80/20 split.  It also
prints, for a private per-feature scale query, the noise of a Gaussian histogram over a public
range of 41 binary exponents: each example adds one count per feature (L2 sensitivity √(2d) under
replace-one), so even 10 % of a (1, 1e-5) budget puts noise of std ≈ 400 on counts that sum to n = 455.

    python benchmarks/breast_cancer_ceiling.py      # ~1 min
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "breast_cancer_ceiling.json"


def main() -> int:
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    from noisysgd import NoisySGDClassifier

    warnings.simplefilter("ignore")
    X, y = load_breast_cancer(return_X_y=True)
    res: dict = {}
    for seed in range(3):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=seed, stratify=y)
        s = StandardScaler().fit(Xtr)
        variants = {
            "raw": (Xtr, Xte),
            "public log1p": (np.sign(Xtr) * np.log1p(np.abs(Xtr)), np.sign(Xte) * np.log1p(np.abs(Xte))),
            "ORACLE StandardScaler (not private)": (s.transform(Xtr), s.transform(Xte)),
            "ORACLE StandardScaler, clipped to [-3, 3] / 3 (not private)": (
                np.clip(s.transform(Xtr), -3, 3) / 3, np.clip(s.transform(Xte), -3, 3) / 3),
        }
        for name, (A, B) in variants.items():
            for eps in (1.0, 3.0):
                for clip in (1.0, 3.0):
                    clf = NoisySGDClassifier(epsilon=eps, feature_clip=clip, random_state=seed).fit(A, ytr)
                    res.setdefault(f"{name} | eps={eps:g} | feature_clip={clip:g}", []).append(clf.score(B, yte))
    rows = {k: {"mean": float(np.mean(v)), "std": float(np.std(v)), "seeds": v} for k, v in res.items()}
    for k, r in rows.items():
        print(f"{k:75s} {r['mean']:.3f} ± {r['std']:.3f}")
    d, n = X.shape[1], int(0.8 * X.shape[0])
    sens = math.sqrt(2 * d)
    # the classic Gaussian mechanism's σ for (0.1, 1e-6): a rough scale, not a tight calibration
    sigma = sens * math.sqrt(2 * math.log(1.25 / 1e-6)) / 0.1
    print(f"private histogram query: L2 sensitivity sqrt(2d) = {sens:.2f}; noise std ~ {sigma:.0f} per count "
          f"at (0.1, 1e-6) vs n = {n} examples in all")
    OUT.write_text(json.dumps({"rows": rows, "histogram_noise_std_at_0.1": sigma, "n_train": n, "d": d},
                              indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
