"""The ``noisysgd`` command line: ``build_parser()`` and ``main(argv) -> int``.

User mistakes exit with status 2 and one line on stderr naming the flag; they
never print a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np

from . import __version__
from .accountant import BEST, DEFAULT_ANALYSES, calibrate, epsilon
from .analyses import ANALYSES
from .io import check_output_file
from .plots import PAPERS
from .rdp import CONVERSIONS
from .run import ADJACENCIES, BATCHING_SCHEMES, INITIALIZATIONS, Run

__all__ = ["build_parser", "main"]

#: Field names used in error messages → the flag a user typed.
_FLAGS = {
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

_EPSILON_EXAMPLES = """\
examples:
  # DP-SGD on 60,000 examples, Poisson batches of 256, 10 epochs
  noisysgd epsilon --n 60000 --batch-size 256 --epochs 10 --lr 0.5 \\
      --noise-multiplier 1.0 --lipschitz 1.0 --batching poisson --delta 1e-5

  # hidden state: convex 1-smooth losses on a ball of diameter 10, fixed-size batches
  noisysgd epsilon --n 60000 --batch-size 256 --epochs 500 --lr 0.5 \
      --noise-multiplier 1.0 --lipschitz 1.0 --smoothness 1.0 --diameter 10 --convex \
      --batching sample --delta 1e-5 --analysis altschuler-talwar --analysis composition

  # the same under add/remove adjacency, RDP composition only, as JSON
  noisysgd epsilon --n 60000 --batch-size 256 --epochs 10 --lr 0.5 \\
      --noise-multiplier 1.0 --lipschitz 1.0 --batching poisson --delta 1e-5 \\
      --adjacency add-remove --analysis composition --json
"""


_CALIBRATE_EXAMPLES = """\
examples:
  # noise for (1, 1e-5)-DP after 100 shuffled epochs of a regularized logistic regression
  noisysgd calibrate --n 60000 --batch-size 256 --epochs 100 --lr 0.05 --lipschitz 1 \\
      --smoothness 1.25 --strong-convexity 0.01 --batching shuffle --epsilon 1 --delta 1e-5

  # the same with composition only, as JSON
  noisysgd calibrate --n 60000 --batch-size 256 --epochs 100 --lr 0.05 --lipschitz 1 \\
      --batching poisson --epsilon 1 --delta 1e-5 --analysis composition --json
"""


_PLAN_EXAMPLES = """\
examples:
  # regularized logistic regression, shuffled fixed-order batches: where does hidden state pay?
  noisysgd plan --n 60000 --batch-size 256 --lr 0.05 --noise-multiplier 4 --lipschitz 1 \\
      --smoothness 1.25 --strong-convexity 0.01 --batching cyclic --delta 1e-5 --epochs 1:1000

  # how many epochs does (2, 1e-5) allow?  with the curves as a PNG, and as JSON
  noisysgd plan --n 60000 --batch-size 256 --lr 0.05 --noise-multiplier 4 --lipschitz 1 \\
      --smoothness 1.25 --strong-convexity 0.01 --batching cyclic --delta 1e-5 \\
      --epochs 1:1000:log40 --epsilon 2 --plot curve.png --json
"""


_FIGURES_EXAMPLES = """\
examples:
  # Altschuler & Talwar's Figures 1, 2(a), 2(b) and the cross-over figure, as PNG files
  noisysgd figures --paper altschuler-talwar --out figures/

  # every paper's figures (needs matplotlib: pip install 'noisysgd[plot]')
  noisysgd figures --paper all --out figures/
"""


class UsageError(Exception):
    """A mistake in the command line: reported in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise UsageError(f"{self.prog}: error: {message}")


def _orders(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers greater than 1, got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers greater than 1, got {text!r}")
    return values


def _epoch_range(text: str):
    from .planning import parse_epochs

    try:
        return parse_epochs(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("epochs must be", "expected")) from None


def _add_run_flags(p: argparse.ArgumentParser, *, noise: bool = True, length: bool = True) -> None:
    g = p.add_argument_group("the run")
    g.add_argument("--n", type=int, required=True, help="number of training examples")
    g.add_argument("--batch-size", type=int, help="batch size b (expected size for poisson; n for full)")
    if length:
        steps = g.add_mutually_exclusive_group(required=True)
        steps.add_argument("--steps", type=int, help="number of noisy gradient steps")
        steps.add_argument("--epochs", type=int,
                           help="number of epochs (steps = epochs x steps per epoch)")
    g.add_argument("--lr", type=float, required=True, help="step size (learning rate) eta, or eta_0 with --lr-decay")
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


def _add_accounting_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--analysis",
        action="append",
        choices=[BEST, *ANALYSES],
        help=(
            f"analysis to run (repeatable; default: {', '.join(DEFAULT_ANALYSES)} = every analysis, "
            "and the smallest sound epsilon among them and their order-wise minimum)"
        ),
    )
    p.add_argument("--orders", type=_orders, help="comma-separated Rényi orders (default: a built-in grid)")
    p.add_argument("--conversion", default="improved", choices=CONVERSIONS, help="RDP to (eps, delta)")
    p.add_argument(
        "--include-unsound",
        action="store_true",
        help="let analyses flagged not sound (e.g. ryffel) supply the best epsilon (off by default)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="noisysgd",
        description="Noisy-SGD with hidden-state differential privacy accounting.",
    )
    parser.add_argument("--version", action="version", version=f"noisysgd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    p = sub.add_parser(
        "epsilon",
        help="privacy (epsilon) of a Noisy-SGD run under each analysis",
        description="Report epsilon for delta under each requested analysis, and the best sound one.",
        epilog=_EPSILON_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_flags(p)
    p.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    _add_accounting_flags(p)
    p.set_defaults(handler=_cmd_epsilon)
    c = sub.add_parser(
        "calibrate",
        help="the smallest noise multiplier that meets a target (epsilon, delta)",
        description=(
            "Find the smallest noise multiplier z for which the run meets (--epsilon, --delta) under "
            "the best sound analysis (or the ones named with --analysis). Bisection in log z; the z "
            "printed was evaluated and meets the target, and z/(1 + rel-tol) did not."
        ),
        epilog=_CALIBRATE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_flags(c, noise=False)
    c.add_argument("--epsilon", type=float, required=True, help="target epsilon > 0")
    c.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    c.add_argument("--rel-tol", type=float, default=1e-4, help="relative tolerance on z (default 1e-4)")
    _add_accounting_flags(c)
    c.set_defaults(handler=_cmd_calibrate)
    from .audit.cli import add_audit_parser
    from .demo import add_demo_parser
    from .train_cli import add_train_parser

    add_demo_parser(sub, argparse.RawDescriptionHelpFormatter)
    add_audit_parser(sub, argparse.RawDescriptionHelpFormatter)
    add_train_parser(sub, _Parser, argparse.RawDescriptionHelpFormatter)
    pl = sub.add_parser(
        "plan",
        help="epsilon versus epochs under every analysis; cross-overs, plateaus, epoch budgets",
        description=(
            "Evaluate every analysis (or those named with --analysis) on the run stopped after each "
            "of --epochs, and report where each hidden-state bound overtakes composition, the value "
            "each convergent bound plateaus at, and, with --epsilon, how many epochs the budget "
            "allows (\"unlimited\" when the best sound bound plateaus below it)."
        ),
        epilog=_PLAN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_flags(pl, length=False)
    pl.add_argument("--epochs", type=_epoch_range, default="1:100",
                    help="epochs to evaluate: A:B, A:B:STEP, A:B:logN or a list (default 1:100)")
    pl.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    pl.add_argument("--epsilon", type=float,
                    help="a budget: also report the largest number of epochs it allows")
    pl.add_argument("--plot", metavar="PNG", help="also draw the curves into this PNG file")
    _add_accounting_flags(pl)
    pl.set_defaults(handler=_cmd_plan)
    f = sub.add_parser(
        "figures",
        help="draw a paper's figures from the library's bounds (PNG files)",
        description=(
            "Recompute a paper's figures from the bounds implemented here and write them as PNG "
            "files into --out (created if missing); prints the paths written."
        ),
        epilog=_FIGURES_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    f.add_argument(
        "--paper",
        default="all",
        choices=[*PAPERS, "all"],
        help="whose figures (default: all)",
    )
    f.add_argument("--out", required=True, metavar="DIR", help="directory to write the PNG files into")
    f.set_defaults(handler=_cmd_figures)
    return parser


def _run_from_args(args) -> Run:
    common = dict(
        n=args.n,
        batch_size=args.batch_size,
        batching=args.batching,
        learning_rate=args.lr,
        # calibrate has no --noise-multiplier: a placeholder, replaced while searching
        noise_multiplier=args.noise_multiplier if hasattr(args, "noise_multiplier") else 1.0,
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
        return Run(steps=1, **common)
    if args.epochs is not None:
        return Run.from_epochs(epochs=args.epochs, **common)
    return Run(steps=args.steps, **common)


def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return f"{value:.{digits}g}" if abs(value) >= 1e4 or abs(value) < 1e-3 else f"{value:.{digits}f}"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cmd_epsilon(args) -> int:
    run = _run_from_args(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = epsilon(
            run, delta=args.delta, analyses=args.analysis, orders=args.orders,
            conversion=args.conversion, include_unsound=args.include_unsound,
        )
    for message in dict.fromkeys(str(w.message) for w in caught):
        print(f"noisysgd: warning: {message}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, allow_nan=False))
        return 0
    r = run
    print(f"delta = {report.delta:g}, adjacency = {r.adjacency}, conversion = {args.conversion}")
    print(
        f"run: n = {r.n}, batch size = {r.batch_size} ({r.batching}, q = {r.sampling_rate:.4g}), "
        f"{r.steps} steps ({r.epochs:.4g} epochs), z = {r.noise_multiplier:g}, "
        f"L = {r.lipschitz:g}, lr = {r.learning_rate:g}"
        + (f" * (t+1)^-{r.lr_decay:g}" if r.lr_decay else "")
    )
    print()
    rows = [["analysis", "applies", "sound", "epsilon", "order", "note"]]
    footnotes: list[str] = []
    for name, res in report.results.items():
        excluded = "" if report.include_unsound else ", excluded from the best bound"
        note = res.reason or ""
        if not res.sound:
            footnotes.append(f"[{len(footnotes) + 1}] {name} is not sound: {res.not_sound_reason}")
            note = f"NOT SOUND{excluded} [{len(footnotes)}]" + (f"; {note}" if note else "")
        if res.applies and res.mu is not None:
            note = f"mu = {_fmt(res.mu)} (Gaussian DP, exact conversion)" + (f"; {note}" if note else "")
        rows.append(
            [
                name,
                "yes" if res.applies else "no",
                "yes" if res.sound else "NO",
                _fmt(res.epsilon),
                _fmt(res.order, 3) if res.order is not None else "-",
                note,
            ]
        )
    if report.combined is not None:
        comb = report.combined
        rows.append([
            comb.analysis, "yes", "yes" if comb.sound else "NO", _fmt(comb.epsilon),
            _fmt(comb.order, 3) if comb.order is not None else "-",
            "smallest RDP of the above at each order"
            + (f" ({comb.details['at_optimal_order']['analysis']} at the optimal order)"
               if "at_optimal_order" in comb.details else ""),
        ])
    print(_table(rows))
    for line in footnotes:
        print(textwrap.fill(line, width=100, subsequent_indent="    "))
    print()
    best = report.best
    if best is None:
        print("no sound analysis applies to this run")
    elif best.sound:
        print(f"best sound epsilon: {_fmt(best.epsilon)} ({best.analysis})")
    else:
        print(
            f"best epsilon: {_fmt(best.epsilon)} ({best.analysis}) -- NOT SOUND, not a guarantee "
            "(--include-unsound; see the note above)"
        )
    return 0


def _cmd_calibrate(args) -> int:
    run = _run_from_args(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal = calibrate(
            run, epsilon=args.epsilon, delta=args.delta, analyses=args.analysis, orders=args.orders,
            conversion=args.conversion, include_unsound=args.include_unsound, rel_tol=args.rel_tol,
        )
    for message in dict.fromkeys(str(w.message) for w in caught):
        if "edge of the order grid" not in message:  # expected while z is being searched
            print(f"noisysgd: warning: {message}", file=sys.stderr)
    if args.json:
        print(json.dumps(cal.to_dict(), indent=2, allow_nan=False))
        return 0
    best = cal.report.best
    print(f"target: epsilon = {cal.target_epsilon:g}, delta = {cal.delta:g}, adjacency = {run.adjacency}")
    print(
        f"run: n = {run.n}, batch size = {run.batch_size} ({run.batching}), {run.steps} steps "
        f"({run.epochs:.4g} epochs), L = {run.lipschitz:g}, lr = {run.max_learning_rate:g}"
    )
    print(f"noise multiplier z = {cal.noise_multiplier:.6g} (relative tolerance {cal.rel_tol:g})")
    print(
        f"epsilon at that z: {_fmt(cal.epsilon)} ({best.analysis}"
        + ("" if best.sound else ", NOT SOUND") + f"); {cal.evaluations} evaluations"
    )
    return 0


def _pick_rows(epochs, count: int = 12) -> list[int]:
    """Indices of about ``count`` log-spaced epochs of the plan (first and last included)."""
    if epochs.size <= count:
        return list(range(epochs.size))
    targets = np.geomspace(epochs[0], epochs[-1], count)
    idx = {int(np.searchsorted(epochs, t)) for t in targets} | {0, epochs.size - 1}
    return sorted(min(i, epochs.size - 1) for i in idx)


def _cmd_plan(args) -> int:
    from .planning import plan

    run = _run_from_args(args)
    plot_path = None
    if args.plot is not None:
        from .plots import require_matplotlib

        plot_path = check_output_file(args.plot, "plot")
        try:
            require_matplotlib()
        except ImportError as exc:
            print(f"noisysgd plan: error: {exc}", file=sys.stderr)
            return 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = plan(run, delta=args.delta, epochs=args.epochs, analyses=args.analysis,
                 orders=args.orders, conversion=args.conversion,
                 include_unsound=args.include_unsound, epsilon=args.epsilon)
    for message in dict.fromkeys(str(w.message) for w in caught):
        if "edge of the order grid" not in message:
            print(f"noisysgd: warning: {message}", file=sys.stderr)
    if plot_path is not None:
        from .plots import plan_figure

        try:
            plan_figure(p, plot_path)
        except OSError as exc:
            raise ValueError(f"plot must be a writable file path. Writing {args.plot!r} failed: {exc}") from None
    if args.json:
        out = p.to_dict()
        if plot_path is not None:
            out["plot"] = str(plot_path)
        print(json.dumps(out, indent=2, allow_nan=False))
        return 0
    shown = [name for name, c in p.curves.items() if c.applies]
    print(f"delta = {p.delta:g}, adjacency = {run.adjacency}, conversion = {args.conversion}")
    print(
        f"run: n = {run.n}, batch size = {run.batch_size} ({run.batching}), "
        f"{run.steps_per_epoch} steps per epoch, z = {run.noise_multiplier:g}, L = {run.lipschitz:g}, "
        f"lr = {run.learning_rate:g}" + (f" * (t+1)^-{run.lr_decay:g}" if run.lr_decay else "")
    )
    print()
    rows = [["epochs", *shown, "best"]]
    for i in _pick_rows(p.epochs):
        cells = []
        for name in shown:
            c = p.curves[name]
            cell = _fmt(float(c.epsilon[i]))
            cells.append(cell + ("" if c.exact[i] else "*"))
        rows.append([str(int(p.epochs[i])), *cells, _fmt(float(p.best_epsilon[i]))])
    print(_table(rows))
    if any(not c.exact.all() for c in p.curves.values() if c.applies):
        print("* upper bound: the value computed at the next larger epoch (the PLD is computed at a "
              "few epochs; composition never lowers epsilon)")
    print()
    rows = [["analysis", "sound", "crosses composition at", "plateau", "reached after"]]
    for name in shown:
        c = p.curves[name]
        if name in ("composition", "composition-pld"):
            continue
        rows.append([
            name, "yes" if c.sound else "NO",
            "-" if c.crossover_epoch is None else f"epoch {c.crossover_epoch}",
            "none (grows)" if c.limit is None else _fmt(c.limit),
            "-" if c.plateau_epoch is None else f"{c.plateau_epoch} epochs",
        ])
    if len(rows) > 1:
        print(_table(rows))
        print("(cross-over: the first epoch of the range from which the bound stays below the smaller "
              "of composition and composition-pld; plateau: the limit as epochs grow, reached within "
              "0.1%)")
    not_applying = [(n, c.reason) for n, c in p.curves.items() if not c.applies]
    if not_applying:
        print("not applicable: " + "; ".join(n for n, _ in not_applying)
              + " (noisysgd epsilon shows why)")
    unsound = [n for n in shown if not p.curves[n].sound]
    if unsound:
        print("NOT SOUND (shown for comparison, never the best bound"
              + (" unless --include-unsound" if not p.include_unsound else "") + "): "
              + ", ".join(unsound))
    last = p.best_analysis[-1]
    print()
    print(f"best sound epsilon after {int(p.epochs[-1])} epochs: {_fmt(float(p.best_epsilon[-1]))}"
          + (f" ({last})" if last else ""))
    if p.limit is not None:
        print(f"limit of the best bound as epochs grow: {_fmt(p.limit)}")
    if p.budget is not None:
        b = p.budget
        if b.epochs is None:
            print(f"budget epsilon = {b.target_epsilon:g}: unlimited epochs (the best bound plateaus at "
                  f"{_fmt(b.limit_epsilon)}, within 0.1% after {b.plateau_epochs} epochs)")
        else:
            print(f"budget epsilon = {b.target_epsilon:g}: at most {b.epochs} epochs")
    if plot_path is not None:
        print(f"plot: {plot_path}")
    return 0


def _check_out_dir(text: str) -> Path:
    """``--out`` as a path that is, or can become, a writable directory (a
    temporary probe is created and removed; nothing else)."""
    from .io import _probe_writable

    out = Path(text)
    if out.exists():
        if not out.is_dir():
            raise ValueError(f"out must be a directory. Found a file: {text!r}.")
        _probe_writable(out, "out", text)
        return out
    parent = out.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"out must be a directory path. Found {text!r}, under the file {str(parent)!r}.")
    _probe_writable(parent, "out", text)
    return out


def _cmd_figures(args) -> int:
    from .plots import require_matplotlib, write_figures

    out = _check_out_dir(args.out)
    try:
        require_matplotlib()
    except ImportError as exc:  # a missing optional dependency, not a usage mistake
        print(f"noisysgd figures: error: {exc}", file=sys.stderr)
        return 1
    try:
        out.mkdir(parents=True, exist_ok=True)
        paths = write_figures(args.paper, out)
    except OSError as exc:
        raise ValueError(
            f"out must be a writable directory. Writing into {args.out!r} failed: {exc}"
        ) from None
    for path in paths:
        print(path)
    return 0


def _flag_for(message: str) -> str:
    match = re.match(r"(\w+) must", message)
    return _FLAGS.get(match.group(1), "") if match else ""


def _one_line(text: str) -> str:
    """An error message on one line, whatever the user typed into it."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``noisysgd`` console script; returns the exit status."""
    parser = build_parser()
    args = None
    try:
        args = parser.parse_args(argv)
        return args.handler(args)
    except UsageError as exc:
        print(_one_line(str(exc)), file=sys.stderr)
        return 2
    except ValueError as exc:
        message = str(exc)
        flag = _flag_for(message)
        prefix = f"{flag}: " if flag else ""
        prog = " ".join(filter(None, ["noisysgd", getattr(args, "command", None)]))
        print(_one_line(f"{prog}: error: {prefix}{message}"), file=sys.stderr)
        return 2
    except OSError as exc:  # the environment, not the command line: one line, status 1
        prog = " ".join(filter(None, ["noisysgd", getattr(args, "command", None)]))
        print(_one_line(f"{prog}: error: {exc}"), file=sys.stderr)
        return 1
    except SystemExit as exc:  # --help and --version
        return int(exc.code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
