"""Reading training data and writing results without ever leaving half a result.

:func:`load_table` reads CSV, NPZ and (when pyarrow is installed) Parquet
files into a numeric feature matrix and a target column,
with an error naming the file, row and column of any bad cell.

:func:`atomic_directory` writes an output directory all at once: files go
into a temporary sibling directory, are flushed to disk, and the directory is
renamed into place only when everything succeeded; on any error the
temporary directory is removed and nothing appears at the destination.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import math
import operator
import os
import stat
import sys
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Table", "load_table", "plain_path", "atomic_directory", "write_json", "check_output_dir", "check_output_file",
           "create_exclusive",
           "declared_categories", "category_key", "category_codes", "one_hot", "one_hot_names",
           "indicator_columns", "encoding_record", "text_cell_error", "absent_value"]


@dataclass(frozen=True)
class Table:
    """Features, target and their names, as read from a file."""

    X: np.ndarray
    y: np.ndarray | None  # None when read without a target (features only)
    feature_names: list[str]
    target: str
    path: str
    #: the declared categories of each one-hot encoded column (empty: none), and the
    #: columns as read, before each categorical one became one column per category
    categorical: dict = field(default_factory=dict)
    input_columns: list | None = None


def load_table(path, *, target: str | None, features=None, categorical=None) -> Table:
    """Read ``path`` (``.csv``, ``.npz``, ``.parquet``) and split off the ``target`` column.

    ``target=None`` reads features only (every column; NPZ: ``X``), ``y`` is then None.
    ``features``: for CSV and Parquet, the feature columns to read, in this order (the
    others are ignored; a missing one is an error naming it); NPZ's ``X`` is positional.
    ``categorical``: {column: [category, ...]}, categories declared publicly (CSV and
    Parquet): each such column becomes one 0/1 column per category, named
    ``column=category``, in the declared order; a cell outside its column's categories is
    an error naming it (nothing is learnt from the data: the encoding is the declaration's).

    CSV: a header row naming the columns; every feature cell must be a finite
    number; target cells may be numbers or labels (strings).  NPZ: arrays
    ``X`` (n × d) and one named ``target`` (n), or a structured table.
    Parquet needs pyarrow (``pip install 'noisysgd[parquet]'``), read a row group at a time.
    """
    p = plain_path(path)  # a string path (os.path: pathlib is not imported into ``noisysgd predict``)
    try:
        is_dir = stat.S_ISDIR(os.stat(p).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        raise ValueError(f"data must be an existing file. Found {str(path)!r}: no such file.") from None
    if is_dir:
        raise ValueError(f"data must be a file. Found a directory: {str(path)!r}.")
    if target is not None and (not isinstance(target, str) or not target):
        raise ValueError(f"target must name a column. Found {target!r}.")
    suffix = _suffix(p)
    if features is not None:
        features = [str(f) for f in features]
    categorical = _check_categorical(categorical, target)
    if suffix == ".npz" and categorical:
        raise ValueError("categorical columns apply to CSV and Parquet data; NPZ holds numbers only. "
                         f"Found {', '.join(map(repr, categorical))} declared for {_name(p)}.")
    if suffix == ".csv":
        fast = _load_plain_csv(p, features) if target is None and not categorical else None
        if fast is not None:
            return fast
        with _collector_paused():
            return _encoded(_load_csv(p, target, features, categorical), categorical)
    if suffix == ".npz":
        return _load_npz(p, target)
    if suffix in (".parquet", ".pq"):
        return _encoded(_load_parquet(p, target, features, categorical), categorical)
    raise ValueError(f"data must be a .csv, .npz or .parquet file. Found {str(path)!r}.")


def plain_path(path) -> str:
    """``path`` (a str, bytes or path-like) as the string ``pathlib.Path`` would make of it: ``.``
    components and repeated or trailing separators dropped (``./a//b.csv/`` is ``a/b.csv``),
    ``..`` kept; an empty path is ``.``."""
    text = os.fsdecode(os.fspath(path))
    if not text:
        return "."
    absolute = text.startswith(os.sep)
    parts = [part for part in text.split(os.sep) if part not in ("", ".")]
    out = os.sep.join(parts)
    return (os.sep + out) if absolute else (out or ".")


def _name(path) -> str:
    """The file name of ``path`` (``Path(path).name``)."""
    return os.path.basename(os.fspath(path).rstrip("/" + os.sep)) or os.fspath(path)


def _suffix(path) -> str:
    """The lower-cased suffix of ``path``'s file name (``Path(path).suffix.lower()``)."""
    name = _name(path)
    i = name.rfind(".")
    return name[i:].lower() if 0 < i < len(name) - 1 else ""


@contextlib.contextmanager
def _collector_paused():
    """The cyclic garbage collector off while a CSV file's cells are read (a list per row and a
    string per cell, none in a cycle), its previous state after: otherwise its passes walk every
    object alive again and again as the rows pile up (a sixth of the time to read 4,000 rows)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _check_categorical(categorical, target) -> dict:
    """``categorical`` as {column: [category, ...]}, validated (names argument and value); the
    categories as text, since they are matched against the file's cells."""
    if categorical is None:
        return {}
    if not isinstance(categorical, dict):
        raise ValueError(f"categorical must map column names to lists of categories. Found {categorical!r}.")
    out = {}
    for column, cats in categorical.items():
        if not isinstance(column, str) or not column:
            raise ValueError(f"categorical must name columns. Found {column!r}.")
        if column == target:
            raise ValueError(f"categorical must not declare the target {column!r} (declare the classes instead: "
                             "--classes / classes=).")
        if isinstance(cats, str) or not hasattr(cats, "__iter__"):
            raise ValueError(f"categorical[{column!r}] must be a list of categories. Found {cats!r}.")
        out[column] = declared_categories([str(c) for c in cats], f"categorical[{column!r}]")
    return out


def category_key(value):
    """What a cell or a declared category is matched by: text stripped of blanks, a number as a
    Python number (so 1, 1.0 and ``np.int64(1)`` are one category), anything else as it is."""
    if isinstance(value, str):
        return value.strip()
    return value.item() if isinstance(value, np.generic) else value


def declared_categories(cats, what: str) -> list:
    """``cats`` (a column's declared categories) as a list of :func:`category_key` values:
    distinct, none empty, missing or NaN; else a ValueError naming ``what``."""
    if isinstance(cats, (str, bytes)) or not hasattr(cats, "__iter__"):
        raise ValueError(f"{what} must be a list of categories. Found {cats!r}.")
    keys = [category_key(c) for c in cats]
    try:
        distinct = len(set(keys)) == len(keys)
    except TypeError:  # an unhashable category (a list, a dict)
        distinct = False
    if not keys or not distinct or any(absent_value(k) for k in keys):
        raise ValueError(f"{what} must list distinct, non-empty categories. Found {keys!r}.")
    return keys


def absent_value(key) -> bool:
    """Whether a :func:`category_key` is no value: None, empty text, NaN (or pandas' NA)."""
    try:
        return bool(key is None or (isinstance(key, str) and not key) or key != key)
    except TypeError:  # (pandas' NA is neither true nor false)
        return True


def category_codes(cells, column: str, cats: list, where, subject: str = "data") -> np.ndarray:
    """The index in ``cats`` (declared, :func:`declared_categories`) of each of ``cells`` (one
    column's cells, matched by :func:`category_key`); a cell outside them is a ValueError naming
    ``column``, the cell and ``where(i)`` (its row; ``subject``: what holds it)."""
    index = {c: k for k, c in enumerate(cats)}
    codes = np.empty(len(cells), dtype=np.int64)
    for i, value in enumerate(cells):
        try:
            codes[i] = index[category_key(value)]
        except (KeyError, TypeError):  # (TypeError: an unhashable cell)
            shown = category_key(value)
            shown = "(empty)" if absent_value(shown) and not isinstance(shown, float) else shown
            raise ValueError(f"{subject} must hold a declared category in every cell of the categorical column "
                             f"{column!r}. Found {shown!r} in {where(i)}; the declared categories are "
                             f"{', '.join(map(repr, cats))}.") from None
    return codes


def one_hot_names(names, categorical: dict) -> list[str]:
    """The columns ``names`` become: each categorical one, one ``column=category`` per declared category."""
    return [out for name in names
            for out in ([f"{name}={c}" for c in categorical[name]] if name in categorical else [name])]


def indicator_columns(names, categorical: dict) -> np.ndarray:
    """Which of :func:`one_hot_names`' columns are 0/1 indicators of a category (a boolean mask)."""
    return np.array([name in categorical for name in names for _ in (categorical.get(name) or [None])], dtype=bool)


def one_hot(X, names, categorical: dict) -> np.ndarray:
    """``X`` (columns ``names``; each categorical one holding :func:`category_codes`) with each
    categorical column replaced by one 0/1 column per declared category, in the declared order
    (columns :func:`one_hot_names`).  Nothing is read off the data: the encoding is the declaration's."""
    blocks = []
    for j, name in enumerate(names):
        if name in categorical:
            codes = np.asarray(X[:, j]).astype(np.int64)
            block = np.zeros((X.shape[0], len(categorical[name])))
            block[np.arange(codes.size), codes] = 1.0
            blocks.append(block)
        else:
            blocks.append(np.asarray(X[:, j:j + 1], dtype=float))
    return np.hstack(blocks) if blocks else np.empty((X.shape[0], 0))


def encoding_record(categorical: dict, input_columns) -> dict:
    """The certificate's account of a declared one-hot encoding (JSON-ready)."""
    return {"categorical": {str(k): list(v) for k, v in categorical.items()},
            "input_columns": [str(c) for c in input_columns],
            "privacy": ("declared publicly (categories given, not read off the data): one 0/1 column per "
                        "declared category, a cell outside them refused; no privacy cost")}


def text_cell_error(shown, kind: str, where: str, declare: str | None = None, subject: str = "data") -> ValueError:
    """The error for a feature cell that is not a finite number (``kind``: "not a number" or "not
    finite") in ``where``; ``declare``: how to declare the column categorical, said when it holds text."""
    hint = f"; if it is a categorical column, declare its categories ({declare})" if declare else ""
    return ValueError(f"{subject} must hold finite numbers in every feature cell. Found {shown!r} ({kind}) in "
                      f"{where}{hint}.")


def _encoded(table: Table, categorical: dict) -> Table:
    """``table`` with each categorical column (held as category codes) one-hot encoded."""
    if not categorical:
        return table
    missing = [c for c in categorical if c not in table.feature_names]
    if missing:
        raise ValueError(f"categorical must name feature columns of {_name(table.path)}. Found "
                         f"{', '.join(map(repr, missing))}, which it does not have.")
    used = {c: categorical[c] for c in table.feature_names if c in categorical}
    return Table(one_hot(table.X, table.feature_names, used), table.y, one_hot_names(table.feature_names, used),
                 table.target, table.path, used, list(table.feature_names))


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value


def _missing(features, columns, p: str):
    missing = [f for f in features if f not in columns]
    if missing:
        shown = ", ".join(repr(m) for m in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise ValueError(f"data must have the feature columns {shown}. Found {_name(p)} without them.")


#: the bytes of a plain CSV file (:func:`_load_plain_csv`): printable ASCII but the quote, the tab,
#: the line breaks; not a control character that ``float`` and numpy's parser might strip differently
_PLAIN_BYTES = bytes(range(0x20, 0x7F)).replace(b'"', b"") + b"\t\n\r"
#: :data:`_PLAIN_BYTES` but the line breaks
_PLAIN_CELL_BYTES = _PLAIN_BYTES.replace(b"\n", b"").replace(b"\r", b"")

#: the csv module's field size limit until a program sets another (``_csv``'s own default)
_CSV_FIELD_LIMIT = 128 * 1024


def _csv_field_limit() -> int:
    """``csv.field_size_limit()``, without importing :mod:`csv` (~0.5 ms of ``noisysgd predict``'s
    start, which reads and writes plain files without it): the limit lives in ``_csv``, so only a
    program that imported it can have set another."""
    module = sys.modules.get("csv") or sys.modules.get("_csv")
    return module.field_size_limit() if module is not None else _CSV_FIELD_LIMIT


def _load_plain_csv(p: str, features) -> Table | None:
    """:func:`_load_csv` of a file read without a target (``noisysgd predict``), its numbers parsed
    in C by ``np.loadtxt`` (twice as fast) — or None where the file is not plain, and
    :func:`_load_csv` reads it, with its errors.  Plain: bytes of :data:`_PLAIN_BYTES` only, every
    line break \\n or every one \\r\\n (the rows are then the lines split at the commas, as the
    csv module reads them), every row with the header's number of cells, the features among its
    columns, and every feature cell a finite number to numpy's parser, which reads a number as
    ``float`` does (both call CPython's correctly rounded ``PyOS_string_to_double`` between
    stripped blanks; what only ``float`` reads, such as ``1_000``, is left to it).  Where at most a
    tenth of the columns are not features (a label column beside them), every column is parsed and
    numpy's parser checks that every row has the first row's cells: cheaper than counting each row's
    commas and parsing the features alone (~2 ms of 4,000 rows of 20 features); where more are not,
    or one of them holds text, the commas are counted.  The line breaks are checked in one pass over
    the file (with the plain bytes), and \\r\\n files split in one more (~1 ms).
    ``tests/test_predict.py`` checks that both read the same table."""
    try:
        with open(p, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    found = data.translate(None, _PLAIN_CELL_BYTES)  # the line breaks in order, and any byte not plain
    if found.translate(None, b"\r\n"):
        return None
    returns = found.count(b"\r")
    if returns:  # the csv module's line breaks (and Excel's): every \r in a \r\n, every \n after a \r
        if found != b"\r\n" * returns:
            return None
        # (one scan, faster than split("\r\n"); it also splits at a \r or a \n apart: more lines)
        lines = data.decode("ascii").splitlines()
        if len(lines) - (not data.endswith(b"\n")) != returns:
            return None
    else:
        lines = data.decode("ascii").split("\n")
    if max(map(len, lines)) >= _csv_field_limit():  # a cell the csv module might refuse
        return None
    lines = [line for line in lines if line.strip(" ,\t")]  # the rows with a cell not blank
    header = [h.strip() for h in lines[0].split(",")] if lines else []
    body = lines[1:]
    names = list(header) if features is None else list(features)
    if not body or not names or len(set(header)) != len(header) or any(n not in header for n in names):
        return None
    cols = [header.index(n) for n in names]
    X = None
    if 10 * (len(header) - len(set(cols))) <= len(header):  # (few other columns: cheaper than counting)
        X = _parsed(body)  # every column: numpy's parser checks that every row has the first row's cells
        if X is not None and X.shape[1] != len(header):
            return None
        if X is not None and cols != list(range(len(header))):
            X = X[:, cols]
    if X is None:
        if set(map(operator.methodcaller("count", ","), body)) != {len(header) - 1}:
            return None
        X = _parsed(body, cols)
    if X is None or X.shape != (len(body), len(names)) or not np.isfinite(X).all():
        return None
    return Table(np.ascontiguousarray(X), None, names, "", str(p))


def _parsed(lines: list[str], usecols=None) -> np.ndarray | None:
    """``lines`` split at every comma, each cell read as a float64 by numpy's parser (only the columns
    ``usecols``, in this order: None is every column, when every line must have the first one's
    number of cells), or None where it refuses a cell or a line."""
    try:
        return np.loadtxt(lines, delimiter=",", comments=None, quotechar=None, dtype=np.float64, ndmin=2,
                          usecols=usecols)
    except Exception:  # noqa: BLE001 - a cell numpy does not read as a number: _load_csv names it
        return None


def _load_csv(p: str, target: str, features=None, categorical=None) -> Table:
    import csv  # (here: noisysgd predict reads a plain file without it)

    categorical = categorical or {}
    try:
        with open(p, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except UnicodeDecodeError as exc:
        raise ValueError(f"data must be a UTF-8 text CSV file. Found {str(p)!r}: {exc.reason}.") from None
    except csv.Error as exc:
        raise ValueError(f"data must be a valid CSV file. Found {str(p)!r}: {exc}.") from None
    rows = [r for r in rows if r and (r[0].strip() or any(cell.strip() for cell in r))]  # no blank rows
    if not rows:
        raise ValueError(f"data must have a header row and at least one example. Found an empty file {str(p)!r}.")
    header = [h.strip() for h in rows[0]]
    if target is not None and target not in header:
        raise ValueError(
            f"target must be a column of {_name(p)}. Found {target!r}; the columns are "
            + ", ".join(repr(h) for h in header[:20]) + (", ..." if len(header) > 20 else ".")
        )
    if len(set(header)) != len(header):
        raise ValueError(f"data must have distinct column names. Found duplicates in {_name(p)}'s header.")
    body = rows[1:]
    if not body:
        raise ValueError(f"data must hold at least one example. Found only a header in {str(p)!r}.")
    j = header.index(target) if target is not None else -1
    names = [h for i, h in enumerate(header) if i != j]
    if features is not None:
        _missing(features, header, p)
        names = list(features)
    if not names:
        raise ValueError(f"data must have at least one feature column besides {target!r}.")
    for r, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise ValueError(
                f"data must have {len(header)} cells in every row. Found {len(row)} in row {r} of {_name(p)}."
            )
    missing = [c for c in categorical if c not in names]
    if missing:
        raise ValueError(f"categorical must name feature columns of {_name(p)}. Found "
                         f"{', '.join(map(repr, missing))}, which it does not have.")
    cols = [header.index(h) for h in names if h not in categorical]
    try:  # numpy parses the cells in one pass; a bad cell is then found and named below
        pick = operator.itemgetter(*cols) if len(cols) > 1 else (lambda row: [row[i] for i in cols])
        X = np.array([pick(row) for row in body], dtype=float).reshape(len(body), len(cols))
    except ValueError:
        X = None
    if X is None or not np.isfinite(X).all():
        for r, row in enumerate(body, start=2):
            for i in cols:
                value = _number(row[i])
                if value is None or not math.isfinite(value):
                    shown = row[i].strip() or "(empty)"
                    kind = "not a number" if value is None else "not finite"
                    declare = (f"--categorical '{header[i]}=a,b,...', or categorical= in load_table"
                               if value is None and shown != "(empty)" else None)
                    raise text_cell_error(shown, kind, f"row {r}, column {header[i]!r} of {_name(p)}", declare)
    if categorical:  # numbers and category codes, in the columns' order (one-hot encoded by _encoded)
        full = np.empty((len(body), len(names)))
        numeric = [k for k, h in enumerate(names) if h not in categorical]
        full[:, numeric] = X
        for k, h in enumerate(names):
            if h in categorical:
                i = header.index(h)
                full[:, k] = category_codes([row[i] for row in body], h, categorical[h],
                                            lambda r: f"row {r + 2} of {_name(p)}")
        X = full
    if target is None:
        return Table(X, None, names, "", str(p))
    labels = [row[j].strip() for row in body]
    numeric = [_number(v) for v in labels]
    if all(v is not None for v in numeric):
        y = np.array(numeric, dtype=float)
        if not np.all(np.isfinite(y)):
            r = int(np.flatnonzero(~np.isfinite(y))[0]) + 2
            raise ValueError(f"target must be finite. Found {labels[r - 2]!r} in row {r} of {_name(p)}.")
    else:
        if any(v == "" for v in labels):
            r = labels.index("") + 2
            raise ValueError(f"target must not be empty. Found an empty cell in row {r} of {_name(p)}.")
        y = np.array(labels, dtype=object)
    return Table(X, y, names, target, p)


def npz_memmap(path, member: str = "X"):
    """The array ``member`` of an NPZ file, memory-mapped from the file — or None when it
    cannot be: a compressed member (``np.savez_compressed``), a Fortran-ordered one, or a
    dtype other than float32/float64.  Written by ``np.savez``, an array is stored
    uncompressed, so its bytes lie contiguous in the file after the member's zip header
    and ``.npy`` header; nothing is read but those headers."""
    import struct
    import zipfile

    name = member + ".npy"
    with open(path, "rb") as f:
        with zipfile.ZipFile(f) as z:
            try:
                info = z.getinfo(name)
            except KeyError:
                return None
        if info.compress_type != zipfile.ZIP_STORED:
            return None
        f.seek(info.header_offset)
        local = f.read(30)
        if local[:4] != b"PK\x03\x04":
            return None
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        f.seek(info.header_offset + 30 + name_len + extra_len)
        version = np.lib.format.read_magic(f)
        read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read(f)
        offset = f.tell()
    if fortran or dtype not in (np.dtype(np.float64), np.dtype(np.float32)) or len(shape) != 2:
        return None
    if shape[0] == 0:
        return None
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)


def _load_npz(p: str, target: str) -> Table:
    """NPZ: ``X`` memory-mapped when it is stored uncompressed (float32/64), so a file larger
    than memory is read a batch at a time by the data-parallel engine; the target in memory."""
    try:
        X_mapped = npz_memmap(p)
    except OSError as exc:
        if exc.errno in (errno.ENOMEM, errno.EFBIG, errno.EOVERFLOW, errno.ENFILE, errno.EMFILE):
            # the file is fine but this process may not map it (an address-space limit, too many
            # open files): never fall back silently to reading all of X into memory
            raise OSError(f"data: X of {_name(p)} could not be memory-mapped ({exc.strerror}): raise the process's "
                          "address-space limit (ulimit -v, prlimit --as) or free memory; X stays on disk and "
                          "--workers 1 reads it a batch at a time once it can be mapped") from None
        X_mapped = None  # np.load below names what is wrong with the file
    except ValueError:
        X_mapped = None
    try:
        with np.load(p, allow_pickle=False) as data:
            arrays = {k: (X_mapped if k == "X" and X_mapped is not None else data[k]) for k in data.files}
    except MemoryError:
        raise OSError(f"data: the arrays of {_name(p)} do not fit in memory: store X uncompressed (np.savez, not "
                      "np.savez_compressed) as float32 or float64 so that it is memory-mapped, and train with "
                      "--workers 1 (a batch at a time)") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"data must be a readable .npz file. Found {str(p)!r}: {exc}.") from None
    if "X" not in arrays:
        raise ValueError(f"data must hold an array 'X' of features. Found arrays {sorted(arrays)} in {_name(p)}.")
    if target is not None and (target not in arrays or target == "X"):
        raise ValueError(
            f"target must name an array of {_name(p)} besides 'X'. Found {target!r}; the arrays are "
            f"{sorted(arrays)}."
        )
    X = arrays["X"]
    if X.ndim != 2 or not np.issubdtype(X.dtype, np.number):
        raise ValueError(f"data must hold a 2-D numeric array 'X'. Found shape {X.shape}, dtype {X.dtype}.")
    if not isinstance(X, np.memmap):
        X = X.astype(float)
    for start in range(0, X.shape[0], 1 << 14):  # a block of rows at a time: X may exceed memory
        block = X[start:start + (1 << 14)]
        if not np.isfinite(block).all():
            i, k = np.argwhere(~np.isfinite(block))[0]
            raise ValueError(f"data must hold finite numbers in X. Found {float(block[i, k])!r} at row {start + i}, "
                             f"column {k}.")
    y = None
    if target is not None:
        y = arrays[target]
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"target must be a 1-D array with one entry per row of X ({X.shape[0]}). "
                             f"Found shape {y.shape}.")
        if np.issubdtype(y.dtype, np.number):
            y = y.astype(float)
            if not np.all(np.isfinite(y)):
                raise ValueError(f"target must be finite. Found {y[~np.isfinite(y)][0]!r} in {target!r}.")
    if X.shape[0] == 0:
        raise ValueError(f"data must hold at least one example. Found 0 rows in {_name(p)}.")
    names = [f"x{i}" for i in range(X.shape[1])]
    return Table(X, y, names, target or "", str(p))


#: Parquet features larger than this are streamed into a memory-mapped temporary file
#: (anonymous: removed when the array is freed) instead of memory.
_PARQUET_SPILL_BYTES = 1 << 28


def _load_parquet(p: str, target: str | None, features=None, categorical=None) -> Table:
    """Parquet, read one row group at a time with pyarrow: the features go into one float64
    array, memory-mapped on an anonymous temporary file when larger than
    :data:`_PARQUET_SPILL_BYTES` (so a file larger than memory can be trained on with the
    data-parallel engine, which reads a batch of rows at a time); peak memory is then one
    row group plus the target."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ValueError("data in Parquet needs pyarrow: pip install 'noisysgd[parquet]'") from None
    try:
        pf = pq.ParquetFile(p)
        schema = pf.schema_arrow
    except Exception as exc:  # noqa: BLE001 - engine errors vary; report them as bad input
        raise ValueError(f"data must be a readable Parquet file. Found {str(p)!r}: {exc}.") from None
    columns = [f.name for f in schema]
    if target is not None and target not in columns:
        raise ValueError(f"target must be a column of {_name(p)}. Found {target!r}; the columns are {columns[:20]}.")
    names = [c for c in columns if c != target]
    if features is not None:
        _missing(features, columns, p)
        names = list(features)
    if not names:
        raise ValueError(f"data must have at least one feature column besides {target!r}.")
    categorical = categorical or {}
    for name in names:
        t = schema.field(name).type
        if name not in categorical and not (pa.types.is_integer(t) or pa.types.is_floating(t)
                                            or pa.types.is_boolean(t)):
            raise ValueError(f"data must hold numbers in every feature column. Found column {name!r} of type {t}"
                             f" (if it is categorical, declare its categories: --categorical '{name}=a,b,...').")
    n, d = pf.metadata.num_rows, len(names)
    if n == 0:
        raise ValueError(f"data must hold at least one example. Found 0 rows in {_name(p)}.")
    if n * d * 8 > _PARQUET_SPILL_BYTES:
        import tempfile

        X = np.memmap(tempfile.TemporaryFile(prefix="noisysgd-parquet-"), dtype=np.float64, mode="w+", shape=(n, d))
    else:
        X = np.empty((n, d), dtype=np.float64)
    ys, row = [], 0
    try:
        for g in range(pf.num_row_groups):
            table = pf.read_row_group(g, columns=names + ([target] if target is not None else []))
            k = table.num_rows
            for j, name in enumerate(names):
                if name in categorical:
                    X[row:row + k, j] = category_codes(
                        ["" if v is None else str(v) for v in table.column(name).to_pylist()], name,
                        categorical[name], lambda i, row=row: f"row {row + i} of {_name(p)}")
                    continue
                X[row:row + k, j] = table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
            block = X[row:row + k]
            if not np.isfinite(block).all():
                i, c = np.argwhere(~np.isfinite(block))[0]
                raise ValueError(f"data must hold finite numbers in every feature cell. Found {float(block[i, c])!r} "
                                 f"(or a missing value) in row {row + i}, column {names[c]!r}.")
            if target is not None:
                ys.append(table.column(target).to_numpy(zero_copy_only=False))
            row += k
    except ValueError:
        raise
    except Exception as exc:  # noqa: BLE001 - a corrupt row group
        raise ValueError(f"data must be a readable Parquet file. Found {str(p)!r}: {exc}.") from None
    if target is None:
        return Table(X, None, names, "", str(p))
    y = np.concatenate(ys)
    if np.issubdtype(y.dtype, np.number) or y.dtype == bool:
        y = y.astype(float)
        if not np.all(np.isfinite(y)):
            raise ValueError(f"target must be finite. Found NaN, infinity or a missing value in {target!r}.")
    else:
        y = y.astype(object)
        if any(v is None for v in y):
            r = next(i for i, v in enumerate(y) if v is None)
            raise ValueError(f"target must not be empty. Found a missing value in row {r} of {_name(p)}.")
    return Table(X, y, names, target, p)


def check_output_dir(path, name: str = "out", *, replace_marker: str | None = None):
    """``path`` as a directory (a ``pathlib.Path``) that does not exist (or is empty) and can be
    created — or, with ``replace_marker``, one that holds that file (an earlier
    result of the same command, which may be replaced)."""
    from pathlib import Path

    out = Path(path)
    if out.exists():
        if not out.is_dir():
            raise ValueError(f"{name} must be a directory. Found a file: {str(path)!r}.")
        if any(out.iterdir()) and not (replace_marker and (out / replace_marker).is_file()):
            raise ValueError(f"{name} must be a new or empty directory (nothing is overwritten). Found {str(path)!r}, which is not empty.")
    _check_parent(out, name, path, "inside")
    return out


def _check_parent(out, name: str, path, where: str) -> None:
    """``out``'s directory exists (else a ValueError: ``name`` must be ``where`` an existing
    directory) and can be written in (:func:`probe_writable`)."""
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise ValueError(f"{name} must be {where} an existing directory. Found {str(path)!r}.")
    probe_writable(parent, name, path)


def create_exclusive(parent, prefix: str, suffix: str = "", directory: bool = False):
    """A new file (opened for writing, mode 0600: returns (its descriptor, its path)) or
    ``directory`` (mode 0700: returns its path) in ``parent``, named ``prefix`` + 16 random hex
    digits + ``suffix`` and created exclusively (``O_EXCL``, ``mkdir``), as ``tempfile.mkstemp`` /
    ``mkdtemp`` do, without importing :mod:`tempfile` (and :mod:`random`) into ``noisysgd
    predict``'s start (benchmarks/cli_startup.py)."""
    for _ in range(100):
        path = os.path.join(os.fspath(parent), f"{prefix}{os.urandom(8).hex()}{suffix}")
        try:
            if directory:
                os.mkdir(path, 0o700)
                return path
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused name found", os.fspath(parent))


def probe_writable(parent, name: str, path) -> None:
    """Create and remove a temporary directory in ``parent``: permission bits do
    not tell (root, read-only or special file systems), trying does."""
    try:
        os.rmdir(create_exclusive(parent, ".noisysgd-probe.", directory=True))
    except OSError as exc:
        raise ValueError(
            f"{name} must be in a writable directory. Found {str(path)!r}: cannot write in "
            f"{str(parent)!r} ({exc.strerror or exc})."
        ) from None


def check_output_file(path, name: str) -> str:
    """``path`` (as a string, :func:`plain_path`) where its directory exists and is writable (nothing
    is created)."""
    if not os.fsdecode(os.fspath(path)):
        raise ValueError(f"{name} must be a file path. Found {path!r}.")
    out = plain_path(path)
    if os.path.isdir(out):
        raise ValueError(f"{name} must be a file path. Found a directory: {str(path)!r}.")
    _check_parent(out, name, path, "in")
    return out


#: The figure formats a plot may be written as (matplotlib picks the format from the suffix).
PLOT_FORMATS = (".png", ".pdf", ".svg")


def check_plot_suffix(path, name: str):
    """``path`` (a ``pathlib.Path``) if its suffix names a format :data:`PLOT_FORMATS` lists, else a
    ValueError."""
    from pathlib import Path

    out = Path(path)
    if out.suffix.lower() not in PLOT_FORMATS:
        raise ValueError(f"{name} must end in {', '.join(PLOT_FORMATS)} (the format is taken from the "
                         f"suffix). Found {str(path)!r}.")
    return out


def _fsync_dir(path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_directory(path, name: str = "out", *, replace_marker: str | None = None):
    """Yield a temporary directory next to ``path``; on success it is renamed
    to ``path`` (which must not exist or be empty — or hold ``replace_marker``,
    then the old directory is swapped out and removed), else it is removed.

    >>> import tempfile, os
    >>> base = tempfile.mkdtemp()
    >>> with atomic_directory(os.path.join(base, "run")) as tmp:
    ...     _ = (tmp / "a.txt").write_text("x")
    >>> sorted(os.listdir(base)), os.listdir(os.path.join(base, "run"))
    (['run'], ['a.txt'])
    >>> try:
    ...     with atomic_directory(os.path.join(base, "failed")) as tmp:
    ...         _ = (tmp / "a.txt").write_text("x"); raise RuntimeError("boom")
    ... except RuntimeError:
    ...     pass
    >>> sorted(os.listdir(base))
    ['run']
    """
    from pathlib import Path

    out = check_output_dir(path, name, replace_marker=replace_marker)
    parent = out.absolute().parent
    try:
        tmp = Path(create_exclusive(parent, f".{out.name}.", ".tmp", directory=True))
    except OSError as exc:
        raise ValueError(
            f"{name} must be in a writable directory. Found {str(path)!r}: {exc.strerror or exc}."
        ) from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # the private 0700 would outlive the rename
        yield tmp
        for f in tmp.iterdir():
            if f.is_file():
                with open(f, "rb") as handle:
                    os.fsync(handle.fileno())
        _fsync_dir(tmp)
        old = None
        if out.exists() and any(out.iterdir()):  # an earlier result (marker checked): swap it out
            old = Path(create_exclusive(parent, f".{out.name}.", ".old", directory=True))
            os.rename(out, old / "previous")
        elif out.exists():
            out.rmdir()  # empty (checked): replaced by the finished directory
        try:
            os.rename(tmp, out)
        except BaseException:
            if old is not None:
                os.rename(old / "previous", out)
            raise
        _fsync_dir(parent)
        if old is not None:
            import shutil

            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_json(path, data) -> None:
    """Write ``data`` as indented JSON (no NaN or infinity: they become errors)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(data, indent=2, allow_nan=False) + "\n")
