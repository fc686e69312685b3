"""The search's assumed model norm B on tables of few columns: measured, not shipped (README §30).

The search scores each candidate run by an excess-risk bound over models of norm ≤ B (the proxy of
``noisysgd.config``), B an assumption, ``MODEL_NORM``·max(1, √(d/64))/R: 10/R up to d = 64 columns.
§26 found the chosen runs on small tables without signal to be noise-dominated random walks
(λ ≈ 0, weights of norm ≈ 5), and a smaller B makes regularization and short runs cheaper in the
proxy.  The variant (:data:`VARIANTS`) halves B for d ≤ 16 and leaves it from d = 64 on —
B = 5·max(1, √(d/16))/R = 10·max(½, √(d/64))/R, the same √d growth started four times earlier — so
digits and Fashion-MNIST (d ≥ 64) keep their runs.  Public either way (it reads d and R only): the
certificate does not change, only which run is certified.

Each run patches ``noisysgd.config._model_norm`` and re-runs (a) the two noisysgd rows of the ten sets
(``check_variants.run_variant``: the other rows are the committed files'; the same ``random_state``,
so the two variants' fits are paired), (b) the synthetic tables of ``margin_study.py`` (§26) and
(c) ``evidence_defaults.py``'s tables; the summary compares the variant with the library as it is
(``shipped``: its set and synthetic runs here — §26's committed study predates §28's scaling rule —,
its evidence rows from ``evidence_defaults_scaling_twin.json``)::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/raw_tables/model_norm.py run shipped /tmp/mnorm --sets --synthetic
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/raw_tables/model_norm.py run floor5 /tmp/mnorm \\
        --sets --synthetic --evidence                    # (--part i --parts k: a share of each, in parallel)
    .venv/bin/python benchmarks/raw_tables/model_norm.py summary /tmp/mnorm \\
        --json benchmarks/results/raw_tables_model_norm.json
    .venv/bin/python benchmarks/raw_tables/model_norm.py markdown benchmarks/results/raw_tables_model_norm.json

(~15 min on two cores in all; the per-fit files stay out of the repository, the summary is committed.)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parents[1] / "benchmarks" / "results"
sys.path.insert(0, str(HERE))

#: variant -> B(d, R) (None: the library's own, config._model_norm)
VARIANTS = {"shipped": None,
            "floor5": lambda d, R: 5.0 * max(1.0, math.sqrt(d / 16.0)) / R}
LABELS = {"shipped": "B = 10·max(1, √(d/64))/R (shipped)", "floor5": "B = 5·max(1, √(d/16))/R"}
#: the ten sets: name -> (halves, the committed file whose other rows a re-run keeps)
SETS = {"all": (("design", "heldout"), "raw_tables_all_independent.json"),
        **{s: ((s,), f"raw_tables_{s}_independent.json") for s in ("fresh", "fourth", "fifth", "sixth")},
        **{s: ((s,), f"raw_tables_{s}.json") for s in ("seventh", "eighth", "ninth", "tenth")}}
#: the evidence rows of the library as it is (README §28)
EVIDENCE_SHIPPED = RESULTS / "evidence_defaults_scaling_twin.json"
COLUMN_BINS = ((1, 8), (9, 16), (17, 32), (33, 60))


def patch(variant: str) -> None:
    import noisysgd.config as config

    if VARIANTS[variant] is not None:
        config._model_norm = VARIANTS[variant]


def run(variant: str, root: Path, sets: bool, synthetic: bool, evidence: bool, part: int, parts: int) -> None:
    import check_variants as cv

    patch(variant)
    out = root / variant
    if sets:
        names = [s for i, s in enumerate(SETS) if i % parts == part]
        cv.run_variant("shipped", out / "sets", names, source=lambda name: RESULTS / SETS[name][1])
    if synthetic:
        import margin_study

        margin_study.run(out / "synthetic", part, parts)
    if evidence:  # (a process of its own: evidence_defaults.py's ``tables`` is benchmarks/tables.py, not ours)
        import subprocess

        subprocess.run([sys.executable, __file__, "evidence-worker", variant, str(out / f"evidence{part}.json"),
                        str(part), str(parts)], check=True)


def _evidence_worker(variant: str, out: Path, part: int, parts: int) -> None:
    sys.path.insert(0, str(HERE.parent))
    import evidence_defaults

    patch(variant)
    tables = sorted(evidence_defaults._data())
    evidence_defaults.run(out, only=tables[part::parts])


def _paired(d: np.ndarray) -> dict:
    return {"cells": int(d.size), "mean_points": float(d.mean()),
            "se_points": float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else 0.0,
            "worst_points": float(d.min()), "best_points": float(d.max()),
            "below_1": int((d < -1).sum()), "above_1": int((d > 1).sum()),
            "below_0": int((d < 0).sum()), "above_0": int((d > 0).sum())}


def _sets(root: Path, variant: str) -> tuple[dict, dict]:
    import check_variants as cv
    import report

    rows, diffs = {}, {b: [] for b in COLUMN_BINS}
    for name, (halves, _) in SETS.items():
        data = {v: report.load([root / v / "sets" / f"{name}.json"]) for v in ("shipped", variant)}
        for half in halves:
            rows[half] = {v: cv._targets(data[v], half) for v in ("shipped", variant)}
        cells = {v: report.cells(data[v]) for v in ("shipped", variant)}
        for key, methods in cells["shipped"].items():
            if not report.complete(methods):
                continue
            d = data["shipped"]["tables"][key[1]]["columns"]
            b = next(b for b in COLUMN_BINS if b[0] <= d <= b[1])
            diffs[b].append(100 * (cells[variant][key]["defaults"]["acc"] - methods["defaults"]["acc"]))
    return rows, {f"{lo}-{hi}": _paired(np.array(v)) for (lo, hi), v in diffs.items() if v}


def _synthetic(root: Path, variant: str) -> dict:
    """Per (training rows, signal): the released accuracy (+½σ_c, as shipped) of the variant against the
    library's, both re-run here (the same tables and seeds), and the T1 cells of each."""
    import margin_study as ms
    from collections import defaultdict

    base, now = ms.fit_cells(root / "shipped" / "synthetic"), ms.fit_cells(root / variant / "synthetic")
    groups = defaultdict(lambda: {"d": [], "t1": [0, 0, 0]})
    for key, rs in base.items():
        mean = lambda rows, f: float(np.mean([f(r) for r in rows]))  # noqa: E731
        before = mean(rs, lambda r: ms.released(r, ms.SHIPPED))
        after = mean(now[key], lambda r: ms.released(r, ms.SHIPPED))
        floor = min(mean(rs, lambda r: r["majority"]), mean(rs, lambda r: r["nonprivate"])) - 0.01 - 1e-9
        g = groups[f"n = {key[3]}, signal {key[2]:g}"]
        g["d"].append(100 * (after - before))
        g["t1"] = [g["t1"][0] + (before >= floor), g["t1"][1] + (after >= floor), g["t1"][2] + 1]
    return {k: {**_paired(np.array(g["d"])), "t1_shipped": g["t1"][0], "t1_variant": g["t1"][1], "t1_of": g["t1"][2]}
            for k, g in sorted(groups.items(), key=lambda kv: (int(kv[0].split()[2].rstrip(",")), kv[0]))}


def _evidence(root: Path, variant: str) -> dict:
    base = json.loads(EVIDENCE_SHIPPED.read_text())["cells"]
    now = {}
    for f in sorted((root / variant).glob("evidence*.json")):
        now.update(json.loads(f.read_text())["cells"])
    if set(now) != set(base):
        raise SystemExit(f"{root / variant}: evidence cells differ from {EVIDENCE_SHIPPED.name}'s")
    out = {}
    for table in sorted({k.split("|")[0] for k in base}):
        keys = [k for k in base if k.split("|")[0] == table]
        out[table] = _paired(np.array([100 * (now[k]["accuracy"] - base[k]["accuracy"]) for k in keys]))
    return out


def summary(root: Path, variant: str) -> dict:
    sets, by_columns = _sets(root, variant)
    return {"variant": variant, "label": LABELS[variant], "sets": sets, "sets_by_columns": by_columns,
            "synthetic": _synthetic(root, variant), "evidence": _evidence(root, variant)}


def markdown(summ: dict) -> str:
    v = summ["variant"]
    lines = [f"| set | T1 shipped → {v} | T2 | T3 | mean acc. |", "|---|---|---|---|---|"]
    tot = {t: [0, 0, 0] for t in ("T1", "T2", "T3")}
    acc = [0.0, 0.0, 0]
    for half, r in summ["sets"].items():
        a, b = r["shipped"], r[v]
        cells = [f"{a[t][0]} → {b[t][0]} /{b[t][1]}" for t in ("T1", "T2", "T3")]
        for t in tot:
            tot[t] = [tot[t][0] + a[t][0], tot[t][1] + b[t][0], tot[t][2] + b[t][1]]
        n = b["T3"][1]
        acc = [acc[0] + a["acc"] * n, acc[1] + b["acc"] * n, acc[2] + n]
        lines.append(f"| {half} | " + " | ".join(cells) + f" | {a['acc']:.3f} → {b['acc']:.3f} |")
    lines.append("| **ten sets** | " + " | ".join(f"{x} → {y} /{z}" for x, y, z in tot.values())
                 + f" | {acc[0] / acc[2]:.4f} → {acc[1] / acc[2]:.4f} |")

    def paired(title, rows, extra=None):
        out = [f"| {title} | cells | mean ± s.e. (points) | worst, best | cells < −1 / > +1 |"
               + (" T1 (shipped → variant) |" if extra else ""),
               "|---|---|---|---|---|" + ("---|" if extra else "")]
        for name, r in rows.items():
            line = (f"| {name} | {r['cells']} | {r['mean_points']:+.2f} ± {r['se_points']:.2f} | "
                    f"{r['worst_points']:+.1f}, {r['best_points']:+.1f} | {r['below_1']} / {r['above_1']} |")
            if extra:
                line += f" {extra(r)} |"
            out.append(line)
        return out

    lines += [""] + paired("columns (ten sets, defaults)", summ["sets_by_columns"])
    lines += [""] + paired("synthetic: rows, signal", summ["synthetic"],
                           lambda r: f"{r['t1_shipped']} → {r['t1_variant']} /{r['t1_of']}")
    lines += [""] + paired("evidence table (3 seeds × 3 ε × 2 adjacencies)", summ["evidence"])
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("variant", choices=list(VARIANTS))
    r.add_argument("root", type=Path)
    for flag in ("--sets", "--synthetic", "--evidence"):
        r.add_argument(flag, action="store_true")
    r.add_argument("--part", type=int, default=0)
    r.add_argument("--parts", type=int, default=1)
    s = sub.add_parser("summary")
    s.add_argument("root", type=Path)
    s.add_argument("--variant", default="floor5", choices=[v for v in VARIANTS if v != "shipped"])
    s.add_argument("--json", type=Path, required=True)
    m = sub.add_parser("markdown")
    m.add_argument("json", type=Path)
    w = sub.add_parser("evidence-worker")
    w.add_argument("variant", choices=list(VARIANTS))
    w.add_argument("out", type=Path)
    w.add_argument("part", type=int)
    w.add_argument("parts", type=int)
    a = ap.parse_args(argv)
    if a.cmd == "evidence-worker":
        _evidence_worker(a.variant, a.out, a.part, a.parts)
    elif a.cmd == "run":
        run(a.variant, a.root, a.sets, a.synthetic, a.evidence, a.part, a.parts)
    elif a.cmd == "summary":
        a.json.write_text(json.dumps(summary(a.root, a.variant), indent=1, ensure_ascii=False) + "\n")
    else:
        print(markdown(json.loads(a.json.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
