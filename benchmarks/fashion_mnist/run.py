"""Ryffel et al.'s logistic-regression experiment, redone soundly, on Fashion-MNIST.

One row = one (feature set, method, ε): every configuration of the method's
grid (:mod:`grids`, 8 each) is trained on the 50,000 training images and
scored on the 10,000 held-out validation images; the configuration with the
best validation accuracy is chosen and its model scored once on the 10,000
test images (the test set is never used to choose anything).  The row is
written to ``benchmarks/results/fashion_mnist/<features>_<method>_eps<ε>.json``.

    python benchmarks/fashion_mnist/run.py --features scatter --method hidden --epsilon 1
    python benchmarks/fashion_mnist/run.py --all --jobs 2      # every row, then the table
    python benchmarks/fashion_mnist/run.py --table             # the Markdown table from the JSON rows
    python benchmarks/fashion_mnist/run.py --accounting        # noise needed per analysis, no training
    python benchmarks/fashion_mnist/run.py --lambda-ceiling    # non-private accuracy per λ
    python benchmarks/fashion_mnist/run.py --features scatter --method hidden --epsilon 1 --reseed 3
    python benchmarks/fashion_mnist/run.py --features scatter --method hidden --epsilon 1 --grid edge

Methods: ``hidden`` (noisysgd, best sound bound), ``composition`` (the same
runs, noise for composition), ``ryffel`` (Ryffel et al.'s Theorem 3.2 — NOT
SOUND, for the record), ``opacus`` (Opacus DP-SGD, its PRV accountant,
add/remove adjacency), ``opacus-replace`` (the same DP-SGD with noise for
replace adjacency, noisysgd's composition accountant), ``nonprivate``.

Tuning is not private: the choice among the 8 configurations looks at the
validation split, which is drawn from the private training images; the ε
reported is that of the one released model, not of the selection (see
README.md in this folder).
"""

from __future__ import annotations

import argparse
import os
import sys

# One BLAS/OpenMP thread per process unless told otherwise (before numpy/torch load): on a
# small shared machine several spinning pools slow each other down by large factors.
_threads = "1"
for _i, _a in enumerate(sys.argv):
    if _a == "--threads" and _i + 1 < len(sys.argv):
        _threads = sys.argv[_i + 1]
    elif _a.startswith("--threads="):
        _threads = _a.split("=", 1)[1]
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, _threads)

import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from concurrent.futures import ProcessPoolExecutor, as_completed  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import data  # noqa: E402
import grids  # noqa: E402
import methods  # noqa: E402

REPO = HERE.parent.parent
DEFAULT_OUT = REPO / "benchmarks" / "results" / "fashion_mnist"
FEATURES = ("pixels", "scatter")
PRIVATE_METHODS = ("hidden", "composition", "opacus", "opacus-replace", "ryffel")
METHODS = PRIVATE_METHODS + ("nonprivate",)
EPSILONS = (1.0, 3.0)
DELTA = 1e-5
ANCHOR = {"features": "scatter", "epsilon": 3.0, "delta": 1e-5, "test_accuracy": 0.897,
          "source": "Tramèr & Boneh (ICLR 2021), ScatterNet + linear, Fashion-MNIST, DP-SGD, "
                    "composition accounting (add/remove adjacency)"}
LABELS = {
    "hidden": "noisysgd, best sound bound (final model only)",
    "composition": "noisysgd, same runs, composition",
    "opacus": "Opacus DP-SGD (PRV, add/remove)",
    "opacus-replace": "Opacus DP-SGD, noise for replace adjacency",
    "ryffel": "Ryffel et al. Thm 3.2 — NOT SOUND",
    "nonprivate": "non-private (same linear model)",
}


def row_name(features: str, method: str, epsilon: float | None) -> str:
    if method == "nonprivate":
        return f"{features}_nonprivate"
    return f"{features}_{method}_eps{epsilon:g}"


_MACHINE: dict = {}


def machine() -> dict:
    """Machine, library versions and the repository state, taken once, when the process
    starts (``main`` calls it first): the code that ran is the code loaded then."""
    if _MACHINE:
        return dict(_MACHINE, load_average_1min=os.getloadavg()[0])
    import importlib.metadata as md

    versions = {}
    for pkg in ("noisysgd", "numpy", "scipy", "scikit-learn", "torch", "opacus", "kymatio",
                "dp-accounting", "prv-accountant"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "src"],
                                    capture_output=True, text=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = None, None
    _MACHINE.update({
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "threads_per_process": int(os.environ.get("OPENBLAS_NUM_THREADS", "1")),
        "load_average_1min": os.getloadavg()[0],
        "versions": versions,
        "git_commit": commit,
        "src_modified_since_commit": dirty,
    })
    return dict(_MACHINE)


_FEATURE_CACHE: dict = {}


def load(features: str, args) -> dict:
    if features not in _FEATURE_CACHE:
        _FEATURE_CACHE.clear()
        _FEATURE_CACHE[features] = data.features(features, data_path=args.data_dir,
                                                 cache=args.cache_dir, log=print)
    return _FEATURE_CACHE[features]


def _json_default(o):
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


def _clean(obj):
    """Non-finite floats to None (JSON has no infinity)."""
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def run_row(features: str, method: str, epsilon: float | None, args) -> dict:
    """Tune on validation, report test: one JSON row."""
    t_row = time.perf_counter()
    f = load(features, args)
    X, y = f["train"]
    Xv, yv = f["val"]
    Xt, yt = f["test"]
    if args.quick:
        grid = grids.quick_grid(method)
    elif args.grid == "edge":
        grid = grids.edge_grid(method)
    else:
        grid = grids.grid(method)
    trainer = methods.TRAINERS[method]
    kw = {} if method == "nonprivate" else {"epsilon": epsilon, "delta": args.delta}
    trials, best = [], None
    name = row_name(features, method, epsilon) + ("_edge" if args.grid == "edge" else "")
    for i, cfg in enumerate(grid):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            predict, info = trainer(X, y, cfg, seed=args.seed, **kw)
        val = methods.accuracy(predict, Xv, yv)
        trials.append({"config": cfg, "val_accuracy": val, **info})
        print(f"[{name}] {i + 1}/{len(grid)} {json.dumps(cfg)}: val {val:.4f}, "
              f"z {info.get('noise_multiplier', 0) or 0:.4g}, eps {info.get('epsilon')}, "
              f"{info.get('certified_by')}, {info['wall_s']:.1f} s", flush=True)
        if best is None or val > best[0]:
            best = (val, i, predict)
    val, i, predict = best
    chosen = dict(trials[i])
    chosen["test_accuracy"] = methods.accuracy(predict, Xt, yt)
    chosen["index"] = i
    extra_seeds = []
    for s in range(1, args.final_seeds):  # the chosen configuration again, other seeds
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p, info = trainer(X, y, chosen["config"], seed=args.seed + s, **kw)
        extra_seeds.append({"seed": args.seed + s, "val_accuracy": methods.accuracy(p, Xv, yv),
                            "test_accuracy": methods.accuracy(p, Xt, yt), "wall_s": info["wall_s"],
                            "epsilon": info.get("epsilon")})
    tests = [chosen["test_accuracy"]] + [e["test_accuracy"] for e in extra_seeds]
    row = {
        "benchmark": "fashion_mnist",
        "row": name,
        "features": features,
        "method": method,
        "label": LABELS[method],
        "target_epsilon": epsilon,
        "delta": None if method == "nonprivate" else args.delta,
        "seed": args.seed,
        "quick": bool(args.quick),
        "grid_set": args.grid,
        "n_train": int(len(X)), "n_validation": int(len(Xv)), "n_test": int(len(Xt)),
        "n_features": int(X.shape[1]),
        "grid": grid,
        "trials": trials,
        "chosen": chosen,
        "extra_seeds": extra_seeds,
        "test_accuracy_mean": float(np.mean(tests)),
        "test_accuracy_std": float(np.std(tests, ddof=1)) if len(tests) > 1 else None,
        "wall_s": time.perf_counter() - t_row,
        "machine": machine(),
        "command": (f"python benchmarks/fashion_mnist/run.py --features {features} --method {method}"
                    + ("" if method == "nonprivate" else f" --epsilon {epsilon:g}")
                    + (f" --seed {args.seed}" if args.seed else "")
                    + (" --grid edge" if args.grid == "edge" else "")
                    + (f" --final-seeds {args.final_seeds}" if args.final_seeds != 1 else "")),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / (name + (".quick" if args.quick else "") + ".json")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(_clean(row), indent=1, default=_json_default) + "\n")
    os.replace(tmp, path)
    print(f"[{name}] chosen {json.dumps(chosen['config'])}: val {val:.4f}, test "
          f"{chosen['test_accuracy']:.4f}; row {row['wall_s']:.0f} s -> {path}", flush=True)
    return row


def reseed_row(features: str, method: str, epsilon: float | None, args) -> dict:
    """Retrain a row's chosen configuration with seeds ``seed+1 .. seed+reseed-1`` and add them
    (test accuracy mean ± std over all seeds) to the row's JSON; no new tuning."""
    name = row_name(features, method, epsilon) + ("_edge" if args.grid == "edge" else "")
    path = Path(args.out) / (name + (".quick" if args.quick else "") + ".json")
    row = json.loads(path.read_text())
    f = load(features, args)
    X, y = f["train"]
    Xv, yv = f["val"]
    Xt, yt = f["test"]
    trainer = methods.TRAINERS[method]
    kw = {} if method == "nonprivate" else {"epsilon": epsilon, "delta": row["delta"]}
    extra = []
    for s in range(1, args.reseed):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p, info = trainer(X, y, row["chosen"]["config"], seed=row["seed"] + s, **kw)
        extra.append({"seed": row["seed"] + s, "val_accuracy": methods.accuracy(p, Xv, yv),
                      "test_accuracy": methods.accuracy(p, Xt, yt), "wall_s": info["wall_s"],
                      "epsilon": info.get("epsilon"), "noise_multiplier": info.get("noise_multiplier")})
        print(f"[{name}] seed {row['seed'] + s}: val {extra[-1]['val_accuracy']:.4f}, test "
              f"{extra[-1]['test_accuracy']:.4f}", flush=True)
    row["extra_seeds"] = extra
    tests = [row["chosen"]["test_accuracy"]] + [e["test_accuracy"] for e in extra]
    row["test_accuracy_mean"] = float(np.mean(tests))
    row["test_accuracy_std"] = float(np.std(tests, ddof=1)) if len(tests) > 1 else None
    row["reseed_command"] = (f"python benchmarks/fashion_mnist/run.py --features {features} --method "
                             f"{method}" + ("" if epsilon is None else f" --epsilon {epsilon:g}")
                             + f" --reseed {args.reseed}")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(_clean(row), indent=1, default=_json_default) + "\n")
    os.replace(tmp, path)
    print(f"[{name}] test {row['test_accuracy_mean']:.4f} ± {row['test_accuracy_std']:.4f} over "
          f"{len(tests)} seeds -> {path}")
    return row


# ----------------------------------------------------------------------------- the table


def _fmt_cfg(method: str, cfg: dict) -> str:
    parts = [f"b={cfg['batch_size']}", f"E={cfg['epochs']}"]
    if method in ("opacus", "opacus-replace"):
        parts += [f"lr={cfg['lr']:g}", f"C={cfg['clip']:g}"]
    else:
        parts.append(cfg["batching"])
        lr = cfg.get("lr")
        lr = methods.learning_rate(cfg) if isinstance(lr, str) else lr
        parts.append(f"η={lr:.3g}")
        if method != "nonprivate":
            parts.append(f"λ={cfg['l2']:g}")
    return ", ".join(parts)


def render_table(out: Path, variant: str = "main") -> str:
    rows = []
    for path in sorted(Path(out).glob("*.json")):
        if path.name.endswith(".quick.json") or not path.name.startswith(FEATURES):
            continue
        if path.name.endswith("_edge.json") != (variant == "edge"):
            continue
        r = json.loads(path.read_text())
        if r.get("benchmark") != "fashion_mnist":
            continue
        rows.append(r)
    order = {m: i for i, m in enumerate(METHODS)}
    rows.sort(key=lambda r: (FEATURES.index(r["features"]), r["target_epsilon"] or 99,
                             order[r["method"]]))
    lines = [
        "| features | target ε | method | certified ε (by) | z | chosen configuration | val acc | "
        "test acc | row wall (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c = r["chosen"]
        eps = c.get("epsilon")
        by = c.get("certified_by") or "-"
        if r["method"] == "ryffel":
            cert = f"{eps:.3f} (ryffel) **NOT A GUARANTEE**"
        elif eps is None:
            cert = "- (not private)"
        else:
            cert = f"{eps:.3f} ({by})"
            if r["method"] == "opacus":
                rep = (c.get("epsilon_noisysgd_composition") or {}).get("replace")
                if rep is not None:
                    cert += f"; replace adjacency: {rep:.2f}"
        test = f"{c['test_accuracy']:.4f}"
        if r.get("test_accuracy_std") is not None:
            test = (f"{r['test_accuracy_mean']:.4f} ± {r['test_accuracy_std']:.4f} "
                    f"({1 + len(r['extra_seeds'])} seeds)")
        z = c.get("noise_multiplier")
        lines.append(
            f"| {r['features']} | {'-' if r['target_epsilon'] is None else format(r['target_epsilon'], 'g')} "
            f"| {r['label']} | {cert} | {'-' if not z else format(z, '.3g')} "
            f"| {_fmt_cfg(r['method'], c['config'])} | {c['val_accuracy']:.4f} | {test} "
            f"| {r['wall_s']:.0f} |")
    lines.append("")
    lines.append(f"Anchor: {ANCHOR['source']}: {ANCHOR['test_accuracy']:.1%} test accuracy at "
                 f"(ε, δ) = ({ANCHOR['epsilon']:g}, {ANCHOR['delta']:g}).")
    text = "\n".join(lines) + "\n"
    suffix = "" if variant == "main" else "_" + variant
    (Path(out) / f"table{suffix}.md").write_text(text)
    trial_lines = ["| row | configuration | z | ε (by) | val acc | wall (s) |", "|---|---|---|---|---|---|"]
    for r in rows:
        for i, t in enumerate(r["trials"]):
            mark = " **chosen**" if i == r["chosen"]["index"] else ""
            eps = t.get("epsilon")
            z = t.get("noise_multiplier")
            trial_lines.append(
                f"| {r['row']} | {_fmt_cfg(r['method'], t['config'])} | "
                f"{'-' if not z else format(z, '.3g')} | "
                f"{'-' if eps is None else format(eps, '.3f') + ' (' + str(t.get('certified_by')) + ')'} | "
                f"{t['val_accuracy']:.4f}{mark} | {t['wall_s']:.0f} |")
    (Path(out) / f"trials{suffix}.md").write_text("\n".join(trial_lines) + "\n")
    return text


# ----------------------------------------------------------------------------- accounting only


def accounting_table(args) -> dict:
    """Noise multiplier each accounting needs for the grid's run shapes, and where hidden pays.

    No training: for softmax at R = 1 (L = 2, M = 1), n = 50,000, η = 1.95/(M+λ), cyclic batches,
    the z that meets (ε, 1e-5) under the best sound bound, under composition for the same cyclic
    run, and under composition for Poisson batches of the same size (replace adjacency).
    """
    import noisysgd
    from noisysgd.limits import limit_noise_multiplier
    from noisysgd.train import Softmax

    c = Softmax(10).constants(feature_clip=1.0)
    n = 50_000
    out = []
    for eps in EPSILONS:
        for lam in (1e-5, 1e-4, 1e-3, 1e-2):
            M = c.smoothness + lam
            eta = 1.95 / M
            for b in (500, 2000):
                for E in (20, 60, 200, 1000):
                    base = dict(epochs=E, n=n, batch_size=b, learning_rate=eta, noise_multiplier=1.0,
                                lipschitz=c.lipschitz)
                    cyc = noisysgd.Run.from_epochs(batching="cyclic", smoothness=M,
                                                   strong_convexity=lam, convex=True, **base)
                    t = time.perf_counter()
                    hid = noisysgd.calibrate(cyc, epsilon=eps, delta=DELTA)
                    comp = noisysgd.calibrate(cyc, epsilon=eps, delta=DELTA,
                                              analyses=["composition", "composition-pld"])
                    poisson_run = noisysgd.Run.from_epochs(batching="poisson", **base)
                    poi = noisysgd.calibrate(poisson_run, epsilon=eps, delta=DELTA,
                                             analyses=["composition", "composition-pld"])
                    # shuffle-once (one secret partition; Ye & Shokri Thm 4.2 applies soundly), and the
                    # limit line: no sound analysis can calibrate below it (noisysgd.limits)
                    once = noisysgd.calibrate(cyc.replace(batching="shuffle-once"), epsilon=eps, delta=DELTA)
                    lim_cyc = limit_noise_multiplier(cyc, eps, DELTA)
                    lim_poi = limit_noise_multiplier(poisson_run.replace(smoothness=M, strong_convexity=lam,
                                                                         convex=True), eps, DELTA)
                    steps = cyc.steps
                    row = {"epsilon": eps, "l2": lam, "batch_size": b, "epochs": E, "steps": steps,
                           "eta": eta, "eta_lambda_steps": eta * lam * steps,
                           "z_hidden": hid.noise_multiplier, "hidden_by": hid.report.best.analysis,
                           "z_composition_cyclic": comp.noise_multiplier,
                           "z_composition_poisson": poi.noise_multiplier,
                           "z_hidden_shuffle_once": once.noise_multiplier,
                           "hidden_shuffle_once_by": once.report.best.analysis,
                           "z_limit_cyclic": lim_cyc, "z_limit_poisson": lim_poi,
                           "seconds": time.perf_counter() - t}
                    out.append(row)
                    print(f"eps={eps:g} λ={lam:g} b={b} E={E}: z hidden {row['z_hidden']:.3g} "
                          f"({row['hidden_by']}), composition cyclic {row['z_composition_cyclic']:.3g}, "
                          f"poisson {row['z_composition_poisson']:.3g}; ηλT = "
                          f"{row['eta_lambda_steps']:.3g}", flush=True)
    res = {"benchmark": "fashion_mnist_accounting", "delta": DELTA, "n": n, "loss": "softmax, R = 1",
           "lipschitz": c.lipschitz, "smoothness_loss": c.smoothness, "rows": out,
           "machine": machine(),
           "command": "python benchmarks/fashion_mnist/run.py --accounting"}
    path = Path(args.out) / "accounting.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_clean(res), indent=1, default=_json_default) + "\n")
    lines = ["Replace adjacency, δ = 1e-5; Poisson composition with the tight replace-one pair; the limit "
             "columns are the smallest z any sound analysis (in the linear + ridge class) could calibrate "
             "to (noisysgd.limits).", "",
             "| ε | λ | b | epochs | ηλT | z hidden, cyclic (by) | z hidden, shuffle-once (by) | "
             "z composition, same cyclic run | z composition, Poisson | Poisson / best hidden | "
             "limit z, cyclic | limit z, Poisson |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in out:
        best = min(r["z_hidden"], r["z_hidden_shuffle_once"])
        lines.append(f"| {r['epsilon']:g} | {r['l2']:g} | {r['batch_size']} | {r['epochs']} | "
                     f"{r['eta_lambda_steps']:.3g} | {r['z_hidden']:.3g} ({r['hidden_by']}) | "
                     f"{r['z_hidden_shuffle_once']:.3g} ({r['hidden_shuffle_once_by']}) | "
                     f"{r['z_composition_cyclic']:.3g} | {r['z_composition_poisson']:.3g} | "
                     f"{r['z_composition_poisson'] / best:.2f} | {r['z_limit_cyclic']:.3g} | "
                     f"{r['z_limit_poisson']:.3g} |")
    (Path(args.out) / "accounting.md").write_text("\n".join(lines) + "\n")
    print(f"-> {path}")
    return res


# ----------------------------------------------------------------------------- regularization


def lambda_ceiling(args) -> dict:
    """The non-private optimum of the L2-regularized softmax objective, per λ: the accuracy
    ceiling that the regularization alone imposes on every strongly convex run.

    scikit-learn's multinomial logistic regression (L-BFGS) on the same features (clipped to
    norm 1) with C = 1/(λ·n), so that its objective is mean loss + (λ/2)‖W‖² — the objective
    noisysgd's runs with l2 = λ minimise (scikit-learn leaves the intercept unpenalised)."""
    from sklearn.linear_model import LogisticRegression

    out = []
    for features in FEATURES:
        f = load(features, args)
        X, y = f["train"]
        Xv, yv = f["val"]
        X, Xv = (A.astype(np.float64) * np.minimum(
            1.0, methods.FEATURE_CLIP / np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1e-30))
            for A in (X, Xv))
        for lam in (1e-2, 1e-3, 1e-4, 1e-5):
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = LogisticRegression(C=1.0 / (lam * len(X)), max_iter=1000, tol=1e-4).fit(X, y)
            row = {"features": features, "l2": lam, "val_accuracy": float(m.score(Xv, yv)),
                   "weight_norm": float(np.linalg.norm(m.coef_)), "iterations": int(m.n_iter_[0]),
                   "seconds": time.perf_counter() - t}
            out.append(row)
            print(f"{features} λ={lam:g}: val {row['val_accuracy']:.4f}, ‖W‖ {row['weight_norm']:.1f}, "
                  f"{row['iterations']} iterations, {row['seconds']:.0f} s", flush=True)
    res = {"benchmark": "fashion_mnist_lambda_ceiling", "rows": out, "machine": machine(),
           "command": "python benchmarks/fashion_mnist/run.py --lambda-ceiling"}
    path = Path(args.out) / "lambda_ceiling.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_clean(res), indent=1, default=_json_default) + "\n")
    print(f"-> {path}")
    return res


# ----------------------------------------------------------------------------- main


def all_rows() -> list[tuple]:
    rows = []
    for features in FEATURES:
        rows.append((features, "nonprivate", None))
        for eps in EPSILONS:
            for method in PRIVATE_METHODS:
                rows.append((features, method, eps))
    return rows


def _row_cost(task) -> float:
    features, method, _ = task
    return (5.0 if features == "scatter" else 1.0) * (1.5 if method.startswith("opacus") else 1.0)


def _worker(task, args):
    features, method, eps = task
    row = run_row(features, method, eps, args)
    return row["row"], row["wall_s"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", choices=FEATURES)
    ap.add_argument("--method", choices=METHODS)
    ap.add_argument("--epsilon", type=float, help="target ε (private methods)")
    ap.add_argument("--delta", type=float, default=DELTA)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--final-seeds", type=int, default=1,
                    help="train the chosen configuration with this many seeds in all (test mean ± std)")
    ap.add_argument("--all", action="store_true", help="every row, then the table")
    ap.add_argument("--jobs", type=int, default=1, help="rows in parallel (with --all)")
    ap.add_argument("--table", action="store_true", help="write table.md from the JSON rows")
    ap.add_argument("--accounting", action="store_true", help="noise per analysis, no training")
    ap.add_argument("--lambda-ceiling", action="store_true",
                    help="non-private accuracy of the λ-regularized optimum (scikit-learn)")
    ap.add_argument("--quick", action="store_true", help="2 configurations of 2 epochs (smoke test)")
    ap.add_argument("--reseed", type=int, default=0,
                    help="retrain an existing row's chosen configuration with this many seeds in all")
    ap.add_argument("--grid", choices=["main", "edge"], default="main",
                    help="edge: 2 configurations beyond the main grid's edge (hidden, opacus, "
                         "opacus-replace), rows *_edge.json, table_edge.md; not the table")
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--data-dir", help="the IDX files (default /usr/share/datasets/fashion-mnist)")
    ap.add_argument("--cache-dir", help="feature cache root (default $NOISYSGD_CACHE or ~/.cache/noisysgd)")
    ap.add_argument("--threads", type=int, default=1, help="BLAS/torch threads per process")
    args = ap.parse_args(argv)
    machine()  # the repository state now, before anything runs

    if args.table:
        print(render_table(Path(args.out), args.grid))
        return 0
    if args.accounting:
        accounting_table(args)
        return 0
    if args.lambda_ceiling:
        lambda_ceiling(args)
        return 0
    if args.all:
        t0 = time.perf_counter()
        tasks = sorted(all_rows(), key=_row_cost, reverse=True)
        if args.features:
            tasks = [t for t in tasks if t[0] == args.features]
        if args.method:
            tasks = [t for t in tasks if t[1] == args.method]
        if args.jobs > 1:
            with ProcessPoolExecutor(max_workers=args.jobs) as pool:
                futs = [pool.submit(_worker, t, args) for t in tasks]
                for fut in as_completed(futs):
                    name, wall = fut.result()
                    print(f"done {name} ({wall:.0f} s)", flush=True)
        else:
            for t in sorted(tasks, key=lambda t: (FEATURES.index(t[0]),)):
                _worker(t, args)
        if not args.quick:
            print(render_table(Path(args.out)))
        print(f"whole table: {time.perf_counter() - t0:.0f} s wall, {args.jobs} job(s)")
        return 0
    if not args.features or not args.method:
        ap.error("--features and --method are required (or --all, --table, --accounting)")
    if args.method != "nonprivate" and args.epsilon is None:
        ap.error("--epsilon is required for a private method")
    eps = None if args.method == "nonprivate" else args.epsilon
    if args.reseed > 1:
        reseed_row(args.features, args.method, eps, args)
    else:
        run_row(args.features, args.method, eps, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
