"""``noisysgd predict MODEL DATA --out FILE``: predictions of a trained model, written atomically.

MODEL is the output directory of ``noisysgd train`` / ``noisysgd tune`` (or
its ``model.json``); DATA a CSV, NPZ or Parquet file.  Feature columns are
matched to the model's by name (CSV/Parquet; extra columns such as the
target are ignored) or by position (NPZ array ``X``).  With ``--target``,
the predictions are also scored against that column and the score is
reported as an evaluation on DATA: it says nothing private unless DATA is
public or held out, and it is not covered by the model's certificate (a
score on private data is itself a release).
"""

from __future__ import annotations

import os

import numpy as np

from ..io import check_output_file, create_exclusive, load_table
from ..model import load_model

__all__ = ["add_arguments", "cmd_predict"]

EXAMPLES = """\
examples:
  # train, then predict on new rows (the columns are matched by name; the label column is ignored)
  noisysgd train train.csv --target label --out model/
  noisysgd predict model/ new.csv --out predictions.csv

  # class probabilities too, and the accuracy on a labelled hold-out file
  noisysgd predict model/ test.csv --target label --proba --out predictions.csv
"""


HELP = "predictions of a model written by train/tune on a CSV/NPZ/Parquet file"
DESCRIPTION = (
    "Read a model written by `noisysgd train` or `noisysgd tune`, predict every row of DATA "
    "and write the predictions as CSV to --out (written all at once)."
)


def add_arguments(p) -> None:
    p.add_argument("model", metavar="MODEL", help="the output directory of noisysgd train/tune, or its model.json")
    p.add_argument("data", metavar="DATA", help="a .csv (with a header row), .npz or .parquet file")
    p.add_argument("--out", required=True, metavar="FILE", help="CSV file for the predictions (replaced atomically)")
    p.add_argument("--target", help="a label column of DATA: also report accuracy (or RMSE) on DATA")
    p.add_argument("--proba", action="store_true", help="also write class probabilities (classification)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=cmd_predict)


def _features(model, table) -> np.ndarray:
    """DATA's feature matrix in the model's column order."""
    names = list(table.feature_names)
    wanted = list(model.feature_names)
    if names == wanted:
        return table.X
    positional = all(n == f"x{i}" for i, n in enumerate(names))  # NPZ: no column names
    if positional:
        if table.X.shape[1] != len(wanted):
            raise ValueError(f"data must have {len(wanted)} feature columns, as the model. Found "
                             f"{table.X.shape[1]} in {table.path}.")
        return table.X
    missing = [w for w in wanted if w not in names]
    if missing:
        shown = ", ".join(repr(m) for m in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise ValueError(f"data must have the model's feature columns. Found {table.path} without {shown}.")
    return table.X[:, [names.index(w) for w in wanted]]


def _write_csv(path: str, header: list[str], columns: list) -> None:
    text = _plain_csv_text(header, columns)
    fd, tmp = create_exclusive(os.path.dirname(os.path.abspath(path)), ".noisysgd-predict.", ".csv")
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            if text is not None:
                f.write(text)
            else:
                import csv  # (here: cells that need quoting, or are not text)

                w = csv.writer(f, lineterminator="\n")
                w.writerow(header)
                w.writerows(zip(*columns))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _plain_csv_text(header: list, columns: list) -> str | None:
    """What ``csv.writer(f, lineterminator="\\n")`` writes of the row ``header`` and the rows
    ``zip(*columns)``, where every cell is non-empty printable ASCII text with no comma or quote
    (written as it is: nothing to quote); else None (the csv module writes them).  Predictions are
    such cells (numbers, most class labels), and writing them so keeps :mod:`csv` out of
    ``noisysgd predict``'s start (~0.5 ms)."""
    for cells in (header, *columns):
        try:
            text = "".join(cells)
        except TypeError:  # a cell that is not text (the csv module writes str() of it)
            return None
        if not (text.isascii() and text.isprintable()) or "," in text or '"' in text or not all(cells):
            return None
    rows = columns[0] if len(columns) == 1 else map(",".join, zip(*columns))
    return "\n".join([",".join(header), *rows]) + "\n"


def _cell(value):
    if isinstance(value, (float, np.floating)):
        return repr(float(value)) if not float(value).is_integer() else str(int(value))
    return value


def cmd_predict(args) -> int:
    out = check_output_file(args.out, "out")  # before reading anything
    model = load_model(args.model)
    if args.target is not None and args.target in (model.input_columns or model.feature_names):
        raise ValueError(f"target must not be one of the model's features. Found {args.target!r}.")
    if args.proba and model.task != "classification":
        raise ValueError("--proba needs a classification model. Found a regression model.")
    named = not all(n == f"x{i}" for i, n in enumerate(model.feature_names))  # else positional (NPZ)
    if model.categorical:  # the columns as read, one-hot encoded with the categories the model declared
        table = load_table(args.data, target=args.target, features=model.input_columns,
                           categorical=model.categorical)
    else:
        table = load_table(args.data, target=args.target, features=model.feature_names if named else None)
    X = _features(model, table)
    pred = model.predict(X)
    values = pred.tolist()
    text = {v: _cell(v) for v in set(values)} if model.task == "classification" else None  # a few classes
    header, columns = ["prediction"], [[text[v] for v in values] if text else [_cell(v) for v in values]]
    if args.proba:
        P = model.predict_proba(X)
        header += [f"p_{c}" for c in model.classes]
        columns += [[repr(float(v)) for v in P[:, j]] for j in range(P.shape[1])]
    summary = {"rows": int(X.shape[0]), "out": str(out), "model": model.path}
    if args.target is not None:
        summary.update(_evaluate(model, pred, table.y, args.target))
    _write_csv(out, header, columns)
    if args.json:
        import json

        print(json.dumps(summary, indent=2, allow_nan=False))
        return 0
    print(f"predicted {summary['rows']} rows of {table.path} with {model!r}")
    if "accuracy" in summary:
        print(f"accuracy on {table.path} = {summary['accuracy']:.4f}, balanced accuracy = "
              f"{summary['balanced_accuracy']:.4f} ({summary['rows']} rows; "
              "an evaluation on DATA, not covered by the certificate)")
    elif "rmse" in summary:
        print(f"RMSE on {table.path} = {summary['rmse']:.4g} ({summary['rows']} rows; "
              "an evaluation on DATA, not covered by the certificate)")
    print(f"wrote {out}")
    return 0


def _evaluate(model, pred, y, target: str) -> dict:
    note = "an evaluation on DATA: not covered by the model's certificate"
    if model.task == "regression":
        if y.dtype == object:
            raise ValueError(f"target must be numeric for a regression model. Found text labels in {target!r}.")
        return {"rmse": float(np.sqrt(np.mean((pred - y.astype(float)) ** 2))), "note": note}
    known = set(model.classes)
    unknown = [v for v in np.unique(y) if _plain(v) not in known]
    if unknown:
        raise ValueError(f"target must hold the model's classes {model.classes!r}. Found {_plain(unknown[0])!r} "
                         f"in {target!r}.")
    hits = np.array([_plain(a) == _plain(b) for a, b in zip(pred, y)])
    truth = np.array([_plain(v) for v in y], dtype=object)
    balanced = float(np.mean([np.mean(hits[truth == c]) for c in {_plain(v) for v in y}]))
    return {"accuracy": float(np.mean(hits)), "balanced_accuracy": balanced, "note": note}


def _plain(v):
    v = v.item() if isinstance(v, np.generic) else v
    return float(v) if isinstance(v, int) and not isinstance(v, bool) else v
