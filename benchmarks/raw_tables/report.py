"""The targets of issue 43 §6 from run.py's JSON, per half, and a markdown table per table.

    .venv/bin/python benchmarks/raw_tables/report.py benchmarks/results/raw_tables_design_baseline.json
        [more files, read over it] [--markdown-only] [--no-markdown]

Cells are table × ε, each the mean over the seeds present (majority and non-private LR do not
depend on ε: their per-seed values are shared by the three ε of a table).

* T1 (floor): accuracy ≥ min(majority, non-private LR) − 1 point on every cell whose test split
  holds ≥ 100 rows;
* T2 (peer): ≥ diffprivlib's better variant (per cell, the better mean of its two rows) on ≥ 85 %
  of cells;
* T3 (no argument needed): ≥ max(defaults, feature_range="private") − 1 point on ≥ 90 % of cells.

T1 is computed for every row (the baselines too), T2 and T3 for noisysgd's two rows.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import (DEFAULTS, DPL_CLIP, DPL_NORM, EPSILONS, MAJORITY, NONPRIVATE,  # noqa: E402
                 PRIVATE_RANGE)

POINT = 0.01
MIN_TEST = 100
T2_SHARE, T3_SHARE = 0.85, 0.90
PRIVATE_ROWS = (DEFAULTS, PRIVATE_RANGE, DPL_NORM, DPL_CLIP)
SHORT = {DEFAULTS: "defaults", PRIVATE_RANGE: 'f_r="private"', DPL_NORM: "dpl data_norm (not private)",
         DPL_CLIP: "dpl clip 1", NONPRIVATE: "non-private LR", MAJORITY: "majority"}


def load(paths) -> dict:
    """run.py's JSON files read as one: a later file's cell replaces an earlier one's of the same
    (table, seed, method, ε) — a re-run of some rows read over the file it re-ran
    (``raw_tables_rerun_unseen_median.json`` over the four sets' files, README §16)."""
    merged: dict = {"runs": [], "tables": {}, "cells": {}}
    for path in paths:
        data = json.loads(Path(path).read_text())
        merged["runs"] += data.get("runs", [])
        merged["tables"].update(data.get("tables", {}))
        for c in data["cells"]:
            merged["cells"][(c["table"], c["seed"], c["method"], c["epsilon"])] = c
    merged["cells"] = list(merged["cells"].values())
    return merged


def cells(data: dict) -> dict:
    """{(half, table, eps): {method: {"acc", "bal", "fit_s", "seeds", "extra": [...]}}}."""
    acc = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for c in data["cells"]:
        epss = EPSILONS if c["epsilon"] is None else (c["epsilon"],)
        for eps in epss:
            slot = acc[(c["half"], c["table"], eps)][c["method"]]
            slot["acc"].append(c["accuracy"])
            slot["bal"].append(c["balanced_accuracy"])
            slot["fit_s"].append(c.get("fit_s", np.nan))
            slot["n_test"].append(c["n_test"])
            slot["cells"].append(c)
    out = {}
    for key, methods in acc.items():
        out[key] = {m: {"acc": float(np.mean(v["acc"])), "bal": float(np.mean(v["bal"])),
                        "acc_std": float(np.std(v["acc"])), "fit_s": float(np.nanmean(v["fit_s"])),
                        "seeds": len(v["acc"]), "n_test": int(np.mean(v["n_test"])), "cells": v["cells"]}
                    for m, v in methods.items()}
    return out


def complete(methods: dict) -> bool:
    return all(m in methods for m in (DEFAULTS, PRIVATE_RANGE, NONPRIVATE, MAJORITY))


def targets(data: dict, half: str) -> dict:
    cs = {k: v for k, v in cells(data).items() if k[0] == half and complete(v)}
    res = {"cells": len(cs), "tables": len({k[1] for k in cs}), "T1": {}, "T2": {}, "T3": {}, "fail": defaultdict(list)}
    has_dpl = all(DPL_NORM in v and DPL_CLIP in v for v in cs.values()) and cs
    for method in PRIVATE_ROWS + (NONPRIVATE, MAJORITY):
        if not all(method in v for v in cs.values()):
            continue
        eligible = [(k, v) for k, v in cs.items() if v[MAJORITY]["n_test"] >= MIN_TEST]
        ok = [v[method]["acc"] >= min(v[MAJORITY]["acc"], v[NONPRIVATE]["acc"]) - POINT for _, v in eligible]
        res["T1"][method] = (sum(ok), len(ok))
        res["fail"][("T1", method)] = [k for (k, _), good in zip(eligible, ok) if not good]
    for method in (DEFAULTS, PRIVATE_RANGE):
        if has_dpl:
            ok = [v[method]["acc"] >= max(v[DPL_NORM]["acc"], v[DPL_CLIP]["acc"]) for v in cs.values()]
            res["T2"][method] = (sum(ok), len(ok))
            res["fail"][("T2", method)] = [k for k, good in zip(cs, ok) if not good]
        ok = [v[method]["acc"] >= max(v[DEFAULTS]["acc"], v[PRIVATE_RANGE]["acc"]) - POINT for v in cs.values()]
        res["T3"][method] = (sum(ok), len(ok))
        res["fail"][("T3", method)] = [k for k, good in zip(cs, ok) if not good]
    return res


def _frac(pair):
    a, b = pair
    return f"{a}/{b} = {a / b:.0%}" if b else "—"


def print_targets(data: dict, half: str) -> None:
    cs = cells(data)
    res = targets(data, half)
    if not res["cells"]:
        print(f"## {half} half: no complete cell\n")
        return
    print(f"## {half} half: {res['tables']} tables, {res['cells']} table × ε cells (mean over seeds)\n")
    n_t1 = next(iter(res["T1"].values()))[1]
    print(f"| row | T1 floor (every cell, {n_t1} cells with ≥ {MIN_TEST} test rows) | T2 ≥ diffprivlib's better "
          f"(≥ {T2_SHARE:.0%}) | T3 ≥ best noisysgd row − 1 pt (≥ {T3_SHARE:.0%}) | mean acc. | mean bal. acc. "
          f"| mean fit s |")
    print("|---|---|---|---|---|---|---|")
    for method in PRIVATE_ROWS + (NONPRIVATE, MAJORITY):
        vals = [v[method] for k, v in cs.items() if k[0] == half and method in v and complete(v)]
        if not vals:
            continue
        t1 = res["T1"].get(method)
        t1s = ((_frac(t1) + (" ✓" if t1[0] == t1[1] else " ✗")) if t1[1] else "no cell") if t1 else "—"
        t2 = res["T2"].get(method)
        t2s = (_frac(t2) + (" ✓" if t2[0] >= T2_SHARE * t2[1] else " ✗")) if t2 else "—"
        t3 = res["T3"].get(method)
        t3s = (_frac(t3) + (" ✓" if t3[0] >= T3_SHARE * t3[1] else " ✗")) if t3 else "—"
        print(f"| {SHORT[method]} | {t1s} | {t2s} | {t3s} | {np.mean([v['acc'] for v in vals]):.3f} "
              f"| {np.mean([v['bal'] for v in vals]):.3f} | {np.mean([v['fit_s'] for v in vals]):.3f} |")
    print()
    for (target, method), failing in res["fail"].items():
        if not failing or method in (NONPRIVATE, MAJORITY):
            continue
        print(f"* {target} fails for {SHORT[method]} on {len(failing)} cell(s):")
        for k in failing:
            v = cs[k]
            line = (f"    {k[1]} ε={k[2]:g}: {v[method]['acc']:.3f} (bal. {v[method]['bal']:.3f}); "
                    f"majority {v[MAJORITY]['acc']:.3f}, non-private {v[NONPRIVATE]['acc']:.3f}, "
                    f"defaults {v[DEFAULTS]['acc']:.3f}, f_r=private {v[PRIVATE_RANGE]['acc']:.3f}")
            if DPL_NORM in v:
                line += f", dpl {v[DPL_NORM]['acc']:.3f}/{v[DPL_CLIP]['acc']:.3f}"
            if method in (DEFAULTS, PRIVATE_RANGE):
                runs = v[method]["cells"]
                line += "; " + ", ".join(sorted({f"{c['regime']} b={c['run']['batch_size']} "
                                                  f"ep={c['run']['epochs']:g} lr={c['run']['learning_rate']:.3g}"
                                                  for c in runs}))
                warned = sum(c.get("near_chance_warning", False) for c in runs)
                if warned:
                    line += f"; near-chance warning {warned}/{len(runs)}"
            print(line)
    print()


def _cell(v, method, std=False):
    if method not in v:
        return "—"
    m = v[method]
    s = f"{m['acc']:.3f}"
    if std:
        s += f" ± {m['acc_std']:.3f}"
    return s + f" ({m['bal']:.3f})"


def markdown(data: dict, half: str) -> list[str]:
    cs = cells(data)
    lines = [f"### {half} half: accuracy (balanced accuracy), mean over seeds",
             "",
             "| table | n test | ε | majority | non-private LR | defaults | `feature_range=\"private\"` "
             "| diffprivlib, data_norm from the data (not private) | diffprivlib, rows clipped to 1 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key in sorted((k for k in cs if k[0] == half), key=lambda k: (k[1].lower(), k[2])):
        v = cs[key]
        lines.append(f"| {key[1]} | {v[MAJORITY]['n_test'] if MAJORITY in v else '—'} | {key[2]:g} "
                     f"| {_cell(v, MAJORITY)} | {_cell(v, NONPRIVATE)} | {_cell(v, DEFAULTS, True)} "
                     f"| {_cell(v, PRIVATE_RANGE, True)} | {_cell(v, DPL_NORM)} | {_cell(v, DPL_CLIP)} |")
    return lines


def regimes(data: dict, half: str) -> list[str]:
    count = defaultdict(lambda: defaultdict(int))
    for c in data["cells"]:
        if c["half"] == half and c["method"] in (DEFAULTS, PRIVATE_RANGE):
            count[c["method"]][c.get("regime")] += 1
    return [f"* {SHORT[m]}: " + ", ".join(f"{r} {n}" for r, n in sorted(d.items(), key=lambda x: -x[1]))
            for m, d in count.items()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("json", type=Path, nargs="+", help="run.py's files, read as one (load: a later file's cells "
                                                         "replace an earlier one's)")
    ap.add_argument("--markdown-only", action="store_true")
    ap.add_argument("--no-markdown", action="store_true")
    args = ap.parse_args(argv)
    data = load(args.json)
    halves = [h for h in ("design", "heldout", "fresh", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
                          "eleventh") if any(c["half"] == h for c in data["cells"])]
    for half in halves:
        if not args.markdown_only:
            print_targets(data, half)
            print("Regimes chosen (table × seed × ε runs):")
            print("\n".join(regimes(data, half)))
            wall = sum(t.get("wall_s", 0.0) for t in data["tables"].values() if t["half"] == half)
            print(f"\nWall time of the {half} half's tables: {wall / 60:.1f} min\n")
        if not args.no_markdown:
            print("\n".join(markdown(data, half)))
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
