"""Tables whose class shares the benchmark's sets cannot tell apart: the release check's margin on
synthetic tables of known shares and signal (README §26).

§23 chose the check's margin (−½σ_c where the private prior of three classes or more is
near-uniform) on the seven seen sets, where it gained on small balanced tables (iris, wine,
penguins).  On a table of 120 training rows at ε ≤ 1 the class counts' noise (σ ≈ 53–100 rows a
class) is larger than the rows of a class, so the released prior cannot tell balanced classes from
0.8/0.1/0.1: the rule is a bet on what small tables hold.  This script measures that bet where the
truth is known: tables of ``n`` Gaussian rows (6 columns) whose class is drawn with the given shares,
the rows shifted by ``signal`` along a random unit direction per class (0: no signal, where the
issue asks the model to fall back to the prior, not below it), 4,000 test rows, 12 seeds, ε ∈
{0.5, 1, 3}, ``classes`` declared and nothing else.

Every fit runs with the model always released (``noisysgd.pipeline.check_margin`` patched to −∞:
the check is still asked and its noisy answer recorded, the run and its noise unchanged), and the
class prior's test accuracy is its class's (argmax of the released prior: what the check releases
in place of the model).  So any margin rule — a function of the released counts — is rebuilt per fit
as post-processing: the model's accuracy where D̃ ≥ τσ_c, the prior's elsewhere (as
``check_variants.py margins`` does on the real sets, whose recorded runs it also reads here)::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/raw_tables/margin_study.py run /tmp/ms --part 0 --parts 2 &
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/raw_tables/margin_study.py run /tmp/ms --part 1 --parts 2
    .venv/bin/python benchmarks/raw_tables/margin_study.py summary /tmp/ms --real /tmp/cv \\
        --json benchmarks/results/raw_tables_margin_study.json      # /tmp/cv: check_variants.py's runs
    .venv/bin/python benchmarks/raw_tables/margin_study.py markdown benchmarks/results/raw_tables_margin_study.json

(3,564 fits, ~4 min on two cores; the per-fit files stay out of the repository, the summary README
§26 shows is committed.)  ``--real``: a directory of ``check_variants.py run`` outputs for the seven
sets, ``shipped`` and ``prior`` as §21 ran them and ``model`` run since ``run.py`` records each fit's
proxy (the chosen run's excess-risk bound, which two of the rules read).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: class shares of the synthetic tables, per number of classes
SHARES = {2: ((0.5, 0.5), (0.7, 0.3), (0.9, 0.1)),
          3: ((1 / 3, 1 / 3, 1 / 3), (0.5, 0.25, 0.25), (0.6, 0.2, 0.2), (0.7, 0.15, 0.15), (0.8, 0.1, 0.1)),
          5: ((0.2,) * 5, (0.4, 0.15, 0.15, 0.15, 0.15), (0.6, 0.1, 0.1, 0.1, 0.1))}
ROWS = (120, 400, 1200)          # training rows (T1 targets test splits of >= 100 rows: 400 training rows)
SIGNALS = (0.0, 0.7, 1.5)        # shift of a class's rows along its unit direction (0: no signal)
EPSILONS = (0.5, 1.0, 3.0)
SEEDS = range(12)
COLUMNS = 6
TEST_ROWS = 4000


def jobs():
    return [(n, shares, signal, eps, seed) for k in SHARES for shares in SHARES[k] for n in ROWS
            for signal in SIGNALS for eps in EPSILONS for seed in SEEDS]


def table(n, shares, signal, seed):
    """(X_train, y_train, X_test, y_test): rows N(0, I) + signal · (their class's unit direction)."""
    k = len(shares)
    rng = np.random.default_rng([seed, n, round(100 * signal), round(1000 * shares[0]), k])  # (every ε: one table)
    y = rng.choice(k, size=n + TEST_ROWS, p=shares)
    centres = rng.normal(size=(k, COLUMNS))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    X = rng.normal(size=(n + TEST_ROWS, COLUMNS)) + signal * centres[y]
    return X[:n], y[:n], X[n:], y[n:]


def fit(job) -> dict:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from noisysgd import NoisySGDClassifier

    n, shares, signal, eps, seed = job
    Xt, yt, Xe, ye = table(n, shares, signal, seed)
    k = len(shares)
    clf = NoisySGDClassifier(epsilon=eps, classes=list(range(k)), random_state=seed).fit(Xt, yt)
    rep = clf.privacy_report_
    counts = next(p for p in rep["preprocessing"]["parts"] if "noisy_counts" in p)
    check = rep["release_check"]
    prior = np.asarray(counts["class_prior"])
    lr = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(Xt, yt)
    return dict(k=k, shares=list(shares), n=n, signal=signal, epsilon=eps, seed=seed,
                noisy_counts=counts["noisy_counts"], count_std=counts["noise_std"],
                noisy_difference=check["noisy_difference"], check_std=check["noise_std"],
                model=float(np.mean(clf.predict(Xe) == ye)), prior=float(np.mean(ye == int(np.argmax(prior)))),
                majority=float(np.mean(ye == np.bincount(yt, minlength=k).argmax())),
                nonprivate=float(lr.score(Xe, ye)), proxy=(rep.get("config") or {}).get("chosen", {}).get("proxy"))


def run(out: Path, part: int, parts: int) -> None:
    import noisysgd.pipeline as pipeline
    from tqdm import tqdm

    pipeline.check_margin = lambda prior: (-math.inf, "study: the model always released")
    todo = [j for i, j in enumerate(jobs()) if i % parts == part]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = [fit(j) for j in tqdm(todo, unit="fit", dynamic_ncols=True)]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"part{part}.json").write_text(json.dumps(rows))


# -- the rules: functions of the released counts c̃ and their noise std σ (post-processing) --------

def _shrunk(c, s):
    """The library's prior p̂ ∝ max(c̃, 0) + σ (noisysgd.prior.private_class_counts)."""
    c = np.maximum(c, 0.0) + s
    return c / c.sum()


def _raw(c, s):
    c = np.maximum(c, 0.0)
    return c / c.sum() if c.sum() > 0 else np.full(c.size, 1.0 / c.size)


def _near(reader, t):
    return lambda c, s: c.size >= 3 and reader(c, s).max() <= 1.0 / c.size + t


def _resolved(z, t):
    """near-uniform where an upper bound of the largest share, (c̃_max + zσ) / Σ max(c̃, 0), is ≤ 1/k + t"""
    return lambda c, s: c.size >= 3 and (c.max() + z * s) / max(np.maximum(c, 0.0).sum(), 1.0) <= 1.0 / c.size + t


def _vacuous(tau):
    """τ where the chosen run's own excess-risk bound (the search's proxy, a function of public inputs) is at
    least log k, the loss of a uniform start: the bound cannot promise that the run beats its start."""
    return lambda c, s, proxy: tau if proxy >= math.log(c.size) else 0.5


def _signed(test):
    return lambda c, s, proxy: -0.5 if test(c, s) else 0.5


#: name -> the margin τ (in σ_c) a rule gives a fit, from the released counts c̃, their noise std σ and the
#: chosen run's proxy (public): post-processing of answers already charged
RULES = {
    "+½σ_c everywhere (shipped)": lambda c, s, proxy: 0.5,
    "−½σ_c where k ≥ 3, p̂_max ≤ 1/k + 0.2 (§23; p̂ shrunk by σ)": _signed(_near(_shrunk, 0.2)),
    "−½σ_c where k ≥ 3, shares of max(c̃, 0) ≤ 1/k + 0.2": _signed(_near(_raw, 0.2)),
    "−½σ_c where k ≥ 3, p̂_max ≤ 1/k + 0.1": _signed(_near(_shrunk, 0.1)),
    "−½σ_c where k ≥ 3, (c̃_max + σ)/n̂ ≤ 1/k + 0.2": _signed(_resolved(1.0, 0.2)),
    "−½σ_c where k ≥ 3, (c̃_max + σ)/n̂ ≤ 1/k + 0.1": _signed(_resolved(1.0, 0.1)),
    "+1σ_c where the run's bound ≥ log k": _vacuous(1.0),
    "the prior where the run's bound ≥ log k": _vacuous(math.inf),
}
SHIPPED = "+½σ_c everywhere (shipped)"
SECTION23 = "−½σ_c where k ≥ 3, p̂_max ≤ 1/k + 0.2 (§23; p̂ shrunk by σ)"


def margin(rule: str, counts, std, proxy=None) -> float:
    return RULES[rule](np.asarray(counts, dtype=float), float(std), proxy)


def released(r: dict, rule: str) -> float:
    """A fit's test accuracy under ``rule``: the model's where D̃ ≥ τσ_c, the prior's elsewhere."""
    kept = r["noisy_difference"] >= margin(rule, r["noisy_counts"], r["count_std"], r["proxy"]) * r["check_std"]
    return r["model"] if kept else r["prior"]


def fit_cells(root: Path) -> dict:
    """The fits of ``run`` under ``root`` (every part), per cell (k, shares to 3 digits, signal, n, ε)."""
    rows = [r for f in sorted(root.glob("part*.json")) for r in json.loads(f.read_text())]
    if len(rows) != len(jobs()):
        raise SystemExit(f"{root}: {len(rows)} fits, expected {len(jobs())} (run every part first)")
    cells = defaultdict(list)
    for r in rows:
        cells[(r["k"], tuple(round(s, 3) for s in r["shares"]), r["signal"], r["n"], r["epsilon"])].append(r)
    return cells


def summary(root: Path, real: Path | None) -> dict:
    cells = fit_cells(root)
    out = {"fits": sum(len(rs) for rs in cells.values()), "seeds": len(SEEDS), "test_rows": TEST_ROWS, "columns": COLUMNS, "rules": {},
           "cells": []}  # (a cell's "rules": the released accuracy per rule of RULES, in order; "changed": the
    #                      fits each rule gave another margin than +½σ_c)
    at = {rule: i for i, rule in enumerate(RULES)}
    for key, rs in sorted(cells.items()):
        mean = lambda f: float(np.mean([f(r) for r in rs]))  # noqa: E731
        out["cells"].append({"k": key[0], "shares": list(key[1]), "signal": key[2], "n": key[3], "epsilon": key[4],
                             "majority": mean(lambda r: r["majority"]), "nonprivate": mean(lambda r: r["nonprivate"]),
                             "model": mean(lambda r: r["model"]), "prior": mean(lambda r: r["prior"]),
                             "rules": [mean(lambda r, rule=rule: released(r, rule)) for rule in RULES],
                             "changed": [sum(margin(rule, r["noisy_counts"], r["count_std"], r["proxy"]) != 0.5
                                                         for r in rs) for rule in RULES]})
    for rule in RULES:
        per = {}
        for label, keep in (("n = 120", lambda c: c["n"] == 120), ("n ≥ 400", lambda c: c["n"] >= 400)):
            d = np.array([100 * (c["rules"][at[rule]] - c["rules"][at[SHIPPED]]) for c in out["cells"] if keep(c)])
            # T1's test where a table has no signal: the released output against min(majority, non-private) − 1 point
            t1 = [c for c in out["cells"] if keep(c) and c["signal"] == 0.0]
            per[label] = {"cells": int(d.size), "mean_points": float(d.mean()), "worst_points": float(d.min()),
                          "best_points": float(d.max()), "cells_below_1": int((d < -1).sum()),
                          "cells_above_1": int((d > 1).sum()),
                          "no_signal_t1": [sum(c["rules"][at[rule]] >= min(c["majority"], c["nonprivate"]) - 0.01 - 1e-9
                                               for c in t1), len(t1)]}
        out["rules"][rule] = {"synthetic": per}
    if real is not None:
        import check_variants as cv

        sets = {**cv.SETS, **cv.LATER_SETS}
        runs = {v: {name: json.loads((real / v / f"{name}.json").read_text()) for name in sets}
                for v in ("shipped", "model", "prior")}
        # the real fits each rule gave another margin than +½σ_c (README §26 quotes the vacuous-bound rules')
        changed = {rule: 0 for rule in RULES}
        fits = 0
        for name in sets:
            model = {cv._key(c): c for c in runs["model"][name]["cells"]}
            for c in runs["shipped"][name]["cells"]:
                if c["method"] in cv.NOISYSGD_ROWS:
                    fits += 1
                    cp = c["class_prior"]
                    for rule in RULES:
                        changed[rule] += margin(rule, cp["noisy_counts"], cp["noise_std"],
                                                model[cv._key(c)]["config"]["proxy"]) != 0.5
        out["real_fits"] = fits
        for rule in RULES:
            out["rules"][rule]["real_changed"] = changed[rule]
            row = out["rules"][rule]["real"] = {}
            for name, halves in sets.items():
                data = cv.rebuilt(runs, name, lambda c, m, rule=rule: margin(
                    rule, c["class_prior"]["noisy_counts"], c["class_prior"]["noise_std"], m["config"]["proxy"]))
                for half in halves:
                    row[half] = cv._targets(data, half)
    return out


def dumps(summ: dict) -> str:
    """The summary as JSON, a cell a line (accuracies to 4 digits)."""
    def r4(x):
        if isinstance(x, dict):
            return {k: r4(v) for k, v in x.items()}
        return [r4(v) for v in x] if isinstance(x, list) else round(x, 4) if isinstance(x, float) else x
    head = {k: v for k, v in summ.items() if k != "cells"}
    cells = ",\n  ".join(json.dumps(r4(c), ensure_ascii=False) for c in summ["cells"])
    return json.dumps(head, indent=1, ensure_ascii=False)[:-2] + ',\n "cells": [\n  ' + cells + "\n ]\n}\n"


def markdown(summ: dict) -> str:
    lines = ["| margin rule (else +½σ_c) | n = 120: mean, worst, cells < −1 / > +1 | no signal, T1 | "
             "n ≥ 400: mean, worst, cells < −1 / > +1 | no signal, T1 |", "|---|---|---|---|---|"]
    for rule, r in summ["rules"].items():
        cells = []
        for label in ("n = 120", "n ≥ 400"):
            s = r["synthetic"][label]
            cells.append(f"{s['mean_points']:+.2f}, {s['worst_points']:+.1f}, {s['cells_below_1']} / {s['cells_above_1']}")
            cells.append(f"{s['no_signal_t1'][0]}/{s['no_signal_t1'][1]}")
        lines.append(f"| {rule} | " + " | ".join(cells) + " |")
    if any("real" in r for r in summ["rules"].values()):
        halves = list(next(r["real"] for r in summ["rules"].values()))
        lines += ["", "| margin rule (real sets: T1, T2, T3; mean accuracy) | " + " | ".join(halves) + " |",
                  "|---" * (len(halves) + 1) + "|"]
        for rule, r in summ["rules"].items():
            lines.append(f"| {rule} | " + " | ".join(
                f"{r['real'][h]['T1'][0]}, {r['real'][h]['T2'][0]}, {r['real'][h]['T3'][0]}; {r['real'][h]['acc']:.3f}"
                for h in halves) + " |")
    lines += ["", "| no signal: k, shares, training rows, ε | majority | non-private | model | prior | "
              "+½σ_c (shipped) | §23 |", "|---|---|---|---|---|---|---|"]
    at = {rule: i for i, rule in enumerate(summ["rules"])}
    shipped, s23 = at[SHIPPED], at[SECTION23]
    for c in summ["cells"]:
        if c["signal"] == 0.0 and c["n"] >= 400 and c["rules"][shipped] < min(c["majority"], c["nonprivate"]) - 0.01:
            lines.append(f"| {c['k']}, {'/'.join(f'{s:.2g}' for s in c['shares'])}, {c['n']}, {c['epsilon']:g} | "
                         f"{c['majority']:.3f} | {c['nonprivate']:.3f} | {c['model']:.3f} | {c['prior']:.3f} | "
                         f"{c['rules'][shipped]:.3f} | {c['rules'][s23]:.3f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--part", type=int, default=0)
    r.add_argument("--parts", type=int, default=1)
    s = sub.add_parser("summary")
    s.add_argument("root", type=Path)
    s.add_argument("--real", type=Path, help="check_variants.py's runs (shipped, model, prior of the seven sets)")
    s.add_argument("--json", type=Path, required=True)
    m = sub.add_parser("markdown")
    m.add_argument("json", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "run":
        run(a.out, a.part, a.parts)
    elif a.cmd == "summary":
        a.json.write_text(dumps(summary(a.root, a.real)))
    else:
        print(markdown(json.loads(a.json.read_text())))


if __name__ == "__main__":
    main()
