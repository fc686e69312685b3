"""``noisysgd train DATA``: a private model, its certificate and metrics, written atomically.

The output directory (``--out``) receives, all at once or not at all:

* ``model.json`` — the coefficients in a portable form, with the feature map
  (features clipped to norm R, a bias coordinate appended) and how to predict;
* ``certificate.json`` — the privacy certificate (run, adjacency, δ, ε per
  analysis, the assumptions the bound rests on, what the trainer enforced);
* ``metrics.json`` — noise, ε, steps, wall time, and the training accuracy or
  error, marked *not private* (they are computed on the training data and the
  certificate does not cover them).

``--checkpoint PATH`` keeps the run's state in PATH (every
``--checkpoint-every`` epochs, written atomically); after an interruption the
same command with ``--resume`` continues the same run exactly (the noise is
not calibrated again; a checkpoint of another run or other data is refused,
naming what differs) and PATH is deleted once the outputs are written.  A
checkpoint holds a hidden iterate, which the certificate assumes is never
released: it is as secret as the data.  ``--secure-mode`` draws the noise,
the batches and the start from the operating system's CSPRNG (no ``--seed``).

Data-parallel training (:mod:`noisysgd.train.distributed`): ``--workers K``
spawns K local processes joined by gloo on 127.0.0.1; under ``torchrun``
(the environment variables ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``) every
process torchrun starts is one rank.  DATA may then be a directory of
``.npz``/``.parquet`` shards, each rank reading only its own; the run, its
calibration and its certificate are those of the single-process run on the
whole data set, and rank 0 alone writes the outputs (atomically).
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np

from ..io import check_output_dir, encoding_record, load_table
from ..train.diagnostics import (balanced_accuracy, check_rows, dominant_columns, dominant_columns_message, mean_dominant, mixed_scales, remedy,
                                 near_chance, near_chance_message)
from ..pipeline import fit_declared
from ..private_fit import Execution
from .common import add_categorical_flag, categorical_arg
from .train_workers import add_engine_flag
from .training import (add_schedule_flags, check_flags, declared, finish, float_or_auto, learning_rate_flag, recorded,
                       task_loss)

__all__ = ["add_arguments", "cmd_train"]

EXAMPLES = """\
examples:
  # logistic regression on a CSV file, (1, 1e-5)-DP for the released model
  noisysgd train data.csv --target label --epsilon 1 --delta 1e-5 --feature-clip 2 --out model/

  # Huber regression on an NPZ file (arrays X and y) with a fixed noise multiplier, quietly
  noisysgd train data.npz --target y --task regression --noise-multiplier 5 --out fit/ --quiet

  # a long run that may be interrupted: checkpoint every 5 epochs; run the same command with
  # --resume after an interruption (the checkpoint is secret; it is deleted at the end)
  noisysgd train data.csv --target label --epochs 500 --checkpoint run.ckpt --checkpoint-every 5 \\
      --resume --out model/

  # a text column one-hot encoded with its declared categories, and public bounds of each numeric column
  noisysgd train data.csv --target label --categorical region=north,south,east,west \\
      --feature-range age=0:120 --feature-range income=0:250000 --out model/

  # bounds of each numeric column from a file (header name,low,high; a row per column)
  noisysgd train data.csv --target label --feature-range-file bounds.csv --out model/

  # noise, batches and start from the operating system's CSPRNG (no --seed)
  noisysgd train data.csv --target label --secure-mode --out model/

  # data-parallel on 4 local processes (gloo), a directory of NPZ shards, each read by one rank
  noisysgd train shards/ --target y --workers 4 --seed 0 --out model/

  # the same under torchrun (one rank per process it starts; NCCL with --backend nccl on GPUs)
  torchrun --nproc-per-node 4 -m noisysgd train shards/ --target y --seed 0 --out model/
"""


HELP = "train a private linear model on a CSV/NPZ/Parquet file; write model, certificate, metrics"
DESCRIPTION = (
    "Calibrate the noise of Noisy-SGD to a privacy target under the best sound analysis, train "
    "exactly that run on DATA, and write model.json, certificate.json and metrics.json into "
    "--out (a new or empty directory, written all at once: a failed run leaves nothing)."
)


def add_arguments(p) -> None:
    p.add_argument("data", metavar="DATA",
                   help="a .csv (with a header row), .npz or .parquet file; with --workers or torchrun "
                        "also a directory of .npz/.parquet shards (rows in file-name order)")
    p.add_argument("--target", required=True, help="the column (or NPZ array) to predict")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (new or empty)")
    p.add_argument("--task", choices=("classification", "regression"), default="classification")
    add_categorical_flag(p)
    p.add_argument("--class-weight", metavar="A=W,...",
                   help="classification: class weights, declared publicly (classes not named weigh 1); normalized "
                        "so the largest is 1, which keeps every bound")
    p.add_argument("--classes", metavar="A,B,...",
                   help="classification: the labels, declared publicly (the model's outputs; a row with another "
                        "label is refused). Without it the labels are taken from the data, which the certificate "
                        "does not cover (a warning says so)")
    p.add_argument("--loss", choices=("auto", "logistic", "softmax", "ovr", "huber", "squared"),
                   default="auto",
                   help="auto: logistic (2 classes), softmax (more), huber (regression)")
    privacy = p.add_mutually_exclusive_group()
    privacy.add_argument("--epsilon", type=float, help="privacy target epsilon (default 1)")
    privacy.add_argument("--noise-multiplier", type=float,
                         help="train with this noise multiplier and report epsilon instead")
    p.add_argument("--delta", type=float, help="delta in (0, 1) (default min(1e-5, 1/(10 n)))")
    add_schedule_flags(p, epochs_help="from public quantities: n, d, classes, epsilon, delta, the loss constants; "
                                      "and on data large enough a private curvature estimate, charged to the "
                                      "certificate)",
                       batch_help="capped at n; ignored for full (default auto)",
                       lr_help="step size, auto = 1/(2 smoothness), or max = 0.98*2/(alpha + smoothness)")
    p.add_argument("--feature-range", action="append", metavar="LOW,HIGH|COL=LOW:HIGH|private|auto|none",
                   help="public bounds of the features (no privacy cost), the ranges saved with the model: LOW,HIGH "
                        "for every column; or COL=LOW:HIGH, repeated, for each numeric column named as in the "
                        "header (all of them: a column left out is refused; a --categorical column's 0/1 columns "
                        "get [0, 1]); or 'private': ranges from a differentially private query spending 10%% of "
                        "epsilon and delta (the certificate covers model and ranges); 'auto' (the default for "
                        "classification with --epsilon): the same query, the rows kept as given only where no column "
                        "stands out of its noise or three or more do, the largest within a factor 2 of their lower median, scaled by it "
                        "otherwise (noisysgd.preprocessing.scaling_decision); 'none': "
                        "the rows as given")
    p.add_argument("--feature-range-file", metavar="CSV",
                   help="the bounds of each column from a CSV file with the header name,low,high (a row per numeric "
                        "column; as --feature-range COL=LOW:HIGH, with which it may be combined)")
    p.add_argument("--center", default="auto", choices=("auto", "private", "none"),
                   help="private: subtract a differentially private mean of the rows (clipped to R) and clip the "
                        "centered rows to an R_c estimated from it (the mean query gets 0.3 of the target's GDP mu "
                        "and a tenth of delta; the certificate covers model and mean); auto (default): private for "
                        "classification with --epsilon in one process, none otherwise (and with --workers or "
                        "torchrun, which do not center yet); the mean is saved with the model")
    p.add_argument("--prior", default="auto", choices=("auto", "none"),
                   help="auto (default): for classification with --epsilon and no --class-weight, count the classes "
                        "privately (0.1 of the target's GDP mu) and start the run at their prior, then check privately "
                        "(0.2 of mu) that the model gets more training rows right than the majority class, releasing "
                        "the prior instead where it does not; none: neither (noisysgd.prior)")
    p.add_argument("--holdout", type=float, metavar="FRACTION",
                   help="keep this fraction of the rows out of training (a seeded random split, drawn before "
                        "training; the certificate covers the training rows) and report the model's accuracy "
                        "(or RMSE) on them")
    p.add_argument("--feature-clip", type=float, default=1.0,
                   help="R: features scaled to norm <= R (fix it from the feature range, not the data)")
    p.add_argument("--intercept-scaling", type=float_or_auto, default="auto", metavar="S|auto",
                   help="s: the bias coordinate appended to every clipped feature vector (the gradient bound "
                        "grows with sqrt(R^2 + s^2)); auto = R/4 for classification, 1 for regression")
    p.add_argument("--clip-norm", type=clip_norm_flag, default="auto", metavar="L|auto|adaptive",
                   help="per-example gradient clipping norm; auto (classification): none, except a run the search "
                        "chose for amplified composition, clipped at 0.3 of the natural Lipschitz constant; adaptive: "
                        "that run's clip starts there and follows the median gradient norm, privately counted "
                        "(Andrew et al. 2021; noisysgd.run.AdaptiveClip)")
    p.add_argument("--diameter", type=float, help="project the iterates onto a ball of this diameter")
    p.add_argument("--target-bound", type=float, help="regression: clip labels to [-B, B]")
    p.add_argument("--huber-delta", type=float, default=1.0)
    p.add_argument("--analysis", action="append", help="analyses to calibrate with (default: best)")
    p.add_argument("--adjacency", default="replace", choices=("replace", "add-remove"),
                   help="replace (default; n public); add-remove (poisson batches; needs --public-n)")
    p.add_argument("--average", nargs="?", const="yes", choices=("auto", "yes", "no"), default=None,
                   help="yes (the flag alone): release the mean of the second half of the iterates (certified by "
                        "composition only; batching auto becomes poisson); auto (the default for classification, "
                        "as the estimator): that mean where composition certifies the run and the iterates have "
                        "settled, else the last iterate; no (the default for regression): the last iterate")
    p.add_argument("--public-n", type=int, metavar="N",
                   help="add-remove: the dataset size declared public; the sampling rate b/N, the steps and "
                        "the default delta come from it, the data may hold any number of rows")
    p.add_argument("--initialization", default="fixed", choices=("fixed", "gaussian"))
    p.add_argument("--seed", type=int, help="random seed (default: fresh entropy; not with --secure-mode)")
    p.add_argument("--secure-mode", action="store_true",
                   help="draw the noise, the batches and the start from the operating system's CSPRNG "
                        "(os.urandom) instead of a seeded generator; floating-point noise is still not "
                        "exactly Gaussian and timing is not hardened")
    p.add_argument("--checkpoint", metavar="PATH",
                   help="keep the run's state in PATH (written atomically) so that --resume can continue "
                        "it after an interruption; deleted once the outputs are written. SECRET: it holds "
                        "a hidden iterate, which the certificate assumes is never released - keep it as "
                        "secret as the training data")
    p.add_argument("--checkpoint-every", type=int, metavar="EPOCHS",
                   help="epochs between checkpoints (default 1)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run held in --checkpoint (exactly, without calibrating again; "
                        "refused if it is another run or other data); start it if there is no file yet")
    p.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    dist = p.add_argument_group("data-parallel training (torch.distributed)")
    dist.add_argument("--workers", type=int, metavar="K",
                      help="spawn K local processes (gloo on 127.0.0.1) that train the same run data-parallel; "
                           "under torchrun, leave it out: each process torchrun starts is one rank")
    dist.add_argument("--backend", default="gloo", choices=("gloo", "nccl"),
                      help="torch.distributed backend under torchrun (gloo: CPU; nccl: one GPU per rank)")
    dist.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                      help="a collective waiting longer than this stops the job (a dead or stuck rank)")
    add_engine_flag(dist)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON")
    p.set_defaults(handler=cmd_train)


class _Progress:
    """A progress bar on a terminal's stderr (tqdm when installed), updated once per 1% of the steps."""

    def __init__(self, quiet: bool):
        self.quiet = quiet or not sys.stderr.isatty()  # no bar in logs and pipes
        self.bar = None
        self.every = 1

    def __call__(self, step: int, total: int) -> None:
        if self.quiet:
            return
        if self.bar is None:
            self.every = max(1, total // 100)
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, unit="step", file=sys.stderr, leave=False)
            except ImportError:
                self.bar = _TextBar(total)
        if step % self.every == 0 or step == total:
            self.bar.update(step - self.bar.n)
        if step == total:
            self.bar.close()


class _TextBar:
    def __init__(self, total: int):
        self.total, self.n = total, 0

    def update(self, k: int) -> None:
        self.n += k
        width = 30
        done = int(width * self.n / self.total)
        sys.stderr.write(f"\rtraining [{'#' * done}{'.' * (width - done)}] {self.n}/{self.total} steps")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\r" + " " * 70 + "\r")
        sys.stderr.flush()












#: A memory-mapped input at least this large gets a hint when a flag copies its rows into memory.
_LAZY_HINT_BYTES = 1 << 30




















def _split_holdout(args, n: int):
    """(training rows, held-out rows) for --holdout: a uniformly random split drawn from
    --seed (fresh entropy without one), before and independently of training."""
    f = args.holdout
    if not (0 < f < 1):
        raise ValueError(f"--holdout must be a fraction in (0, 1). Found {f}.")
    k = int(round(f * n))
    if k < 1 or n - k < 2:
        raise ValueError(f"--holdout {f} leaves {k} held-out and {n - k} training rows of {n}: "
                         "both need at least one (training at least two).")
    seed = None if args.secure_mode else (None if args.seed is None else [args.seed, 0x401D])
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[k:]), np.sort(perm[:k])


def _take_holdout(X, y, train_rows, held):
    """(training X, training y, (held-out X, held-out y)) for ``--holdout``: the k held-out rows
    copied out, and the training rows, in their order, as a view of the first n − k rows of X
    where X is the reader's own writable array (a parsed CSV, a Parquet table's scratch map):
    each training row moved forward over rows already read, a block at a time (the indices
    increase, so train_rows[j] ≥ j: a block's sources lie at or after its destinations and after
    every earlier block's), so no copy of the training rows is formed.  A read-only
    X (a memory-mapped ``.npy``/``.npz``) is copied, as the one-line hint says."""
    from ..train.rows import block_rows

    holdout = (X[held], y[held])
    if not X.flags.writeable:
        return X[train_rows], y[train_rows], holdout
    m = train_rows.size
    moved = np.flatnonzero(train_rows != np.arange(m))  # the rows before the first held-out one stay
    step = block_rows(X.shape[1])
    for j0 in range(int(moved[0]) if moved.size else m, m, step):
        j1 = min(m, j0 + step)
        X[j0:j1] = X[train_rows[j0:j1]]  # (the right side is gathered before it is written)
    return X[:m], y[train_rows], holdout


def _quality(task, pred, y, classes) -> float:
    if task == "regression":
        return float(np.sqrt(np.mean((pred - y) ** 2)))
    hits = (pred == (2 * y - 1)) if classes.size == 2 else (pred == y)
    return float(np.mean(hits))


def _truth(y, classes):
    """The labels in the coding of ``result.predict`` (±1 for two classes, else indices)."""
    return (2 * y - 1) if classes.size == 2 else y


def _warn_if_near_chance(pred, y, classes, advice: str) -> bool:
    """One warning line when the model is barely better than predicting one class: never a
    silent majority-class model (a statistic of the training data, not private), with the one
    remedy ``advice`` (:func:`noisysgd.train.diagnostics.remedy`).  True when it warned."""
    found = near_chance(_truth(y, classes), pred)
    if found is not None:
        k = classes.size
        found["label"] = (classes[(int(found["label"]) + 1) // 2] if k == 2 else classes[int(found["label"])])
        found["label"] = found["label"].item() if hasattr(found["label"], "item") else found["label"]
        warnings.warn(near_chance_message(found, "", advice.replace("raise epsilon", "raise --epsilon")),
                      UserWarning, stacklevel=2)
    return found is not None




def clip_norm_flag(text: str):
    """--clip-norm: a number, auto or adaptive."""
    return "adaptive" if text.strip() == "adaptive" else float_or_auto(text)


def cmd_train(args) -> int:
    from .train_workers import cmd_train_distributed, torchrun_env

    env = torchrun_env()
    if args.workers is not None or env is not None:
        if args.feature_range_file is not None:
            raise ValueError("--feature-range-file is not available for data-parallel training (--workers, "
                             "torchrun) yet: scale the shards beforehand with bounds you know.")
        return cmd_train_distributed(args, env)
    out = check_output_dir(args.out)  # before reading or computing anything
    check_flags(args)
    table = load_table(args.data, target=args.target, categorical=categorical_arg(args.categorical))
    with warnings.catch_warnings(record=True) as labels_warning:  # issued once training ran (one error line)
        warnings.simplefilter("always")
        loss, y, classes = task_loss(args, table.y)
    X = table.X
    ranged = [v for v in (args.feature_range or ()) if v.strip() != "none"] or args.feature_range_file
    copying = [flag for flag, value in (("--holdout", args.holdout if not X.flags.writeable else None),
                                        ("--feature-range", ranged or None)) if value is not None]
    if isinstance(X, np.memmap) and X.nbytes >= _LAZY_HINT_BYTES and copying:
        # (the engine itself reads the rows a batch at a time: noisysgd.train.rows)
        verb = "copies" if len(copying) == 1 else "copy"
        warnings.warn(f"data: X is memory-mapped ({X.nbytes / 2**30:.1f} GiB) but {' and '.join(copying)} {verb} "
                      "its rows into memory; without them the rows are read a batch at a time", UserWarning,
                      stacklevel=2)
    holdout = None
    if args.holdout is not None:
        X, y, holdout = _take_holdout(X, y, *_split_holdout(args, X.shape[0]))
    epsilon = None if args.noise_multiplier is not None else (1.0 if args.epsilon is None else args.epsilon)
    decl = declared(args, X.shape[1], epsilon, table=table)
    learning_rate_flag(args.lr)
    # raw columns on large scales (statistics of the training rows, not private), said after training
    dominant = None
    start = time.perf_counter()
    out_fit = fit_declared(X, y, loss, decl, Execution(
        random_state=args.seed, dtype=np.dtype(args.dtype), progress=_Progress(args.quiet),
        secure_mode=args.secure_mode, checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every,
        resume=args.resume, keep_checkpoint=True),  # the checkpoint until the outputs are written (below)
        names=_names(table, X.shape[1]), recorded=recorded(args))
    seconds = time.perf_counter() - start
    mixed = None
    if out_fit.feature_map.ranges is None:  # the rows were trained as given (no bounds, or "auto" kept them)
        # (the private mean's finding first: post-processing of a charged answer; else the rows' own)
        dominant = mean_dominant(out_fit.fit.certificate) or dominant_columns(X[check_rows(X.shape[0])])
        mixed = mixed_scales(X[check_rows(X.shape[0])])
    for w in [*labels_warning, *out_fit.deferred]:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    fit, fmap, X = out_fit.fit, out_fit.feature_map, out_fit.rows
    if holdout is not None:
        holdout = (fmap(holdout[0]), holdout[1])
    result = fit.result
    metric = "train_rmse" if args.task == "regression" else "train_accuracy"
    pred = result.predict(X)
    quality = {metric: _quality(args.task, pred, y, classes)}
    kept = any(v.strip() == "none" for v in (args.feature_range or ())) or epsilon is None  # (the user's choice)
    found = (dominant or mixed) if kept else None  # (dominant: the private mean's finding first)
    flag = "--feature-range COL=LOW:HIGH, or --feature-range-file"
    advice = remedy(found, flag=flag, names=_names(table, X.shape[1]))
    near, released_prior = False, not (fit.certificate.get("release_check") or {}).get("kept_model", True)
    if args.task == "classification":
        quality["train_balanced_accuracy"] = balanced_accuracy(_truth(y, classes), pred)
        if not released_prior:  # (else its own warning said it)
            near = _warn_if_near_chance(pred, y, classes, advice)
    if dominant is not None and not near and not released_prior:  # one line: the near-chance or the release
        short = remedy(found, flag=flag, names=_names(table, X.shape[1]), why=False)  # check's names its remedy
        warnings.warn(dominant_columns_message(dominant, "", args.feature_clip, short, _names(table, X.shape[1])),
                      UserWarning, stacklevel=2)
    extra = {}
    if holdout is not None:
        name = "rmse" if args.task == "regression" else "accuracy"
        held_pred = result.predict(holdout[0])
        extra["holdout"] = {
            name: _quality(args.task, held_pred, holdout[1], classes),
            **({"balanced_accuracy": balanced_accuracy(_truth(holdout[1], classes), held_pred)}
               if name == "accuracy" else {}),
            "rows": int(holdout[0].shape[0]),
            "fraction": args.holdout,
            "note": ("rows split off at random before training and not used in it (the certificate's n is "
                     "the training rows); the score is computed on them, so publishing it releases "
                     "information about those rows that the certificate does not cover"),
        }
    if table.categorical:  # declared, so free: the certificate says what was encoded (as the estimators')
        fit.certificate["encoding"] = encoding_record(table.categorical, table.input_columns)
    if out_fit.query is not None:  # the certificate covers the model and the queries (fit_private's certify)
        eps_total, delta_total = fit.total
        extra.update(epsilon=eps_total, delta=delta_total, epsilon_training=fit.epsilon)
    model = dict(loss=loss, classes=classes, target=table.target, feature_names=table.feature_names,
                 encoding=(table.categorical, table.input_columns), feature_clip=out_fit.feature_clip,
                 feature_range=fmap.ranges, center=fmap.center, center_clip=fmap.clip,
                 feature_range_kind=fmap.ranges_kind)
    n = fit.certificate["certificate"]["data"]["n"]
    return finish(args, out, fit, model, source=table.path, n=n, quality=quality, seconds=seconds, extra=extra)




def _names(table, d: int):
    """The table's feature names when there is one per column of X (for the warnings), else None."""
    names = getattr(table, "feature_names", None)
    return list(names) if names is not None and len(names) == d else None


