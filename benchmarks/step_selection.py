"""Where the automatic step size loses to the Opacus oracle, can an *accounted* choice of the step
win it back?  (issue 26: "defaults ≥ the Opacus oracle on every row"; make_classification is the
row it misses.)

For each data set, ε and seed (the splits of ``benchmarks/auto_config.py``, replace-one):

* ``defaults``: ``NoisySGDClassifier(epsilon=ε)`` as shipped (the private mean included);
* ``not centered``: the same with ``center=None`` — the reference for the rows below, since the
  private tuner does not center (the mean query is not part of its accounting);
* ``step ÷ f`` (f = 1, 4, 16): the run the defaults chose (Poisson batches, b, epochs, α and the
  clip of ``clip_norm="auto"``, as trained) with its step divided by f, not centered, each a
  (ε, δ)-DP release on its own — what a user who knew the best f would get;
* ``private choice``: :class:`~noisysgd.tuning.NoisySGDClassifierCV` over those three steps
  (Papernot & Steinke's Poisson random stopping, E[K] = ``--expected-runs``; every candidate and
  the noisy validation scores inside one (ε, δ) certificate): the honest price of choosing.

Writes ``benchmarks/results/step_selection.json``; docs/accuracy.md §1a shows
:func:`markdown_table` (checked by tests/test_docs_tables.py)::

    python benchmarks/step_selection.py [--expected-runs 2]     # ~25 min on 2 cores
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
OUT = HERE / "results" / "step_selection.json"
DATASETS = ("synthetic", "digits")
EPSILONS = (0.5, 1.0, 3.0)
SEEDS = (0, 1, 2)
DIVISORS = (1, 4, 16)


def _one(name, eps, seed, expected_runs) -> dict:
    sys.path.insert(0, str(HERE))
    from auto_config import load

    from noisysgd import NoisySGDClassifier
    from noisysgd.tuning import NoisySGDClassifierCV

    Xtr, Xte, ytr, yte, _ = load(name, seed)
    classes = sorted(set(np.asarray(ytr).tolist()))
    d = NoisySGDClassifier(epsilon=eps, random_state=seed, classes=classes).fit(Xtr, ytr)
    out = {"seed": seed, "defaults": float(d.score(Xte, yte))}
    out["not_centered"] = float(NoisySGDClassifier(epsilon=eps, random_state=seed, classes=classes, center=None)
                                .fit(Xtr, ytr).score(Xte, yte))
    c = d.privacy_report_["config"]["chosen"]
    if c.get("regime") != "amplified composition":
        return {**out, "regime": c.get("regime")}
    clip = d.privacy_report_["config"].get("clip")
    fixed = dict(batching="poisson", batch_size=c["batch_size"], epochs=c["epochs"], alpha=d.run_.strong_convexity,
                 clip_norm=None if clip is None else clip["clip_norm"], center=None, classes=classes)
    steps = [d.run_.learning_rate / f for f in DIVISORS]
    out.update(regime=c["regime"], chosen={**fixed, "learning_rate": d.run_.learning_rate}, steps=steps)
    out["fixed"] = [float(NoisySGDClassifier(epsilon=eps, random_state=seed, learning_rate=lr, **fixed)
                          .fit(Xtr, ytr).score(Xte, yte)) for lr in steps]
    cv = NoisySGDClassifierCV({"learning_rate": steps}, estimator=NoisySGDClassifier(**fixed), epsilon=eps,
                              expected_runs=expected_runs, random_state=seed).fit(Xtr, ytr)
    out["private_choice"] = float(cv.score(Xte, yte))
    out["private_choice_step"] = cv.best_params_["learning_rate"]
    out["runs_drawn"] = int(cv.n_runs_)
    out["candidate_noise"] = float(cv.noise_multipliers_[0])
    out["fixed_noise"] = float(d.noise_multiplier_)
    out["tuning_epsilon"] = float(cv.epsilon_)
    return out


def markdown_table(path=OUT) -> list[str]:
    """docs/accuracy.md §1a's step-selection table, rendered from step_selection.json."""
    data = json.loads(Path(path).read_text())
    head = " | ".join(f"step ÷ {f}" for f in data["divisors"])
    lines = [f"| data set | ε | defaults | not centered | {head} | private choice (E[K] = {data['expected_runs']:g}) "
             "| its noise / a single run's |", "|---|---|---|---|" + "---|" * len(data["divisors"]) + "---|---|"]
    for r in data["rows"]:
        runs = r["seeds"]
        if any("fixed" not in s for s in runs):
            continue
        mean = lambda key: np.mean([s[key] for s in runs])  # noqa: E731
        fixed = " | ".join(f"{np.mean([s['fixed'][i] for s in runs]):.3f}" for i in range(len(data["divisors"])))
        ratio = np.mean([s["candidate_noise"] / s["fixed_noise"] for s in runs])
        lines.append(f"| {r['data'].replace('synthetic', 'make_classification')} | {r['epsilon']:g} "
                     f"| {mean('defaults'):.3f} | {mean('not_centered'):.3f} | {fixed} | {mean('private_choice'):.3f} "
                     f"| {ratio:.2f}× |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--expected-runs", type=float, default=2.0, help="E[K] of the private tuner (default 2)")
    ap.add_argument("--data", default=",".join(DATASETS), help="comma-separated (default: %(default)s)")
    ap.add_argument("--json", default=str(OUT))
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    rows, t0 = [], time.perf_counter()
    for name in a.data.split(","):
        for eps in EPSILONS:
            seeds = [_one(name, eps, s, a.expected_runs) for s in SEEDS]
            rows.append({"data": name, "epsilon": eps, "seeds": seeds})
            done = [s for s in seeds if "fixed" in s]
            if done:
                print(f"{name} eps {eps:g}: defaults {np.mean([s['defaults'] for s in seeds]):.4f}, fixed "
                      + ", ".join(f"÷{f} {np.mean([s['fixed'][i] for s in done]):.4f}" for i, f in enumerate(DIVISORS))
                      + f", private choice {np.mean([s['private_choice'] for s in done]):.4f} "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
            Path(a.json).write_text(json.dumps({"seeds": list(SEEDS), "divisors": list(DIVISORS),
                                                "expected_runs": a.expected_runs, "rows": rows}, indent=1) + "\n")
    print("\n".join(markdown_table(a.json)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
