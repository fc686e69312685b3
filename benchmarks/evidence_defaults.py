"""The defaults on the project's evidence tables, for a change of the defaults: before and after.

    PYTHONPATH=<a library's src> python benchmarks/evidence_defaults.py --json OUT.json [--tables NAME ...]
    python benchmarks/evidence_defaults.py --compare BEFORE.json AFTER.json

Committed: ``benchmarks/results/evidence_defaults_before.json`` (the library of commit be99bed, before
issue 43's defaults) and ``evidence_defaults_after.json`` (after them);
``evidence_defaults_unseen_median.json`` (the unseen columns' range and the scaling rule of
benchmarks/raw_tables/README.md §16, commit b807976); ``evidence_defaults_scaling_twin.json`` (the
scaling rule of its §28); ``evidence_adaptive_clip.json``
(``--params '{"clip_norm": "adaptive-unscaled"}'``) and ``evidence_adaptive_clip_scaled.json``
(``'{"clip_norm": "adaptive"}'``, docs/accuracy.md §1b); one thread, ~4 min each.

The tables of docs/accuracy.md's evidence (the splits of ``peer_opacus.py``: 80/20 stratified,
seeds 0, 1, 2): digits, breast_cancer, make_classification(20000, 50), statsmodels' ``fair``
(needs statsmodels) and ``benchmarks/tables.py``'s five (75/25), each at ε ∈ {0.5, 1, 3} under
both adjacencies, ``NoisySGDClassifier(epsilon, classes, random_state=seed)`` (add/remove: the
training rows' count declared public).  Fashion-MNIST is not here (``fashion_mnist/anchor.py``).
``--compare`` prints each cell's mean before and after, the difference, and the seeds' spread
(the pooled standard deviation of the two rows' three seeds), flagging a loss beyond 2 standard
errors of the difference.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SEEDS = (0, 1, 2)
EPSILONS = (0.5, 1.0, 3.0)
ADJACENCIES = ("replace", "add-remove")


def _data() -> dict:
    from sklearn.datasets import load_breast_cancer, load_digits, make_classification

    sys.path.insert(0, str(HERE))
    from peer_opacus import _fair, _tables

    data = {"digits": (load_digits(return_X_y=True), 0.2),
            "breast_cancer": (load_breast_cancer(return_X_y=True), 0.2),
            "synthetic": (make_classification(n_samples=20000, n_features=50, random_state=0), 0.2)}
    try:
        data["fair"] = (_fair(), 0.2)
    except ImportError:
        print("statsmodels missing: fair and the five tables skipped", file=sys.stderr)
        return data
    data.update({name: (Xy, 0.25) for name, Xy in _tables().items()})
    return data


def run(out_path: Path, only=None, params=None) -> None:
    from sklearn.model_selection import train_test_split

    import noisysgd
    from noisysgd import NoisySGDClassifier

    params = dict(params or {})
    if params.get("clip_norm") == "adaptive-unscaled":  # (adaptive, the step not scaled by C_0/C_t)
        import dataclasses

        import noisysgd.pipeline as pipeline

        real = pipeline.configure

        def configure(p, *a, **k):
            out = real(p, *a, **k)
            if p.get("adaptive_clip") is not None:
                p["adaptive_clip"] = dataclasses.replace(p["adaptive_clip"], scale_step=False)
            return out
        pipeline.configure = configure
        params["clip_norm"] = "adaptive"
    out = json.loads(out_path.read_text()) if out_path.exists() else {"library": noisysgd.__file__, "cells": {},
                                                                      "params": params}
    warnings.simplefilter("ignore")
    for name, ((X, y), test_size) in _data().items():
        if only and name not in only:
            continue
        labels = sorted(set(np.asarray(y).tolist()))
        for s in SEEDS:
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=test_size, random_state=s, stratify=y)
            for adjacency in ADJACENCIES:
                extra = {"adjacency": "add-remove", "public_n": len(Xtr)} if adjacency == "add-remove" else {}
                for eps in EPSILONS:
                    key = f"{name}|{adjacency}|{eps:g}|{s}"
                    if key in out["cells"]:
                        continue
                    t0 = time.perf_counter()
                    clf = NoisySGDClassifier(epsilon=eps, classes=labels, random_state=s, **extra,
                                             **params).fit(Xtr, ytr)
                    cfg = clf.privacy_report_["config"]
                    out["cells"][key] = {"accuracy": float(clf.score(Xte, yte)), "seconds": time.perf_counter() - t0,
                                         "regime": cfg.get("chosen", {}).get("regime"),
                                         "alpha": clf.run_.strong_convexity, "learning_rate": clf.run_.learning_rate,
                                         "epsilon": clf.privacy_report_["epsilon"]}
        print(name, flush=True)
        out_path.write_text(json.dumps(out, indent=1) + "\n")


def compare(before: Path, after: Path) -> int:
    a, b = (json.loads(p.read_text())["cells"] for p in (before, after))
    groups: dict = {}
    for key in sorted(set(a) & set(b)):
        name, adjacency, eps, _ = key.split("|")
        groups.setdefault((name, adjacency, eps), []).append((a[key]["accuracy"], b[key]["accuracy"]))
    worse = 0
    print(f"{'table':24s} {'adjacency':10s} {'eps':>4s} {'before':>7s} {'after':>7s} {'diff':>7s} {'2 s.e.':>7s}")
    for (name, adjacency, eps), pairs in groups.items():
        x, y = np.array(pairs).T
        pooled = np.sqrt((np.var(x, ddof=1) + np.var(y, ddof=1)) / 2) if len(x) > 1 else 0.0
        se2 = 2 * pooled * np.sqrt(2 / len(x))
        flag = " LOSS" if y.mean() - x.mean() < -max(se2, 0.005) else ""
        worse += bool(flag)
        print(f"{name:24s} {adjacency:10s} {eps:>4s} {x.mean():7.3f} {y.mean():7.3f} {y.mean() - x.mean():+7.3f} "
              f"{se2:7.3f}{flag}")
    print(f"{worse} of {len(groups)} cells lose beyond two standard errors")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--tables", nargs="*")
    ap.add_argument("--compare", nargs=2, type=Path)
    ap.add_argument("--params", default="{}", help="JSON of estimator parameters to set on every fit (a variant "
                    "of the defaults, e.g. '{\"clip_norm\": \"adaptive\"}'; \"adaptive-unscaled\": adaptive "
                    "clipping without the step scaled by C_0/C_t, benchmarks/results/evidence_adaptive_clip.json)")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    run(args.json, args.tables, json.loads(args.params))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
