"""Issue 43 §1 on the raw tables' DESIGN half: when should the defaults scale the columns privately?

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 nice -n 10 .venv/bin/python \
        benchmarks/raw_tables/explore_rule.py fit --shares 0.1 0.05 0.02 0.2 0.3 \
        --variants unseen_s1 intercept1 floor4 --rule        # the fits: 1,905, 10.5 min on one core
    .venv/bin/python benchmarks/raw_tables/explore_rule.py analyse   # the rules, from the JSON (~10 s)

``fit`` is resume-safe (it skips the fits already in the JSON) and writes it after every table.

The design half only (the held-out half is never loaded here: ``tables.names("design")``).  The
library is the one the baseline ran (``benchmarks/results/raw_tables_design_baseline.json``): commit
``BASE_COMMIT``'s ``src/noisysgd``, exported with ``git archive`` into a temporary folder (or
``--src``) and put first on ``sys.path``; its sha256 is checked against the baseline's.  Nothing
under ``src/`` is edited: the candidate rules are simulated by wrapping ``noisysgd.pipeline._ranges``
at run time.

The family measured ("query, then decide"): ``feature_range="private"``'s range query is always
asked and charged (``private_ranges_within``: ``PRIVATE_RANGE_SHARE`` of (ε, δ), composed with the
training as the pipeline composes it); a statistic S of its answer (the per-column scales s_j),
with the public n, d, ε, decides whether the rows are scaled into the ball with those ranges
(what ``feature_range="private"`` does) or trained on raw (the query's answer unused).  The
decision is post-processing of a charged answer, so the certificate is the same either way.

Per table × seed × ε (run.py's splits and seeds), ``fit`` records:

* ``query_raw@share``: the query asked and charged (``share`` of ε, δ), the raw rows trained — (b);
* ``query_scaled@share`` for shares other than the baseline's 0.1 (for 0.1 the baseline's
  ``feature_range="private"`` row *is* this fit — (c); ``--verify`` re-runs it on one seed per
  table and checks the accuracy is the baseline's, bit for bit);
* ``raw_0.9eps``: the brief's literal (b), ``NoisySGDClassifier(epsilon=0.9 ε, delta=0.9 δ_default)``
  on the raw rows (no query at all: basic composition of an unused query, for comparison);
* the query's answer (scales, uninformative columns, noise std) of every query fit, from which
  ``analyse`` computes the statistics.

``analyse`` then evaluates every (statistic, threshold) rule: per fit, S of that fit's own answer
picks (b) or (c); per table × ε the mean over the 3 seeds; the three targets of README §5 (T3's
reference stays max(baseline defaults, baseline ``feature_range="private"``) − 1 point).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BASELINE = ROOT / "benchmarks" / "results" / "raw_tables_design_baseline.json"
OUT = ROOT / "benchmarks" / "results" / "raw_tables_rule_exploration.json"
BASE_COMMIT = "6502f45"
POINT, MIN_TEST, T2_SHARE, T3_SHARE = 0.01, 100, 0.85, 0.90


# ----------------------------------------------------------------------------------------------
# the library of the baseline
# ----------------------------------------------------------------------------------------------

def _use_library(src: Path | None, expected_sha: str) -> dict:
    if src is None:
        import atexit
        import shutil

        tmp = Path(tempfile.mkdtemp(prefix="explore_rule_src_"))
        atexit.register(shutil.rmtree, tmp, True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", BASE_COMMIT, "src/noisysgd"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        src = tmp / "src"
    sys.path.insert(0, str(src))
    sys.path.insert(1, str(HERE))
    from run import source_sha256  # noqa: E402  (run.py's own hash)

    sha = source_sha256(Path(src) / "noisysgd")
    if sha != expected_sha:
        raise SystemExit(f"{src}/noisysgd has sha256 {sha}, the baseline ran {expected_sha}")
    import noisysgd

    assert Path(noisysgd.__file__).resolve().is_relative_to(Path(src).resolve()), noisysgd.__file__
    return {"src": str(src), "commit": BASE_COMMIT, "sha256": sha}


# ----------------------------------------------------------------------------------------------
# the rule, simulated: the pipeline's step 1 wrapped
# ----------------------------------------------------------------------------------------------

LAST_QUERY: dict = {}


@contextlib.contextmanager
def query_then(decide, share: float = 0.1, transform=None, floor=None):
    """Within the block, ``feature_range="private"`` asks the range query at ``share`` of (ε, δ)
    (charged and composed as the pipeline does) and then scales the rows only where
    ``decide(scales, query) is True``; otherwise the raw rows are trained (the answer unused).
    ``transform(scales) -> scales``: post-processing of the answer before the scaling (a variant);
    ``floor``: the query's ``NOISE_FLOOR`` (noisy counts below floor·σ read as empty) if not None."""
    import noisysgd.pipeline as P
    import noisysgd.preprocessing as PP
    from dataclasses import replace

    original, original_share, original_floor = P._ranges, PP.PRIVATE_RANGE_SHARE, PP.NOISE_FLOOR

    def _ranges(X, declared, p, n, execution, recorded, events, fmap):
        assert P._is_private(declared.feature_range)
        ranges, q, p["epsilon"], p["delta"] = PP.private_ranges_within(
            X, p["epsilon"], P._delta(p, n), adjacency=p["adjacency"], seed=execution.random_state,
            secure_mode=execution.secure_mode, recorded=recorded)
        events.append(P.QueryEvent.of("feature_range", q))
        LAST_QUERY.clear()
        LAST_QUERY.update(q)
        if decide(np.asarray(q["scales"]), q):
            if transform is not None:
                s = transform(np.asarray(q["scales"], dtype=float))
                ranges = (-s, s)
            fmap = replace(fmap, ranges=ranges, ranges_kind="private")
            return PP.scale_to_ball(X, ranges, p["feature_clip"]), fmap
        return X, fmap

    P._ranges, PP.PRIVATE_RANGE_SHARE = _ranges, share
    PP.NOISE_FLOOR = original_floor if floor is None else floor
    try:
        yield
    finally:
        P._ranges, PP.PRIVATE_RANGE_SHARE, PP.NOISE_FLOOR = original, original_share, original_floor


def _fit(X_tr, y_tr, X_te, y_te, labels, eps, seed, **kw) -> dict:
    from sklearn.metrics import balanced_accuracy_score

    from noisysgd import NoisySGDClassifier

    clf = NoisySGDClassifier(epsilon=eps, classes=labels, random_state=seed, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        clf.fit(X_tr, y_tr)
        fit_s = time.perf_counter() - t0
    pred = clf.predict(X_te)
    rep = clf.privacy_report_
    chosen = (rep.get("config") or {}).get("chosen") or {}
    return {"accuracy": float(np.mean(pred == y_te)), "balanced_accuracy": float(balanced_accuracy_score(y_te, pred)),
            "fit_s": fit_s, "epsilon_total": rep.get("epsilon_total"), "delta_total": rep.get("delta_total"),
            "regime": chosen.get("regime"), "scaled": clf.feature_map_.ranges is not None}


WIDEST = 2.0 ** 17  # an uninformative column's scale (EXPONENTS[1] + 1)

#: variants of (c), measured at share 0.1 only: name -> (transform of the scales, estimator kwargs,
#: noise floor).  The raw rows' fit (b) does not depend on the answer (it is unused), so (b) at share
#: 0.1 pairs with every variant; the rule then reads the variant's own answer.
SCALED_VARIANTS = {
    # a column the query could not see (noise swamped every count: s = 2^17, which maps it to ~0)
    # gets s = 1 instead (clipped to [-1, 1], kept): post-processing of the same answer
    "unseen_s1": (lambda s: np.where(s >= WIDEST, 1.0, s), {}, None),
    # the bias coordinate 1 instead of "auto" (R/4, or R_c/4 after centering)
    "intercept1": (None, {"intercept_scaling": 1.0}, None),
    # the noise floor at 4 sigma instead of 3: with d x 33 noisy counts a 3-sigma floor lets a
    # spurious bucket through in a good share of the queries (Bonferroni over 33 d counts at 5 %
    # is about 4 sigma for d = 5..30)
    "floor4": (None, {}, 4.0),
}


def _query_record(q: dict) -> dict:
    return {"scales": [float(s) for s in q["scales"]], "uninformative": int(q["uninformative_features"]),
            "noise_std": float(q["noise_std"]), "epsilon": float(q["epsilon"]), "delta": float(q["delta"])}


def fit_main(args) -> int:
    from sklearn.model_selection import train_test_split

    base = json.loads(BASELINE.read_text())
    lib = _use_library(args.src, base["runs"][-1]["noisysgd_source_sha256"])
    import tables as T
    from run import EPSILONS, PRIVATE_RANGE, SEEDS, TEST_SIZE

    from noisysgd.private_fit import default_delta

    out = json.loads(args.json.read_text()) if args.json.exists() else {
        "what": "raw tables, design half: query-then-decide rules (benchmarks/raw_tables/explore_rule.py)",
        "fits": [], "runs": []}
    done = {(f["table"], f["seed"], f["epsilon"], f["variant"]) for f in out["fits"]}
    out["runs"].append({"started": time.strftime("%Y-%m-%d %H:%M:%S"), "library": lib, "shares": args.shares,
                        "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}})
    base_acc = {(c["table"], c["seed"], c["epsilon"]): c["accuracy"] for c in base["cells"]
                if c["method"] == PRIVATE_RANGE}
    names = T.names("design")
    if args.tables:
        names = [n for n in names if n in args.tables]
    t_start = time.perf_counter()
    for name in names:
        table = T.load(name)
        assert table.half == "design"
        t0 = time.perf_counter()
        for seed in SEEDS:
            X_tr, X_te, y_tr, y_te = train_test_split(table.X, table.y, test_size=TEST_SIZE, stratify=table.y,
                                                      random_state=seed)
            for eps in EPSILONS:
                def add(variant, rec):
                    out["fits"].append({"table": name, "seed": seed, "epsilon": eps, "variant": variant,
                                        "n_train": int(len(y_tr)), "d": int(X_tr.shape[1]),
                                        "n_test": int(len(y_te)), **rec})
                    done.add((name, seed, eps, variant))

                for share in args.shares:
                    v = f"query_raw@{share:g}"
                    if (name, seed, eps, v) not in done:
                        with query_then(lambda s, q: False, share):
                            rec = _fit(X_tr, y_tr, X_te, y_te, table.labels, eps, seed, feature_range="private")
                        add(v, {**rec, "query": _query_record(LAST_QUERY)})
                    v = f"query_scaled@{share:g}"
                    if share != 0.1 and (name, seed, eps, v) not in done:
                        with query_then(lambda s, q: True, share):
                            rec = _fit(X_tr, y_tr, X_te, y_te, table.labels, eps, seed, feature_range="private")
                        add(v, {**rec, "query": _query_record(LAST_QUERY)})
                for var in args.variants:
                    v = f"query_scaled_{var}@0.1"
                    if (name, seed, eps, v) not in done:
                        transform, kw, floor = SCALED_VARIANTS[var]
                        with query_then(lambda s, q: True, 0.1, transform, floor):
                            rec = _fit(X_tr, y_tr, X_te, y_te, table.labels, eps, seed, feature_range="private", **kw)
                        add(v, {**rec, "query": _query_record(LAST_QUERY)})
                if args.rule and (name, seed, eps, "rule@0.1") not in done:
                    with query_then(recommended, 0.1):
                        rec = _fit(X_tr, y_tr, X_te, y_te, table.labels, eps, seed, feature_range="private")
                    add("rule@0.1", {**rec, "query": _query_record(LAST_QUERY)})
                if args.naive and (name, seed, eps, "raw_0.9eps") not in done:
                    dl = default_delta(len(y_tr))
                    add("raw_0.9eps", _fit(X_tr, y_tr, X_te, y_te, table.labels, 0.9 * eps, seed, delta=0.9 * dl))
                if args.verify and seed == 0 and eps == 1.0 and (name, seed, eps, "verify_scaled@0.1") not in done:
                    with query_then(lambda s, q: True, 0.1):
                        rec = _fit(X_tr, y_tr, X_te, y_te, table.labels, eps, seed, feature_range="private")
                    rec["baseline_accuracy"] = base_acc[(name, seed, eps)]
                    add("verify_scaled@0.1", {**rec, "query": _query_record(LAST_QUERY)})
        print(f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)
        out["runs"][-1]["wall_s"] = time.perf_counter() - t_start
        _save(args.json, out)
    return 0


def _save(path: Path, data: dict) -> None:
    """The JSON, one fit and one rule a line (the file stays a few MB and diffable)."""
    def lines(obj: dict, big: set, depth: int = 1) -> str:
        pad = " " * depth
        out = []
        for k, v in obj.items():
            if k in big and isinstance(v, list):
                body = "[\n" + ",\n".join(pad + " " + json.dumps(x, ensure_ascii=False) for x in v) + "\n" + pad + "]"
            elif k in big and isinstance(v, dict):
                dump = lambda x: json.dumps(x, ensure_ascii=False)  # noqa: E731
                body = ("{\n" + ",\n".join(f"{pad} {dump(kk)}: {dump(vv)}" for kk, vv in v.items())
                        + "\n" + pad + "}")
            elif k == "analysis":
                body = lines(v, {"rules", "cells", "statistics", "rows"}, depth + 1)
            else:
                body = json.dumps(v, ensure_ascii=False)
            out.append(f"{pad}{json.dumps(k)}: {body}")
        return "{\n" + ",\n".join(out) + "\n" + pad[:-1] + "}"

    tmp = path.with_suffix(path.suffix + ".tmp")
    text = lines(data, {"fits"}) + "\n"
    assert json.loads(text) == json.loads(json.dumps(data))
    tmp.write_text(text)
    tmp.replace(path)


# ----------------------------------------------------------------------------------------------
# statistics of the query's answer (and public n, d, ε)
# ----------------------------------------------------------------------------------------------


def _informative(s):
    s = np.asarray(s, float)
    return s[s < WIDEST]


def _ratio_at_least_one(s) -> float:
    big = _informative(s)
    big = big[big >= 1.0]
    return float(big.max() / np.median(big)) if len(big) else 0.0


STATISTICS = {
    # max/median of the scales, uninformative columns (s = 2^17) left out
    "max/median (informative)": lambda s, r: (float(_informative(s).max() / np.median(_informative(s)))
                                              if len(_informative(s)) else 0.0),
    # max/median over the informative columns whose scale is at least 1 (|x| reaches 1 in 5 % of rows):
    # a nearly-zero column (digits' border pixels, scale 2^-15) does not pull the median down
    "max/median (informative, s >= 1)": lambda s, r: _ratio_at_least_one(s),
    # max/median of every column's scale (uninformative ones at 2^17)
    "max/median (all)": lambda s, r: float(np.max(s) / np.median(s)),
    # share of the largest s_j^2 in sum s_j^2 (informative columns)
    "top share of s^2 (informative)": lambda s, r: (float(np.max(_informative(s)) ** 2 / np.sum(_informative(s) ** 2))
                                                    if len(_informative(s)) else 0.0),
    # the raw rows' reach against the clip R = 1: sqrt(sum s_j^2) over informative columns
    "sqrt(sum s^2) (informative)": lambda s, r: (float(np.sqrt(np.sum(_informative(s) ** 2)))
                                                 if len(_informative(s)) else 0.0),
    # the largest informative scale
    "max s (informative)": lambda s, r: float(_informative(s).max()) if len(_informative(s)) else 0.0,
    # the number of columns with s_j > 2 (|x| >= 2 for more than 5 % of rows: beyond a 0/1 column)
    "#columns s > 2 (informative)": lambda s, r: float(np.sum(_informative(s) > 2.0)),
    # the share of columns the query could not see (noise swamped every count)
    "uninformative share": lambda s, r: r["uninformative"] / len(s),
}
THRESHOLDS = {
    "max/median (informative)": [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
    "max/median (informative, s >= 1)": [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
    "max/median (all)": [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2 ** 15],
    "top share of s^2 (informative)": [0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999],
    "sqrt(sum s^2) (informative)": [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096],
    "max s (informative)": [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096],
    "#columns s > 2 (informative)": [0, 1, 2, 3, 4, 6, 8],
}


#: the rule recommended (README "Rule exploration"): scale when the largest informative scale is
#: more than RULE_RATIO times their median and at most RULE_UNSEEN of the columns are unseen
RULE_STAT, RULE_RATIO, RULE_UNSEEN = "max/median (informative)", 16.0, 0.25
RULE_KEY = f"share 0.1 | {RULE_STAT} > {RULE_RATIO:g} | unseen share ≤ {RULE_UNSEEN:g}"


def recommended(scales, q) -> bool:
    """The recommended rule: True = train on the privately scaled rows, False = on the raw rows."""
    scales = np.asarray(scales, dtype=float)
    unseen = q["uninformative_features"] if "uninformative_features" in q else q["uninformative"]
    if unseen / len(scales) > RULE_UNSEEN:
        return False
    return STATISTICS[RULE_STAT](scales, q) > RULE_RATIO


def _cell_means(rows: list[dict]) -> dict:
    acc = defaultdict(lambda: defaultdict(list))
    for r in rows:
        acc[(r["table"], r["epsilon"])]["acc"].append(r["accuracy"])
        acc[(r["table"], r["epsilon"])]["bal"].append(r["balanced_accuracy"])
    return {k: {"acc": float(np.mean(v["acc"])), "bal": float(np.mean(v["bal"])), "seeds": len(v["acc"])}
            for k, v in acc.items()}


def _baseline_cells(base: dict) -> dict:
    from run import DEFAULTS, DPL_CLIP, DPL_NORM, EPSILONS, MAJORITY, NONPRIVATE, PRIVATE_RANGE

    per = defaultdict(lambda: defaultdict(list))
    n_test = {}
    for c in base["cells"]:
        if c["half"] != "design":
            continue
        for eps in (EPSILONS if c["epsilon"] is None else (c["epsilon"],)):
            per[(c["table"], eps)][c["method"]].append(c["accuracy"])
            n_test[(c["table"], eps)] = c["n_test"]
    out = {}
    for k, m in per.items():
        out[k] = {"majority": np.mean(m[MAJORITY]), "nonprivate": np.mean(m[NONPRIVATE]),
                  "defaults": np.mean(m[DEFAULTS]), "private": np.mean(m[PRIVATE_RANGE]),
                  "dpl": max(np.mean(m[DPL_NORM]), np.mean(m[DPL_CLIP])), "n_test": n_test[k]}
    return out


def targets(acc: dict, ref: dict) -> dict:
    """T1, T2, T3 (README §5) of a row ``acc`` {(table, eps): mean accuracy} against the baseline."""
    keys = sorted(ref)
    t1 = [k for k in keys if ref[k]["n_test"] >= MIN_TEST]
    f1 = [k for k in t1 if acc[k] < min(ref[k]["majority"], ref[k]["nonprivate"]) - POINT]
    f2 = [k for k in keys if acc[k] < ref[k]["dpl"]]
    f3 = [k for k in keys if acc[k] < max(ref[k]["defaults"], ref[k]["private"]) - POINT]
    return {"T1": [len(t1) - len(f1), len(t1)], "T2": [len(keys) - len(f2), len(keys)],
            "T3": [len(keys) - len(f3), len(keys)],
            "met": int(len(f1) == 0) + int(len(keys) - len(f2) >= T2_SHARE * len(keys))
            + int(len(keys) - len(f3) >= T3_SHARE * len(keys)),
            "cells_ok": sum(k not in f1 and k not in f2 and k not in f3 for k in keys),
            "mean_acc": float(np.mean([acc[k] for k in keys])),
            "fail": {"T1": [f"{k[0]} ε={k[1]:g}" for k in f1], "T2": [f"{k[0]} ε={k[1]:g}" for k in f2],
                     "T3": [f"{k[0]} ε={k[1]:g}" for k in f3]}}


def _rule_rows(raw_fits, scaled_fits, choose) -> tuple[list, int]:
    """Per fit, (b) or (c) by ``choose(answer)``: the answer (c) was scaled with where (c) recorded
    it (a variant's own query), else (b)'s (the same query: same share, seed and noise stream)."""
    scaled = {(f["table"], f["seed"], f["epsilon"]): f for f in scaled_fits}
    rows, n_scaled = [], 0
    for f in raw_fits:
        c = scaled[(f["table"], f["seed"], f["epsilon"])]
        use = choose(c.get("query") or f["query"])
        n_scaled += use
        rows.append(c if use else f)
    return rows, n_scaled


def analyse_main(args) -> int:
    sys.path.insert(0, str(HERE))
    base = json.loads(BASELINE.read_text())
    data = json.loads(args.json.read_text())
    from run import PRIVATE_RANGE

    ref = _baseline_cells(base)
    fits = defaultdict(list)
    for f in data["fits"]:
        fits[f["variant"]].append(f)
    # (c) at share 0.1 is the baseline's feature_range="private" row (same library, seeds and stream)
    base_priv = [{"table": c["table"], "seed": c["seed"], "epsilon": c["epsilon"], "accuracy": c["accuracy"],
                  "balanced_accuracy": c["balanced_accuracy"]} for c in base["cells"]
                 if c["method"] == PRIVATE_RANGE and c["half"] == "design"]
    fits["query_scaled@0.1"] = base_priv
    verify = fits.get("verify_scaled@0.1", [])
    result = {"verify": {"fits": len(verify),
                         "identical": sum(f["accuracy"] == f["baseline_accuracy"] for f in verify)},
              "rows": {}, "rules": {}}

    def row(name, acc):
        result["rows"][name] = targets(acc, ref)

    row("baseline defaults (raw, full ε)", {k: v["defaults"] for k, v in ref.items()})
    row('baseline feature_range="private" (always scaled)', {k: v["private"] for k, v in ref.items()})
    row("oracle: better of baseline defaults / private per cell",
        {k: max(v["defaults"], v["private"]) for k, v in ref.items()})
    shares = sorted({float(v.split("@")[1]) for v in fits if v.startswith("query_raw@")})
    pairs = [(f"query_raw@{sh:g}", f"query_scaled@{sh:g}", f"share {sh:g}") for sh in shares]
    pairs += [("query_raw@0.1", f"query_scaled_{var}@0.1", f"share 0.1, scaled rows: {var}") for var in SCALED_VARIANTS]
    for raw_name, sc_name, label in pairs:
        raw, sc = fits.get(raw_name, []), fits.get(sc_name, [])
        if len(raw) != 135 or len(sc) != 135:
            continue
        if label == f"share {raw_name.split('@')[1]}":
            row(f"(b) query charged at {raw_name.split('@')[1]}, raw rows",
                {k: v["acc"] for k, v in _cell_means(raw).items()})
        row(f"(c) {label}: always scaled", {k: v["acc"] for k, v in _cell_means(sc).items()})
        for stat, fn in STATISTICS.items():
            if stat not in THRESHOLDS:
                continue
            for thr in THRESHOLDS[stat]:
                for cap in (None, 0.5, 0.25, 0.0):  # optionally: raw when more than this share of columns is unseen
                    def choose(q, fn=fn, thr=thr, cap=cap):
                        if cap is not None and q["uninformative"] / len(q["scales"]) > cap:
                            return False
                        return fn(np.asarray(q["scales"]), q) > thr
                    rows, n_sc = _rule_rows(raw, sc, choose)
                    res = targets({k: v["acc"] for k, v in _cell_means(rows).items()}, ref)
                    res["scaled_fits"] = n_sc
                    key = f"{label} | {stat} > {thr:g}" + ("" if cap is None else f" | unseen share ≤ {cap:g}")
                    result["rules"][key] = res
    if "raw_0.9eps" in fits and len(fits["raw_0.9eps"]) == 135:
        row("raw, ε·0.9 and δ·0.9, no query (basic composition)",
            {k: v["acc"] for k, v in _cell_means(fits["raw_0.9eps"]).items()})
    # the cost of the unused query: (b) against the baseline defaults (raw rows, full ε), per cell
    result["unused_query_cost"] = {}
    for v in [f"query_raw@{sh:g}" for sh in shares] + ["raw_0.9eps"]:
        if len(fits.get(v, [])) != 135:
            continue
        m = _cell_means(fits[v])
        dl = np.array([m[k]["acc"] - ref[k]["defaults"] for k in sorted(ref)])
        result["unused_query_cost"][v] = {
            "mean_pt": 100 * float(dl.mean()), "median_pt": 100 * float(np.median(dl)),
            "min_pt": 100 * float(dl.min()), "max_pt": 100 * float(dl.max()),
            "cells_beyond_1pt": int(np.sum(np.abs(dl) > POINT))}
    # the recommended rule: run end to end (rule@0.1) it must equal the per-fit choice of (b)/(c)
    rec = result["rules"].get(RULE_KEY)
    if rec is not None:
        chosen, _ = _rule_rows(fits["query_raw@0.1"], fits["query_scaled@0.1"], lambda q: recommended(q["scales"], q))
        e2e = {(f["table"], f["seed"], f["epsilon"]): f for f in fits.get("rule@0.1", [])}
        result["recommended"] = {
            "rule": RULE_KEY, **rec,
            "end_to_end": {"fits": len(e2e), "identical_to_the_choice": sum(
                e2e[(f["table"], f["seed"], f["epsilon"])]["accuracy"] == f["accuracy"]
                for f in chosen if (f["table"], f["seed"], f["epsilon"]) in e2e)}}
        rule_acc = _cell_means(chosen)
        b_acc = _cell_means(fits["query_raw@0.1"])
        scaled_n = defaultdict(int)
        for f in fits["query_raw@0.1"]:
            scaled_n[(f["table"], f["epsilon"])] += recommended(f["query"]["scales"], f["query"])
        result["recommended"]["cells"] = [
            {"table": k[0], "epsilon": k[1], "n_test": int(ref[k]["n_test"]), "majority": ref[k]["majority"],
             "nonprivate": ref[k]["nonprivate"], "defaults": ref[k]["defaults"], "private": ref[k]["private"],
             "dpl_better": ref[k]["dpl"], "raw_after_query": b_acc[k]["acc"], "rule": rule_acc[k]["acc"],
             "rule_bal": rule_acc[k]["bal"], "seeds_scaled": scaled_n[k]}
            for k in sorted(ref, key=lambda k: (k[0].lower(), k[1]))]
    # per-table statistics of the answers (share 0.1)
    per = defaultdict(list)
    for f in fits.get("query_raw@0.1", []):
        per[(f["table"], f["epsilon"])].append({s: fn(np.asarray(f["query"]["scales"]), f["query"])
                                                for s, fn in STATISTICS.items()})
    result["statistics"] = {f"{k[0]} ε={k[1]:g}": {s: [d[s] for d in v] for s in STATISTICS}
                            for k, v in sorted(per.items())}
    data["analysis"] = result
    _save(args.json, data)
    _print(result, ref, fits)
    return 0


def _fmt(r):
    return (f"T1 {r['T1'][0]}/{r['T1'][1]}  T2 {r['T2'][0]}/{r['T2'][1]} = {r['T2'][0] / r['T2'][1]:.0%}  "
            f"T3 {r['T3'][0]}/{r['T3'][1]} = {r['T3'][0] / r['T3'][1]:.0%}  met {r['met']}/3  "
            f"cells ok {r['cells_ok']}  mean acc {r['mean_acc']:.4f}")


def _print(result, ref, fits):
    print(f"verify: {result['verify']['identical']}/{result['verify']['fits']} re-run scaled fits identical "
          "to the baseline's feature_range='private'\n")
    for name, r in result["rows"].items():
        print(f"{name:62s} {_fmt(r)}")
    print("\nthe unused query's cost, (b) minus the baseline defaults, per table x ε cell (points):")
    for v, c in result["unused_query_cost"].items():
        print(f"  {v:16s} mean {c['mean_pt']:+.2f}, median {c['median_pt']:+.2f}, range [{c['min_pt']:+.1f}, "
              f"{c['max_pt']:+.1f}], {c['cells_beyond_1pt']}/45 cells beyond 1 point")
    if "recommended" in result:
        r = result["recommended"]
        print(f"\nrecommended: {r['rule']}\n  {_fmt(r)}  scaled {r['scaled_fits']}/135; end to end "
              f"{r['end_to_end']['identical_to_the_choice']}/{r['end_to_end']['fits']} fits identical")
        for t in ("T1", "T2", "T3"):
            print(f"  {t} fails: {', '.join(r['fail'][t]) or '-'}")
        print(f"  {'table':22s} {'ε':>4s} {'n_te':>5s} {'maj':>6s} {'NP':>6s} {'def':>6s} {'priv':>6s} {'dpl':>6s} "
              f"{'(b)':>6s} {'rule':>6s} scaled")
        for c in r["cells"]:
            print(f"  {c['table'][:22]:22s} {c['epsilon']:4g} {c['n_test']:5d} {c['majority']:6.3f} "
                  f"{c['nonprivate']:6.3f} {c['defaults']:6.3f} {c['private']:6.3f} {c['dpl_better']:6.3f} "
                  f"{c['raw_after_query']:6.3f} {c['rule']:6.3f} {c['seeds_scaled']}/3")
    print("\nbest rules (met targets, cells meeting all three, mean accuracy):")
    ranked = sorted(result["rules"].items(), key=lambda kv: (-kv[1]["met"], -kv[1]["cells_ok"], -kv[1]["mean_acc"]))
    for key, r in ranked[:15]:
        print(f"  {key:75s} {_fmt(r)}  scaled {r['scaled_fits']}/135")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit")
    f.add_argument("--src", type=Path, help=f"a folder holding noisysgd/ (default: git archive {BASE_COMMIT})")
    f.add_argument("--shares", type=float, nargs="+", default=[0.1])
    f.add_argument("--variants", nargs="*", default=[], choices=sorted(SCALED_VARIANTS))
    f.add_argument("--rule", action="store_true", help="also run the recommended rule end to end")
    f.add_argument("--no-naive", dest="naive", action="store_false")
    f.add_argument("--no-verify", dest="verify", action="store_false")
    f.add_argument("--tables", nargs="*")
    f.add_argument("--json", type=Path, default=OUT)
    a = sub.add_parser("analyse")
    a.add_argument("--json", type=Path, default=OUT)
    args = ap.parse_args(argv)
    return fit_main(args) if args.cmd == "fit" else analyse_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
