"""How long a default fit takes on a small table, beside scikit-learn in the same process.

The work: ``NoisySGDClassifier(epsilon=ε, classes=[0, 1], random_state=seed).fit(X, y)`` with every
other parameter its default (the private mean and curvature queries, the configuration search, the
final calibration, training, the certificate), against scikit-learn's
``make_pipeline(StandardScaler(), LogisticRegression())`` on the same rows (non-private: the floor a
user compares with).  Two tables: 1,000 × 20 raw rows (``make_classification``, columns as
generated) and 600 × 17 rows in mixed units (columns scaled by 10⁻² to 5·10⁴ and shifted, 20 %
positives).  Before each of our fits, scikit-learn's best of three (this machine's speed drifts by
a third over minutes: each ratio is of fits made in the same period).  The process is warm
(imports done, one fit before timing); each timed fit asks a
*new* ε (so nothing the accountant cached for an earlier target is reused: what a user fitting a
new table pays), and, separately, a refit at an ε already asked (the caches warm: what a
cross-validation loop pays).  For each, the time is split into the queries, the configuration
search, the final calibration and the rest (training and the certificate).  The search is also
timed alone, each in a fresh process (every cache empty, imports not counted), with pruning on and
off (``config.PRUNE = False``: every candidate calibrated, what the search did before) — the same
choice, checked here.

Not a test (timings depend on the machine); run by hand, the machine otherwise idle::

    python benchmarks/fit_speed.py [--repeats 5] [--json benchmarks/results/fit_speed.json]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import time
import warnings

import numpy as np

EPSILONS = (0.53, 0.71, 0.89, 1.13, 1.37, 1.61, 1.93, 2.27, 2.69, 3.07, 0.61, 0.79)


def tables():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=1000, n_features=20, random_state=0)
    X2, y2 = make_classification(n_samples=600, n_features=17, n_informative=6, weights=[0.8], random_state=1)
    scale = np.array([1, 1e3, 10, 1e-2, 5e4, 1, 1, 1, 3, 300, 1, 1, 1, 2, 1, 1, 1])
    shift = np.array([0, 5e3] + [0] * 15)
    return {"raw 1000x20": (X, y), "mixed units 600x17": (X2 * scale + shift, y2)}


class Split:
    """Wall time of the pipeline's stages, by wrapping them where the pipeline calls them."""

    STAGES = {"queries": ("private_center_within", "private_ranges_within", "curvature_for"),
              "search": ("configure",), "calibration": ("calibrate_run",)}

    def __init__(self):
        import noisysgd.pipeline as P
        import noisysgd.private_fit as F

        self.seconds = {k: 0.0 for k in self.STAGES}
        for stage, names in self.STAGES.items():
            for name in names:
                module = F if name == "calibrate_run" else P
                setattr(module, name, self._timed(getattr(module, name), stage))

    def _timed(self, f, stage):
        def g(*a, **k):
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                self.seconds[stage] += time.perf_counter() - t
        return g

    def take(self) -> dict:
        out, self.seconds = dict(self.seconds), {k: 0.0 for k in self.STAGES}
        return out


SEARCH = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
import noisysgd.config as config
config.PRUNE = sys.argv[3] == "1"
t = time.perf_counter()
cfg = config.auto_config(n=int(sys.argv[1]), d=int(sys.argv[2]), outputs=1, epsilon=0.8, delta=1e-5,
                         lipschitz=1.0, smoothness=0.25)
print(json.dumps({"seconds": time.perf_counter() - t, "chosen": cfg.chosen}))
"""


def _search_alone(n: int, d: int, prune: bool) -> tuple:
    """(seconds, chosen row) of one configuration search in a fresh process."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", SEARCH, str(n), str(d), "1" if prune else "0"],
                         capture_output=True, text=True, check=True).stdout
    got = json.loads(out.strip().splitlines()[-1])
    return got["seconds"], got["chosen"]


def _median_split(splits, totals):
    med = {k: statistics.median(s[k] for s in splits) for k in splits[0]}
    med["rest"] = statistics.median(t - sum(s.values()) for s, t in zip(splits, totals))
    return {k: round(v, 4) for k, v in med.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from noisysgd import NoisySGDClassifier

    split = Split()
    rows = []
    for name, (X, y) in tables().items():
        NoisySGDClassifier(epsilon=4.0, classes=[0, 1], random_state=99).fit(X, y)  # warm: imports, first calls
        make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y)
        split.take()
        sk = []

        def peer():  # scikit-learn's best of three fits, just before each of ours (the same period)
            best = math.inf
            for _ in range(3):
                t = time.perf_counter()
                make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y)
                best = min(best, time.perf_counter() - t)
            sk.append(best)

        fresh, fresh_split, chosen = [], [], []
        for i in range(a.repeats):
            peer()
            t = time.perf_counter()
            clf = NoisySGDClassifier(epsilon=EPSILONS[i], classes=[0, 1], random_state=i).fit(X, y)
            fresh.append(time.perf_counter() - t)
            fresh_split.append(split.take())
            chosen.append(clf.privacy_report_["config"]["chosen"])
        refit, refit_split = [], []
        for i in range(a.repeats):
            peer()
            t = time.perf_counter()
            NoisySGDClassifier(epsilon=EPSILONS[0], classes=[0, 1], random_state=i).fit(X, y)
            refit.append(time.perf_counter() - t)
            refit_split.append(split.take())
        # the search alone, pruned and exhaustive, on one fit's inputs: each in a fresh process (every
        # cache empty, the imports not counted), the choice compared
        search, same = {}, None
        for prune in (True, False):
            seconds, chosen_cfg = _search_alone(X.shape[0], X.shape[1], prune)
            search["pruned" if prune else "exhaustive"] = round(seconds, 4)
            same = chosen_cfg if same is None else (same == chosen_cfg)
        sk_s, fresh_s, refit_s = (statistics.median(v) for v in (sk, fresh, refit))
        rows.append({
            "table": name, "rows": int(X.shape[0]), "columns": int(X.shape[1]),
            "sklearn_scaled_logreg_s": round(sk_s, 4),
            "noisysgd_default_new_epsilon_s": round(fresh_s, 4),
            "noisysgd_default_refit_same_epsilon_s": round(refit_s, 4),
            "ratio_new_epsilon": round(fresh_s / sk_s, 1), "ratio_refit": round(refit_s / sk_s, 1),
            "split_new_epsilon_s": _median_split(fresh_split, fresh),
            "split_refit_s": _median_split(refit_split, refit),
            "search_alone_s": search, "pruned_search_chooses_the_same": bool(same),
            "regimes_chosen": sorted({c.get("regime") for c in chosen}),
        })
        print(f"{name}: scikit-learn {sk_s * 1e3:.1f} ms; noisysgd defaults {fresh_s * 1e3:.0f} ms at a new epsilon "
              f"({fresh_s / sk_s:.0f}x), {refit_s * 1e3:.0f} ms refitting at the same epsilon ({refit_s / sk_s:.0f}x); "
              f"split {rows[-1]['split_new_epsilon_s']}; search alone {search} (same choice: {bool(same)})")
    out = {"benchmark": "fit_speed", "repeats": a.repeats, "python": platform.python_version(),
           "machine": platform.machine(), "processor_count": __import__("os").cpu_count(), "rows": rows}
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
