"""What the subcommands share: the parser class that reports mistakes in one line,
the flags of a run and of its accounting, the one-line warnings, and the
mapping from an error message to the flag a user typed.

Imported by ``noisysgd --help`` and by every command: nothing of the library at module
level (the run description is imported by the flags and the functions that use it).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import warnings
from typing import TYPE_CHECKING

from ..text import terminal_columns

if TYPE_CHECKING:
    from ..run import Run

__all__ = ["FLAGS", "UsageError", "Parser", "OneLineWarnings", "add_run_flags", "add_accounting_flags",
           "run_from_args", "progress_wanted", "check_out_dir", "flag_for", "one_line", "orders_arg",
           "epoch_range_arg", "RAW", "Formatter", "RawFormatter", "auxiliary", "write_outputs"]


class Formatter(argparse.HelpFormatter):
    """argparse's help formatter, its width taken as it takes it (the terminal's, less 2) by
    :func:`noisysgd.text.terminal_columns`, which does not import shutil."""

    def __init__(self, *args, **kwargs):
        if len(args) < 4 and kwargs.get("width") is None:
            kwargs["width"] = terminal_columns() - 2
        super().__init__(*args, **kwargs)


class RawFormatter(Formatter, argparse.RawDescriptionHelpFormatter):
    """:class:`Formatter` that keeps the description's and the examples' line breaks."""


#: The help formatter of every subcommand (examples keep their line breaks).
RAW = RawFormatter

#: Field names used in error messages → the flag a user typed.
FLAGS = {
    "n": "--n",
    "batch_size": "--batch-size",
    "steps": "--steps",
    "epochs": "--epochs",
    "learning_rate": "--lr",
    "noise_multiplier": "--noise-multiplier",
    "lipschitz": "--lipschitz",
    "smoothness": "--smoothness",
    "strong_convexity": "--strong-convexity",
    "diameter": "--diameter",
    "convex": "--convex",
    "lr_decay": "--lr-decay",
    "batching": "--batching",
    "adjacency": "--adjacency",
    "delta": "--delta",
    "analysis": "--analysis",
    "analyses": "--analysis",
    "orders": "--orders",
    "conversion": "--conversion",
    "out": "--out",
    "paper": "--paper",
    "epsilon": "--epsilon",
    "rel_tol": "--rel-tol",
    "include_unsound": "--include-unsound",
    "plot": "--plot",
    "initialization": "--initialization",
    "data": "DATA",
    "target": "--target",
    "feature_clip": "--feature-clip",
    "intercept_scaling": "--intercept-scaling",
    "clip_norm": "--clip-norm",
    "target_bound": "--target-bound",
    "l2": "--alpha",
    "loss": "--loss",
    "checkpoint": "--checkpoint",
    "checkpoint_every": "--checkpoint-every",
    "resume": "--resume",
    "secure_mode": "--secure-mode",
    "random_state": "--seed",
    "runs": "--runs",
    "calibration_runs": "--calibration-runs",
    "threshold": "--threshold",
    "confidence": "--confidence",
}


class UsageError(Exception):
    """A mistake in the command line: reported in one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # one line, no usage dump
        raise UsageError(f"{self.prog}: error: {message}")


def orders_arg(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers greater than 1, got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers greater than 1, got {text!r}")
    return values


def epoch_range_arg(text: str):
    from ..planning import parse_epochs

    try:
        return parse_epochs(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("epochs must be", "expected")) from None


def add_run_flags(p: argparse.ArgumentParser, *, noise: bool = True, length: bool = True,
                   lr_required: bool = True) -> None:
    from ..run import ADJACENCIES, BATCHING_SCHEMES, INITIALIZATIONS

    g = p.add_argument_group("the run")
    g.add_argument("--n", type=int, required=True, help="number of training examples (under --adjacency add-remove: the declared public size)")
    g.add_argument("--batch-size", type=int, help="batch size b (expected size for poisson; n for full)")
    if length:
        steps = g.add_mutually_exclusive_group(required=True)
        steps.add_argument("--steps", type=int, help="number of noisy gradient steps")
        steps.add_argument("--epochs", type=int,
                           help="number of epochs (steps = epochs x steps per epoch)")
    g.add_argument("--lr", type=float, required=lr_required,
                   help="step size (learning rate) eta, or eta_0 with --lr-decay"
                        + ("" if lr_required else " (needed by the hidden-state analyses, not by composition)"))
    g.add_argument(
        "--lr-decay",
        type=float,
        default=0.0,
        help="c in [0, 1): step sizes eta_t = eta_0 * (t+1)^-c (default 0: constant)",
    )
    if noise:
        g.add_argument(
            "--noise-multiplier",
            type=float,
            required=True,
            help="z: noise std z*L/b on the mean gradient (Opacus convention)",
        )
    g.add_argument("--lipschitz", type=float, required=True, help="L: per-example gradient norm bound")
    g.add_argument("--smoothness", type=float, help="M: smoothness of each loss (if known)")
    g.add_argument("--strong-convexity", type=float, default=0.0, help="m: strong convexity (default 0)")
    g.add_argument("--diameter", type=float, help="D: diameter of the constraint set (default: none)")
    g.add_argument(
        "--convex",
        action="store_true",
        help="every example's loss is convex (needed by the hidden-state analyses; implied by m > 0)",
    )
    g.add_argument("--batching", required=True, choices=BATCHING_SCHEMES, help="how batches are formed")
    g.add_argument("--adjacency", default="replace", choices=ADJACENCIES, help="default: replace")
    g.add_argument(
        "--initialization", default="fixed", choices=INITIALIZATIONS,
        help="start point: fixed (default), or gaussian = Proj(N(0, 2 sigma^2/m I)), which "
             "chourasia (and ryffel) assume",
    )


def accounting_options(args) -> dict:
    """The accountant's keywords from the flags of :func:`add_accounting_flags`."""
    return {"analyses": args.analysis, "orders": args.orders, "conversion": args.conversion,
            "include_unsound": args.include_unsound}


def add_accounting_flags(p: argparse.ArgumentParser) -> None:
    from ..accountant import BEST, DEFAULT_ANALYSES
    from ..analyses import ANALYSES
    from ..rdp import CONVERSIONS

    p.add_argument(
        "--analysis",
        action="append",
        choices=[BEST, *ANALYSES],
        help=(
            f"analysis to run (repeatable; default: {', '.join(DEFAULT_ANALYSES)} = every analysis, "
            "and the smallest sound epsilon among them and their order-wise minimum)"
        ),
    )
    p.add_argument("--orders", type=orders_arg, help="comma-separated Rényi orders (default: a built-in grid)")
    p.add_argument("--conversion", default="improved", choices=CONVERSIONS, help="RDP to (eps, delta)")
    p.add_argument(
        "--include-unsound",
        action="store_true",
        help="let analyses flagged not sound (e.g. ryffel) supply the best epsilon (off by default)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def run_from_args(args) -> Run:
    from ..run import Run

    common = dict(
        n=args.n,
        batch_size=args.batch_size,
        batching=args.batching,
        learning_rate=args.lr,
        noise_multiplier=getattr(args, "noise_multiplier", None),  # calibrate finds it
        lipschitz=args.lipschitz,
        smoothness=args.smoothness,
        strong_convexity=args.strong_convexity,
        diameter=args.diameter,
        convex=args.convex,
        adjacency=args.adjacency,
        lr_decay=args.lr_decay,
        initialization=args.initialization,
    )
    if not hasattr(args, "steps"):  # plan: the epochs are a range, steps are set per point
        return Run(**common)
    if args.epochs is not None:
        return Run.from_epochs(epochs=args.epochs, **common)
    return Run(steps=args.steps, **common)


def check_out_dir(text: str):
    """``--out`` as a path (a ``pathlib.Path``) that is, or can become, a writable directory (a
    temporary probe is created and removed; nothing else)."""
    from pathlib import Path

    from ..io import probe_writable

    out = Path(text)
    if out.exists():
        if not out.is_dir():
            raise ValueError(f"out must be a directory. Found a file: {text!r}.")
        probe_writable(out, "out", text)
        return out
    parent = out.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"out must be a directory path. Found {text!r}, under the file {str(parent)!r}.")
    probe_writable(parent, "out", text)
    return out


def progress_wanted(args) -> bool:
    """Progress bars on stderr: on a terminal, unless --quiet."""
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


class OneLineWarnings(contextlib.AbstractContextManager):
    """Every warning raised while a command runs, as one ``noisysgd: warning: ...``
    line on stderr, once: repeats (the same kind and text up to its numbers, e.g.
    one per noise level a calibration tries) are dropped."""

    def __enter__(self):
        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("always")
        seen: set = set()

        def show(message, category, filename, lineno, file=None, line=None):
            text = " ".join(str(message).split())
            key = (category, re.sub(r"[-+]?\d[\d.e+-]*", "#", text))
            if key not in seen:
                seen.add(key)
                print(f"noisysgd: warning: {text}", file=sys.stderr, flush=True)

        warnings.showwarning = show
        return self

    def __exit__(self, *exc):
        return self._catch.__exit__(*exc)


def add_categorical_flag(p: argparse.ArgumentParser) -> None:
    """``--categorical COL=a,b,c`` (repeatable): a column's categories, declared publicly."""
    p.add_argument("--categorical", action="append", metavar="COL=A,B,...",
                   help="a categorical feature column and its categories, declared publicly (repeat for each "
                        "column): one 0/1 column per category; a cell with another value is refused")


def categorical_arg(values) -> dict:
    """The ``--categorical`` flags as {column: [category, ...]} (a bad flag names itself)."""
    out: dict = {}
    for text in values or ():
        column, sep, cats = text.partition("=")
        column = column.strip()
        categories = [c.strip() for c in cats.split(",")] if sep else []
        if not column or not categories or any(not c for c in categories):
            raise ValueError(f"--categorical must be COL=A,B,... (a column and its categories). Found {text!r}.")
        if column in out:
            raise ValueError(f"--categorical must declare each column once. Found {column!r} twice.")
        out[column] = categories
    return out


def flag_for(message: str) -> str:
    match = re.match(r"(\w+) must", message)
    return FLAGS.get(match.group(1), "") if match else ""


def one_line(text: str) -> str:
    """An error message on one line, whatever the user typed into it."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def auxiliary(compute, *args) -> tuple[float | None, str | None]:
    """(``compute(*args)``, None), or (None, why not): for what a command prints beside its
    answer (the limit line): a refusal is reported as its reason and a numerical failure as
    'not computed', never a traceback."""
    try:
        return compute(*args), None
    except ValueError as exc:
        return None, str(exc)
    except ArithmeticError as exc:
        return None, f"not computed: {type(exc).__name__} in its numerics"


def write_outputs(out, model: dict, certificate: dict, metrics: dict) -> None:
    """``model.json``, ``certificate.json`` and ``metrics.json`` into the directory ``out``,
    all at once or not at all (``noisysgd train`` and ``noisysgd tune``)."""
    from ..io import atomic_directory, write_json

    with atomic_directory(out) as tmp:
        write_json(tmp / "model.json", model)
        write_json(tmp / "certificate.json", certificate)
        write_json(tmp / "metrics.json", metrics)
