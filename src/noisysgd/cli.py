"""The ``noisysgd`` command line: ``build_parser()`` and ``main(argv) -> int``.

User mistakes exit with status 2 and one line on stderr naming the flag; they
never print a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import warnings
from pathlib import Path

from .run import ADJACENCIES, BATCHING_SCHEMES, INITIALIZATIONS, Run

# Heavy modules (numpy, scipy, scikit-learn, dp_accounting, matplotlib) are imported
# where they are used: `noisysgd --help` builds only the list of commands, and a
# command builds only its own parser (benchmarks/cli_startup.py measures it).

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


class _Version(argparse.Action):
    """--version, reading the installed version only when asked."""

    def __call__(self, parser, namespace, values, option_string=None):
        from . import __version__

        print(f"noisysgd {__version__}")
        parser.exit()


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


def _add_run_flags(p: argparse.ArgumentParser, *, noise: bool = True, length: bool = True,
                   lr_required: bool = True) -> None:
    g = p.add_argument_group("the run")
    g.add_argument("--n", type=int, required=True, help="number of training examples")
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


def _add_accounting_flags(p: argparse.ArgumentParser) -> None:
    from .accountant import BEST, DEFAULT_ANALYSES
    from .analyses import ANALYSES
    from .rdp import CONVERSIONS

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


#: Every command: its line in ``noisysgd --help`` and the function that builds its parser.
_COMMANDS = {
    "epsilon": "privacy (epsilon) of a Noisy-SGD run under each analysis",
    "calibrate": "the smallest noise multiplier that meets a target (epsilon, delta)",
    "plan": "epsilon versus epochs under every analysis; cross-overs, plateaus, epoch budgets",
    "train": "train a private linear model on a CSV/NPZ/Parquet file; write model, certificate, metrics",
    "tune": "private hyperparameter selection; the certificate covers the whole tuning",
    "predict": "predictions of a model written by train/tune on a CSV/NPZ/Parquet file",
    "demo": "train the same private model certified by hidden state and by composition (digits)",
    "audit": "empirical privacy audit: a lower bound on epsilon from many runs, beside the certified one",
    "figures": "draw a paper's figures from the library's bounds (PNG files)",
}


def _command_in(argv: list[str]) -> str | None:
    """The command named on the command line (the first word that is not an option:
    the top-level parser has no option that takes a value)."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``noisysgd`` parser.  With ``only``, just that command's parser is built
    (the others are listed, with their help line): a command imports only what it
    needs, and ``noisysgd --help`` imports nothing heavy.  ``only=""`` lists the
    commands without building any."""
    parser = _Parser(
        prog="noisysgd",
        description="Noisy-SGD with hidden-state differential privacy accounting.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, line in _COMMANDS.items():
        if only is None or only == name:
            _BUILDERS[name](sub)
        else:
            sub.add_parser(name, help=line, add_help=False)
    for action in sub._choices_actions:  # one listing, whoever built the parser
        action.help = _COMMANDS[action.dest]
    # every command takes --quiet: no progress bars (they are shown on a terminal only)
    for name, sp in sub.choices.items():
        if (only is None or only == name) and not any("--quiet" in a.option_strings for a in sp._actions):
            sp.add_argument("--quiet", "-q", action="store_true",
                            help="no progress bars (shown only when stderr is a terminal)")
    return parser


def _build_epsilon(sub) -> None:
    p = sub.add_parser(
        "epsilon",
        help=_COMMANDS["epsilon"],
        description="Report epsilon for delta under each requested analysis, and the best sound one.",
        epilog=_EPSILON_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_flags(p, lr_required=False)
    p.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    _add_accounting_flags(p)
    p.set_defaults(handler=_cmd_epsilon)


def _build_calibrate(sub) -> None:
    c = sub.add_parser(
        "calibrate",
        help=_COMMANDS["calibrate"],
        description=(
            "Find the smallest noise multiplier z for which the run meets (--epsilon, --delta) under "
            "the best sound analysis (or the ones named with --analysis). Bisection in log z; the z "
            "printed was evaluated and meets the target, and z/(1 + rel-tol) did not."
        ),
        epilog=_CALIBRATE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_flags(c, noise=False, lr_required=False)
    c.add_argument("--epsilon", type=float, required=True, help="target epsilon > 0")
    c.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    c.add_argument("--rel-tol", type=float, default=1e-4, help="relative tolerance on z (default 1e-4)")
    _add_accounting_flags(c)
    c.set_defaults(handler=_cmd_calibrate)


def _build_plan(sub) -> None:
    pl = sub.add_parser(
        "plan",
        help=_COMMANDS["plan"],
        description=(
            "Evaluate every analysis (or those named with --analysis) on the run stopped after each "
            "of --epochs, and report where each hidden-state bound overtakes composition, the value "
            "each convergent bound plateaus at, and, with --epsilon, how many epochs the budget "
            "allows (\"unlimited\" when the best sound bound plateaus below it)."
        ),
        epilog=_PLAN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_flags(pl, length=False, lr_required=False)
    pl.add_argument("--epochs", type=_epoch_range, default="1:100",
                    help="epochs to evaluate: A:B, A:B:STEP, A:B:logN or a list (default 1:100)")
    pl.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    pl.add_argument("--epsilon", type=float,
                    help="a budget: also report the largest number of epochs it allows")
    pl.add_argument("--plot", metavar="FILE",
                    help="also draw the curves into this file (.png, .pdf or .svg)")
    _add_accounting_flags(pl)
    pl.set_defaults(handler=_cmd_plan)


def _build_figures(sub) -> None:
    from .plots import PAPERS

    f = sub.add_parser(
        "figures",
        help=_COMMANDS["figures"],
        description=(
            "Recompute a paper's figures from the bounds implemented here and write each as a PNG "
            "file and its plotted data as JSON into --out (created if missing); prints the paths "
            "written. `noisysgd figures --paper all --out docs/figures` regenerates the figures the "
            "docs show."
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


def _build_demo(sub) -> None:
    from .demo import add_demo_parser

    add_demo_parser(sub, argparse.RawDescriptionHelpFormatter)


def _build_audit(sub) -> None:
    from .audit.cli import add_audit_parser

    add_audit_parser(sub, argparse.RawDescriptionHelpFormatter)


def _build_train(sub) -> None:
    from .train_cli import add_train_parser

    add_train_parser(sub, _Parser, argparse.RawDescriptionHelpFormatter)


def _build_tune(sub) -> None:
    from .tune_cli import add_tune_parser

    add_tune_parser(sub, _Parser, argparse.RawDescriptionHelpFormatter)


def _build_predict(sub) -> None:
    from .predict_cli import add_predict_parser

    add_predict_parser(sub, _Parser, argparse.RawDescriptionHelpFormatter)


_BUILDERS = {
    "epsilon": _build_epsilon,
    "calibrate": _build_calibrate,
    "plan": _build_plan,
    "train": _build_train,
    "tune": _build_tune,
    "predict": _build_predict,
    "demo": _build_demo,
    "audit": _build_audit,
    "figures": _build_figures,
}


def _run_from_args(args) -> Run:
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


def _cmd_epsilon(args) -> int:
    from .accountant import epsilon

    run = _run_from_args(args)
    report = epsilon(
        run, delta=args.delta, analyses=args.analysis, orders=args.orders,
        conversion=args.conversion, include_unsound=args.include_unsound,
    )
    limit, why = _limit(run, args.delta)
    if args.json:
        out = report.to_dict()
        out["limit"] = {"epsilon": limit, "reason": why}
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        print(report.summary())
        from .text import fill

        print(fill("limit: " + (f"n/a ({why})" if limit is None else
                                f"no sound analysis can certify less than epsilon = {limit:.4g} for "
                                "this run (the exact privacy of its linear + ridge instance; "
                                "noisysgd.limits; altschuler-talwar, which needs a projection, "
                                "excepted)")))
    return 0


def _limit(run, delta) -> tuple[float | None, str | None]:
    """The limit line of ``run`` (:func:`noisysgd.limits.limit_epsilon`), or why there is none."""
    from .limits import limit_epsilon

    try:
        return limit_epsilon(run, delta), None
    except ValueError as exc:
        return None, str(exc)
    except ArithmeticError as exc:  # auxiliary information: never a traceback for it
        return None, f"not computed: {type(exc).__name__} in its numerics"


def _cmd_calibrate(args) -> int:
    from .accountant import calibrate

    run = _run_from_args(args)
    cal = calibrate(
        run, epsilon=args.epsilon, delta=args.delta, analyses=args.analysis,
        orders=args.orders, conversion=args.conversion, include_unsound=args.include_unsound,
        rel_tol=args.rel_tol, progress=_progress(args),
    )
    limit, why = _limit_noise(run, args.epsilon, args.delta)
    if args.json:
        out = cal.to_dict()
        out["limit"] = {"noise_multiplier": limit, "reason": why}
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        print(cal.summary())
        from .text import above, fill

        if limit is None:
            print(fill(f"limit: n/a ({why})"))
        elif limit > 0:
            print(fill(f"limit: no sound analysis can meet this target with z below {limit:.4g} (the exact "
                       "privacy of this run's linear + ridge instance; noisysgd.limits; altschuler-talwar, "
                       f"which needs a projection, excepted): the calibrated z is {above(cal.noise_multiplier, limit)}"))
    return 0


def _limit_noise(run, epsilon, delta) -> tuple[float | None, str | None]:
    """The smallest z any sound analysis (in the linear + ridge class) could calibrate to
    (:func:`noisysgd.limits.limit_noise_multiplier`), or why there is none."""
    from .limits import limit_noise_multiplier

    try:
        return limit_noise_multiplier(run, epsilon, delta), None
    except ValueError as exc:
        return None, str(exc)
    except ArithmeticError as exc:
        return None, f"not computed: {type(exc).__name__} in its numerics"


def _cmd_plan(args) -> int:
    from .io import check_output_file
    from .planning import plan

    run = _run_from_args(args)
    plot_path = None
    if args.plot is not None:
        from .io import check_plot_suffix
        from .plots import require_matplotlib

        plot_path = check_output_file(args.plot, "plot")
        check_plot_suffix(plot_path, "plot")
        try:
            require_matplotlib()
        except ImportError as exc:
            print(f"noisysgd plan: error: {exc}", file=sys.stderr)
            return 1
    p = plan(run, delta=args.delta, epochs=args.epochs, analyses=args.analysis,
             orders=args.orders, conversion=args.conversion,
             include_unsound=args.include_unsound, epsilon=args.epsilon, progress=_progress(args))
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
    print(p.summary())
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
        paths = write_figures(args.paper, out, progress=_progress(args))
    except OSError as exc:
        raise ValueError(
            f"out must be a writable directory. Writing into {args.out!r} failed: {exc}"
        ) from None
    for path in paths:
        print(path)
    return 0


def _progress(args) -> bool:
    """Progress bars on stderr: on a terminal, unless --quiet."""
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


class _OneLineWarnings(contextlib.AbstractContextManager):
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


def _flag_for(message: str) -> str:
    match = re.match(r"(\w+) must", message)
    return _FLAGS.get(match.group(1), "") if match else ""


def _one_line(text: str) -> str:
    """An error message on one line, whatever the user typed into it."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``noisysgd`` console script; returns the exit status."""
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(only=_command_in(argv) or "")
    args = None
    try:
        args = parser.parse_args(argv)
        with _OneLineWarnings():
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
