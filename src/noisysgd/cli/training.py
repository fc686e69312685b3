"""What ``noisysgd train``'s one-process and data-parallel paths (and ``noisysgd tune``) share: the
flags checked and translated into the pipeline's declarations (:class:`noisysgd.pipeline.Declared`),
the loss of the labels, and the outputs written at the end (:func:`finish`)."""

from __future__ import annotations

import argparse
import math
import os

import numpy as np

from ..io import check_output_file, indicator_columns
from ..model import model_document
from ..pipeline import Declared, auto_intercept_scaling, classification_loss
from ..run import BATCHING_SCHEMES
from ..train import ClassWeighted, Huber, Squared, encode_labels
from ..train.checkpoint import delete_checkpoint
from .common import write_outputs

__all__ = ["task_loss", "class_weighted", "plain_label", "declared_classes", "learning_rate_flag", "or_auto",
           "int_or_auto", "float_or_auto", "feature_range_flag", "center_rule", "prior_rule", "declared", "flag_params",
           "add_schedule_flags", "check_schedule_flags", "check_flags", "recorded", "finish", "RELEASE"]


def task_loss(args, y):
    if args.task == "regression":
        if args.loss not in ("auto", "huber", "squared"):
            raise ValueError(f"loss must be huber or squared for --task regression. Found {args.loss!r}.")
        if y.dtype == object:
            raise ValueError("target must be numeric for --task regression. Found text labels.")
        return (Squared() if args.loss == "squared" else Huber(args.huber_delta)), y, None
    if args.loss in ("huber", "squared"):
        raise ValueError(f"loss must be logistic, softmax or ovr for classification. Found {args.loss!r}.")
    declared = declared_classes(args, y)
    if declared is None and np.unique(y).size < 2:
        raise ValueError(f"target must hold at least two classes for classification. Found 1 class: "
                         f"{plain_label(np.unique(y)[0])!r}.")
    classes, encoded, args.classes_source = encode_labels(y, declared, name="--classes", stacklevel=2)
    if args.loss == "logistic" and classes.size > 2:
        raise ValueError(
            f"loss must be softmax or ovr for {classes.size} classes (logistic is binary). Found 'logistic'."
        )
    multi = "ovr" if args.loss == "ovr" else "softmax"
    return class_weighted(args, y, classes, classification_loss(classes.size, multi)), encoded, classes


def class_weighted(args, y, classes, loss):
    """``loss`` weighted by ``--class-weight A=W,B=W`` (:meth:`ClassWeighted.from_dict`), or as it is."""
    text = getattr(args, "class_weight", None)
    if text is None:
        return loss
    given = {}
    for part in text.split(","):
        label, sep, value = part.partition("=")
        try:
            weight = float(value)
        except ValueError:
            weight = None
        if not sep or not label.strip() or weight is None or not (math.isfinite(weight) and weight > 0):
            raise ValueError(f"--class-weight must be LABEL=WEIGHT,... with positive weights. Found {text!r}.")
        key = label.strip()
        if y.dtype.kind in "fiub":
            try:
                key = float(key)
            except ValueError:
                raise ValueError(f"--class-weight must name numeric labels for a numeric target. Found "
                                 f"{label.strip()!r}.") from None
        given[key] = weight
    labels = [plain_label(c) for c in classes]
    try:
        return ClassWeighted.from_dict(loss, given, labels)
    except LookupError as unknown:
        raise ValueError(f"--class-weight must name classes among {labels}. Found {unknown.args[0]!r}.") from None


def plain_label(value):
    return value.item() if hasattr(value, "item") else value


def declared_classes(args, y):
    """``--classes A,B,...`` as labels of ``y``'s kind (numbers for a numeric target), or None."""
    text = getattr(args, "classes", None)
    if text is None:
        return None
    if getattr(args, "task", "classification") == "regression":
        raise ValueError(f"classes must not be given for --task regression. Found {text!r}.")
    labels = [t.strip() for t in text.split(",")]
    if any(not t for t in labels):
        raise ValueError(f"classes must be a comma-separated list of labels. Found {text!r}.")
    if y.dtype.kind in "fiub":
        try:
            return [float(t) for t in labels]
        except ValueError:
            raise ValueError(f"classes must be numbers for a numeric target. Found {text!r}.") from None
    return labels


def learning_rate_flag(text):
    if text in ("auto", "max"):
        return text
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"learning_rate must be 'auto', 'max' or a positive number. Found {text!r}.") from None


def or_auto(convert, what: str):
    """An argparse type: the word "auto", or ``convert(text)`` (else the message names ``what``)."""
    def parse(text):
        if text == "auto":
            return text
        try:
            return convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} or 'auto' was expected. Found {text!r}.") from None
    return parse


int_or_auto = or_auto(int, "a whole number")


float_or_auto = or_auto(float, "a number")


def feature_range_flag(args, d: int, epsilon, table=None):
    """--feature-range (repeatable) and --feature-range-file as the pipeline's declaration: None,
    "private", or public (low, high) arrays over the ``d`` columns trained on — ``table``'s
    (:class:`noisysgd.io.Table`; None: x0, x1, ...), where a category's 0/1 column lies in [0, 1]
    (given, public), or "auto" (no flag: the classifier's default with --epsilon, as the estimator's
    ``feature_range="auto"``).  ``LOW,HIGH``, ``private``, ``auto`` and ``none`` cover every column and come alone; ``COL=LOW:HIGH``
    (and each row of the file) bound one column, named as in the file's header, and every numeric
    column must then be bounded: a column left out is refused, never left unscaled."""
    values = args.feature_range
    values = [v.strip() for v in ([values] if isinstance(values, str) else values or ())]
    path = getattr(args, "feature_range_file", None)
    if not values and path is None:  # the classifier's default: the range query, then the decision
        return "auto" if getattr(args, "task", None) == "classification" and epsilon is not None else None
    names = list(table.feature_names) if table is not None else [f"x{j}" for j in range(d)]
    categorical = (table.categorical if table is not None else None) or {}
    inputs = list((table.input_columns if table is not None else None) or names)
    whole = [v for v in values if "=" not in v]
    if whole and (len(values) > 1 or path is not None):
        raise ValueError("--feature-range LOW,HIGH and --feature-range private cover every column: give one of them "
                         "alone, or COL=LOW:HIGH for every column (or --feature-range-file). Found "
                         + " ".join(f"--feature-range {v}" for v in values)
                         + (f" --feature-range-file {path}" if path is not None else "") + ".")
    if whole:
        return _whole_range(whole[0], d, epsilon, indicator_columns(inputs, categorical))
    given = [("--feature-range", repr(text), *_column_bound(text)) for text in values]
    if path is not None:
        given += _bounds_file(path)
    source = os.path.basename(table.path) if table is not None else "the data"
    bounds = {}
    for flag, shown, column, low, high in given:
        if column in categorical:
            raise ValueError(f"{flag} must not bound the categorical column {column!r}: its 0/1 columns lie in "
                             f"[0, 1], given automatically. Found {shown}.")
        if column not in inputs:
            raise ValueError(f"{flag} must name feature columns of {source}. Found {column!r} ({shown}); the "
                             "columns are " + ", ".join(map(repr, inputs[:20])) + (", ..." if len(inputs) > 20
                                                                                   else "."))
        if column in bounds:
            raise ValueError(f"{flag} must bound each column once. Found {column!r} twice ({shown}).")
        bounds[column] = (low, high)
    missing = [c for c in inputs if c not in categorical and c not in bounds]
    if missing:
        flag = "--feature-range-file" if not values else "--feature-range"
        raise ValueError(f"{flag} must bound every feature column once it bounds one (an unbounded column would "
                         "be neither scaled nor declared). Found none for " + ", ".join(map(repr, missing[:20]))
                         + (", ..." if len(missing) > 20 else "") + ": give COL=LOW:HIGH for each, or "
                         "--feature-range LOW,HIGH for every column.")
    low = [b for c in inputs for b in ([0.0] * len(categorical[c]) if c in categorical else [bounds[c][0]])]
    high = [b for c in inputs for b in ([1.0] * len(categorical[c]) if c in categorical else [bounds[c][1]])]
    return np.array(low), np.array(high)


def _whole_range(text: str, d: int, epsilon, indicators):
    """``--feature-range private``, ``auto``, ``none`` or ``LOW,HIGH`` (every column; a category's 0/1
    column in [0, 1])."""
    if text == "none":
        return None
    if text == "auto":
        return "auto" if epsilon is not None else None
    if text == "private":
        if epsilon is None:
            raise ValueError("--feature-range private spends a share of --epsilon; it cannot be combined with "
                             "--noise-multiplier.")
        return "private"
    try:
        low, high = (float(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"--feature-range must be LOW,HIGH (two numbers), 'private', 'auto' or 'none'. Found {text!r} (or "
                         "COL=LOW:HIGH, repeated, for bounds of each column).") from None
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ValueError(f"--feature-range must have finite LOW < HIGH. Found {text!r}.")
    indicators = indicators if indicators.size == d else np.zeros(d, dtype=bool)
    return np.where(indicators, 0.0, low), np.where(indicators, 1.0, high)


def _column_bound(text: str) -> tuple:
    """``--feature-range COL=LOW:HIGH`` as (column, low, high), checked."""
    column, _, bounds = text.rpartition("=")
    low, sep, high = bounds.partition(":")
    if not column.strip() or not sep:
        raise ValueError(f"--feature-range must be COL=LOW:HIGH (a column and two numbers) to bound one column. "
                         f"Found {text!r}.")
    return (column.strip(), *_bound_pair(low, high, "--feature-range", repr(text)))


def _bound_pair(low: str, high: str, flag: str, shown: str) -> tuple[float, float]:
    """(low, high) read as finite numbers with low < high, else an error naming ``flag`` and ``shown``."""
    try:
        low, high = float(low), float(high)
    except ValueError:
        raise ValueError(f"{flag} must give two numbers LOW and HIGH. Found {shown}.") from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"{flag} must have finite LOW < HIGH. Found {shown}.")
    return low, high


def _bounds_file(path) -> list[tuple]:
    """--feature-range-file: a CSV file with a header naming the columns name, low and high, and one
    row per feature column; (flag, where, column, low, high) for each row."""
    import csv

    name = os.path.basename(str(path))
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = [r for r in csv.reader(handle) if any(cell.strip() for cell in r)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"--feature-range-file must be a readable UTF-8 CSV file. Found {str(path)!r}: "
                         f"{getattr(exc, 'strerror', None) or exc}.") from None
    header = [h.strip().lower() for h in rows[0]] if rows else []
    if not all(h in header for h in ("name", "low", "high")) or len(rows) < 2:
        raise ValueError(f"--feature-range-file must be a CSV file with a header row name,low,high and a row per "
                         f"feature column. Found {name} with {'the header ' + ','.join(rows[0]) if rows else 'nothing'}"
                         f"{'' if len(rows) > 1 else ' and no rows'}.")
    at = [header.index(h) for h in ("name", "low", "high")]
    out = []
    for r, row in enumerate(rows[1:], start=2):
        where = f"row {r} of {name}"
        if len(row) != len(header):
            raise ValueError(f"--feature-range-file must have {len(header)} cells in every row. Found {len(row)} in "
                             f"{where}.")
        column, low, high = (row[i].strip() for i in at)
        if not column:
            raise ValueError(f"--feature-range-file must name a column in every row. Found an empty name in {where}.")
        shown = f"{f'{column},{low},{high}'!r} in {where}"
        out.append(("--feature-range-file", shown, column, *_bound_pair(low, high, "--feature-range-file", shown)))
    return out


def center_rule(args, epsilon) -> str | None:
    """--center resolved: "private", or None (auto: private for classification with --epsilon)."""
    if args.center == "private":
        if epsilon is None:
            raise ValueError("--center private spends a share of --epsilon; it cannot be combined with "
                             "--noise-multiplier (use --center none).")
        return "private"
    if args.center == "auto" and args.task == "classification" and epsilon is not None:
        return "private"
    return None


def declared(args, d: int, epsilon, *, queries: bool = True, table=None) -> Declared:
    """``noisysgd train``'s flags as the pipeline's :class:`~noisysgd.pipeline.Declared` (checked
    here, where the messages name the flags); ``queries=False``: no private preprocessing (a
    data-parallel rank, which holds its shard only); ``table``: the data's columns, which
    ``--feature-range COL=LOW:HIGH`` names (:func:`feature_range_flag`)."""
    check_schedule_flags(args, epsilon, args.delta)  # a bad flag is refused before any private query
    p = flag_params(args, epsilon, args.delta)
    return Declared.from_params(
        p, task=args.task, intercept_auto=args.intercept_auto, target_bound=args.target_bound,
        public_n=args.public_n, analyses=args.analysis or "best", release=RELEASE[args.average],
        initialization=args.initialization,
        feature_range=feature_range_flag(args, d, epsilon, table) if queries else None,
        center=center_rule(args, epsilon) if queries else None,
        prior=queries and prior_rule(args, epsilon),
        indicators=_indicators(table))


def _indicators(table):
    """The table's declared categories' 0/1 columns (a mask; None without any)."""
    categorical = (table.categorical if table is not None else None) or {}
    if not categorical:
        return None
    return indicator_columns(list(table.input_columns or table.feature_names), categorical)


def prior_rule(args, epsilon) -> bool:
    """--prior resolved: the class prior and the release check for classification with --epsilon and
    no --class-weight (:mod:`noisysgd.prior`)."""
    return (getattr(args, "prior", "none") == "auto" and args.task == "classification" and epsilon is not None
            and getattr(args, "class_weight", None) is None)


def flag_params(args, epsilon, delta) -> dict:
    """The flags as :func:`noisysgd.config.configure` reads an estimator's parameters."""
    p = {"epochs": args.epochs, "batch_size": args.batch_size, "batching": args.batching, "alpha": args.alpha,
         "epsilon": epsilon, "delta": delta, "noise_multiplier": args.noise_multiplier,
         "learning_rate": learning_rate_flag(args.lr), "feature_clip": args.feature_clip,
         "clip_norm": args.clip_norm, "diameter": args.diameter, "adjacency": args.adjacency,
         "intercept_scaling": args.intercept_scaling}
    if p["batching"] not in ("auto", "full") and p["batch_size"] == "auto" and "auto" not in (
            p["epochs"], p["alpha"]):
        p["batch_size"] = 256  # a minibatch scheme with nothing else left to choose: the former default
    return p


def add_schedule_flags(p, *, epochs_help: str, batch_help: str, lr_help: str) -> None:
    """--epochs, --batch-size, --batching, --lr and --alpha, each "auto" by default (noisysgd train and
    tune: the automatic configuration chooses them together; ``epochs_help`` ends its help)."""
    p.add_argument("--epochs", type=int_or_auto, default="auto",
                   help="passes over the data, or auto (default: chosen with --batch-size, --batching and --alpha "
                        + epochs_help)
    p.add_argument("--batch-size", type=int_or_auto, default="auto", help=batch_help)
    p.add_argument("--batching", default="auto", choices=BATCHING_SCHEMES + ("auto",), help="default auto")
    p.add_argument("--lr", default="auto", help=lr_help)
    p.add_argument("--alpha", type=float_or_auto, default="auto", help="L2 regularization lambda (default auto)")


#: ``--average``'s values as fit_private's ``release`` (None: resolved by check_flags).
RELEASE = {"yes": "tail-average", "no": "last", "auto": "auto"}


def check_schedule_flags(args, epsilon, delta) -> None:
    """The schedule flags' own checks (the messages name them)."""
    from ..rdp import validate_delta
    from ..run import checked_integer, checked_real

    for name in ("epochs", "batch_size"):
        if getattr(args, name) != "auto":
            checked_integer(name, getattr(args, name))
    if args.alpha != "auto":
        checked_real("l2", args.alpha, positive=False)
    if epsilon is not None:
        checked_real("epsilon", epsilon)
    if args.noise_multiplier is not None:
        checked_real("noise_multiplier", args.noise_multiplier)
    if delta is not None:
        validate_delta(delta)
    checked_real("feature_clip", args.feature_clip)


def check_flags(args) -> None:
    """The checkpoint and secure-mode flags, before anything is read; resolves
    ``--intercept-scaling auto`` (R/4 for classification, as the estimator; 1 for regression)."""
    from ..run import checked_real

    checked_real("feature_clip", args.feature_clip)
    if args.average is None:  # as the estimators: auto for the classifier, the last iterate for the regressor
        args.average = "auto" if args.task == "classification" else "no"
    if args.average == "yes" and args.batching == "auto":
        args.batching = "poisson"  # composition certifies an average: DP-SGD's batches
    if args.holdout is not None and args.adjacency == "add-remove":
        raise ValueError("--holdout needs --adjacency replace: its split sizes come from the number of rows, so "
                         "under add-remove a neighbour's training set can be this one with a row replaced; split "
                         "the file beforehand and score with noisysgd predict.")
    args.intercept_auto = args.intercept_scaling == "auto"
    if args.intercept_auto:
        args.intercept_scaling = auto_intercept_scaling(args.feature_clip, args.task)
    checked_real("intercept_scaling", args.intercept_scaling)
    if args.secure_mode and args.seed is not None:
        raise ValueError(
            "--seed cannot be combined with --secure-mode: the noise, the batches and the start then come "
            "from the operating system's CSPRNG, and a seed would make them reproducible by whoever knows it."
        )
    if args.checkpoint is None:
        if args.resume:
            raise ValueError("--resume needs --checkpoint PATH (the checkpoint of the run to continue).")
        if args.checkpoint_every is not None:
            raise ValueError("--checkpoint-every needs --checkpoint PATH.")
        return
    if args.checkpoint_every is not None and args.checkpoint_every < 1:
        raise ValueError(f"--checkpoint-every must be a whole number of epochs >= 1. Found {args.checkpoint_every}.")
    check_output_file(args.checkpoint, "checkpoint")
    if os.path.exists(args.checkpoint) and not args.resume:
        raise ValueError(
            f"--checkpoint: {args.checkpoint!r} already exists (a run in progress, or a finished one that "
            "was kept): add --resume to continue the run it holds, or delete it to start a new run."
        )


def recorded(args):
    """The preprocessing query recorded in the checkpoint --resume continues (its answer is reused)."""
    if not getattr(args, "resume", False):
        return None
    from ..preprocessing import recorded_query

    return recorded_query(args.checkpoint)


def finish(args, out, fit, model: dict, *, source, n, quality, seconds, extra=None) -> int:
    """Write model.json, certificate.json and metrics.json into ``out`` at once, and report.
    ``model``: what :func:`noisysgd.model.model_document` needs besides the fit (the loss,
    classes, target, feature names, and the feature map: ranges, center)."""
    result, loss = fit.result, model["loss"]
    classes = model.get("classes")
    if classes is not None:
        fit.certificate["classes"] = {"source": args.classes_source, "classes": [c.item() if hasattr(c, "item")
                                                                                 else c for c in classes]}
    if isinstance(loss, ClassWeighted):
        fit.certificate["class_weight"] = loss.record([plain_label(c) for c in classes])
    model = {"feature_clip": args.feature_clip, **model}  # (the training's clip: after centering, R_c)
    model = model_document(
        task=args.task, classes_source=getattr(args, "classes_source", None),
        coef=result.coef, version=fit.certificate["noisysgd_version"], intercept_scaling=result.intercept_scaling,
        **model)
    metrics = {
        "noise_multiplier": fit.noise_multiplier,
        "epsilon": fit.epsilon,
        "delta": fit.report.delta,
        "best_analysis": fit.report.best.analysis,
        "steps": result.steps,
        "epochs": fit.run.epochs,
        "n": n,
        "wall_seconds": seconds,
        "secure_mode": args.secure_mode,
        "checkpoint": result.enforced.get("checkpoint"),
        **(extra or {}),
        "not_private": {
            **quality,
            "note": ("computed on the training data: not covered by the certificate; do not publish "
                     "it as if it were"),
        },
    }
    write_outputs(out, model, fit.certificate, metrics)
    if args.checkpoint is not None:  # the outputs are on disk: the secret state goes
        delete_checkpoint(args.checkpoint)
    if args.json:
        import json

        print(json.dumps({**metrics, "out": str(out)}, indent=2, allow_nan=False))
        return 0
    if fit.run.adjacency == "add-remove":  # n is the declared size; the rows trained on are not recorded
        print(f"trained on {source} ({args.task}, {loss!r}), {result.steps} steps at the rate b/n of the "
              f"declared public n = {n}")
    else:
        print(f"trained on {n} examples from {source} ({args.task}, {loss!r}), {result.steps} steps")
    ledger = result.enforced.get("checkpoint")
    if ledger and ledger["resumed_at_step"] is not None:
        print(f"resumed from the checkpoint at step {ledger['resumed_at_step']} (sessions: "
              + ", ".join(f"{a}-{b}" for a, b in ledger["sessions"]) + "); the noise was not calibrated again")
    from ..text import fill

    print(fill(f"privacy: {fit.certificate['certificate']['guarantee']}"))
    print(f"noise multiplier z = {fit.noise_multiplier:.6g} ({fit.report.best.analysis})")
    if "released" in result.enforced or "release" in result.enforced:  # an average, or --average auto's choice
        print(fill(f"released: {fit.certificate['certificate']['released']}"))
    config = fit.certificate.get("config") or {}
    if config.get("auto"):
        run = fit.run
        chosen = config.get("chosen", {})
        alpha = run.strong_convexity if config.get("clip") else chosen.get("alpha", run.strong_convexity)
        clip = f", gradients clipped at {run.lipschitz:.4g} (--clip-norm auto)" if config.get("clip") else ""
        regime = f"{chosen['regime']} regime, " if chosen.get("regime") else ""
        source = ("public quantities and the private curvature estimate" if (config.get("assumptions") or {}).get(
            "curvature_ratio") is not None else "public quantities only")
        print(fill(f"configuration (auto, from {source}): {regime}batching={run.batching}, batch "
                   f"size {run.batch_size or n}, {run.epochs:g} epochs, learning rate {run.learning_rate:.4g}, "
                   f"alpha={alpha:g}{clip}; intercept scaling {fit.result.intercept_scaling:g}"))
    pre = fit.certificate.get("preprocessing") or {}
    ranges = next((part for part in pre.get("parts", [pre]) if isinstance(part, dict) and "decision" in part), None)
    if ranges is not None:
        print(fill(f"feature ranges (auto): {ranges['decision']}"))
    if pre.get("center") == "private":
        print(fill("centering: the rows minus a private mean (in the privacy line), then clipped to "
                   f"{pre['feature_clip_after_centering']:.4g}" if pre.get("centered") else
                   "centering: the private mean did not stand out of its noise; the rows were not centered"))
    check = fit.certificate.get("release_check")
    if check is not None:
        print(fill(f"release check: {check['released']} (noisy difference {check['noisy_difference']:+.1f} rows, "
                   f"noise std {check['noise_std']:.3g}; in the privacy line); the run started at the private "
                   "class prior"))
    if args.secure_mode:
        print("randomness: the operating system's CSPRNG (noise, batches, start; --secure-mode)")
    name, value = next(iter(quality.items()))
    balanced = (f", balanced accuracy = {quality['train_balanced_accuracy']:.4f}"
                if "train_balanced_accuracy" in quality else "")
    print(f"{name.replace('_', ' ')} = {value:.4f}{balanced} (on the training data; not private)")
    held = (extra or {}).get("holdout")
    if held is not None:
        name = "accuracy" if "accuracy" in held else "rmse"
        balanced = f", balanced accuracy = {held['balanced_accuracy']:.4f}" if "balanced_accuracy" in held else ""
        print(f"hold-out {name} = {held[name]:.4f}{balanced} ({held['rows']} rows split off before training and "
              "not used in it; not covered by the certificate)")
    print(f"wrote {out}/model.json, certificate.json, metrics.json")
    if args.checkpoint is not None:
        print(f"deleted the checkpoint {args.checkpoint} (it held secret training state)")
    return 0
