"""``noisysgd plan``: ε versus epochs under every analysis; cross-overs, plateaus, epoch budgets."""

from __future__ import annotations

import json
import sys

from .common import accounting_options, add_accounting_flags, add_run_flags, epoch_range_arg, progress_wanted, run_from_args

HELP = "epsilon versus epochs under every analysis; cross-overs, plateaus, epoch budgets"
DESCRIPTION = (
    "Evaluate every analysis (or those named with --analysis) on the run stopped after each "
    "of --epochs, and report where each hidden-state bound overtakes composition, the value "
    "each convergent bound plateaus at, and, with --epsilon, how many epochs the budget "
    "allows (\"unlimited\" when the best sound bound plateaus below it)."
)

EXAMPLES = """\
examples:
  # regularized logistic regression, shuffled fixed-order batches: where does hidden state pay?
  noisysgd plan --n 60000 --batch-size 256 --lr 0.05 --noise-multiplier 4 --lipschitz 1 \\
      --smoothness 1.25 --strong-convexity 0.01 --batching cyclic --delta 1e-5 --epochs 1:1000

  # how many epochs does (2, 1e-5) allow?  with the curves as a PNG, and as JSON
  noisysgd plan --n 60000 --batch-size 256 --lr 0.05 --noise-multiplier 4 --lipschitz 1 \\
      --smoothness 1.25 --strong-convexity 0.01 --batching cyclic --delta 1e-5 \\
      --epochs 1:1000:log40 --epsilon 2 --plot curve.png --json
"""


def add_arguments(pl) -> None:
    add_run_flags(pl, length=False, lr_required=False)
    pl.add_argument("--epochs", type=epoch_range_arg, default="1:100",
                    help="epochs to evaluate: A:B, A:B:STEP, A:B:logN or a list (default 1:100)")
    pl.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    pl.add_argument("--epsilon", type=float,
                    help="a budget: also report the largest number of epochs it allows")
    pl.add_argument("--plot", metavar="FILE",
                    help="also draw the curves into this file (.png, .pdf or .svg)")
    add_accounting_flags(pl)
    pl.set_defaults(handler=cmd_plan)


def cmd_plan(args) -> int:
    from ..io import check_output_file
    from ..planning import plan

    run = run_from_args(args)
    plot_path = None
    if args.plot is not None:
        from ..io import check_plot_suffix
        from ..figures import require_matplotlib

        plot_path = check_output_file(args.plot, "plot")
        check_plot_suffix(plot_path, "plot")
        try:
            require_matplotlib()
        except ImportError as exc:
            print(f"noisysgd plan: error: {exc}", file=sys.stderr)
            return 1
    p = plan(run, delta=args.delta, epochs=args.epochs, **accounting_options(args), epsilon=args.epsilon,
             progress=progress_wanted(args))
    if plot_path is not None:
        from ..figures import plan_figure

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
