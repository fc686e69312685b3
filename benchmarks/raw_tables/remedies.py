"""Which one remedy should the near-chance warning name (issue 43 §4)?  Measured on run.py's JSON.

    .venv/bin/python benchmarks/raw_tables/remedies.py benchmarks/results/raw_tables_design.json

For every fit of the defaults that warned "barely better than predicting one class" at ε < 3, the
gain each remedy would have brought on the same split and seed: **raise ε** (the same fit at the
next ε of the benchmark, 2-3x), **scale the columns** (the same fit with ``feature_range="private"``),
and, with ``--fit-bounds``, **declare public bounds** — refitted here with ``feature_range=`` the
training split's min and max per column, a stand-in for the bounds a user knows from the columns'
domain (R's documentation does not give them; read off the data, so *not private*: it measures what
the remedy can bring, not a private row) — split by whether the fit's range query saw too few columns
to scale by (where scaling might have been expected to help most).  Balanced accuracy is what the warning
is about (a constant has 1/k); accuracy beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import DEFAULTS, EPSILONS, PRIVATE_RANGE  # noqa: E402


def _with_bounds(table: str, seed: int, eps: float) -> tuple[float, float]:
    import warnings

    from sklearn.metrics import balanced_accuracy_score
    from sklearn.model_selection import train_test_split

    import tables as T
    from run import TEST_SIZE

    from noisysgd import NoisySGDClassifier

    t = T.load(table)
    X_tr, X_te, y_tr, y_te = train_test_split(t.X, t.y, test_size=TEST_SIZE, stratify=t.y, random_state=seed)
    low, high = X_tr.min(axis=0), X_tr.max(axis=0)
    high = np.where(high > low, high, low + 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = NoisySGDClassifier(epsilon=eps, classes=t.labels, random_state=seed,
                                 feature_range=(low, high)).fit(X_tr, y_tr)
    pred = clf.predict(X_te)
    return float(balanced_accuracy_score(y_te, pred)), float(np.mean(pred == y_te))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json", type=Path)
    ap.add_argument("--fit-bounds", action="store_true", help="also refit the warned fits with min/max bounds")
    args = ap.parse_args(argv)
    cells = json.loads(args.json.read_text())["cells"]
    by = {(c["table"], c["seed"], c["method"], c["epsilon"]): c for c in cells}
    gains = defaultdict(lambda: defaultdict(list))
    for (table, seed, method, eps), c in by.items():
        if method != DEFAULTS or eps is None or eps >= max(EPSILONS) or not c.get("near_chance_warning"):
            continue
        decision = (c.get("range_query") or {}).get("decision") or ""
        named = "the range query saw too few columns" if "too few" in decision else "it saw enough of them"
        nxt = EPSILONS[EPSILONS.index(eps) + 1]
        for remedy, other in (("raise epsilon", by.get((table, seed, DEFAULTS, nxt))),
                              ("scale the columns", by.get((table, seed, PRIVATE_RANGE, eps)))):
            if other is not None:
                gains[named][remedy].append((other["balanced_accuracy"] - c["balanced_accuracy"],
                                             other["accuracy"] - c["accuracy"]))
        if args.fit_bounds:
            bal, acc = _with_bounds(table, seed, eps)
            gains[named]["declare bounds (min/max stand-in, not private)"].append(
                (bal - c["balanced_accuracy"], acc - c["accuracy"]))
    print("| fits that warned | warned fits | remedy tried | mean gain in balanced acc. | mean gain in acc. | "
          "share of fits it helps (bal.) |\n|---|---|---|---|---|---|")
    for named, tried in sorted(gains.items()):
        for remedy, g in sorted(tried.items()):
            g = np.array(g)
            print(f"| {named} | {len(g)} | {remedy} | {g[:, 0].mean():+.3f} | {g[:, 1].mean():+.3f} | "
                  f"{np.mean(g[:, 0] > 0):.0%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
