"""Which statistic of the range query's answer should decide ``feature_range="auto"`` (issue 43 §1)?

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/raw_tables/run.py --half design --forced-raw \\
        --json benchmarks/results/raw_tables_design.json
    .venv/bin/python benchmarks/raw_tables/scaling_rule.py benchmarks/results/raw_tables_design.json

Every fit of ``run.py --forced-raw`` has the two outcomes a rule chooses between, from **one** answer
of the range query (the same seed draws the same noise: the script checks the answers are equal):
``feature_range="private"`` (the rows scaled by it) and ``feature_range="auto", rows kept`` (asked,
charged, not used).  A rule is a function of that answer alone (post-processing); this script
picks, per fit, the outcome each rule would have chosen and computes the targets of README §5 with
that row as "defaults" (T3's reference: the better of the rule's row and the always-scaled row, as
report.py does).  The files are read as one (``report.load``: a later file's cells replace an earlier
one's), and each half their cells name (design, heldout, fresh, fourth, fifth) is evaluated;
``the library's rule`` is :func:`noisysgd.preprocessing.scaling_decision` as it was from §16 to §27
(:func:`_section16`; since §28 the library ships :data:`TWIN`, :func:`_twin`), and the
always-scaled outcome is the library's ``feature_range="private"`` of the run that wrote the file
(README §16: the four sets' rows re-run for the unseen columns' range, read over their files)::

    R=benchmarks/results
    .venv/bin/python benchmarks/raw_tables/scaling_rule.py $R/raw_tables_{design,heldout,fresh,fourth}.json \\
        $R/raw_tables_rerun_unseen_median.json $R/raw_tables_fifth.json [--all-variants]

README §22 adds two readings over the seven sets (``$R/raw_tables_{all,fresh,fourth,fifth,sixth}_independent.json
$R/raw_tables_seventh.json``): T3 as the issue words it (:func:`literal_t3`, a column of every table)
and ``--loso`` (:func:`leave_one_set_out`: each set held out, the rule with the best mean accuracy on
the others).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from report import load, targets  # noqa: E402
from run import DEFAULTS, FORCED_RAW, PRIVATE_RANGE  # noqa: E402


#: the name, among :func:`_rules`, of the rule the library shipped from §16 to §27 (``scaling_decision`` then:
#: scale where at least two trusted columns' scales differ by more than a factor 2; :func:`_section16`); the
#: tables of §16-§27 show it as "shipped".  Since §28 the library's rule is :data:`TWIN`.
LIBRARY = "§16's rule (scaling_decision until §27)"
#: the shipped rule's near twin (README §22, §24, §27)
TWIN = "≥ 1 trusted, and not (≥ 3 trusted within a factor 2)"


def _trusted(a, strict: bool, drop_lowest: bool):
    s = np.asarray(a["strict_scales"] if strict else a["scales"], dtype=float)
    seen = s > 0 if strict else s < 2.0 ** 17
    s = s[seen]
    return s[s > a["lowest_scale"]] if drop_lowest else s


def ratio(a, *, strict=True, drop_lowest=True, lower=True) -> float:
    s = _trusted(a, strict, drop_lowest)
    if s.size < (2 if drop_lowest else 1):
        return 0.0
    med = np.sort(s)[(s.size - 1) // 2] if lower else np.median(s)
    return float(s.max() / med)


def rule(stat, threshold, cap=0.25):
    def decide(a):
        d = len(a["scales"])
        return a["uninformative_features"] <= cap * d and stat(a) > threshold
    return decide


RULES = {
    f"{name} > {t:g}" + ("" if cap == 0.25 else f", unseen ≤ {cap:g}"): rule(fn, t, cap)
    for name, fn in {
        "strict, drop lowest, lower median (library)": lambda a: ratio(a),
        "strict, drop lowest, median": lambda a: ratio(a, lower=False),
        "3σ, drop lowest, lower median": lambda a: ratio(a, strict=False),
        "3σ, keep lowest, median (README §7)": lambda a: ratio(a, strict=False, drop_lowest=False, lower=False),
        "strict, keep lowest, median": lambda a: ratio(a, drop_lowest=False, lower=False),
    }.items()
    for t in (8, 16, 32, 64) for cap in (0.25, 0.5)
}


def _trusted_count(a) -> int:
    return int(_trusted(a, strict=True, drop_lowest=True).size)


def _section16(a) -> bool:
    """The rule of :data:`LIBRARY` (README §16-§27): at least two trusted columns, scales apart by more
    than a factor 2."""
    return _trusted_count(a) >= 2 and ratio(a) > 2


def _twin(a) -> bool:
    """:data:`TWIN`, the library's rule since §28: scale unless no column is trusted, or three or more
    are and the largest scale is within a factor 2 of their lower median."""
    return _trusted_count(a) >= 1 and not (_trusted_count(a) >= 3 and ratio(a) <= 2)


def _rules() -> dict:
    return {"always raw (query charged)": lambda a: False, "always scaled": lambda a: True,
            LIBRARY: _section16,
            "§8's rule (strict, drop lowest, lower median > 16, unseen ≤ 0.25)":
                RULES["strict, drop lowest, lower median (library) > 16"],
            "scale unless the query saw no column (3σ floor)": lambda a: a["uninformative_features"] < len(a["scales"]),
            TWIN: _twin,
            **RULES}


def _pairs(cells) -> dict:
    """Each fit's two outcomes, ``{(half, table, seed, ε): {method: cell}}``, for the private-range
    and the forced-raw rows of ``cells``."""
    pairs = defaultdict(dict)
    for c in cells:
        if c["method"] in (PRIVATE_RANGE, FORCED_RAW):
            pairs[(c["half"], c["table"], c["seed"], c["epsilon"])][c["method"]] = c
    return pairs


def evaluate(data: dict, half: str, rules: dict) -> tuple[list, float]:
    """Per rule: (name, T1, T2, T3, mean accuracy, fits scaled, fits) on ``half`` of ``data``; and the
    per-fit oracle's mean accuracy."""
    cells = [c for c in data["cells"] if c["half"] == half]
    pairs = _pairs(cells)
    # the same answer (the strict read: the 3σ read of an unseen column depends on the library's fallback)
    mismatched = [k for k, v in pairs.items() if len(v) == 2 and v[PRIVATE_RANGE]["range_query"]["strict_scales"]
                  != v[FORCED_RAW]["range_query"]["strict_scales"]]
    if mismatched:
        raise SystemExit(f"the two outcomes saw different answers: {mismatched[:3]}")
    base = [c for c in cells if c["method"] not in (DEFAULTS, FORCED_RAW)]
    rows = []
    for name, decide in rules.items():
        chosen = []
        scaled = 0
        for v in pairs.values():
            s = decide(v[PRIVATE_RANGE]["range_query"])
            scaled += s
            chosen.append({**(v[PRIVATE_RANGE] if s else v[FORCED_RAW]), "method": DEFAULTS})
        res = targets({"cells": base + chosen}, half)
        acc = np.mean([c["accuracy"] for c in chosen])
        rows.append((name, res["T1"][DEFAULTS], res["T2"].get(DEFAULTS), res["T3"][DEFAULTS], acc, scaled, len(pairs),
                     literal_t3(pairs, chosen)))
    oracle = np.mean([max(v[PRIVATE_RANGE]["accuracy"], v[FORCED_RAW]["accuracy"]) for v in pairs.values()])
    return rows, float(oracle)


def literal_t3(pairs: dict, chosen: list) -> tuple[int, int]:
    """T3 as issue 43 words it: the rule's row ≥ the better of {the rows as given, the rows scaled}
    − 1 point, per table × ε cell (means over the seeds), where report.py's T3 takes the better of
    {the rule's row, the rows scaled} — which a rule that always scales meets by construction.
    ``chosen``: the rule's outcome of each fit, in the order of ``pairs``.  (cells that meet it, cells)"""
    per = defaultdict(lambda: defaultdict(list))
    for (_, table, _, eps), v, c in zip(pairs.keys(), pairs.values(), chosen):
        per[(table, eps)]["rule"].append(c["accuracy"])
        per[(table, eps)]["raw"].append(v[FORCED_RAW]["accuracy"])
        per[(table, eps)]["scaled"].append(v[PRIVATE_RANGE]["accuracy"])
    ok = [np.mean(p["rule"]) >= max(np.mean(p["raw"]), np.mean(p["scaled"])) - 0.01 for p in per.values()]
    return int(sum(ok)), len(ok)


def leave_one_set_out(data: dict, rules: dict) -> list:
    """For each half of ``data`` held out, the rule of ``rules`` with the best mean accuracy over the
    fits of the other halves (the issue's criterion: expected utility), and what it and the library's
    rule give on the held-out half: (half, chosen rule, its accuracy, the library's, its T3 and the
    library's, lenient and literal)."""
    halves = list(dict.fromkeys(c["half"] for c in data["cells"]))
    table = {h: {r[0]: r for r in evaluate(data, h, rules)[0]} for h in halves}
    lib = LIBRARY
    out = []
    for held in halves:
        def utility(name):
            rows = [table[h][name] for h in halves if h != held]
            return sum(r[4] * r[6] for r in rows) / sum(r[6] for r in rows)
        best = max(rules, key=utility)
        b, ref = table[held][best], table[held][lib]
        out.append((held, best, b[4], ref[4], b[3], ref[3], b[7], ref[7]))
    return out


def by_unseen(data: dict) -> list:
    """The fits §16's rule (:data:`LIBRARY`, the library's until §27) scales, by the share of columns the
    query's strict read did not see (whose range is then the guessed one, README §16): (bin, fits, mean of
    scaled − raw accuracy, share of fits where scaling lost, the worst fit's loss, its table)."""
    pairs = _pairs(data["cells"])
    bins = defaultdict(list)
    for (_, table, _, _), v in pairs.items():
        a = v[PRIVATE_RANGE]["range_query"]
        if len(v) != 2 or not _section16(a):
            continue
        unseen = float(np.mean(np.asarray(a["strict_scales"], dtype=float) <= 0))
        key = next(b for b in (0.25, 0.5, 0.75, 1.0) if unseen <= b)
        bins[key].append((v[PRIVATE_RANGE]["accuracy"] - v[FORCED_RAW]["accuracy"], table))
    out = []
    for key in sorted(bins):
        diffs = np.array([d for d, _ in bins[key]])
        worst = min(bins[key])
        out.append((key, len(diffs), float(diffs.mean()), float(np.mean(diffs < 0)), worst[0], worst[1]))
    return out


#: README §28: each set's committed file(s) (the rule of §16-§27) -> its halves
COMMITTED = {"all_independent": ("design", "heldout"), "fresh_independent": ("fresh",),
             "fourth_independent": ("fourth",), "fifth_independent": ("fifth",), "sixth_independent": ("sixth",),
             "seventh": ("seventh",), "eighth": ("eighth",), "ninth": ("ninth",)}


def _row(data: dict, half: str) -> dict:
    """T1-T3 of the defaults row (report.py's), its mean (balanced) accuracy, and the defaults fits the
    range query's answer scaled."""
    import report

    res = report.targets(data, half)
    cs = [v for k, v in report.cells(data).items() if k[0] == half and report.complete(v)]
    fits = [c for c in data["cells"] if c.get("half") == half and c["method"] == DEFAULTS]
    scaled = sum("scaled by the private ranges" in ((c.get("range_query") or {}).get("decision") or "") for c in fits)
    return {**{t: list(res[t]["defaults"]) for t in ("T1", "T2", "T3")},
            "acc": sum(v["defaults"]["acc"] for v in cs) / len(cs), "bal": sum(v["defaults"]["bal"] for v in cs) / len(cs),
            "scaled": [scaled, len(fits)], "fit_s": sum(c["fit_s"] for c in fits) / len(fits)}


def rerun_summary(results: Path, rerun: Path) -> dict:
    """README §28: per half, the defaults row of the committed files (the rule of §16-§27) against the same
    fits re-run with the library's rule since §28 (``rerun``: ``check_variants.py run shipped`` for the
    seven sets, ``run.py --no-diffprivlib`` for the eighth and ninth; their other rows are the committed
    files')."""
    out = {}
    for stem, halves in COMMITTED.items():
        before = load([results / f"raw_tables_{stem}.json"])
        name = {"all_independent": "all"}.get(stem, stem.replace("_independent", ""))
        redone = rerun / "cv" / f"{name}.json"
        after = load([redone] if redone.exists() else [results / f"raw_tables_{stem}.json", rerun / f"{name}.json"])
        for half in halves:
            out[half] = {"before": _row(before, half), "after": _row(after, half)}
    return out


def rerun_markdown(summ: dict) -> str:
    lines = ["| set (defaults row) | T1 | T2 (≥ 85 %) | T3 (≥ 90 %) | mean acc. | mean bal. acc. | fits scaled | "
             "mean fit s |", "|---|---|---|---|---|---|---|---|"]
    for half, r in summ.items():
        b, a = r["before"], r["after"]
        cells = [f"{b[t][0]} → {a[t][0]} /{a[t][1]}" for t in ("T1", "T2", "T3")]
        cells += [f"{b[k]:.3f} → {a[k]:.3f}" for k in ("acc", "bal")]
        cells.append(f"{b['scaled'][0]} → {a['scaled'][0]} /{a['scaled'][1]}")
        cells.append(f"{b['fit_s']:.2f} → {a['fit_s']:.2f}")
        lines.append(f"| {half} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    if argv is None and sys.argv[1:2] == ["rerun"] or argv and argv[:1] == ["rerun"]:
        import json

        args = (sys.argv[2:] if argv is None else argv[1:])
        rp = argparse.ArgumentParser(description="README §28: the nine sets re-run with the library's rule")
        rp.add_argument("rerun", type=Path)
        rp.add_argument("--json", type=Path)
        rp.add_argument("--markdown", type=Path, help="a summary --json wrote: print its table")
        a = rp.parse_args(args)
        summ = (json.loads(a.markdown.read_text()) if a.markdown else
                rerun_summary(HERE.parents[1] / "benchmarks" / "results", a.rerun))
        if a.json:
            a.json.write_text(json.dumps(summ, indent=1) + "\n")
        print(rerun_markdown(summ))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json", type=Path, nargs="+", help="run.py's files, read as one (report.load)")
    ap.add_argument("--all-variants", action="store_true", help="also the ratio rules of README §7-8")
    ap.add_argument("--loso", action="store_true",
                    help="leave one set out: the rule with the best mean accuracy on the other halves, on the one held out")
    ap.add_argument("--by-unseen", action="store_true",
                    help="the fits the library's rule scales, by the share of columns the query did not see")
    args = ap.parse_args(argv)
    if args.by_unseen:
        print("| columns unseen (strict read) | scaled fits | scaled − raw, mean | scaling lost | worst fit |\n"
              "|---|---|---|---|---|")
        lo = 0.0
        for key, n, mean, lost, worst, table in by_unseen(load(args.json)):
            print(f"| {lo:.0%}–{key:.0%} | {n} | {mean * 100:+.1f} pts | {lost:.0%} | {worst * 100:+.1f} ({table}) |")
            lo = key
        return 0
    rules = _rules()
    if not args.all_variants:
        rules = dict(list(rules.items())[:6])
    data = load(args.json)
    f = lambda p: f"{p[0]}/{p[1]}" if p else "—"  # noqa: E731
    if args.loso:
        print(loso_markdown(leave_one_set_out(data, rules)))
        return 0
    for half in dict.fromkeys(c["half"] for c in data["cells"]):
        rows, oracle = evaluate(data, half, rules)
        print(f"\n{half}:\n\n| rule | T1 | T2 | T3 | T3, the issue's wording | mean acc. | fits scaled |\n"
              "|---|---|---|---|---|---|---|")
        for name, t1, t2, t3, acc, scaled, n, lit in rows:
            print(f"| {name} | {f(t1)} | {f(t2)} | {f(t3)} | {f(lit)} | {acc:.3f} | {scaled}/{n} |")
        print(f"\nper-fit oracle mean accuracy {oracle:.3f}")
    return 0


def loso_markdown(rows: list) -> str:
    lines = ["| held out | rule chosen on the other sets | its mean acc. (shipped) | T3 (shipped) | "
             "T3, the issue's wording (shipped) |", "|---|---|---|---|---|"]
    for held, best, acc, ref, t3, t3_ref, lit, lit_ref in rows:
        lines.append(f"| {held} | {best} | {acc:.3f} ({ref:.3f}) | {t3[0]}/{t3[1]} ({t3_ref[0]}) | "
                     f"{lit[0]}/{lit[1]} ({lit_ref[0]}) |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
