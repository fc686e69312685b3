"""The result tables docs/accuracy.md shows are the benchmark files' numbers (they cannot drift)."""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _benchmark(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shown(lines: list[str], rows: int, where: str, how: str) -> None:
    """docs/accuracy.md shows every line of a rendered table (header, rule and ``rows`` rows)."""
    docs = (ROOT / "docs" / "accuracy.md").read_text().splitlines()
    assert len(lines) == 2 + rows
    missing = [line for line in lines if line not in docs]
    assert not missing, f"docs/accuracy.md {where} differs from benchmarks/results (re-render with {how}): " + \
        "\n".join(missing)


def test_tables_of_section_4a_are_the_benchmark_results():
    # benchmarks/tables.py, peer_diffprivlib.py --tables and peer_opacus.py --centered --tables write
    # the JSON files; the docs' table is rendered from them, row for row
    _shown(_benchmark("tables").markdown_table(), 5 * 3, "§4a", "benchmarks/tables.py's markdown_table()")


def test_tables_of_section_1_are_the_benchmark_results():
    # benchmarks/auto_config.py (and peer_opacus.py, peer_diffprivlib.py) write the JSON files
    first, peers = _benchmark("auto_config").markdown_tables()
    for lines in (first, peers):
        _shown(lines, 3 * 3, "§1", "benchmarks/auto_config.py's markdown_tables()")


def test_the_query_cost_table_is_the_benchmark_result():
    # benchmarks/query_cost.py writes the JSON file (issue 27's third target)
    _shown(_benchmark("query_cost").markdown_table(), 3, "§4", "benchmarks/query_cost.py's markdown_table()")


def test_the_regularization_table_is_the_benchmark_result():
    # benchmarks/regularization.py writes the JSON file (issue 27 §2)
    _shown(_benchmark("regularization").markdown_table(), 5 * 3, "§5",
           "benchmarks/regularization.py's markdown_table()")


def test_the_regime_tables_of_section_1a_are_the_benchmark_results():
    # benchmarks/auto_config.py and peer_opacus.py --centered [--adjacency add-remove] [--fashion DIR
    # [--scatter]] [--held-out] (--defaults-only after a change of the defaults) write the JSON files
    tables = _benchmark("auto_config").markdown_regime_tables()
    how = "benchmarks/auto_config.py's markdown_regime_tables()"
    _shown(tables["replace"], 5 * 3, "§1a (replace-one)", how)
    _shown(tables["add-remove"], 5 * 3, "§1a (add/remove)", how)
    _shown(tables["held-out"], 2 * 3, "§1a (held-out)", how)


def test_the_averaging_table_is_the_benchmark_result():
    # benchmarks/averaging.py writes the JSON file (issue 26 §2: the tail average at the run the
    # automatic configuration picks)
    rows = len(json.loads((ROOT / "benchmarks" / "results" / "averaging.json").read_text())["rows"])
    _shown(_benchmark("averaging").markdown_table(), rows, "§1a (averaging)", "benchmarks/averaging.py's markdown_table()")


def test_the_step_selection_table_is_the_benchmark_result():
    # benchmarks/step_selection.py writes the JSON file (issue 26: make_classification's gap to the
    # oracle is the step; a private choice of it does not pay)
    data = json.loads((ROOT / "benchmarks" / "results" / "step_selection.json").read_text())
    _shown(_benchmark("step_selection").markdown_table(), len(data["rows"]), "§1a (step selection)",
           "benchmarks/step_selection.py's markdown_table()")


def test_the_raw_tables_readme_shows_the_benchmark_results():
    # benchmarks/raw_tables/run.py writes the JSON files (issue 43 §6); README §8-10 show their targets
    import sys

    here = ROOT / "benchmarks" / "raw_tables"
    sys.path.insert(0, str(here))
    try:
        spec = importlib.util.spec_from_file_location("raw_tables_report", here / "report.py")
        report = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(report)
    finally:
        sys.path.remove(str(here))
    readme = (here / "README.md").read_text().splitlines()
    for half, label in (("design", "| **defaults now** |"), ("heldout", "| **defaults** |"),
                        ("fresh", "| **defaults, fresh set** |")):
        data = json.loads((ROOT / "benchmarks" / "results" / f"raw_tables_{half}.json").read_text())
        res = report.targets(data, half)
        cells = [v["defaults"]["acc"] for k, v in report.cells(data).items() if k[0] == half and report.complete(v)]
        row = next(line for line in readme if line.startswith(label))
        for target in ("T1", "T2", "T3"):
            got, of = res[target]["defaults"]
            assert f"{got}/{of}" in row, (half, target, row)
        assert f"{sum(cells) / len(cells):.3f}" in row, (half, row)
    # README §16: the four sets' defaults re-run (read over each set's file), and the fifth set run once
    results = ROOT / "benchmarks" / "results"
    for half, label in (("design", "| design |"), ("heldout", "| held-out |"), ("fresh", "| fresh |"),
                        ("fourth", "| fourth |"), ("fifth", "| **defaults, fifth set** |")):
        files = ([results / "raw_tables_fifth.json"] if half == "fifth" else
                 [results / f"raw_tables_{half}.json", results / "raw_tables_rerun_unseen_median.json"])
        data = report.load(files)
        res = report.targets(data, half)
        cs = [v for k, v in report.cells(data).items() if k[0] == half and report.complete(v)]
        row = next(line for line in readme[readme.index("## 16. An unseen column's range, a scaling rule for it, "
                                                        "and the fifth set run once"):] if line.startswith(label))
        for target in ("T1", "T2", "T3"):
            got, of = res[target]["defaults"]
            assert (f"→ {got} /{of}" if half != "fifth" else f"{got}/{of}") in row, (half, target, row)
        for key in ("acc", "bal"):
            mean = sum(v["defaults"][key] for v in cs) / len(cs)
            assert f"{mean:.3f}" in row, (half, key, row)
    # README §17: the sixth set, run once
    data = report.load([results / "raw_tables_sixth.json"])
    res = report.targets(data, "sixth")
    cs = [v for k, v in report.cells(data).items() if k[0] == "sixth" and report.complete(v)]
    row = next(line for line in readme if line.startswith("| **defaults, sixth set** |"))
    for target in ("T1", "T2", "T3"):
        got, of = res[target]["defaults"]
        assert f"{got}/{of}" in row, ("sixth", target, row)
    for key in ("acc", "bal"):
        assert f"{sum(v['defaults'][key] for v in cs) / len(cs):.3f}" in row, ("sixth", key, row)
    # README §18: each row against a re-seeded copy of itself (reseeded.py's table, from its file)
    spec = importlib.util.spec_from_file_location("raw_tables_reseeded", here / "reseeded.py")
    sys.path.insert(0, str(here))
    try:
        reseeded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(reseeded)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            table = reseeded.markdown(reseeded.summary(results / "raw_tables_reseeded.json"))
    finally:
        sys.path.remove(str(here))
    text = "\n".join(readme)
    assert table in text, table
    # README §20: the six sets re-run with a noise of their own per table (run.py --independent-noise)
    section = readme[readme.index("## 20. Every table's fit drew the same noise: the six sets re-run with a noise "
                                  "of their own"):]
    for half, label, name in (("design", "| design |", "all"), ("heldout", "| held-out |", "all"),
                              ("fresh", "| fresh |", "fresh"), ("fourth", "| fourth |", "fourth"),
                              ("fifth", "| fifth |", "fifth"), ("sixth", "| sixth |", "sixth")):
        data = report.load([results / f"raw_tables_{name}_independent.json"])
        res = report.targets(data, half)
        cs = [v for k, v in report.cells(data).items() if k[0] == half and report.complete(v)]
        row = next(line for line in section if line.startswith(label))
        cells = row.split(" | ")
        for target, cell in zip(("T1", "T2", "T3"), cells[2:5]):
            got, of = res[target]["defaults"]
            assert cell.startswith(f"{got}/{of}"), (half, target, row)
        for key in ("acc", "bal"):
            assert f"{sum(v['defaults'][key] for v in cs) / len(cs):.3f}" in row, (half, key, row)


def _raw_tables_module(name: str):
    import sys

    here = ROOT / "benchmarks" / "raw_tables"
    # benchmarks/tables.py is also "tables": a test may have imported it; the set scripts need their own
    foreign = sys.modules.get("tables")
    if foreign is not None and Path(getattr(foreign, "__file__", "") or "").parent != here:
        del sys.modules["tables"]
    sys.path.insert(0, str(here))
    try:
        spec = importlib.util.spec_from_file_location(f"raw_tables_{name}", here / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(here))
        if foreign is not None:
            sys.modules["tables"] = foreign
    return module


def test_the_raw_tables_readme_shows_the_check_variants():
    # README §21: check_variants.py's summary file, rendered
    text = (ROOT / "benchmarks" / "raw_tables" / "README.md").read_text()
    variants = _raw_tables_module("check_variants")
    summary = json.loads((ROOT / "benchmarks" / "results" / "raw_tables_check_variants.json").read_text())
    assert set(summary["rows"]) == set(variants.VARIANTS) | set(variants.DERIVED)
    table = variants.markdown(summary)
    assert table in text, table


#: each set's committed run, in the order the sets came (the first five files re-run with noise of their own per
#: table, README §20; the later sets were run that way once)
SET_STEMS = ("all_independent", "fresh_independent", "fourth_independent", "fifth_independent", "sixth_independent",
             "seventh", "eighth", "ninth", "tenth", "eleventh")


def _sets_through(last: str) -> dict:
    """The committed runs of the sets up to ``last``, read as one (scaling_rule.load)."""
    stems = SET_STEMS[:[s.split("_")[0] for s in SET_STEMS].index(last) + 1]
    return _raw_tables_module("scaling_rule").load([ROOT / "benchmarks" / "results" / f"raw_tables_{s}.json"
                                                     for s in stems])


def _set_rows_match(heading: str, stem: str, half: str, rows: dict) -> tuple:
    """A set run once (§22, §24): its README section's rows of targets (line start -> method) against
    the committed file ``raw_tables_{stem}.json``, run with noise of its own per table.  Returns
    (the section's lines, the report module, the results folder, the data)."""
    results = ROOT / "benchmarks" / "results"
    text = (ROOT / "benchmarks" / "raw_tables" / "README.md").read_text()
    section = text[text.index(heading):].splitlines()
    report = _raw_tables_module("report")
    data = report.load([results / f"raw_tables_{stem}.json"])
    assert {r["noise"] for r in data["runs"]} == {"independent"}
    res = report.targets(data, half)
    cs = [v for k, v in report.cells(data).items() if k[0] == half and report.complete(v)]
    for label, method in rows.items():
        row = next(line for line in section if line.startswith(label))
        for target, cell in zip(("T1", "T2", "T3"), row.split(" | ")[1:4]):
            got, of = res[target][method]
            assert cell.startswith(f"{got}/{of}"), (target, row)
        for key in ("acc", "bal"):
            assert f"{sum(v[method][key] for v in cs) / len(cs):.3f}" in row, (key, row)
    return section, report, results, data


def test_the_raw_tables_readme_shows_the_seventh_set():
    # README §22: the seventh set's file, and the scaling rules of scaling_rule.py on the seven sets
    section, report, results, _ = _set_rows_match("## 22. The seventh set", "seventh", "seventh",
                                                  {"| **defaults, seventh set** |": "defaults"})
    rule = _raw_tables_module("scaling_rule")
    rules = rule._rules()
    shown = {"| shipped (`scaling_decision`) |": rule.LIBRARY,
             "| scale unless the query saw no column |": "scale unless the query saw no column (3σ floor)"}
    files = {"design": "all_independent", "heldout": "all_independent", "fresh": "fresh_independent",
             "fourth": "fourth_independent", "fifth": "fifth_independent", "sixth": "sixth_independent",
             "seventh": "seventh"}
    for label, name in shown.items():
        cells = next(line for line in section if line.startswith(label)).split(" | ")[1:]
        for (half, stem), cell in zip(files.items(), cells):
            (row,), _ = rule.evaluate(report.load([results / f"raw_tables_{stem}.json"]), half, {name: rules[name]})
            got, of = row[3]
            assert cell.strip(" |").startswith(f"{got}/{of}, {row[4]:.3f}"), (label, half, cell)


def test_the_raw_tables_readme_shows_t3_as_the_issue_words_it_and_the_rules_left_out():
    # README §22: literal T3 (scaling_rule.literal_t3) of four rules on the seven sets, and the
    # leave-one-set-out table (scaling_rule.py --loso --all-variants), from the committed files
    text = (ROOT / "benchmarks" / "raw_tables" / "README.md").read_text()
    section = text[text.index("**T3 as the issue words it"):].splitlines()
    rule = _raw_tables_module("scaling_rule")
    data = _sets_through("seventh")
    rules = rule._rules()
    halves = ("design", "heldout", "fresh", "fourth", "fifth", "sixth", "seventh")
    table = {h: {r[0]: r for r in rule.evaluate(data, h, rules)[0]} for h in halves}
    shown = {"| shipped (`scaling_decision`) |": rule.LIBRARY,
             "| always raw |": "always raw (query charged)", "| always scaled |": "always scaled",
             "| scale unless the query saw no column |": "scale unless the query saw no column (3σ floor)"}
    for label, name in shown.items():
        cells = next(line for line in section if line.startswith(label)).strip(" |").split(" | ")[1:]
        lit = [table[h][name][7] for h in halves]
        assert cells[:7] == [str(got) for got, _ in lit], (label, cells)
        assert cells[7] == str(sum(got >= 0.9 * of - 1e-9 for got, of in lit)), (label, cells)
    assert max(sum(table[h][n][7][0] >= 0.9 * table[h][n][7][1] - 1e-9 for h in halves) for n in rules) == 2
    assert rule.loso_markdown(rule.leave_one_set_out(data, rules)) in text


def test_the_raw_tables_readme_shows_the_signed_margin():
    # README §23: check_variants.py's margins file, rendered; §23's library run (signed) equals the
    # rule it shipped, rebuilt per fit from the recorded answers, on every set
    text = (ROOT / "benchmarks" / "raw_tables" / "README.md").read_text()
    variants = _raw_tables_module("check_variants")
    summary = json.loads((ROOT / "benchmarks" / "results" / "raw_tables_check_margins.json").read_text())
    assert summary["shipped_rule"] == variants.MARGIN_SHIPPED
    assert set(summary["rules"]) == {"+0.5σ_c everywhere (shipped)"} | {r[0] for r in variants.MARGIN_RULES}
    assert summary["signed"] == summary["rules"][variants.MARGIN_SHIPPED]
    from noisysgd.prior import CHECK_MARGIN, check_margin
    # the rule §23 shipped is the one its signed run patched in (withdrawn in §26: the library's margin is
    # +½σ_c on every prior, the rules' first row)
    assert variants.MARGIN_SHIPPED == f"k ≥ 3, p̂_max ≤ 1/k + {variants.SECTION23_NEAR_UNIFORM:g}: {-CHECK_MARGIN:g}σ_c"
    assert variants.section23_margin([0.3, 0.4, 0.3])[0] == -CHECK_MARGIN == -check_margin([0.3, 0.4, 0.3])[0]
    assert variants.section23_margin([0.8, 0.1, 0.1])[0] == CHECK_MARGIN == variants.section23_margin([0.5, 0.5])[0]
    for table in variants.margins_markdown(summary).split("\n\n"):  # (three tables, text between them)
        assert table in text, table


def test_the_raw_tables_readme_shows_the_margin_study():
    # README §26: margin_study.py's summary, rendered; its real-set rows are those of §23's margins file
    # (the same recorded runs, rebuilt by another script), and its transcription of §23's rule reads the
    # library's own prior p̂ (noisysgd.prior.private_class_counts) as check_variants.py's rule does
    text = (ROOT / "benchmarks" / "raw_tables" / "README.md").read_text()
    study = _raw_tables_module("margin_study")
    variants = _raw_tables_module("check_variants")
    summary = json.loads((ROOT / "benchmarks" / "results" / "raw_tables_margin_study.json").read_text())
    assert list(summary["rules"]) == list(study.RULES) and summary["fits"] == len(study.jobs())
    for table in study.markdown(summary).split("\n\n"):
        assert table in text, table
    margins = json.loads((ROOT / "benchmarks" / "results" / "raw_tables_check_margins.json").read_text())
    assert summary["rules"][study.SHIPPED]["real"] == margins["rules"]["+0.5σ_c everywhere (shipped)"]
    assert summary["rules"][study.SECTION23]["real"] == margins["rules"][margins["shipped_rule"]]
    line = " ".join(text[text.index("## 26. The margin on tables"):].split())
    vacuous = summary["rules"]["+1σ_c where the run's bound ≥ log k"]["real_changed"]
    assert vacuous == summary["rules"]["the prior where the run's bound ≥ log k"]["real_changed"]
    assert f"at least log k on {vacuous:,} of the {summary['real_fits']:,} real noisysgd fits" in line
    from noisysgd.prior import private_class_counts
    rng = np.random.default_rng(0)
    for _ in range(200):
        k = int(rng.integers(2, 6))
        y = rng.choice(k, size=int(rng.integers(30, 400)), p=rng.dirichlet(np.ones(k)))
        prior, details = private_class_counts(y, k, 0.05, rng=rng)
        assert study._shrunk(np.asarray(details["noisy_counts"]), details["noise_std"]) == pytest.approx(prior)
        assert study.margin(study.SECTION23, details["noisy_counts"], details["noise_std"]) == \
            variants.section23_margin(prior)[0]


def test_the_raw_tables_readme_shows_the_eighth_set():
    # README §24: the eighth set's file (run once, noise of its own per table), its rows of targets
    section, _, _, data = _set_rows_match("## 24. An eighth set", "eighth", "eighth",
                                    {"| **defaults, eighth set** |": "defaults",
                                     '| `feature_range="private"` |': 'feature_range="private"'})
    assert sorted(data["tables"]) == _raw_tables_module("eighth").names()
    rule = _raw_tables_module("scaling_rule")
    rules = rule._rules()
    shipped, more = (rule.evaluate(rule.load([ROOT / "benchmarks" / "results" / "raw_tables_eighth.json"]), "eighth",
                                   {name: rules[name]})[0][0]
                     for name in (rule.LIBRARY, "scale unless the query saw no column (3σ floor)"))
    line = " ".join(l.strip() for l in section if l.strip())  # noqa: E741 (the README's lines, unwrapped)
    assert (f"the shipped rule {shipped[3][0]}/{shipped[3][1]} of report.py's T3 and {shipped[4]:.3f} mean accuracy; "
            f'"scale unless the query saw no column" {more[3][0]}/{more[3][1]} and {more[4]:.3f}') in line
    eight = _sets_through("eighth")
    loso = rule.leave_one_set_out(eight, rules)
    assert rule.loso_markdown(loso) in "\n".join(section)
    weights = {r[0]: r[4][1] for r in loso}
    assert f"{-100 * sum((r[2] - r[3]) * weights[r[0]] for r in loso) / sum(weights.values()):.2f}" in line


def _later_set(heading: str, name: str) -> tuple:
    """A later set run once (§27, §29): :func:`_set_rows_match` on its two noisysgd rows, the section cut at the
    next heading and its lines unwrapped, the file's tables the set's module lists.  Returns (the section's
    lines, the line, the results folder, the data, scaling_rule, its rules)."""
    section, _, results, data = _set_rows_match(heading, name, name,
                                                {f"| **defaults, {name} set** |": "defaults",
                                                 '| `feature_range="private"` |': 'feature_range="private"'})
    section = section[:next((i for i, line in enumerate(section[1:], 1) if line.startswith("## ")), len(section))]
    assert sorted(data["tables"], key=str.lower) == _raw_tables_module(name).names()
    rule = _raw_tables_module("scaling_rule")
    line = " ".join(l.strip() for l in section if l.strip())  # noqa: E741 (the README's lines, unwrapped)
    return section, line, results, data, rule, rule._rules()


def _reference_rows(section: list, data: dict, half: str) -> None:
    """§29, §31: the table's reference rows (diffprivlib's two, non-private, majority: T1 and the means) and
    the percentages of the two noisysgd rows' T2 and T3."""
    report = _raw_tables_module("report")
    res = report.targets(data, half)
    cs = [v for k, v in report.cells(data).items() if k[0] == half and report.complete(v)]
    labels = {"| diffprivlib, rows clipped to 1 |": report.DPL_CLIP,
              "| diffprivlib, `data_norm` from the data (not private) |": report.DPL_NORM,
              "| non-private LR |": report.NONPRIVATE, "| majority |": report.MAJORITY}
    for label, method in labels.items():
        row = next(line for line in section if line.startswith(label))
        got, of = res["T1"][method]
        assert row.split(" | ")[1].startswith(f"{got}/{of}"), row
        for key in ("acc", "bal"):
            assert f"{sum(v[method][key] for v in cs) / len(cs):.3f}" in row, (key, row)
    for label, method in ((f"| **defaults, {half} set** |", "defaults"), ('| `feature_range="private"` |',
                                                                          'feature_range="private"')):
        row = next(line for line in section if line.startswith(label))
        for target in ("T2", "T3"):
            got, of = res[target][method]
            assert f"{got}/{of} = {100 * got / of:.0f} %" in row, (target, row)


def test_the_raw_tables_readme_shows_the_ninth_set():
    # README §27: the ninth set's file (run once, noise of its own per table), its rows of targets, the
    # scaling rules on it and the nine sets' leave-one-set-out table with its weighted gain
    section, line, results, _, rule, rules = _later_set("## 27. A ninth set", "ninth")
    ninth = rule.load([results / "raw_tables_ninth.json"])
    shipped, twin, more = (rule.evaluate(ninth, "ninth", {name: rules[name]})[0][0] for name in
                           (rule.LIBRARY, rule.TWIN, "scale unless the query saw no column (3σ floor)"))
    assert (f"the shipped rule T1 {shipped[1][0]}/{shipped[1][1]}, T3 {shipped[3][0]}/{shipped[3][1]}, mean "
            f"accuracy {shipped[4]:.3f}") in line
    assert f"T1 {twin[1][0]}/{twin[1][1]}, T3 {twin[3][0]}/{twin[3][1]} and {twin[4]:.3f}" in line
    assert f'"scale unless the query saw no column" {more[1][0]}/{more[1][1]}, {more[3][0]}/{more[3][1]} and ' \
           f"{more[4]:.3f}" in line
    nine = _sets_through("ninth")
    loso = rule.leave_one_set_out(nine, rules)
    assert rule.loso_markdown(loso) in "\n".join(section)
    assert {r[1] for r in loso} == {rule.TWIN}
    weights = {r[0]: r[4][1] for r in loso}
    assert f"{100 * sum((r[2] - r[3]) * weights[r[0]] for r in loso) / sum(weights.values()):+.2f} points" in line
    assert f"over their {sum(weights.values())} cells" in line


def test_the_raw_tables_readme_shows_the_tenth_set():
    # README §29: the tenth set's file (run once with the library of §28, noise of its own per table), its rows
    # of targets, the scaling rules rebuilt on it, and leave-one-set-out over the ten sets
    section, line, results, data, rule, rules = _later_set("## 29. A tenth set", "tenth")
    from noisysgd.preprocessing import scaling_decision

    for c in data["cells"]:  # run with the library's rule (§28's near twin)
        if c["method"] == "defaults":
            assert ("scaled by the private ranges" in c["range_query"]["decision"]) == rule._twin(c["range_query"])
            assert scaling_decision(c["range_query"])[0] == rule._twin(c["range_query"])
    tenth = rule.load([results / "raw_tables_tenth.json"])
    twin, old, more = (rule.evaluate(tenth, "tenth", {name: rules[name]})[0][0] for name in
                       (rule.TWIN, rule.LIBRARY, "scale unless the query saw no column (3σ floor)"))
    assert f"the near twin of §28, T1 {twin[1][0]}/{twin[1][1]}, T3 {twin[3][0]}/{twin[3][1]} and {twin[4]:.3f}" in line
    assert f"§16's rule T1 {old[1][0]}/{old[1][1]}, T3 {old[3][0]}/{old[3][1]} and {old[4]:.3f}" in line
    assert f'"scale unless the query saw no column" {more[1][0]}/{more[1][1]}, {more[3][0]}/{more[3][1]} and ' \
           f"{more[4]:.3f}" in line
    assert f"§28's switch holds on unseen tables ({100 * (twin[4] - old[4]):+.1f} points)" in line
    _reference_rows(section, data, "tenth")
    report = _raw_tables_module("report")
    cs = [v for k, v in report.cells(data).items() if report.complete(v)]
    mean = {m: sum(v[m]["acc"] for v in cs) / len(cs) for m in ("defaults", report.DPL_CLIP, report.DPL_NORM)}
    assert (f"{100 * (mean['defaults'] - mean[report.DPL_CLIP]):.1f} and "
            f"{100 * (mean['defaults'] - mean[report.DPL_NORM]):.1f} points above diffprivlib's two rows") in line
    ten = _sets_through("tenth")
    loso = rule.leave_one_set_out(ten, rules)
    assert sum(r[1] == rule.TWIN for r in loso) == 9 and [r[0] for r in loso if r[1] != rule.TWIN] == ["sixth"]
    weights = {r[0]: r[4][1] for r in loso}
    gain = f"{100 * sum((r[2] - r[3]) * weights[r[0]] for r in loso) / sum(weights.values()):+.2f}".replace("-", "−")
    assert f"accuracy is {gain} points" in line
    assert f"the ten sets' {sum(weights.values())} cells" in line


def test_the_raw_tables_readme_shows_the_eleventh_set():
    # README §31: the eleventh set's file (run once with the library of §28), its rows, the scaling rules on it
    # and leave-one-set-out over the eleven sets
    section, line, results, data, rule, rules = _later_set("## 31. An eleventh set", "eleventh")
    _reference_rows(section, data, "eleventh")
    eleventh = rule.load([results / "raw_tables_eleventh.json"])
    twin, old, scaled, raw = (rule.evaluate(eleventh, "eleventh", {name: rules[name]})[0][0] for name in
                              (rule.TWIN, rule.LIBRARY, "always scaled", "always raw (query charged)"))
    assert (f"the library's near twin {twin[4]:.3f}, §16's rule {old[4]:.3f}, always scaled {scaled[4]:.3f}, "
            f"always raw {raw[4]:.3f}") in line
    sets = _sets_through("eleventh")
    loso = rule.leave_one_set_out(sets, rules)
    assert [r[0] for r in loso if r[1] != rule.TWIN] == ["sixth"] and len(loso) == 11
    weights = {r[0]: r[4][1] for r in loso}
    gain = f"{100 * sum((r[2] - r[3]) * weights[r[0]] for r in loso) / sum(weights.values()):+.2f}".replace("-", "−")
    assert f"{gain} points over {sum(weights.values())} cells against §16's rule" in line


def test_the_raw_tables_readme_shows_the_model_norm_variant():
    # README §30: model_norm.py's summary, rendered; its library rows are §28's re-run and the tenth set's file
    # (two runs of the same library agree), the variant is the formula the section states, and the prose
    # quotes the summary
    import noisysgd.config as config

    mn = _raw_tables_module("model_norm")
    variants = _raw_tables_module("check_variants")
    report = _raw_tables_module("report")
    results = ROOT / "benchmarks" / "results"
    summary = json.loads((results / "raw_tables_model_norm.json").read_text())
    text = (ROOT / "benchmarks" / "raw_tables" / "README.md").read_text()
    section = text[text.index("## 30. A smaller assumed model norm"):]
    assert mn.markdown(summary) in section
    twin = json.loads((results / "raw_tables_scaling_twin.json").read_text())
    for half, row in summary["sets"].items():
        mine = row["shipped"]
        theirs = twin[half]["after"] if half in twin else variants._targets(
            report.load([results / f"raw_tables_{half}.json"]), half)
        assert {t: list(mine[t]) for t in ("T1", "T2", "T3")} == {t: list(theirs[t]) for t in ("T1", "T2", "T3")}
        assert mine["acc"] == pytest.approx(theirs["acc"], abs=1e-12), half
    floor5 = mn.VARIANTS["floor5"]
    assert floor5(64, 1.0) == config._model_norm(64, 1.0) and floor5(784, 2.0) == config._model_norm(784, 2.0)
    assert floor5(16, 1.0) == config._model_norm(16, 1.0) / 2 == floor5(3, 1.0)
    assert f"{floor5(30, 1.0):.1f}/R at 30" in " ".join(section.split())
    line = " ".join(section.split())
    cells = sum(r["floor5"]["T3"][1] for r in summary["sets"].values())
    gain = 100 * sum((r["floor5"]["acc"] - r["shipped"]["acc"]) * r["floor5"]["T3"][1]
                     for r in summary["sets"].values()) / cells
    assert f"{gain:+.2f} points of mean accuracy over {cells} cells" in line
    t1 = [sum(r[k] for name, r in summary["synthetic"].items() if name.endswith("signal 0") and not name.startswith("n = 120,"))
          for k in ("t1_shipped", "t1_variant", "t1_of")]
    assert f"at ≥ 400 rows from {t1[0]} to {t1[1]} of {t1[2]}" in line
    assert f"on breast_cancer** (30 columns, B 10 → {floor5(30, 1.0):.1f}): " \
           f"{summary['evidence']['breast_cancer']['mean_points']:.1f} ± ".replace("-", "−") in line
    r = summary["evidence"]["breast_cancer (raw)"]
    assert f"{r['mean_points']:.1f} ± {r['se_points']:.1f} on its raw columns".replace("-", "−") in line
    bc = summary["evidence"]["breast_cancer"]
    assert f"{bc['below_0']} of breast_cancer's {bc['cells']} fits lose and {bc['above_0']} gain" in line
    delta = {t: sum(r["floor5"][t][0] - r["shipped"][t][0] for r in summary["sets"].values()) for t in ("T1", "T2", "T3")}
    assert f"T1 {delta['T1']:+d} cell".replace("-", "−") in line and f"T2 {delta['T2']:+d}, T3 {delta['T3']:+d}" in line
    signal = [r["mean_points"] for name, r in summary["synthetic"].items() if not name.endswith("signal 0")]
    assert f"(+{min(signal):.1f} to +{max(signal):.1f} points a group" in line
    tenth = summary["sets"]["tenth"]
    assert (f"+{100 * (tenth['floor5']['acc'] - tenth['shipped']['acc']):.1f} points and "
            f"{tenth['floor5']['T3'][0] - tenth['shipped']['T3'][0]} T3 cells") in line.replace("three T3", "3 T3")


def test_the_raw_tables_readme_shows_the_nine_sets_rerun_with_the_twin():
    # README §28: the library's scaling rule is the near twin (its decision equals scaling_rule.py's on every
    # recorded answer), and the re-run's summary, whose "before" rows are the committed files'
    from noisysgd.preprocessing import scaling_decision

    rule = _raw_tables_module("scaling_rule")
    results = ROOT / "benchmarks" / "results"
    summary = json.loads((results / "raw_tables_scaling_twin.json").read_text())
    text = (ROOT / "benchmarks" / "raw_tables" / "README.md").read_text()
    assert rule.rerun_markdown(summary) in text
    # the section's totals over the nine sets, and the CHANGELOG's
    line = " ".join(text[text.index("## 28. The near twin shipped"):].split())
    total = {t: [sum(r[w][t][0] for r in summary.values()) for w in ("before", "after")] for t in ("T1", "T2", "T3")}
    cells = sum(r["after"]["T2"][1] for r in summary.values())
    gain = 100 * sum((r["after"]["acc"] - r["before"]["acc"]) * r["after"]["T2"][1] for r in summary.values()) / cells
    claim = (f"T1 {total['T1'][0]} → {total['T1'][1]} cells, T2 {total['T2'][0]} → {total['T2'][1]}, "
             f"T3 {total['T3'][0]} → {total['T3'][1]}; mean accuracy {gain:+.2f} points weighted over the {cells} cells")
    assert claim in line, claim
    changelog = " ".join((ROOT / "CHANGELOG.md").read_text().split())
    assert (f"T1 {total['T1'][0]} → {total['T1'][1]} cells, T2 {total['T2'][0]} → {total['T2'][1]}, T3 "
            f"{total['T3'][0]} → {total['T3'][1]}, mean accuracy {gain:+.2f} points") in changelog
    answers = 0
    for stem, halves in rule.COMMITTED.items():
        data = rule.load([results / f"raw_tables_{stem}.json"])
        for half in halves:
            assert summary[half]["before"] == json.loads(json.dumps(rule._row(data, half)))
        for c in data["cells"]:
            a = c.get("range_query")
            if a and a.get("strict_scales") is not None:
                answers += 1
                assert scaling_decision(a)[0] == rule._twin(a), a
                if c["method"] == "defaults":  # (what the committed fits decided: §16's rule)
                    assert ("scaled by the private ranges" in a["decision"]) == rule._section16(a)
    assert answers > 2800


def test_the_readme_quotes_digits_from_the_evidence_file():
    cells = json.loads((ROOT / "benchmarks" / "results" / "evidence_defaults_scaling_twin.json").read_text())["cells"]
    acc = np.array([cells[f"digits|replace|1|{s}"]["accuracy"] for s in range(3)])
    line = " ".join((ROOT / "README.md").read_text().split())
    assert f"digits at ε = 1 reaches {acc.mean():.3f} ± {acc.std(ddof=1):.3f} (3 seeds" in line


def test_the_raw_tables_readme_shows_the_reseeded_copies_with_independent_noise():
    # README §25: reseeded.py --independent-noise's summary, rendered; every first fit reproduced its cell
    text = (ROOT / "benchmarks" / "raw_tables" / "README.md").read_text()
    reseeded = _raw_tables_module("reseeded")
    summary = json.loads((ROOT / "benchmarks" / "results" / "raw_tables_reseeded_independent_summary.json")
                         .read_text())
    assert list(summary) == list(reseeded.INDEPENDENT_SETS)
    assert all(row["reproduced"] == row["first_fits"] for row in summary.values())
    table = reseeded.markdown(summary)
    assert table in text[text.index("## 25."):], table
