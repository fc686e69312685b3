"""Does the automatic α (or the intercept scaling s) make the training objective's optimum a
constant model?  (issue 27 §2, on the tables of ``benchmarks/tables.py``.)

For each table, ε and seed, the defaults are fitted as in ``tables.py`` (the same split, the
declared one-hot encoding, ``NoisySGDClassifier(epsilon=ε)``); then the objective the trainer
minimised — the mean logistic loss over the rows *as trained* (clipped, centered on the
released private mean, clipped to R_c, with the bias coordinate s) plus (α/2)‖W‖² on every
coordinate — is minimised exactly, without noise (scipy L-BFGS), three times:

* ``optimum (α, s)``: at the α and s the defaults chose;
* ``optimum (α/1000, s)``: the same rows with a thousand times less regularisation: what α
  costs the optimum (a constant optimum, or a bias towards it, shows here);
* ``optimum (α, s = R_c)``: the intercept scaled as the weights (s = R_c): what a small s costs
  the intercept, which the ridge term penalises as (α/s²)·b²/2 (the "starved intercept").

Test accuracy and balanced accuracy of each, against the private model and the majority class.
None of these optima is private (they read the training rows): they say which part of the gap
to the non-private model is the regularisation and which is the noise.  Writes
``benchmarks/results/regularization.json``::

    python benchmarks/regularization.py      # ~3 min (statsmodels for the tables)
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tables import EPSILONS, SEEDS, _encoder, tables  # noqa: E402  (benchmarks/tables.py)

OUT = Path(__file__).resolve().parent / "results" / "regularization.json"
COLUMNS = ("majority", "private model", "optimum (alpha, s)", "optimum (alpha/1000, s)", "optimum (alpha, s = R_c)")


def markdown_table(path=OUT) -> list[str]:
    """docs/accuracy.md §5's table, rendered from regularization.json (tests/test_docs_tables.py
    checks that the docs show it as the file says)."""
    rows = json.loads(Path(path).read_text())["rows"]
    head = ("| table | ε | α, s chosen | majority | private model (defaults) | optimum at (α, s) "
            "| optimum at (α/1000, s) | optimum at (α, s = R_c) |")
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [f"{r['models'][k]['accuracy_mean']:.3f} (bal. {r['models'][k]['balanced_accuracy_mean']:.3f})"
                 for k in COLUMNS]
        lines.append(f"| {r['data']} | {r['epsilon']:g} | {np.median(r['alpha']):.0e}, {np.median(r['s']):.3f} | "
                     + " | ".join(cells) + " |")
    return lines


def trained_rows(est, X) -> np.ndarray:
    """The rows of ``X`` as ``est`` (a fitted NoisySGDClassifier) trained on them: x̄ = (x as
    trained, s), formed (the same map ``predict`` applies)."""
    from noisysgd.train.losses import augment

    X = est.feature_map_(np.asarray(X, dtype=float))
    res = est.fit_.result
    return augment(X, res.feature_clip, intercept_scaling=res.intercept_scaling, dtype=np.float64)


def optimum(Xbar: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """argmin_W mean log(1 + exp(−y_i x̄_iᵀW)) + (λ/2)‖W‖², y ∈ {−1, +1} (L-BFGS: to a gradient of
    1e-9, or 5,000 iterations where the rows are ill-conditioned — the tiny columns of the mixed
    units — whose predictions have long stopped changing by then)."""
    from scipy.optimize import minimize
    from scipy.special import expit

    def f(W):
        m = y * (Xbar @ W)
        val = np.mean(np.logaddexp(0.0, -m)) + 0.5 * lam * W @ W
        grad = -(Xbar.T @ (y * expit(-m))) / len(y) + lam * W
        return val, grad

    res = minimize(f, np.zeros(Xbar.shape[1]), jac=True, method="L-BFGS-B",
                   options={"maxiter": 5000, "gtol": 1e-9, "ftol": 1e-14})
    return res.x


def main() -> int:
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline

    from noisysgd import NoisySGDClassifier

    rows = []
    for name, X, y, cats in tables():
        print(f"{name}: {X.shape[0]} rows, {X.shape[1]} columns, {y.mean():.1%} positive", flush=True)
        for eps in EPSILONS:
            res: dict = {}
            for seed in SEEDS:
                X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)
                enc = _encoder(cats).fit(X_tr)
                E_tr, E_te = enc.transform(X_tr), enc.transform(X_te)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = NoisySGDClassifier(epsilon=eps, classes=[0, 1], random_state=seed).fit(E_tr, y_tr)
                lam = float(est.fit_.result.run.strong_convexity)
                s, Rc = float(est.fit_.result.intercept_scaling), float(est.fit_.result.feature_clip)
                B_tr, B_te = trained_rows(est, E_tr), trained_rows(est, E_te)
                assert np.allclose(B_te @ est.fit_.result.coef, est.decision_function(E_te), rtol=1e-9, atol=1e-12)
                ys = np.where(y_tr == 1, 1.0, -1.0)
                models = {"private model": est.predict(E_te),
                          "majority": np.full(y_te.shape, int(np.bincount(y_tr).argmax()))}
                for label, l, scale in (("optimum (alpha, s)", lam, s), ("optimum (alpha/1000, s)", lam / 1000, s),
                                        ("optimum (alpha, s = R_c)", lam, Rc)):
                    Btr, Bte = B_tr.copy(), B_te.copy()
                    Btr[:, -1], Bte[:, -1] = scale, scale
                    W = optimum(Btr, ys, l)
                    models[label] = (Bte @ W > 0).astype(int)
                    res.setdefault(label + " intercept", []).append(float(W[-1] * scale))
                for label, pred in models.items():
                    r = res.setdefault(label, {"accuracy": [], "balanced_accuracy": []})
                    r["accuracy"].append(float(np.mean(pred == y_te)))
                    r["balanced_accuracy"].append(float(balanced_accuracy_score(y_te, pred)))
                res.setdefault("alpha", []).append(lam)
                res.setdefault("s", []).append(s)
                res.setdefault("R_c", []).append(Rc)
            out = {"data": name, "epsilon": eps, "alpha": res["alpha"], "s": res["s"], "R_c": res["R_c"], "models": {}}
            for label in COLUMNS:
                r = res[label]
                out["models"][label] = {**r, "accuracy_mean": float(np.mean(r["accuracy"])),
                                        "balanced_accuracy_mean": float(np.mean(r["balanced_accuracy"]))}
                if label + " intercept" in res:
                    out["models"][label]["intercept"] = res[label + " intercept"]
            rows.append(out)
            summary = "  ".join(f"{k}: {v['accuracy_mean']:.3f} (bal. {v['balanced_accuracy_mean']:.3f})"
                                for k, v in out["models"].items())
            print(f"  eps={eps:<4g} alpha {np.median(res['alpha']):.0e} s {np.median(res['s']):.3g}  {summary}", flush=True)
    OUT.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
