"""What the release check is worth, and what a better one could reach (README §21).

Each variant re-runs the two noisysgd rows (the defaults and ``feature_range="private"``) of the six
seen sets with ``--independent-noise``, the library unchanged but for one thing patched here; the
other rows (diffprivlib, non-private LR, majority) are read from the committed files, whose fits
the variant ``shipped`` reproduces exactly (same ``random_state``, same draws)::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/raw_tables/check_variants.py run model /tmp/cv/model
    ...                                  # and every other name of VARIANTS (shipped, prior, intercept, ...)
    .venv/bin/python benchmarks/raw_tables/check_variants.py summary /tmp/cv \\
        --json benchmarks/results/raw_tables_check_variants.json
    .venv/bin/python benchmarks/raw_tables/check_variants.py markdown benchmarks/results/raw_tables_check_variants.json

§23 (:data:`SIGNED`): ``signed`` is the library as §23 shipped it, whose check kept the model
unless it was behind by half a noise std where the private prior of three classes or more is
near-uniform (:func:`section23_margin`, patched in as ``noisysgd.prior.check_margin`` was then;
§26 withdrew it); every variant of §21, ``shipped`` included, runs the library as §21 measured it
and as it is again since §26, the margin +½σ_c on every fit (:func:`_patch`), so they still
reproduce §21.  The margins tried are rebuilt from ``shipped``, ``model`` and ``prior`` runs of the
seven sets (``run.py`` records each check's noisy answer, so a margin is post-processing), and
``signed`` is run and compared with ``shipped``::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/raw_tables/check_variants.py run signed /tmp/cv/signed \\
        --sets all fresh fourth fifth sixth seventh                  # and shipped, model, prior
    .venv/bin/python benchmarks/raw_tables/check_variants.py margins /tmp/cv \\
        --json benchmarks/results/raw_tables_check_margins.json
    .venv/bin/python benchmarks/raw_tables/check_variants.py margins-markdown \\
        benchmarks/results/raw_tables_check_margins.json

Variants (:data:`VARIANTS`); ``oracle`` is not run but computed, per fit, as the better on the
*test* rows of ``model`` and ``prior`` (the same fit's two outcomes): a test-set oracle, which no
check (it counts training rows, with noise) can be.  It bounds the mean accuracy of any hard choice
between the two — not a soft fallback's (``shrink*``), and not T1–T3, whose reference rows move
with it.
§21's numbers are a measurement, none of them a default: nothing there was shipped; §23's margin was.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parents[1] / "benchmarks" / "results"
sys.path.insert(0, str(HERE))

#: name -> what it changes (the library's release check, noisysgd.pipeline._checked_release)
VARIANTS = {
    "shipped": "the library as it is (a control: reproduces the committed cells)",
    "model": "no check: the model always released (the check still asked and charged)",
    "prior": "the prior always released (the model never)",
    "intercept": "where the check releases a constant, its class from the model's intercept (coefficients 0, "
                 "the model's bias row kept), not the class counts'",
    "margin1": "the check's margin CHECK_MARGIN = 1.0 noise std (shipped: 0.5; §12 re-measured)",
    "share3": "the check's share of μ CHECK_SHARE = 0.3 (shipped: 0.2)",
    "shrink0.5": "where the check releases the prior, the prior's parameters plus half the way to the model's "
                 "(W₀ + ½(W − W₀): the model's scores pulled halfway to the prior's log-odds) instead",
    "shrink0.25": "the same, a quarter of the way",
    "common_range": "not the check: feature_range='auto' where it keeps the rows as given because at least two "
                    "trusted columns share their units, every column scaled by one common range ±S (S the largest "
                    "trusted scale) instead (README §22)",
}
#: README §23: the library with the signed margin it shipped then (:func:`section23_margin`; withdrawn in
#: §26, the library's margin is +½σ_c on every fit again, as §21's variants measured it)
SIGNED = {"signed": "the library of §23: the check's margin −½σ_c where the private prior of three classes "
                    "or more is near-uniform (noisysgd.prior.check_margin then; README §23, withdrawn in §26)"}
#: §23's near-uniform threshold: p̂_max ≤ 1/k + this
SECTION23_NEAR_UNIFORM = 0.2


def section23_margin(prior) -> tuple[float, str]:
    """The margin rule §23 shipped in ``noisysgd.prior.check_margin`` (withdrawn in §26): −½σ_c where
    k ≥ 3 and the released prior's largest share is at most 1/k + 0.2, +½σ_c elsewhere."""
    from noisysgd.prior import CHECK_MARGIN

    p = np.asarray(prior, dtype=np.float64)
    if p.size >= 3 and float(np.max(p)) <= 1.0 / p.size + SECTION23_NEAR_UNIFORM:
        return -CHECK_MARGIN, "the private class prior is near-uniform (README §23's rule)"
    return CHECK_MARGIN, f"the model is kept if it is ahead by at least {CHECK_MARGIN:g} noise std"
DERIVED = {"oracle": "per fit, the better on the test rows of model and prior (no private check can do this)"}
#: the six seen sets: (file stem, halves it holds)
SETS = {"all": ("design", "heldout"), "fresh": ("fresh",), "fourth": ("fourth",), "fifth": ("fifth",),
        "sixth": ("sixth",)}
#: a set run only where asked (``run --sets seventh``): README §22's, unseen by §21's variants
LATER_SETS = {"seventh": ("seventh",)}
NOISYSGD_ROWS = ("defaults", 'feature_range="private"')


def committed(name: str) -> Path:
    """The committed run of set ``name`` (with independent noise) whose other rows a variant reuses."""
    return RESULTS / (f"raw_tables_{name}.json" if name in LATER_SETS else f"raw_tables_{name}_independent.json")


def _patch(variant: str) -> None:
    import noisysgd.pipeline as pipeline
    import noisysgd.prior as prior_mod

    if variant in SIGNED:
        pipeline.check_margin = section23_margin  # the library as §23 shipped it
        return
    # §21's variants measured the library before §23, the margin +CHECK_MARGIN on every fit, as now (§26)
    pipeline.check_margin = lambda prior: (prior_mod.CHECK_MARGIN, "")
    if variant == "common_range":
        _patch_common_range(pipeline)
        return
    if variant == "margin1":
        prior_mod.CHECK_MARGIN = 1.0
    elif variant == "share3":
        prior_mod.CHECK_SHARE = 0.3
    if variant not in ("model", "prior", "intercept") and not variant.startswith("shrink"):
        return
    checked = pipeline._checked_release

    def patched(fit, X, y, loss, prior, events, p, execution, d):
        W = np.array(fit.result.coef, dtype=float)
        out = checked(fit, X, y, loss, prior, events, p, execution, d)
        if variant == "prior":
            W_out = pipeline.prior_start(prior, loss.param_shape(d), p["intercept_scaling"], ovr=pipeline._ovr(loss))
        elif out.certificate["release_check"]["kept_model"]:
            return out
        elif variant == "model":
            W_out = W
        elif variant.startswith("shrink"):  # the released prior's W₀, moved toward the model
            W0 = np.asarray(out.result.coef, dtype=float)
            W_out = W0 + float(variant[len("shrink"):]) * (W - W0)
        else:  # intercept: coefficients 0, the model's bias row
            W_out = np.zeros_like(W)
            W_out[-1] = W[-1]
        return replace(out, result=replace(out.result, coef=W_out))

    pipeline._checked_release = patched


def _patch_common_range(pipeline) -> None:
    """Same-unit tables by one common range: post-processing of the same answer (the shipped rule's
    test, then the arrays of the ranges it returned set to ±S in place)."""
    from noisysgd.preprocessing import SCALING_TRUSTED

    last = {}
    ranges_within, decide = pipeline.private_ranges_within, pipeline._scaling

    def ranges(*a, **k):
        out = ranges_within(*a, **k)
        last["ranges"] = out[0]
        return out

    def scaling(q, replayed):
        scaled, why = decide(q, replayed)
        s = np.asarray(q["strict_scales"], dtype=float)
        trusted = s[s > q["lowest_scale"]]
        if scaled or replayed or trusted.size < SCALING_TRUSTED:
            return scaled, why
        low, high = last["ranges"]
        low[:], high[:] = -trusted.max(), trusted.max()
        return True, why.replace("the rows were kept as given", f"one common range ±{trusted.max():g}")

    pipeline.private_ranges_within, pipeline._scaling = ranges, scaling


def run_variant(variant: str, out: Path, sets, source=None) -> None:
    """Re-run the noisysgd rows of ``sets`` under ``variant`` into ``out``/<set>.json; the other rows are
    those of ``source(name)`` (default :func:`committed`)."""
    import run

    _patch(variant)
    out.mkdir(parents=True, exist_ok=True)
    for name in sets:
        dst = out / f"{name}.json"
        if not dst.exists():  # the committed file without its noisysgd rows: run.py re-runs only those
            data = json.loads((source or committed)(name).read_text())
            data["cells"] = [c for c in data["cells"] if c["method"] not in NOISYSGD_ROWS]
            tmp = Path(tempfile.mkstemp(dir=out, suffix=".json")[1])
            tmp.write_text(json.dumps(data))
            shutil.move(tmp, dst)
        run.main(["--half", name, "--json", str(dst), "--independent-noise", "--no-diffprivlib"])


def _key(c):
    return c["table"], c["seed"], c["method"], c["epsilon"]


def _oracle(root: Path, name: str) -> dict:
    model = json.loads((root / "model" / f"{name}.json").read_text())
    prior = {_key(c): c for c in json.loads((root / "prior" / f"{name}.json").read_text())["cells"]}
    model["cells"] = [c if c["method"] not in NOISYSGD_ROWS or c["accuracy"] >= prior[_key(c)]["accuracy"]
                      else prior[_key(c)] for c in model["cells"]]
    return model


def summary(root: Path) -> dict:
    """{variant: {half: {T1, T2, T3: [got, of], acc, bal}}} of the defaults row, from the runs under ``root``."""
    import report

    out = {"variants": {**VARIANTS, **DERIVED}, "rows": {}}
    for variant in list(VARIANTS) + list(DERIVED):
        row = out["rows"][variant] = {}
        for name, halves in SETS.items():
            # (a variant's file holds every row: run_variant copies the committed ones it does not re-run)
            data = _oracle(root, name) if variant in DERIVED else report.load([root / variant / f"{name}.json"])
            for half in halves:
                row[half] = _targets(data, half)
    out["by_size"] = by_size(root)
    return out


SIZES = ((0, 300, "under 300"), (300, 1000, "300-999"), (1000, float("inf"), "1,000 or more"))


def by_size(root: Path) -> dict:
    """Per set and size of the training split: (fits, mean accuracy of oracle − shipped, of model −
    shipped, in points), the defaults row."""
    out = {}
    for name in SETS:
        shipped = json.loads((RESULTS / f"raw_tables_{name}_independent.json").read_text())
        rows = shipped["tables"]
        model = {_key(c): c for c in json.loads((root / "model" / f"{name}.json").read_text())["cells"]}
        prior = {_key(c): c for c in json.loads((root / "prior" / f"{name}.json").read_text())["cells"]}
        bins = {label: [0, 0.0, 0.0] for _, _, label in SIZES}
        for c in shipped["cells"]:
            if c["method"] != "defaults":
                continue
            n = rows[c["table"]]["rows"] - c["n_test"]
            label = next(lab for lo, hi, lab in SIZES if lo <= n < hi)
            m, p = model[_key(c)]["accuracy"], prior[_key(c)]["accuracy"]
            b = bins[label]
            b[0] += 1
            b[1] += 100 * (max(m, p) - c["accuracy"])
            b[2] += 100 * (m - c["accuracy"])
        out[name] = {lab: [b[0], b[1] / b[0], b[2] / b[0]] if b[0] else [0, None, None] for lab, b in bins.items()}
    return out


HALVES = ("design", "heldout", "fresh", "fourth", "fifth", "sixth")
SHARES = {"T1": 1.0, "T2": 0.85, "T3": 0.90}


def markdown(summ: dict) -> str:
    lines = ["| variant (defaults row) | " + " | ".join(HALVES) + " |", "|---" * (len(HALVES) + 1) + "|"]
    for variant, row in summ["rows"].items():
        cells = []
        for half in HALVES:
            r = row[half]
            marks = "".join("✓" if r[t][0] >= SHARES[t] * r[t][1] - 1e-9 else "·" for t in ("T1", "T2", "T3"))
            cells.append(f"{r['T1'][0]}/{r['T1'][1]}, {r['T2'][0]}/{r['T2'][1]}, {r['T3'][0]}/{r['T3'][1]} {marks}; "
                         f"{r['acc']:.3f}")
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    lines += ["", "| training rows | " + " | ".join(("design + heldout" if n == "all" else n) for n in SETS) + " |",
              "|---" * (len(SETS) + 1) + "|"]
    for _, _, label in SIZES:
        cells = []
        for name in SETS:
            fits, orc, mod = summ["by_size"][name][label]
            cells.append(f"{fits} fits: {orc:+.1f} / {mod:+.1f}" if fits else "—")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: README §23: the margins tried (rebuilt per fit from the recorded noisy answer): (name, classes it
#: applies to — "all" or "3+" —, excess t: near-uniform where p̂_max ≤ 1/k + t, margin there in σ_c;
#: +½ elsewhere).  −inf: the model always kept there.
MARGIN_RULES = ([(f"k ≥ 3, p̂_max ≤ 1/k + {t:g}: {tau:g}σ_c", "3+", t, tau)
                 for t in (0.1, 0.2, 0.3, 1.0) for tau in (0.0, -0.5, -1.0, -math.inf)]
                + [(f"every k, p̂_max ≤ 1/k + {t:g}: {tau:g}σ_c", "all", t, tau)
                   for t in (0.1, 0.2) for tau in (0.0, -0.5, -math.inf)]
                + [("every fit: 0σ_c", "all", 1.0, 0.0)])
#: the rule §23 shipped (:func:`section23_margin`; withdrawn in §26)
MARGIN_SHIPPED = f"k ≥ 3, p̂_max ≤ 1/k + {SECTION23_NEAR_UNIFORM:g}: -0.5σ_c"


def _margin(cell: dict, classes: str, t: float, tau: float) -> float:
    p = np.asarray(cell["class_prior"]["class_prior"], dtype=float)
    k = p.size
    near = (classes == "all" or k >= 3) and p.max() <= 1.0 / k + t
    return tau if near else 0.5


def _targets(data: dict, half: str) -> dict:
    import report

    res = report.targets(data, half)
    cs = [v for k, v in report.cells(data).items() if k[0] == half and report.complete(v)]
    row = {t: list(res[t]["defaults"]) for t in ("T1", "T2", "T3")}
    row.update(acc=sum(v["defaults"]["acc"] for v in cs) / len(cs), bal=sum(v["defaults"]["bal"] for v in cs) / len(cs))
    return row


def rebuilt(runs: dict, name: str, margin) -> dict:
    """Set ``name``'s ``shipped`` run with each noisysgd fit's outcome rebuilt under another check margin:
    ``model``'s where the recorded noisy answer D̃ ≥ τσ_c, ``prior``'s elsewhere (exact: the margin changes
    neither the run nor its noise).  ``margin(cell, model_cell)``: τ, from the recorded answers (and, for
    rules that read it, the model run's recorded configuration)."""
    data = json.loads(json.dumps(runs["shipped"][name]))
    model = {_key(c): c for c in runs["model"][name]["cells"]}
    prior = {_key(c): c for c in runs["prior"][name]["cells"]}
    cells = []
    for c in data["cells"]:
        if c["method"] in NOISYSGD_ROWS:
            answer = c["check_answer"]
            kept = answer["noisy_difference"] >= margin(c, model[_key(c)]) * answer["noise_std"]
            c = model[_key(c)] if kept else prior[_key(c)]
        cells.append(c)
    data["cells"] = cells
    return data


def margins(root: Path) -> dict:
    """README §23.  ``rules``: per rule of :data:`MARGIN_RULES` (and ``shipped``, +½σ_c everywhere),
    per half of the seven sets, T1–T3 and mean (balanced) accuracy of the defaults row, rebuilt per
    noisysgd fit from ``shipped``'s recorded check answer D̃ and σ_c: ``model``'s outcome where D̃ ≥ τσ_c,
    ``prior``'s elsewhere (exact: the margin changes neither the run nor its noise).  ``signed``: the
    library run itself (its targets, and per table whose margin was negative on some fit, those fits
    and the defaults row's mean accuracy change, in points) — it must equal its rebuilt rule."""
    runs = {v: {name: json.loads((root / v / f"{name}.json").read_text()) for name in {**SETS, **LATER_SETS}}
            for v in ("shipped", "model", "prior", "signed")}
    out = {"variants": {"shipped": VARIANTS["shipped"], **SIGNED}, "shipped_rule": MARGIN_SHIPPED, "rules": {},
           "signed": {}, "tables": {}}
    for label, classes, t, tau in [("+0.5σ_c everywhere (shipped)", "all", -1.0, 0.5)] + MARGIN_RULES:
        row = out["rules"][label] = {}
        for name, halves in {**SETS, **LATER_SETS}.items():
            data = rebuilt(runs, name, lambda c, m, classes=classes, t=t, tau=tau: _margin(c, classes, t, tau))
            for half in halves:
                row[half] = _targets(data, half)
    for name, halves in {**SETS, **LATER_SETS}.items():
        data = runs["signed"][name]
        for half in halves:
            out["signed"][half] = _targets(data, half)
        before = {_key(c): c for c in runs["shipped"][name]["cells"]}
        per = {}
        for c in data["cells"]:
            if c["method"] not in NOISYSGD_ROWS:
                continue
            t = per.setdefault(c["table"], {"half": c["half"], "fits": 0, "negative": 0, "points": []})
            t["fits"] += 1
            t["negative"] += c["check_answer"]["margin"] < 0
            if c["method"] == "defaults":
                t["points"].append(100 * (c["accuracy"] - before[_key(c)]["accuracy"]))
        for table, t in per.items():
            if t["negative"]:
                out["tables"][table] = {"set": t["half"], "fits": t["fits"], "negative": t["negative"],
                                        "defaults_points": sum(t["points"]) / len(t["points"])}
    return out


def margins_markdown(summ: dict) -> str:
    """The three tables of README §23 from :func:`margins`' file."""
    halves = list(summ["signed"])
    lines = ["| margin where the prior is near-uniform (else +0.5σ_c) | " + " | ".join(halves) + " |",
             "|---" * (len(halves) + 1) + "|"]
    for label, row in summ["rules"].items():
        cells = [f"{row[h]['T1'][0]}, {row[h]['T2'][0]}, {row[h]['T3'][0]}; {row[h]['acc']:.3f}" for h in halves]
        name = f"**{label}** (shipped)" if label == summ["shipped_rule"] else label
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "| set (defaults row) | T1: +½σ_c everywhere → signed | T2 (≥ 85 %) | T3 (≥ 90 %) | mean acc. | "
              "mean bal. acc. |", "|---|---|---|---|---|---|"]
    before = summ["rules"]["+0.5σ_c everywhere (shipped)"]
    for half, b in summ["signed"].items():
        a = before[half]
        cells = [f"{a[t][0]} → {b[t][0]} /{a[t][1]}" for t in ("T1", "T2", "T3")]
        cells += [f"{a[k]:.3f} → {b[k]:.3f}" for k in ("acc", "bal")]
        lines.append(f"| {half} | " + " | ".join(cells) + " |")
    lines += ["", "| table (set) | noisysgd fits with the margin −½σ_c | defaults' mean accuracy change |",
              "|---|---|---|"]
    for table, t in sorted(summ["tables"].items(), key=lambda kv: (-kv[1]["defaults_points"], kv[0])):
        lines.append(f"| {table} ({t['set']}) | {t['negative']} of {t['fits']} | {t['defaults_points']:+.1f} points |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("variant", choices=list(VARIANTS) + list(SIGNED))
    r.add_argument("out", type=Path)
    r.add_argument("--sets", nargs="*", default=list(SETS), choices=list(SETS) + list(LATER_SETS))
    s = sub.add_parser("summary")
    s.add_argument("root", type=Path, help="the folder holding one folder per variant")
    s.add_argument("--json", type=Path, required=True)
    m = sub.add_parser("markdown")
    m.add_argument("json", type=Path)
    g = sub.add_parser("margins", help="README §23: the margins tried, and signed against shipped, on the seven sets")
    g.add_argument("root", type=Path, help="the folder holding shipped/, model/, prior/ and signed/")
    g.add_argument("--json", type=Path, required=True)
    gm = sub.add_parser("margins-markdown")
    gm.add_argument("json", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "run":
        run_variant(args.variant, args.out, args.sets)
    elif args.cmd == "summary":
        args.json.write_text(json.dumps(summary(args.root), indent=1) + "\n")
    elif args.cmd == "margins":
        args.json.write_text(json.dumps(margins(args.root), indent=1) + "\n")
    elif args.cmd == "margins-markdown":
        print(margins_markdown(json.loads(args.json.read_text())))
    else:
        print(markdown(json.loads(args.json.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
