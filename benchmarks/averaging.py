"""Does the tail average help at the run the automatic configuration picks?  (issue 26 §2:
"use it in auto if it helps".)

For each data set, seed and ε the defaults are fitted (``NoisySGDClassifier(epsilon=ε)``, the
splits of ``benchmarks/auto_config.py``); where the search chose the amplified-composition regime
(every iterate covered, so an average of them is free post-processing), the chosen run is fitted
again with its parameters fixed (Poisson batches, b, epochs, learning rate, α and the clip of
``clip_norm="auto"``, as trained), once releasing
the last iterate and once the tail average (``average=True``), same seed: a paired comparison of
the two outputs of one configuration.  (The fixed runs ask no curvature query, so they carry ~1 %
less noise than the defaults; the pair shares it.)  The defaults release by ``average="auto"``
(:mod:`noisysgd.train.release`): the table counts the seeds where that rule released the tail
average and gives its statistic.  Writes ``benchmarks/results/averaging.json``;
docs/accuracy.md §1a shows :func:`markdown_table` (checked by tests/test_docs_tables.py)::

    python benchmarks/averaging.py [--fashion-dir DIR]      # ~6 min, ~4 more with Fashion-MNIST
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "averaging.json"
DATASETS = ("digits", "breast_cancer", "synthetic")
EPSILONS = (0.5, 1.0, 3.0)
SEEDS = (0, 1, 2)


def chosen_run(clf) -> dict | None:
    """The amplified-composition run a fitted ``NoisySGDClassifier`` with the defaults chose, as
    parameters that fit it again (Poisson batches, b, epochs, the learning rate, α and the clip of
    ``clip_norm="auto"``, as trained), or None where the search chose the hidden-state regime."""
    c = clf.privacy_report_["config"]["chosen"]
    if c.get("regime") != "amplified composition":
        return None
    clip = clf.privacy_report_["config"].get("clip")  # clip_norm="auto": the clipped run, as trained
    return dict(batching="poisson", batch_size=c["batch_size"], epochs=c["epochs"],
                learning_rate=clf.run_.learning_rate, alpha=clf.run_.strong_convexity,
                clip_norm=None if clip is None else clip["clip_norm"])


def _pair(name, eps, seeds, fashion_dir=None) -> dict | None:
    sys.path.insert(0, str(HERE))
    from auto_config import load

    from noisysgd import NoisySGDClassifier

    from auto_config import released

    out = {"defaults": [], "last": [], "average": [], "chosen": [], "released": [], "release_statistic": []}
    for seed in seeds:
        Xtr, Xte, ytr, yte, _ = load(name, seed, fashion_dir)
        d = NoisySGDClassifier(epsilon=eps, random_state=seed).fit(Xtr, ytr)
        fixed = chosen_run(d)
        if fixed is None:
            continue
        out["defaults"].append(float(d.score(Xte, yte)))
        out["chosen"].append(fixed)
        rule = released(d)
        out["released"].append(rule["released"])
        out["release_statistic"].append(rule["release_statistic"])
        for key, average in (("last", False), ("average", True)):
            m = NoisySGDClassifier(epsilon=eps, random_state=seed, average=average, **fixed).fit(Xtr, ytr)
            out[key].append(float(m.score(Xte, yte)))
    return out if out["last"] else None


def markdown_table(path=OUT) -> list[str]:
    """docs/accuracy.md §1a's averaging table, rendered from averaging.json."""
    rows = json.loads(Path(path).read_text())["rows"]
    lines = ["| data set | ε | seeds | defaults (`average=\"auto\"`) | the chosen run, last iterate "
             "| the same run, tail average | average − last | seeds where `\"auto\"` averaged | its statistic c |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        diff = np.mean(r["average"]) - np.mean(r["last"])
        stats = ", ".join("—" if c is None else f"{c:+.2f}" for c in r["release_statistic"])
        lines.append(f"| {r['data'].replace('synthetic', 'make_classification').replace('fashion_pixels', 'Fashion-MNIST pixels')} "
                     f"| {r['epsilon']:g} | {len(r['last'])} | {np.mean(r['defaults']):.3f} | {np.mean(r['last']):.3f} "
                     f"| {np.mean(r['average']):.3f} | {100 * diff:+.1f} points "
                     f"| {sum(x == 'tail-average' for x in r['released'])} of {len(r['released'])} | {stats} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fashion-dir", default=None, help="also Fashion-MNIST pixels at ε = 1 (IDX files in DIR)")
    ap.add_argument("--json", default=str(OUT))
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    rows = []
    jobs = [(name, eps) for name in DATASETS for eps in EPSILONS]
    if a.fashion_dir:
        jobs.append(("fashion_pixels", 1.0))
    for name, eps in jobs:
        r = _pair(name, eps, SEEDS, a.fashion_dir)
        if r is None:
            print(f"{name} eps {eps:g}: the search chose no composition run", flush=True)
            continue
        rows.append({"data": name, "epsilon": eps, **r})
        print(f"{name} eps {eps:g}: defaults {np.mean(r['defaults']):.4f}, last {np.mean(r['last']):.4f}, "
              f"average {np.mean(r['average']):.4f}", flush=True)
    Path(a.json).write_text(json.dumps({"seeds": list(SEEDS), "rows": rows}, indent=1) + "\n")
    print("\n".join(markdown_table(a.json)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
