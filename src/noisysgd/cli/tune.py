"""``noisysgd tune DATA``: private hyperparameter selection, certified as a whole.

Runs :class:`noisysgd.tuning.NoisySGDClassifierCV`: a random number of
candidate runs (each a random point of the ``--grid``, trained on a random
split and scored on the rest by a noisy count), the noise of every run
calibrated so that the *whole tuning* meets ``--epsilon``/``--delta`` under
the ``--selection`` rule (Papernot & Steinke 2022 Theorems 2 and 6, or Liu &
Talwar 2019 Theorem 3.4).  The output directory (``--out``) receives, all at
once or not at all:

* ``model.json`` — the selected model (as ``noisysgd train`` writes it);
* ``certificate.json`` — the certificate of the whole tuning (selection rule,
  theorem, K drawn, every candidate's run and noise, score mechanism, ε);
* ``metrics.json`` — the selected candidate, its noisy validation accuracy
  (private: covered by the certificate), and the training accuracy marked
  *not private*.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from ..io import check_output_dir, load_table
from ..model import model_document
from .training import add_schedule_flags, declared_classes, float_or_auto, learning_rate_flag
from .common import add_categorical_flag, categorical_arg, write_outputs

__all__ = ["add_arguments", "cmd_tune", "parse_grid"]

EXAMPLES = """\
examples:
  # tune the step size and the regularization; (1, 1e-5)-DP for the whole tuning
  noisysgd tune data.csv --target label --epsilon 1 --delta 1e-5 --feature-clip 2 \\
      --grid learning_rate=auto,max --grid alpha=0.01,0.001 --out tuned/

  # the truncated negative binomial rule (eta = 0: logarithmic), 10 runs expected
  noisysgd tune data.csv --target label --grid epochs=20,50,100 --selection negative-binomial \\
      --eta 0 --expected-runs 10 --out tuned/
"""

#: NoisySGDClassifier parameters a --grid may vary, and how to read their values.
_GRID_TYPES = {
    "epochs": int, "batch_size": int, "alpha": float, "feature_clip": float, "clip_norm": float,
    "diameter": float, "learning_rate": "lr", "batching": str, "multi_class": str,
    "initialization": str,
}


def parse_grid(items) -> dict:
    """``["learning_rate=auto,max", "alpha=0.01,0.001"]`` → a parameter grid dict."""
    grid: dict = {}
    for item in items or []:
        name, sep, values = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not values.strip():
            raise ValueError(f"grid must be NAME=VALUE[,VALUE...]. Found {item!r}.")
        if name not in _GRID_TYPES:
            raise ValueError(f"grid parameter must be one of {', '.join(_GRID_TYPES)}. Found {name!r}.")
        if name in grid:
            raise ValueError(f"grid names {name!r} twice. Found {item!r}.")
        kind = _GRID_TYPES[name]
        parsed = []
        for text in values.split(","):
            text = text.strip()
            try:
                if kind == "lr":
                    parsed.append(text if text in ("auto", "max") else float(text))
                elif kind is str:
                    parsed.append(text)
                else:
                    parsed.append(kind(text))
            except ValueError:
                raise ValueError(f"grid value {text!r} of {name} is not a valid {getattr(kind, '__name__', 'number')}. "
                                 f"Found {item!r}.") from None
        grid[name] = parsed
    if not grid:
        raise ValueError("grid must name at least one parameter (--grid NAME=V1,V2). Found none.")
    return grid


HELP = "private hyperparameter selection; the certificate covers the whole tuning"
DESCRIPTION = (
    "Tune a private linear classifier on DATA with a private selection rule whose cost is "
    "accounted: a random number of runs, each a random --grid point trained on a random split "
    "and scored by a noisy count on the rest; the best is released. The noise of every run is "
    "calibrated so that the whole tuning meets --epsilon/--delta. Writes model.json, "
    "certificate.json and metrics.json into --out (new or empty; all at once or nothing)."
)


def add_arguments(p) -> None:
    p.add_argument("data", metavar="DATA", help="a .csv (with a header row), .npz or .parquet file")
    p.add_argument("--target", required=True, help="the column (or NPZ array) to predict")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (new or empty)")
    p.add_argument("--grid", action="append", metavar="NAME=V1,V2",
                   help="candidate values of one parameter (repeatable): " + ", ".join(_GRID_TYPES))
    p.add_argument("--selection", default="poisson", choices=("poisson", "negative-binomial", "liu-talwar"))
    p.add_argument("--expected-runs", type=float, default=5.0, help="E[K], the expected number of runs")
    p.add_argument("--eta", type=float, default=1.0,
                   help="shape of the truncated negative binomial (1 geometric, 0 logarithmic)")
    p.add_argument("--validation-fraction", type=float, default=0.2)
    p.add_argument("--score-noise", default="auto",
                   help="std of the noise on the count of correct validation predictions (default auto)")
    p.add_argument("--epsilon", type=float, default=1.0, help="epsilon of the whole tuning (default 1)")
    p.add_argument("--delta", type=float, help="delta in (0, 1) (default min(1e-5, 1/(10 n)))")
    add_categorical_flag(p)
    p.add_argument("--classes", metavar="A,B,...",
                   help="the labels, declared publicly (a row with another label is refused); without it they "
                        "are taken from the data, which the certificate does not cover (a warning says so)")
    p.add_argument("--loss", choices=("auto", "softmax", "ovr"), default="auto",
                   help="multiclass loss (two classes: logistic)")
    add_schedule_flags(p, epochs_help="(and --clip-norm) per candidate as noisysgd train chooses them, from public "
                                      "quantities only: the training part's size, d, the classes, the tuning's "
                                      "epsilon and delta)",
                       batch_help="default auto", lr_help="step size, auto or max")
    p.add_argument("--feature-clip", type=float, default=1.0)
    p.add_argument("--intercept-scaling", type=float_or_auto, default="auto", metavar="S|auto",
                   help="the bias coordinate of every clipped feature vector (auto = feature clip / 4)")
    p.add_argument("--clip-norm", type=float_or_auto, default="auto", metavar="L|auto",
                   help="per-example gradient clipping norm; auto: none, except a candidate the search chose for "
                        "amplified composition, clipped at 0.3 of the natural Lipschitz constant")
    p.add_argument("--diameter", type=float)
    p.add_argument("--seed", type=int, help="random seed (default: fresh entropy)")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON")
    p.set_defaults(handler=cmd_tune)


def _score_noise(text):
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"score_noise must be 'auto' or a positive number. Found {text!r}.") from None


def cmd_tune(args) -> int:
    from ..estimators import NoisySGDClassifier
    from ..tuning import NoisySGDClassifierCV, NoRunsDrawn

    out = check_output_dir(args.out)  # before reading or computing anything
    grid = parse_grid(args.grid)
    table = load_table(args.data, target=args.target, categorical=categorical_arg(args.categorical))
    base = NoisySGDClassifier(
        epochs=args.epochs, batch_size=args.batch_size, batching=args.batching, learning_rate=learning_rate_flag(args.lr),
        alpha=args.alpha, feature_clip=args.feature_clip, clip_norm=args.clip_norm,
        intercept_scaling=args.intercept_scaling,
        diameter=args.diameter, multi_class="ovr" if args.loss == "ovr" else "softmax",
        classes=declared_classes(args, table.y),
    )
    cv = NoisySGDClassifierCV(
        grid, estimator=base, epsilon=args.epsilon, delta=args.delta, selection=args.selection,
        expected_runs=args.expected_runs, eta=args.eta, validation_fraction=args.validation_fraction,
        score_noise=_score_noise(args.score_noise), random_state=args.seed,
    )
    start = time.perf_counter()
    try:
        cv.fit(table.X, table.y)
    except NoRunsDrawn as exc:
        print(f"noisysgd tune: error: {exc}", file=sys.stderr)
        return 1
    seconds = time.perf_counter() - start
    fit = cv.best_fit_
    model = model_document(
        task="classification", loss=fit.result.loss, target=table.target, feature_names=table.feature_names,
        encoding=(table.categorical, table.input_columns),
        classes=cv.classes_, feature_clip=fit.result.feature_clip, coef=fit.result.coef,
        version=fit.certificate["noisysgd_version"], intercept_scaling=fit.result.intercept_scaling,
        classes_source=cv.privacy_report_["classes"]["source"],
    )
    metrics = {
        "epsilon": cv.epsilon_,
        "delta": cv.delta_,
        "selection": args.selection,
        "expected_runs": args.expected_runs,
        "runs_drawn": cv.n_runs_,
        "best_params": cv.privacy_report_["selected"]["params"],
        "noisy_validation_accuracy": cv.best_score_,
        "noise_multipliers": cv.noise_multipliers_,
        "score_noise": cv.score_noise_,
        "n": int(table.X.shape[0]),
        "wall_seconds": seconds,
        "not_private": {
            "train_accuracy": float(np.mean(cv.predict(table.X) == table.y)),
            "note": ("computed on all the data: not covered by the certificate; do not publish it as if "
                     "it were"),
        },
    }
    write_outputs(out, model, cv.privacy_report_, metrics)
    if args.json:
        import json

        print(json.dumps({**metrics, "out": str(out)}, indent=2, allow_nan=False))
        return 0
    print(f"tuned on {metrics['n']} examples from {table.path}: {cv.n_runs_} runs drawn "
          f"({args.selection}, E[K] = {args.expected_runs:g}) over {len(cv.noise_multipliers_)} candidates")
    print(f"privacy: {cv.privacy_report_['certificate']['guarantee']}")
    print(f"selected: {metrics['best_params']} (noisy validation accuracy {cv.best_score_:.4f}, private)")
    print(f"wrote {out}/model.json, certificate.json, metrics.json")
    return 0
