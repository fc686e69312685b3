"""The estimators' automatic configuration against the pre-auto defaults (issue 15).

Data sets, each split 80/20 (stratified, ``random_state=seed``) unless said:

* ``digits``: scikit-learn's digits (1,797 × 64 pixels in [0, 16], 10 classes).
* ``breast_cancer``: scikit-learn's breast_cancer (569 × 30, 2 classes), raw features.
* ``synthetic``: ``make_classification(n_samples=20000, n_features=50, random_state=0)``.
* ``fashion_pixels``: Fashion-MNIST's 784 raw pixels (0–255), its own 60,000/10,000
  train/test split — only if the IDX files are on disk (Debian's
  ``dataset-fashion-mnist``: ``/usr/share/datasets/fashion-mnist`` or
  ``FASHION_MNIST_DIR``); nothing is downloaded.  One seed by default (``--fashion-seeds``).
* ``fashion_scatter``: the ScatterNet features of ``benchmarks/fashion_mnist`` (d = 3,969,
  norm 1; needs kymatio, see its README) on the *same* 50,000 training rows as the grid
  rows of docs/results.md (their 10,000 validation rows unused: nothing is tuned), scored
  on the 10,000 test images — the issue's "auto, no grid" against the best grid row.

Rows, each at ε ∈ {0.5, 1, 3}, δ = the estimator's default min(1e-5, 1/(10n)),
seeds 0, 1, 2 (the split's and the model's):

* ``defaults (pre-auto)``: ``NoisySGDClassifier(epsilon=ε, epochs=100,
  batch_size=256, batching="cyclic", alpha=0.01, intercept_scaling=1.0)`` — what the estimator did
  before ``"auto"`` (the issue's "today's defaults").
* ``auto, intercept 1``: ``NoisySGDClassifier(epsilon=ε, intercept_scaling=1.0)``:
  the automatic configuration with the bias coordinate 1 it had before
  ``intercept_scaling="auto"`` (R/4).
* ``auto, not centered``: ``NoisySGDClassifier(epsilon=ε, center=None)`` — the
  configuration chosen by :func:`noisysgd.config.auto_config` from n, d, the
  number of classes, ε, δ, the feature clip and the loss constants only (no
  feature, no label), on the clipped rows as they are.
* ``auto``: ``NoisySGDClassifier(epsilon=ε)``, the defaults: the rows centered on
  a private mean (``center="private"``, spending 0.3 of the target's GDP μ and
  composed into the reported ε), then the automatic configuration for the
  clip R_c of the centered rows.
* ``auto + feature_range``: with public feature bounds (digits [0, 16],
  Fashion-MNIST [0, 255]; none are public for breast_cancer or the synthetic set).
* ``non-private``: ``StandardScaler`` + ``LogisticRegression`` (reference only;
  on Fashion-MNIST only with ``--fashion-nonprivate``: minutes of lbfgs).

Every private row's ε is the model's own, the centering query included (the
configuration looks at no data, so it costs nothing).  Not a test: run it by hand::

    python benchmarks/auto_config.py [--datasets digits,breast_cancer,synthetic,fashion_pixels]
        [--json benchmarks/results/auto_config.json]

An existing JSON file is updated (rows run now replace theirs; other rows of the data set stay).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

EPSILONS = (0.5, 1.0, 3.0)
LEGACY = dict(epochs=100, batch_size=256, batching="cyclic", alpha=0.01)


def _split(X, y, seed):
    from sklearn.model_selection import train_test_split

    return train_test_split(X, y, test_size=0.2, random_state=seed, stratify=y)


def load(name, seed, fashion_dir=None):
    """(X_train, X_test, y_train, y_test, public feature range or None)."""
    from sklearn.datasets import load_breast_cancer, load_digits, make_classification

    if name == "digits":
        X, y = load_digits(return_X_y=True)
        return (*_split(X, y, seed), (0.0, 16.0))
    if name == "breast_cancer":
        X, y = load_breast_cancer(return_X_y=True)
        return (*_split(X, y, seed), None)
    if name == "synthetic":
        X, y = make_classification(n_samples=20000, n_features=50, random_state=0)
        return (*_split(X, y, seed), None)
    if name == "fashion_scatter":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from fashion_mnist.data import features

        f = features("scatter", data_path=fashion_dir, threads=2, log=lambda *a: None)
        (Xtr, ytr), (Xte, yte) = f["train"], f["test"]
        return Xtr.astype(np.float64), Xte.astype(np.float64), ytr, yte, None
    if name == "fashion_pixels":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from fashion_mnist.data import load_images

        d = load_images(fashion_dir)
        Xtr = d["train_images"].reshape(60000, -1).astype(np.float64)
        Xte = d["test_images"].reshape(10000, -1).astype(np.float64)
        return Xtr, Xte, d["train_labels"], d["test_labels"], (0.0, 255.0)
    raise ValueError(f"unknown data set {name!r}")


def released(clf) -> dict:
    """What a fitted classifier released under ``average="auto"``: {"released": "last" or
    "tail-average", "release_statistic": the iterates' mean-reversion statistic or None}."""
    rule = clf.privacy_report_["certificate"].get("trainer_enforced", {}).get("release") or {}
    return {"released": rule.get("released", "last"), "release_statistic": rule.get("statistic")}


def _private(Xtr, Xte, ytr, yte, eps, seed, **params):
    from noisysgd import NoisySGDClassifier

    t = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf = NoisySGDClassifier(epsilon=eps, random_state=seed, **params).fit(Xtr, ytr)
    run = clf.run_
    cfg = clf.privacy_report_.get("config", {})
    return {
        "accuracy": float(clf.score(Xte, yte)), "epsilon": clf.epsilon_, "delta": clf.delta_,
        "noise_multiplier": clf.noise_multiplier_, "analysis": clf.privacy_report_["best_analysis"],
        "batching": run.batching, "batch_size": run.batch_size, "epochs": clf.n_iter_,
        "alpha": run.strong_convexity, "learning_rate": run.learning_rate,
        "feature_clip": clf.feature_clip_, "centered": clf.center_ is not None,
        "proxy": (cfg.get("chosen") or {}).get("proxy"),
        "legacy_proxy": next((c["proxy"] for c in cfg.get("candidates", []) if c.get("legacy")), None),
        "curvature_ratio": (cfg.get("assumptions") or {}).get("curvature_ratio"),
        "clip_factor": (cfg.get("clip") or {}).get("clip_factor"),
        **released(clf),
        "seconds": time.perf_counter() - t,
        "warnings": sorted({w.category.__name__ for w in caught}),
    }


def _nonprivate(Xtr, Xte, ytr, yte):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(Xtr, ytr)
    return {"accuracy": float(m.score(Xte, yte))}


def _summary(runs):
    acc = np.array([r["accuracy"] for r in runs])
    return {"mean": float(acc.mean()), "std": float(acc.std(ddof=1)) if acc.size > 1 else 0.0,
            "n_seeds": int(acc.size)}


_TABLE_SETS = (("digits", "digits (1437, 64)"), ("breast_cancer", "breast_cancer (455, 30)"),
               ("synthetic", "make_classification(20000, 50) (16000, 50)"))


def markdown_tables(results=Path(__file__).resolve().parent / "results") -> tuple[list[str], list[str]]:
    """docs/accuracy.md §1's two tables, rendered from auto_config.json (and, for the peers,
    peer_opacus.json and peer_diffprivlib.json); tests/test_docs_tables.py checks the docs show them."""
    results = Path(results)
    ours = json.loads((results / "auto_config.json").read_text())["datasets"]
    opacus = json.loads((results / "peer_opacus.json").read_text())["datasets"]
    dpl = json.loads((results / "peer_diffprivlib.json").read_text())["rows"]

    def cell(x, bold=False):
        text = f"{x['mean']:.3f} ± {x['std']:.3f}"
        return f"**{text}**" if bold else text

    first = ["| data set (n_train, d) | ε | pre-auto defaults | auto, intercept 1 | auto, not centered | **auto** (the "
             "defaults: private centering, §2) | auto + public `feature_range` | non-private (StandardScaler + "
             "LogisticRegression) |", "|---|---|---|---|---|---|---|---|"]
    peers = ["| data set | ε | noisysgd `epsilon=ε` (defaults, no data looked at but a private mean) | noisysgd, not "
             "centered | Opacus DP-SGD, **ORACLE** config (not centered) | diffprivlib LogisticRegression |",
             "|---|---|---|---|---|---|"]
    for name, label in _TABLE_SETS:
        sm = ours[name]["summary"]
        for i, eps in enumerate(EPSILONS):
            at = f" @ eps={eps:g}"
            fr = sm.get("auto + feature_range" + at)
            first.append(f"| {label if i == 0 else name.replace('synthetic', 'make_classification')} | {eps:g} "
                         f"| {cell(sm['defaults (pre-auto)' + at])} | {cell(sm['auto, intercept 1' + at])} "
                         f"| {cell(sm['auto, not centered' + at])} | {cell(sm['auto' + at], True)} "
                         f"| {cell(fr) if fr else '—'} | {cell(sm['non-private']) if i == 0 else ''} |")
            row = [sm["auto" + at], sm["auto, not centered" + at], opacus[name]["oracle"][f"{eps:g}"],
                   dpl[f"{name} @ eps={eps:g}"]]
            best = max(range(4), key=lambda j: row[j]["mean"])
            peers.append(f"| {name.replace('synthetic', 'make_classification')} | {eps:g} | "
                         + " | ".join(cell(x, j == best) for j, x in enumerate(row)) + " |")
    return first, peers


_REGIME_SETS = (("digits", "digits"), ("breast_cancer", "breast_cancer"), ("synthetic", "make_classification"))


def _chosen_text(c: dict | None) -> str:
    """What the search chose (one seed's run): the regime, batch size, epochs, step size, the private
    curvature's share of the worst-case smoothness where it was asked, and the tail average where
    ``average="auto"`` released it."""
    if not c:
        return "—"
    composition = c.get("regime") == "amplified composition" or (
        c.get("batching") == "poisson" and str(c.get("analysis", "composition")).startswith("composition"))
    text = (f"composition, b = {c['batch_size']}" if composition
            else f"hidden state ({c['batching']} {c['batch_size'] or 'full'})")
    text += f", {c['epochs']} epochs, lr {c['learning_rate']:.3g}"
    if c.get("clip_factor"):  # clip_norm="auto" (the step shown is the one trained, at the clip)
        text += f", clipped at {c['clip_factor']:g} L"
    if c.get("curvature_ratio") is not None:
        text += f", λ̂/R̄² = {c['curvature_ratio']:.2f}"
    if c.get("released") == "tail-average":  # average="auto" found the iterates settled
        text += f", tail average (c = {c['release_statistic']:.2f})"
    return text


def _ms(x: dict) -> str:
    return f"{x['mean']:.3f} ± {x['std']:.3f}" if x.get("std") else f"{x['mean']:.3f}"


def markdown_regime_tables(results=Path(__file__).resolve().parent / "results") -> dict:
    """docs/accuracy.md §1a's tables (issue 26 §4), rendered from the JSON files: the defaults against
    the Opacus oracle with the same private mean charged to it, under replace-one ("replace") and
    add/remove ("add-remove"), and on the held-out table ("held-out").  The defaults of digits,
    breast_cancer and make_classification under replace-one and of Fashion-MNIST pixels come from
    auto_config.json (3 seeds), the others from peer_opacus_centered*.json's ``noisysgd_defaults``."""
    results = Path(results)

    def load(name):
        return json.loads((results / f"{name}.json").read_text())["datasets"]

    ours = json.loads((results / "auto_config.json").read_text())["datasets"]
    out = {}
    head = ["| data set | ε | **noisysgd defaults** | what the search chose (seed 0) | Opacus ORACLE, same private "
            "mean charged to it | oracle's configuration |", "|---|---|---|---|---|---|"]
    for adjacency, suffix in (("replace", ""), ("add-remove", "_add_remove")):
        lines = list(head)
        peer = load("peer_opacus_centered" + suffix)
        sets = [(key, label, peer[key]) for key, label in _REGIME_SETS]
        sets += [(key, label, load(f"peer_opacus_centered_{key}{suffix}")[key])
                 for key, label in (("fashion_pixels", "Fashion-MNIST pixels"),
                                    ("fashion_scatter", "Fashion-MNIST ScatterNet"))]
        for key, label, theirs in sets:
            for eps in EPSILONS:
                e = f"{eps:g}"
                if adjacency == "replace" and key != "fashion_scatter":  # (3 seeds; ScatterNet: seed 0, peer file)
                    mine = ours[key]["summary"][f"auto @ eps={e}"]
                    chosen = next((r for r in ours[key]["runs"][f"auto @ eps={e}"] if r.get("seed") == 0), None)
                else:
                    mine = theirs["noisysgd_defaults"][e]
                    chosen = (mine.get("chosen") or [None])[0]
                oracle = theirs["oracle"][e]
                cfg = oracle["config"]
                lines.append(f"| {label} | {e} | {_ms(mine)} | {_chosen_text(chosen)} | {_ms(oracle)} | "
                             f"b = {cfg['batch_size']}, {cfg['epochs']} epochs, lr {cfg['lr']:g} |")
        out[adjacency] = lines
    lines = ["| adjacency | ε | **noisysgd defaults** | what the search chose (seed 0) | Opacus ORACLE, same private "
             "mean charged to it |", "|---|---|---|---|---|"]
    for adjacency, suffix in (("replace-one", ""), ("add/remove", "_add_remove")):
        fair = load("peer_opacus_centered" + suffix + "_held_out")["fair"]
        for eps in EPSILONS:
            e = f"{eps:g}"
            mine = fair["noisysgd_defaults"][e]
            lines.append(f"| {adjacency} | {e} | {_ms(mine)} | {_chosen_text((mine.get('chosen') or [None])[0])} "
                         f"| {_ms(fair['oracle'][e])} |")
    out["held-out"] = lines
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="digits,breast_cancer,synthetic,fashion_pixels")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--fashion-seeds", type=int, default=1)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="seeds first-seed, first-seed + 1, ...; runs of other seeds already in the JSON stay")
    ap.add_argument("--fashion-dir", default=None)
    ap.add_argument("--fashion-nonprivate", action="store_true",
                    help="also fit the non-private reference on Fashion-MNIST (slow)")
    ap.add_argument("--json", default="benchmarks/results/auto_config.json")
    ap.add_argument("--epsilons", default=",".join(f"{e:g}" for e in EPSILONS))
    ap.add_argument("--variants", default=None,
                    help="semicolon-separated subset of: defaults (pre-auto); auto, intercept 1; auto; "
                         "auto, not centered; auto + feature_range (default all)")
    args = ap.parse_args(argv)
    out_path = Path(args.json)
    results = json.loads(out_path.read_text()) if out_path.exists() else {}
    results["meta"] = {"python": platform.python_version(), "machine": platform.machine(),
                       "epsilons": list(EPSILONS), "legacy": LEGACY,
                       "command": "python benchmarks/auto_config.py " + " ".join(argv or sys.argv[1:])}
    results.setdefault("datasets", {})
    for name in args.datasets.split(","):
        seeds = args.fashion_seeds if name.startswith("fashion") else args.seeds
        try:
            load(name, 0, args.fashion_dir)
        except FileNotFoundError as exc:
            print(f"{name}: skipped ({exc})", flush=True)
            results["datasets"][name] = {"skipped": str(exc)}
            continue
        rows = {}
        for seed in range(args.first_seed, args.first_seed + seeds):
            Xtr, Xte, ytr, yte, frange = load(name, seed, args.fashion_dir)
            if not name.startswith("fashion") or args.fashion_nonprivate:  # minutes on 60,000 x 784
                rows.setdefault("non-private", []).append({**_nonprivate(Xtr, Xte, ytr, yte), "seed": seed})
            for eps in [float(e) for e in args.epsilons.split(",")]:
                variants = {"defaults (pre-auto)": {**LEGACY, "intercept_scaling": 1.0, "center": None},
                            "auto, intercept 1": {"intercept_scaling": 1.0, "center": None},
                            "auto, not centered": {"center": None}, "auto": {}}
                if frange is not None:
                    variants["auto + feature_range"] = {"feature_range": frange}
                if args.variants:
                    keep = [v.strip() for v in args.variants.split(";")]
                    variants = {k: v for k, v in variants.items() if k in keep}
                for label, params in variants.items():
                    r = {**_private(Xtr, Xte, ytr, yte, eps, seed, **params), "seed": seed}
                    rows.setdefault(f"{label} @ eps={eps:g}", []).append(r)
                    print(f"{name} seed {seed} eps {eps:g} {label:22s} acc {r['accuracy']:.4f} "
                          f"z {r['noise_multiplier']:.4g} {r['batching']} b={r['batch_size']} "
                          f"epochs={r['epochs']} alpha={r['alpha']:g} ({r['seconds']:.1f} s)", flush=True)
        n = len(Xtr) + (0 if name.startswith("fashion") else len(Xte))
        kept = results["datasets"].get(name, {}).get("runs", {})  # runs of other rows or seeds stay
        for label, old in kept.items():
            new = rows.get(label, [])
            done = {r["seed"] for r in new}
            rows[label] = sorted([r for i, r in enumerate(old) if r.get("seed", i) not in done] + new,
                                 key=lambda r: r.get("seed", 0))
        results["datasets"][name] = {
            "n_train": len(Xtr), "n_test": len(Xte), "d": Xtr.shape[1], "n_total": n,
            "summary": {k: _summary(v) for k, v in rows.items()}, "runs": rows}
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(results, indent=1, allow_nan=False) + "\n")
    for name, res in results["datasets"].items():
        if "summary" not in res:
            continue
        print(f"\n{name} (n_train={res['n_train']}, d={res['d']})")
        for k, s in res["summary"].items():
            print(f"  {k:34s} {s['mean']:.3f} ± {s['std']:.3f}  ({s['n_seeds']} seeds)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
