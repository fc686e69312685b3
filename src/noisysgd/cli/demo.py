"""``noisysgd demo``: the defaults' private model on digits, then one run certified by hidden state and by composition.

The computation and the report are :mod:`noisysgd.demo`; this module reads the
flags, runs it and prints the table.
"""

from __future__ import annotations

import json

from .. import demo
from ..demo import MARKER

HELP = "the defaults' private model on digits, then one run certified by hidden state and by composition"
DESCRIPTION = demo.__doc__.split("\n\n")[1].replace("\n", " ")
EXAMPLES = "example:\n  noisysgd demo --epsilon 1 --delta 1e-5 --out noisysgd-demo\n"


def cmd_demo(args) -> int:
    from ..io import check_output_dir
    from ..figures import require_matplotlib
    from ..demo import run_demo, summary, write_report

    check_output_dir(args.out, replace_marker=MARKER)
    require_matplotlib()
    result = run_demo(epsilon=args.epsilon, delta=args.delta, seed=args.seed)
    out = write_report(result, args.out)
    if args.json:
        data = {k: v for k, v in result.items() if k not in ("plan", "certificates")}
        data["out"] = str(out)
        print(json.dumps(data, indent=2, allow_nan=False))
        return 0
    print(summary(result, out))
    return 0


def add_arguments(p) -> None:
    p.add_argument("--epsilon", type=float, default=1.0, help="target epsilon (default 1)")
    p.add_argument("--delta", type=float, default=1e-5, help="target delta (default 1e-5)")
    p.add_argument("--seed", type=int, default=0, help="split and training seed (default 0)")
    p.add_argument("--out", default="noisysgd-demo", metavar="DIR",
                   help="report directory (default ./noisysgd-demo; an earlier demo report is replaced)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(handler=cmd_demo)
