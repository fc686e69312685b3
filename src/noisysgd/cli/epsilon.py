"""``noisysgd epsilon``: ε of a run under each analysis, the best sound one, and the limit line."""

from __future__ import annotations

import json

from .common import accounting_options, add_accounting_flags, add_run_flags, auxiliary, run_from_args

HELP = "privacy (epsilon) of a Noisy-SGD run under each analysis"
DESCRIPTION = "Report epsilon for delta under each requested analysis, and the best sound one."

EXAMPLES = """\
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


def add_arguments(p) -> None:
    add_run_flags(p, lr_required=False)
    p.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    add_accounting_flags(p)
    p.set_defaults(handler=cmd_epsilon)


def cmd_epsilon(args) -> int:
    from ..accountant import epsilon

    run = run_from_args(args)
    report = epsilon(run, delta=args.delta, **accounting_options(args))
    from ..limits import limit_epsilon

    limit, why = auxiliary(limit_epsilon, run, args.delta)
    if args.json:
        out = report.to_dict()
        out["limit"] = {"epsilon": limit, "reason": why}
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        print(report.summary())
        from ..text import fill

        print(fill("limit: " + (f"n/a ({why})" if limit is None else
                                f"no sound analysis can certify less than epsilon = {limit:.4g} for "
                                "this run (the exact privacy of its linear + ridge instance; "
                                "noisysgd.limits; altschuler-talwar, which needs a projection, "
                                "excepted)")))
    return 0
