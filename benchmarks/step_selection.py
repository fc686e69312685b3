"""Where the automatic step size loses to the Opacus oracle, can an *accounted* choice of the step
win it back?  (issue 26: "defaults ≥ the Opacus oracle on every row"; make_classification is the
row it misses.)

For each data set, ε and seed (the splits of ``benchmarks/auto_config.py``, replace-one):

* ``defaults``: ``NoisySGDClassifier(epsilon=ε)`` as shipped (the private mean included);
* ``step × f`` (f = 2, 1, 1/4, 1/16): the run the defaults chose (Poisson batches, b, epochs, α
  and the clip of ``clip_norm="auto"``, as trained) with its step multiplied by f, the private
  mean as in the defaults, each an (ε, δ)-DP release on its own — what a user who knew the best f
  would get (a fixed run asks no curvature query: ~1 % less noise than the defaults);
* ``not centered``: the defaults with ``center=None``, the reference for the private choice,
  since the private tuner does not center (the mean query is not part of its accounting);
* ``private choice``: :class:`~noisysgd.tuning.NoisySGDClassifierCV` over those four steps, not
  centered (Papernot & Steinke's Poisson random stopping, E[K] = ``--expected-runs``; every
  candidate and the noisy validation scores inside one (ε, δ) certificate): what choosing costs.

Fashion-MNIST pixels (``--fashion-dir``) at ε = 1, seed 0 only.

Writes ``benchmarks/results/step_selection.json``; docs/accuracy.md §1a shows
:func:`markdown_table` (checked by tests/test_docs_tables.py)::

    python benchmarks/step_selection.py [--expected-runs 2] [--fashion-dir DIR]   # ~1 min, ~3 more with DIR (one thread)
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
DATASETS = ("synthetic", "digits", "breast_cancer")
EPSILONS = (0.5, 1.0, 3.0)
SEEDS = (0, 1, 2)
FACTORS = (2.0, 1.0, 0.25, 0.0625)


def _one(name, eps, seed, expected_runs, fashion_dir=None) -> dict:
    sys.path.insert(0, str(HERE))
    from auto_config import load
    from averaging import chosen_run

    from noisysgd import NoisySGDClassifier
    from noisysgd.tuning import NoisySGDClassifierCV

    Xtr, Xte, ytr, yte, _ = load(name, seed, fashion_dir)
    classes = sorted(set(np.asarray(ytr).tolist()))
    d = NoisySGDClassifier(epsilon=eps, random_state=seed, classes=classes).fit(Xtr, ytr)
    out = {"seed": seed, "defaults": float(d.score(Xte, yte))}
    out["not_centered"] = float(NoisySGDClassifier(epsilon=eps, random_state=seed, classes=classes, center=None)
                                .fit(Xtr, ytr).score(Xte, yte))
    chosen = chosen_run(d)
    if chosen is None:
        return {**out, "regime": d.privacy_report_["config"]["chosen"].get("regime")}
    fixed = {**chosen, "classes": classes}
    lr = fixed.pop("learning_rate")
    steps = [lr * f for f in FACTORS]
    out.update(regime="amplified composition", chosen={**fixed, "learning_rate": lr}, steps=steps)
    out["fixed"] = [float(NoisySGDClassifier(epsilon=eps, random_state=seed, learning_rate=lr, **fixed)
                          .fit(Xtr, ytr).score(Xte, yte)) for lr in steps]
    cv = NoisySGDClassifierCV({"learning_rate": steps}, estimator=NoisySGDClassifier(**fixed, center=None),
                              epsilon=eps, expected_runs=expected_runs, random_state=seed).fit(Xtr, ytr)
    out["private_choice"] = float(cv.score(Xte, yte))
    out["private_choice_step"] = cv.best_params_["learning_rate"]
    out["runs_drawn"] = int(cv.n_runs_)
    out["candidate_noise"] = float(cv.noise_multipliers_[0])
    out["fixed_noise"] = float(d.noise_multiplier_)
    out["tuning_epsilon"] = float(cv.epsilon_)
    return out


def _factor(f: float) -> str:
    return f"× {f:g}" if f >= 1 else f"÷ {1 / f:g}"


def markdown_table(path=OUT) -> list[str]:
    """docs/accuracy.md §1a's step-selection table, rendered from step_selection.json."""
    data = json.loads(Path(path).read_text())
    head = " | ".join(f"step {_factor(f)}" for f in data["factors"])
    lines = [f"| data set | ε | seeds | defaults | {head} | not centered | private choice (E[K] = "
             f"{data['expected_runs']:g}) | its noise / a single run's |",
             "|---|---|---|---|" + "---|" * len(data["factors"]) + "---|---|---|"]
    for r in data["rows"]:
        runs = [s for s in r["seeds"] if "fixed" in s]
        if not runs:
            continue
        mean = lambda key: np.mean([s[key] for s in runs])  # noqa: E731
        fixed = " | ".join(f"{np.mean([s['fixed'][i] for s in runs]):.3f}" for i in range(len(data["factors"])))
        ratio = np.mean([s["candidate_noise"] / s["fixed_noise"] for s in runs])
        name = {"synthetic": "make_classification", "fashion_pixels": "Fashion-MNIST pixels"}.get(r["data"], r["data"])
        lines.append(f"| {name} | {r['epsilon']:g} | {len(runs)} | {mean('defaults'):.3f} | {fixed} "
                     f"| {mean('not_centered'):.3f} | {mean('private_choice'):.3f} | {ratio:.2f}× |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--expected-runs", type=float, default=2.0, help="E[K] of the private tuner (default 2)")
    ap.add_argument("--data", default=",".join(DATASETS), help="comma-separated (default: %(default)s)")
    ap.add_argument("--fashion-dir", default=None, help="also Fashion-MNIST pixels at ε = 1, seed 0 (IDX files in DIR)")
    ap.add_argument("--json", default=str(OUT))
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    rows, t0 = [], time.perf_counter()
    jobs = [(name, eps, SEEDS) for name in a.data.split(",") for eps in EPSILONS]
    if a.fashion_dir:
        jobs.append(("fashion_pixels", 1.0, (0,)))
    for name, eps, seeds in jobs:
        runs = [_one(name, eps, s, a.expected_runs, a.fashion_dir) for s in seeds]
        rows.append({"data": name, "epsilon": eps, "seeds": runs})
        done = [s for s in runs if "fixed" in s]
        if done:
            print(f"{name} eps {eps:g}: defaults {np.mean([s['defaults'] for s in runs]):.4f}, "
                  + ", ".join(f"{_factor(f)} {np.mean([s['fixed'][i] for s in done]):.4f}" for i, f in enumerate(FACTORS))
                  + f", private choice {np.mean([s['private_choice'] for s in done]):.4f} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
        Path(a.json).write_text(json.dumps({"seeds": list(SEEDS), "factors": list(FACTORS),
                                            "expected_runs": a.expected_runs, "rows": rows}, indent=1) + "\n")
    print("\n".join(markdown_table(a.json)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
