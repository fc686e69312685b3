"""How much of T3 is seed noise?  Each noisysgd row against a copy of itself with other noise (README §18).

T3 (README §5) asks the defaults to be within a point of ``max(defaults, feature_range="private")``
on 90 % of the cells, each cell a mean over 3 seeds.  Both rows are noisy: a cell's two means can
differ by more than a point when the two rows run the *same* procedure with different noise.  This
script measures that floor.  For every table × seed × ε of the six sets it fits, on the seed's own
80/20 split (``random_state=seed``, as ``run.py``), the defaults and ``feature_range="private"``
twice: with ``random_state=seed`` (the benchmark's fit, which must reproduce the committed cell) and
with ``random_state=seed + 1000`` (the same split and procedure, other noise: the batches, the
Gaussian noise, the private queries).  Then, per set, T3's test of each row against its re-seeded
copy: the share of cells where ``row ≥ copy − 1 point`` (a procedure tested against itself).  That
is the spread of independent draws; T3 itself compares two rows that share their noise (the same
``random_state``, one range answer: a fit the rule scales *is* the reference fit), so it does not
bound what a scaling rule can reach on T3 (README §18).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/raw_tables/reseeded.py \
        --json benchmarks/results/raw_tables_reseeded.json               # ~10 min, one thread
    .venv/bin/python benchmarks/raw_tables/reseeded.py --report benchmarks/results/raw_tables_reseeded.json

Resume-safe: a cell already in the JSON is skipped; the JSON is rewritten after every table.  The
wheels of fresh.py to seventh.py must be in ``.fresh-wheels`` (their docstrings say how).

``--independent-noise`` (README §25): §18's fits gave every table of a seed the same
``random_state`` (seed, then seed + 1000), so each copy drew one release-check noise for all tables
(README §20).  With it, each first fit is the benchmark's ``run.py --independent-noise`` fit
(``random_state`` = sha256 of "table|seed") and its copy draws from sha256 of "table|seed + 1000";
the eight sets are run, against the committed ``*_independent``, seventh and eighth files, with the
release check's margin of those files (+½σ_c on every fit: README §23's margin patched out, so the
first fits reproduce them)::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/raw_tables/reseeded.py --independent-noise \
        --json /tmp/raw_tables_reseeded_independent.json \
        --summary-json benchmarks/results/raw_tables_reseeded_independent_summary.json   # ~7 min, one thread

(the 7,272 fits' file stays out of the repository; its summary, the table README §25 shows, is
committed.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as R  # noqa: E402
import tables as T  # noqa: E402

SETS = ("design", "heldout", "fresh", "fourth", "fifth", "sixth")
#: --independent-noise: the eight sets, and the committed files of run.py --independent-noise
INDEPENDENT_SETS = SETS + ("seventh", "eighth")
COMMITTED_INDEPENDENT = {"design": ("raw_tables_all_independent.json",), "heldout": ("raw_tables_all_independent.json",),
                         **{h: (f"raw_tables_{h}_independent.json",) for h in ("fresh", "fourth", "fifth", "sixth")},
                         "seventh": ("raw_tables_seventh.json",), "eighth": ("raw_tables_eighth.json",)}
OFFSET = 1000
ROWS = {R.DEFAULTS: {}, R.PRIVATE_RANGE: {"feature_range": "private"}}
#: the committed cells each set's first fits must reproduce (the library of README §16-17)
COMMITTED = {"design": ("raw_tables_design.json", "raw_tables_rerun_unseen_median.json"),
             "heldout": ("raw_tables_heldout.json", "raw_tables_rerun_unseen_median.json"),
             "fresh": ("raw_tables_fresh.json", "raw_tables_rerun_unseen_median.json"),
             "fourth": ("raw_tables_fourth.json", "raw_tables_rerun_unseen_median.json"),
             "fifth": ("raw_tables_fifth.json",), "sixth": ("raw_tables_sixth.json",)}


def source(which: str):
    if which in ("design", "heldout"):
        return T
    import importlib

    return importlib.import_module(which)


def _fit(X_tr, y_tr, X_te, y_te, labels, eps, state, kw) -> dict:
    from noisysgd import NoisySGDClassifier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = NoisySGDClassifier(epsilon=eps, classes=labels, random_state=state, **kw).fit(X_tr, y_tr)
    return R.scores(y_te, clf.predict(X_te))


def _states(name: str, seed: int, independent: bool) -> tuple[int, int]:
    """(the benchmark fit's random_state, its copy's)."""
    if not independent:
        return seed, seed + OFFSET
    return R.fit_state(name, seed, True), R.fit_state(name, seed + OFFSET, True)


def run(path: Path, sets, independent: bool = False) -> None:
    from sklearn.model_selection import train_test_split
    from tqdm import tqdm

    if independent:  # the margin of the committed files, +½σ_c (§25 ran with §23's rule patched out; the library's
        #             margin since §26): the first fits reproduce them
        import noisysgd.pipeline as pipeline
        from noisysgd.prior import CHECK_MARGIN

        pipeline.check_margin = lambda prior: (CHECK_MARGIN, "")
    data = json.loads(path.read_text()) if path.exists() else {"cells": [], "meta": R._library_meta(),
                                                               "noise": "independent" if independent else "shared"}
    done = {(c["half"], c["table"], c["seed"], c["method"], c["epsilon"], c["state"]) for c in data["cells"]}
    todo = [(s, n) for s in sets for n in source(s).names(s)]
    bar = tqdm(total=len(todo) * len(R.SEEDS) * len(R.EPSILONS) * len(ROWS) * 2, unit="fit", dynamic_ncols=True)
    for half, name in todo:
        table = source(half).load(name)
        for seed in R.SEEDS:
            X_tr, X_te, y_tr, y_te = train_test_split(table.X, table.y, test_size=R.TEST_SIZE, stratify=table.y,
                                                      random_state=seed)
            for method, kw in ROWS.items():
                for eps in R.EPSILONS:
                    for copy, state in enumerate(_states(name, seed, independent)):
                        bar.update(1)
                        if (half, name, seed, method, eps, state) in done:
                            continue
                        bar.set_description(f"{half} {name}")
                        scores = _fit(X_tr, y_tr, X_te, y_te, table.labels, eps, state, kw)
                        data["cells"].append({"half": half, "table": name, "seed": seed, "method": method,
                                              "epsilon": eps, "state": state, "copy": bool(copy), **scores,
                                              "n_test": int(len(y_te))})
        R.save_json(path, data)  # (one cell a line, as run.py writes)
    bar.close()


def _as_cells(cells, method):
    return [{**c, "method": method} for c in cells]


def summary(path: Path) -> dict:
    """Per set: whether the benchmark's own fits reproduced the committed cells; the targets as
    committed and with both noisysgd rows replaced by their re-seeded copies (the same procedures,
    other noise); and T3's test of each row against its own copy."""
    import report

    data = json.loads(path.read_text())
    independent = data.get("noise") == "independent"
    out = {}
    results = HERE.parents[1] / "benchmarks" / "results"
    for half in INDEPENDENT_SETS if independent else SETS:
        mine = [c for c in data["cells"] if c["half"] == half]
        if not mine:
            continue
        committed = report.load([results / f for f in (COMMITTED_INDEPENDENT if independent else COMMITTED)[half]])
        base = [c for c in committed["cells"] if c["half"] == half]
        ref = {(c["table"], c["seed"], c["method"], c["epsilon"]): c["accuracy"] for c in base if c["method"] in ROWS}
        is_copy = (lambda c: c["copy"]) if independent else (lambda c: c["state"] >= OFFSET)  # noqa: E731
        first = [c for c in mine if not is_copy(c)]
        copy = {m: [c for c in mine if is_copy(c) and c["method"] == m] for m in ROWS}
        others = [c for c in base if c["method"] not in ROWS]
        row = {"reproduced": sum(ref.get((c["table"], c["seed"], c["method"], c["epsilon"])) == c["accuracy"]
                                 for c in first), "first_fits": len(first)}
        row["committed"] = report.targets({"cells": base}, half)
        row["copies"] = report.targets({"cells": others + copy[R.DEFAULTS] + copy[R.PRIVATE_RANGE]}, half)
        firsts = {m: [c for c in first if c["method"] == m] for m in ROWS}
        # each row against its own copy: the copy stands in for the other noisysgd row of T3
        self_d = report.targets({"cells": others + firsts[R.DEFAULTS] + _as_cells(copy[R.DEFAULTS], R.PRIVATE_RANGE)},
                                half)
        self_p = report.targets({"cells": others + firsts[R.PRIVATE_RANGE] + _as_cells(copy[R.PRIVATE_RANGE], R.DEFAULTS)},
                                half)
        row["self_T3"] = {R.DEFAULTS: self_d["T3"][R.DEFAULTS], R.PRIVATE_RANGE: self_p["T3"][R.PRIVATE_RANGE]}
        out[half] = row
    return out


def compact(s: dict) -> dict:
    """:func:`summary` without the targets' per-cell failure lists (what :func:`markdown` reads)."""
    return {half: {**{k: row[k] for k in ("reproduced", "first_fits", "self_T3")},
                   **{k: {t: row[k][t] for t in ("T1", "T2", "T3")} for k in ("committed", "copies")}}
            for half, row in s.items()}


def _pct(pair) -> str:
    a, b = pair
    return f"{a}/{b} = {100 * a / b:.0f} %"


def markdown(s: dict) -> str:
    lines = ["| set | first fits = committed | T1, T2, T3 as committed | T1, T2, T3 with both rows re-seeded "
             "| T3 of the defaults against their own copy | T3 of `feature_range=\"private\"` against its copy |",
             "|---|---|---|---|---|---|"]
    for half, row in s.items():
        t = [", ".join(_pct(r[k][R.DEFAULTS]) if k != "T1" else "{}/{}".format(*r[k][R.DEFAULTS])
                       for k in ("T1", "T2", "T3") if R.DEFAULTS in r[k]) for r in (row["committed"], row["copies"])]
        lines.append(f"| {half} | {row['reproduced']}/{row['first_fits']} | {t[0]} | {t[1]} "
                     f"| {_pct(row['self_T3'][R.DEFAULTS])} | {_pct(row['self_T3'][R.PRIVATE_RANGE])} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path, help="run, writing here")
    ap.add_argument("--report", type=Path, help="summarise this file")
    ap.add_argument("--sets", nargs="*", choices=INDEPENDENT_SETS, help="default: the six sets (the eight with "
                    "--independent-noise)")
    ap.add_argument("--independent-noise", action="store_true", help="README §25 (module docstring)")
    ap.add_argument("--summary-json", type=Path, help="also write the summary (compact) here")
    args = ap.parse_args(argv)
    sets = args.sets or list(INDEPENDENT_SETS if args.independent_noise else SETS)
    if args.json:
        t0 = time.perf_counter()
        run(args.json, sets, args.independent_noise)
        print(f"wrote {args.json} ({time.perf_counter() - t0:.0f} s)")
    if args.report or args.json:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # (report.cells' mean fit time: none recorded here)
            s = compact(summary(args.report or args.json))
        print(markdown(s))
        if args.summary_json:
            args.summary_json.write_text(json.dumps(s, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
