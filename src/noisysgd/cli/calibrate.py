"""``noisysgd calibrate``: the smallest noise multiplier that meets a target (ε, δ), and the limit line's."""

from __future__ import annotations

import json

from .common import accounting_options, add_accounting_flags, add_run_flags, auxiliary, progress_wanted, run_from_args

HELP = "the smallest noise multiplier that meets a target (epsilon, delta)"
DESCRIPTION = (
    "Find the smallest noise multiplier z for which the run meets (--epsilon, --delta) under "
    "the best sound analysis (or the ones named with --analysis). Bisection in log z; the z "
    "printed was evaluated and meets the target, and z/(1 + rel-tol) did not."
)

EXAMPLES = """\
examples:
  # noise for (1, 1e-5)-DP after 100 shuffled epochs of a regularized logistic regression
  noisysgd calibrate --n 60000 --batch-size 256 --epochs 100 --lr 0.05 --lipschitz 1 \\
      --smoothness 1.25 --strong-convexity 0.01 --batching shuffle --epsilon 1 --delta 1e-5

  # the same with composition only, as JSON
  noisysgd calibrate --n 60000 --batch-size 256 --epochs 100 --lr 0.05 --lipschitz 1 \\
      --batching poisson --epsilon 1 --delta 1e-5 --analysis composition --json
"""


def add_arguments(c) -> None:
    add_run_flags(c, noise=False, lr_required=False)
    c.add_argument("--epsilon", type=float, required=True, help="target epsilon > 0")
    c.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    c.add_argument("--rel-tol", type=float, default=1e-4, help="relative tolerance on z (default 1e-4)")
    add_accounting_flags(c)
    c.set_defaults(handler=cmd_calibrate)


def cmd_calibrate(args) -> int:
    from ..accountant import calibrate

    run = run_from_args(args)
    cal = calibrate(run, epsilon=args.epsilon, delta=args.delta, **accounting_options(args), rel_tol=args.rel_tol,
                    progress=progress_wanted(args))
    from ..limits import limit_noise_multiplier

    limit, why = auxiliary(limit_noise_multiplier, run, args.epsilon, args.delta)
    if args.json:
        out = cal.to_dict()
        out["limit"] = {"noise_multiplier": limit, "reason": why}
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        print(cal.summary())
        from ..text import above, fill

        if limit is None:
            print(fill(f"limit: n/a ({why})"))
        elif limit > 0:
            print(fill(f"limit: no sound analysis can meet this target with z below {limit:.4g} (the exact "
                       "privacy of this run's linear + ridge instance; noisysgd.limits; altschuler-talwar, "
                       f"which needs a projection, excepted): the calibrated z is {above(cal.noise_multiplier, limit)}"))
    return 0
