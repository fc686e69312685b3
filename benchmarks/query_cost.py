"""What the private preprocessing queries cost the training's noise (issue 27, third target:
≤ 10 % more noise than no query at all at ε = 1).

The same fixed runs of ``NoisySGDClassifier(epsilon=1)`` on make_classification(20000, 50) in
mixed units (benchmarks/tables.py's), for three batchings, each fitted four times: no query
(``center=None``), the private mean (``center="private"``, the default), the private ranges
(``feature_range="private"``), and both.  The calibrated noise multiplier z of each, and its
ratio to the first: the queries are composed with the training natively (GDP/PLD/RDP,
:func:`noisysgd.accountant.compose_query`) and the training calibrated to the composed total,
so a query costs the training only what √(μ² − μ_q²) takes from μ.  Writes
``benchmarks/results/query_cost.json``::

    python benchmarks/query_cost.py      # ~1 min
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "query_cost.json"
RUNS = (("poisson", 256, 20), ("cyclic", 256, 100), ("full", 20000, 300))
QUERIES = (("no query", {"center": None}), ("private mean", {"center": "private"}),
           ("private ranges", {"center": None, "feature_range": "private"}),
           ("both", {"center": "private", "feature_range": "private"}))


def markdown_table(path=OUT) -> list[str]:
    """The table docs/accuracy.md §4 shows, rendered from query_cost.json (tests/test_docs_tables.py)."""
    rows = json.loads(Path(path).read_text())["rows"]
    lines = ["| run (ε = 1) | " + " | ".join(f"z, {label}" for label, _ in QUERIES) + " |",
             "|---|" + "---|" * len(QUERIES)]
    for r in rows:
        z, ratio = r["noise_multiplier"], r["ratio_to_no_query"]
        cells = [f"{z[label]:.4g}" + ("" if label == "no query" else f" ({ratio[label] - 1:+.1%})")
                 for label, _ in QUERIES]
        lines.append(f"| {r['batching']}, b = {r['batch_size']}, {r['epochs']} epochs | " + " | ".join(cells) + " |")
    return lines


def main() -> int:
    from sklearn.datasets import make_classification

    from noisysgd import NoisySGDClassifier

    X, y = make_classification(n_samples=20000, n_features=50, n_informative=20, random_state=0)
    X = X * 10.0 ** np.random.default_rng(1).uniform(-3, 3, size=50)
    rows = []
    for batching, b, epochs in RUNS:
        z = {}
        for label, kw in QUERIES:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = NoisySGDClassifier(epsilon=1.0, classes=[0, 1], batching=batching, batch_size=b, epochs=epochs,
                                         alpha=1e-5, random_state=0, **kw).fit(X, y)
            z[label] = float(est.fit_.result.run.noise_multiplier)
        rows.append({"batching": batching, "batch_size": b, "epochs": epochs, "noise_multiplier": z,
                     "ratio_to_no_query": {k: v / z["no query"] for k, v in z.items()}})
        print(f"{batching:8s} b={b:<6d} {epochs:4d} epochs  "
              + "  ".join(f"{k}: z {v:.4g} ({v / z['no query'] - 1:+.1%})" for k, v in z.items()), flush=True)
    OUT.write_text(json.dumps({"epsilon": 1.0, "rows": rows}, indent=1) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
