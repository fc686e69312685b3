"""``noisysgd audit``: an empirical lower bound on ε beside the certified ε.

The audits themselves are :mod:`noisysgd.audit`; this module reads the flags,
runs one and prints it.

Exit status: 0 when the audit ran and found nothing wrong, 3 when its lower
bound exceeds the certified ε (a failed audit), 2 with one line on stderr for
bad input (via ``noisysgd.cli.main``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from ..run import BATCHING_SCHEMES

__all__ = ["add_arguments", "cmd_audit", "VIOLATION_STATUS"]

#: Exit status of an audit whose lower bound exceeds the certified ε.
VIOLATION_STATUS = 3

EXAMPLES = """\
defaults: at-1d: --n 10, full batches, --steps 200, --lr 1, --noise-multiplier 4, --lipschitz 1,
  --diameter 4, --runs 10000; canary: --n 200, full batches, --steps 100, --lr 1/(2M),
  --noise-multiplier 16, --feature-clip 3, --clip-norm 1, --diameter 4, --runs 2000;
  both: --threshold tuned (on as many calibration runs as counted runs), --confidence 0.95,
  --delta 1e-5, --analysis best

examples:
  # Altschuler & Talwar's 1-D construction, full batches, 10,000 runs per dataset
  noisysgd audit --adversary at-1d --n 10 --batching full --steps 200 --lr 1 \\
      --noise-multiplier 4 --diameter 4 --runs 10000 --delta 1e-5 --seed 0

  # the paper's own test, "final iterate >= 0", declared up front, fixed-size batches of 1
  noisysgd audit --adversary at-1d --n 10 --batch-size 1 --batching sample --steps 200 \\
      --lr 1 --noise-multiplier 1 --diameter 4 --threshold 0 --variant paper --delta 1e-5

  # add/remove: D' holds one more example (slope -L) than D; Poisson batches of expected size 2
  noisysgd audit --adversary at-1d --adjacency add-remove --n 10 --batch-size 2 --batching poisson \
      --steps 200 --lr 1 --noise-multiplier 1 --diameter 4 --runs 10000 --seed 0

  # adaptive clipping: the honest count, then one released un-noised (the audit must fail: exit 3)
  noisysgd audit --adversary adaptive --runs 300 --seed 0
  noisysgd audit --adversary adaptive --runs 300 --seed 0 --leak-count

  # a canary in scikit-learn's digits (binary logistic regression), as JSON
  noisysgd audit --adversary canary --n 200 --batching full --steps 100 \\
      --noise-multiplier 16 --feature-clip 3 --clip-norm 1 --diameter 4 --runs 2000 --json
"""

#: Defaults per adversary for the flags left out.
_DEFAULTS = {
    "at-1d": dict(n=10, batching="full", steps=200, lr=1.0, noise_multiplier=4.0, lipschitz=1.0,
                  diameter=4.0, runs=10_000, threshold="tuned", variant="opposed"),
    "canary": dict(n=200, batching="full", steps=100, lr=None, noise_multiplier=16.0, feature_clip=3.0,
                   clip_norm=1.0, alpha=0.0, diameter=4.0, runs=2000, threshold="tuned"),
    "adaptive": dict(n=2, batching="poisson", batch_size=1, steps=200, noise_multiplier=12.0, runs=1000,
                     threshold="tuned"),
}
_ONLY = {
    "at-1d": ("lipschitz", "smoothness", "variant"),
    "canary": ("feature_clip", "clip_norm", "alpha"),
    "adaptive": ("leak_count",),
}
_FLAG = {
    "lipschitz": "--lipschitz", "smoothness": "--smoothness", "variant": "--variant",
    "feature_clip": "--feature-clip", "clip_norm": "--clip-norm", "alpha": "--alpha", "leak_count": "--leak-count",
}


def _threshold(text: str):
    if text.strip().lower() == "tuned":
        return "tuned"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'tuned', got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number or 'tuned', got {text!r}")
    return value


HELP = "empirical privacy audit: a lower bound on epsilon from many runs, beside the certified one"
DESCRIPTION = (
    "Run the trainer many times on two adjacent datasets (Altschuler & Talwar's 1-D lower-bound "
    "construction, or a canary in scikit-learn's digits), apply a distinguishing test fixed in "
    "advance to each final model, and turn its error counts into a lower bound on epsilon "
    "(Clopper-Pearson, Bonferroni over the two error rates) at the stated confidence; print it "
    "beside the certified epsilon of the same run. Exit status 3 if the lower bound exceeds "
    "the certified epsilon."
)


def add_arguments(p) -> None:
    from ..analyses import ANALYSES
    from ..accountant import BEST

    p.add_argument("--adversary", required=True, choices=("at-1d", "canary", "adaptive"),
                   help="at-1d: Altschuler & Talwar's 1-D construction; canary: a canary in digits; adaptive: "
                        "adaptive clipping's released counts (Poisson batches, add/remove; noisysgd.audit."
                        "audit_adaptive)")
    g = p.add_argument_group("the run (defaults depend on --adversary)")
    g.add_argument("--n", type=int, help="number of examples (canary: the first n digits; at most 1797)")
    g.add_argument("--batch-size", type=int, help="batch size b (default: n for full)")
    g.add_argument("--batching", choices=BATCHING_SCHEMES, help="how batches are formed (default full)")
    steps = g.add_mutually_exclusive_group()
    steps.add_argument("--steps", type=int, help="number of noisy gradient steps")
    steps.add_argument("--epochs", type=int, help="number of epochs")
    g.add_argument("--lr", type=float, help="step size eta (canary default: 1/(2M))")
    g.add_argument("--noise-multiplier", type=float, help="z: noise std z*L/b on the mean gradient")
    g.add_argument("--diameter", type=float, help="D: the iterates are projected onto the ball of diameter D")
    g.add_argument("--no-diameter", action="store_true", help="no projection (canary only)")
    g.add_argument("--average", nargs="?", const="yes", choices=("yes", "auto", "no"), default="no",
                   help="at-1d: release (and test) the mean of the second half of the iterates (yes, the flag "
                        "alone), or per run what average='auto' releases (auto); composition certifies")
    g.add_argument("--adjacency", choices=("replace", "add-remove"), default="replace",
                   help="replace (default); add-remove (at-1d only; poisson batches, --n the public size): D = D' "
                        "without its last example")
    a = p.add_argument_group("at-1d")
    a.add_argument("--lipschitz", type=float, help="L: slope of the differing loss and clip norm (default 1)")
    a.add_argument("--smoothness", type=float,
                   help="declared M (a linear loss is M-smooth for any M; default 2/lr, 2b/(n lr) for poisson)")
    a.add_argument("--variant", choices=("opposed", "paper"),
                   help="opposed (default): slopes +L on D and -L on D'; paper: 0 on D, -L on D'")
    c = p.add_argument_group("canary")
    c.add_argument("--feature-clip", type=float, help="R: features clipped to norm R (default 3)")
    c.add_argument("--clip-norm", type=float, help="L: per-example gradient clip norm (default 1)")
    c.add_argument("--alpha", type=float, help="lambda: L2 regularization = strong convexity (default 0)")
    ad = p.add_argument_group("adaptive")
    ad.add_argument("--leak-count", action="store_true", default=None,
                    help="train with the count released un-noised (a broken trainer the audit must catch)")
    s = p.add_argument_group("the audit")
    s.add_argument("--runs", type=int, help="counted runs per dataset (default 10000 at-1d, 2000 canary)")
    s.add_argument("--calibration-runs", type=int,
                   help="runs per dataset to choose the threshold on, then discarded (default --runs)")
    s.add_argument("--threshold", type=_threshold,
                   help="'tuned' (default: chosen on calibration runs) or a number declared up front "
                        "(at-1d: final iterate >= T => D'; canary: loss on the canary <= T => D')")
    s.add_argument("--confidence", type=float, default=0.95, help="confidence of the lower bound (default 0.95)")
    s.add_argument("--delta", type=float, default=1e-5, help="delta of both bounds (default 1e-5)")
    s.add_argument("--seed", type=int, help="seed of every run (default: fresh entropy, printed)")
    s.add_argument("--analysis", action="append", choices=[BEST, *ANALYSES],
                   help="analyses for the certified epsilon (repeatable; default best)")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=cmd_audit)


def _positive_int(flag: str, value, minimum: int = 1) -> int:
    if value is None or value < minimum:
        raise ValueError(f"{flag} must be an integer >= {minimum}. Found {value!r}.")
    return value


def _build(args):
    """(adversary, run, audit keyword arguments) from parsed flags."""
    from ..run import Run
    from ..audit.adversaries import at_1d_run, canary_run

    adv = args.adversary
    d = _DEFAULTS[adv]
    for other in _ONLY:
        for name in _ONLY[other] if other != adv else ():
            if getattr(args, name, None) is not None:
                raise ValueError(f"{_FLAG[name]} applies to --adversary {other} only.")
    if args.no_diameter and adv == "at-1d":
        raise ValueError("--no-diameter applies to --adversary canary only (the construction lives on "
                         "K = [-D/2, D/2]).")
    if args.no_diameter and args.diameter is not None:
        raise ValueError("--no-diameter and --diameter are exclusive.")
    get = lambda name: d.get(name) if getattr(args, name, None) is None else getattr(args, name)  # noqa: E731
    n = get("n")
    batching = get("batching")
    b = args.batch_size if args.batch_size is not None else (n if batching == "full" else d.get("batch_size"))
    if b is None:
        raise ValueError(f"--batch-size is required for --batching {batching}.")
    diameter = None if args.no_diameter else get("diameter")
    runs = _positive_int("--runs", get("runs"))
    cal = None if args.calibration_runs is None else _positive_int("--calibration-runs", args.calibration_runs)
    if not 0.0 < args.confidence < 1.0:
        raise ValueError(f"--confidence must be in (0, 1). Found {args.confidence!r}.")
    if args.seed is not None and args.seed < 0:
        raise ValueError(f"--seed must be a non-negative integer. Found {args.seed!r}.")
    probe = Run(n=n, batch_size=b, batching=batching, steps=1, learning_rate=1.0, noise_multiplier=1.0,
                lipschitz=1.0)
    if args.epochs is not None:
        steps = args.epochs * probe.steps_per_epoch
        if args.epochs < 1:
            raise ValueError(f"epochs must be an integer >= 1. Found {args.epochs!r}.")
    else:
        steps = get("steps")
    z = get("noise_multiplier")
    if adv == "adaptive":
        from ..audit.adversaries import adaptive_run

        if batching != "poisson" or args.adjacency != "replace" or args.average != "no" or args.lr is not None \
                or args.diameter is not None:
            raise ValueError("--adversary adaptive runs Poisson batches under add/remove at its own step size, "
                             "without projection or averaging: leave --batching, --adjacency, --lr, --diameter "
                             "and --average out.")
        run = adaptive_run(n=n, batch_size=b, steps=steps, noise_multiplier=z)
        extra = dict(leak_count=bool(args.leak_count))
    elif adv == "at-1d":
        if args.adjacency == "add-remove" and args.variant is not None:
            raise ValueError("--variant applies to --adjacency replace only (add-remove removes the last example).")
        run = at_1d_run(n=n, batch_size=b, batching=batching, steps=steps, learning_rate=get("lr"),
                        noise_multiplier=z, diameter=diameter, lipschitz=get("lipschitz"),
                        smoothness=args.smoothness, adjacency=args.adjacency)
        extra = dict(variant=get("variant"), average={"yes": True, "no": False, "auto": "auto"}[args.average])
    else:
        if args.average != "no":
            raise ValueError("--average applies to --adversary at-1d only.")
        if args.adjacency != "replace":
            raise ValueError("--adjacency add-remove applies to --adversary at-1d only (the canary pairs are "
                             "replace-one).")
        if n > 1797:
            raise ValueError(f"n must be at most 1797 (the digits) for --adversary canary. Found {n}.")
        run = canary_run(n=n, batch_size=b, batching=batching, steps=steps, learning_rate=get("lr"),
                         noise_multiplier=z, feature_clip=get("feature_clip"), clip_norm=get("clip_norm"),
                         l2=get("alpha"), diameter=diameter)
        extra = dict(feature_clip=get("feature_clip"))
    kwargs = dict(delta=args.delta, runs=runs, confidence=args.confidence, calibration_runs=cal,
                  threshold=get("threshold"), random_state=args.seed,
                  certify=args.analysis if args.analysis else "best", **extra)
    return adv, run, kwargs


def cmd_audit(args) -> int:
    """Handler of ``noisysgd audit`` (raises ValueError for bad input)."""
    from ..audit.adversaries import audit_adaptive, audit_at_1d, audit_canary

    adv, run, kwargs = _build(args)
    progress = not args.quiet and sys.stderr.isatty()
    audit = {"at-1d": audit_at_1d, "canary": audit_canary, "adaptive": audit_adaptive}[adv]
    result = audit(run, progress=progress, **kwargs)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, allow_nan=False, default=_plain))
    else:
        print(format_result(result))
    return VIOLATION_STATUS if result.violation else 0


def _plain(value):
    try:
        return value.item()
    except AttributeError:
        return str(value)


def _g(x, digits=4):
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.{digits}g}"


def format_result(res) -> str:
    """The text report of an :class:`~noisysgd.audit.AuditResult`."""
    r, lb = res.run, res.lower_bound
    title = {"at-1d": "Altschuler & Talwar's 1-D construction (Theorem 4.1)",
             "canary": "a canary in scikit-learn's digits",
             "adaptive": "adaptive clipping's released counts (Andrew et al. 2021)"}[res.adversary]
    lines = [f"noisysgd audit: {title}"]
    lines.append(
        f"run: n = {r.n}, batch size = {r.batch_size} ({r.batching}), {r.steps} steps, "
        f"z = {r.noise_multiplier:g}, L = {r.lipschitz:g}, lr = {r.max_learning_rate:g}, "
        f"D = {'-' if r.diameter is None else format(r.diameter, 'g')}, lambda = {r.strong_convexity:g}, "
        f"{r.adjacency}"
    )
    if res.trainer_run != r:
        lines.append(f"TRAINER RUN DIFFERS FROM THE CERTIFIED RUN: z = {res.trainer_run.noise_multiplier:g}")
    cal = f" (+ {res.calibration_runs} + {res.calibration_runs} calibration runs)" if res.calibration_runs else ""
    lines.append(f"runs: {res.runs} on D and {res.runs} on D'{cal}; seed entropy {res.details['seed_entropy']}")
    lines.append(f"test: {res.test.describe(res.statistic)} => D' ({res.threshold_source})")
    lines.append("")
    each = 100.0 * lb.per_rate_confidence
    rows = [["", "runs", "errors", "rate", f"upper bound ({each:.4g}%)"],
            ["D  (false positives)", str(lb.negatives), str(lb.false_positives), _g(lb.fpr), _g(lb.fpr_upper)],
            ["D' (false negatives)", str(lb.positives), str(lb.false_negatives), _g(lb.fnr), _g(lb.fnr_upper)]]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    lines.append("")
    lines.append(f"empirical lower bound: epsilon >= {_g(lb.epsilon)} at delta = {res.delta:g} "
                 f"({100 * res.confidence:g}% confidence)")
    if res.certified_epsilon is None:
        lines.append("certified: no sound analysis applies to this run")
    else:
        others = [f"{name} {_g(v['epsilon'])}" + ("" if v.get("sound") else " (NOT SOUND)")
                  for name, v in res.certified.items()
                  if not name.startswith("_") and v.get("applies") and v.get("epsilon") is not None
                  and name != res.certified_by]
        lines.append(f"certified:             epsilon <= {_g(res.certified_epsilon)} ({res.certified_by}, "
                     "best sound)")
        if others:
            lines.append("  also: " + ", ".join(others))
        lines.append(f"gap: certified / empirical = {_g(res.ratio, 3)}")
    if res.violation:
        lines.append("VIOLATION: the empirical lower bound exceeds the certified epsilon")
    return "\n".join(lines)
