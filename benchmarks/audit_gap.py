"""The gap between certified ε and what an audit can show, for Altschuler & Talwar's
1-D construction and for a canary in digits.

For each setting of the 1-D construction (:func:`noisysgd.audit.audit_at_1d`,
``opposed`` variant: slopes +L on D, −L on D′, unless marked ``paper``):

* ``certified`` — the best sound ε of :func:`noisysgd.epsilon` (and which
  analysis), and ``altschuler-talwar`` alone;
* ``exact`` — the ε at δ of the pair of final iterates, from their law
  computed numerically (:mod:`noisysgd.audit.exact`; a lower bound on the
  algorithm's ε up to the discretization; not for ``shuffle``);
* ``ideal@N`` — what a perfectly tuned threshold audit with N runs per
  dataset reports when its counts equal their expectations (the audit's
  statistical ceiling at this N);
* ``emp ω≥0`` and ``emp tuned`` — the empirical lower bounds at 95%
  confidence, N runs per dataset through the replica engine: the paper's
  test declared up front, and a threshold chosen on N further runs per
  dataset.

So certified/exact is the slack of the analysis; exact/empirical the cost of
auditing with N runs.  Then: which noise reduction a 10⁴-run audit catches
(the ideal bound of the broken run against the certified ε of the honest
one), the canary audits, and the replica engine's speed against a loop of
``train`` calls.

Run by hand (about 2 minutes on 2 cores)::

    python benchmarks/audit_gap.py [--runs 10000] [--json benchmarks/results/audit_gap.json]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
import warnings

import numpy as np

import noisysgd
from noisysgd.analyses.altschuler_talwar import lower_bound_rdp
from noisysgd.audit import audit_at_1d, audit_canary
from noisysgd.audit.adversaries import at_1d_datasets, at_1d_run, canary_run
from noisysgd.audit.exact import at_1d_law, ideal_lower_bound, privacy_epsilon
from noisysgd.audit.losses import Linear
from noisysgd.train import train
from noisysgd.train.replicas import train_replicas

DELTA = 1e-5
NO_PLD = ["altschuler-talwar", "altschuler-talwar-sampled", "composition"]


def one_d_settings():
    s = []
    for z in (2.0, 4.0, 8.0, 16.0, 24.0):
        s.append((f"full z={z:g}", dict(n=10, batch_size=10, batching="full", steps=200, noise_multiplier=z,
                                        diameter=4.0), {}))
    for T in (5, 10, 20, 40, 80, 1000):
        s.append((f"full z=4 T={T}", dict(n=10, batch_size=10, batching="full", steps=T, noise_multiplier=4.0,
                                          diameter=4.0), {}))
    s.append(("full z=8 paper", dict(n=10, batch_size=10, batching="full", steps=200, noise_multiplier=8.0,
                                     diameter=4.0), {"variant": "paper"}))
    for z in (0.5, 1.0, 2.0):
        s.append((f"sample b=1 z={z:g}", dict(n=10, batch_size=1, batching="sample", steps=200,
                                              noise_multiplier=z, diameter=4.0), {}))
    s.append(("poisson b=1 z=1", dict(n=10, batch_size=1, batching="poisson", steps=200, noise_multiplier=1.0,
                                      diameter=4.0), {}))
    for z in (0.5, 1.0):
        s.append((f"cyclic b=2 z={z:g}", dict(n=10, batch_size=2, batching="cyclic", steps=200,
                                              noise_multiplier=z, diameter=4.0), {}))
    s.append(("shuffle b=2 z=1", dict(n=10, batch_size=2, batching="shuffle", steps=200, noise_multiplier=1.0,
                                      diameter=4.0), {}))
    s.append(("Thm 4.1 regime paper", dict(n=10, batch_size=1, batching="sample", steps=7500,
                                           noise_multiplier=0.36, diameter=1000.0), {"variant": "paper",
                                                                                      "no_pld": True}))
    return s


def fmt(x, d=3):
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.{d}g}"


def run_1d(runs: int, seed: int):
    rows = []
    for label, kw, extra in one_d_settings():
        run = at_1d_run(learning_rate=1.0, **kw)
        variant = extra.get("variant", "opposed")
        certify = NO_PLD if extra.get("no_pld") else "best"
        t0 = time.perf_counter()
        declared = audit_at_1d(run, delta=DELTA, runs=runs, threshold=0.0, variant=variant,
                               random_state=[seed, 1], certify=certify)
        tuned = audit_at_1d(run, delta=DELTA, runs=runs, threshold="tuned", variant=variant,
                            random_state=[seed, 2], certify=certify)
        audit_s = time.perf_counter() - t0
        exact = ideal = None
        if run.batching != "shuffle":
            cells = 4000 if run.diameter < 100 else 20000
            p = at_1d_law(run, dataset="D", variant=variant, cells=cells)
            q = at_1d_law(run, dataset="D'", variant=variant, cells=cells)
            exact = privacy_epsilon(p, q, DELTA)
            ideal = ideal_lower_bound(p, q, runs=runs, delta=DELTA)
        at = declared.certified.get("altschuler-talwar", {}).get("epsilon")
        lb_rdp, _ = lower_bound_rdp(run)
        row = dict(setting=label, run=run.to_dict(), variant=variant,
                   burn_in_steps=math.ceil(run.diameter * run.n / (run.lipschitz * run.learning_rate)),
                   certified=declared.certified_epsilon, certified_by=declared.certified_by,
                   altschuler_talwar=at, exact=exact, ideal=ideal,
                   empirical_declared=declared.epsilon_lower, empirical_tuned=tuned.epsilon_lower,
                   tuned_test=tuned.test.describe("omega"),
                   counts_tuned=[tuned.lower_bound.false_positives, tuned.lower_bound.false_negatives],
                   theorem_4_1_rdp_lower_bound=lb_rdp, audit_seconds=audit_s,
                   violation=declared.violation or tuned.violation,
                   pld_skipped=bool(extra.get("no_pld")))
        rows.append(row)
        print(f"{label:22s} cert {fmt(row['certified']):>6s} ({row['certified_by']:<17s}) "
              f"exact {fmt(exact):>6s}  ideal@{runs} {fmt(ideal):>5s}  emp ω≥0 {fmt(declared.epsilon_lower):>5s}  "
              f"emp tuned {fmt(tuned.epsilon_lower):>5s}  cert/emp {fmt(row['certified'] / max(tuned.epsilon_lower, 1e-12)):>5s}"
              f"  ({audit_s:.1f} s){'  VIOLATION' if row['violation'] else ''}", flush=True)
    return rows


def detectable_noise_reduction(runs: int):
    """For honest z (certified ε at z), the ideal 10⁴-run audit of a trainer using z/c."""
    out = []
    for z in (8.0, 24.0):
        run = at_1d_run(n=10, batch_size=10, batching="full", steps=200, learning_rate=1.0, noise_multiplier=z,
                        diameter=4.0)
        cert = noisysgd.epsilon(run, delta=DELTA).epsilon
        for c in (1, 2, 3, 4, 5, 6, 8, 10):
            broken = run.replace(noise_multiplier=z / c)
            p, q = at_1d_law(broken, dataset="D"), at_1d_law(broken, dataset="D'")
            ideal = ideal_lower_bound(p, q, runs=runs, delta=DELTA)
            exact = privacy_epsilon(p, q, DELTA)
            out.append(dict(z=z, factor=c, certified=cert, exact_broken=exact, ideal_broken=ideal,
                            caught=ideal > cert))
            print(f"z={z:g} noise/{c:<2d} certified(z) {cert:.3f}  exact(z/c) {fmt(exact)}  "
                  f"ideal audit of z/c {fmt(ideal)}  {'CAUGHT' if ideal > cert else '-'}", flush=True)
    return out


def canaries(runs: int, seed: int):
    out = []
    configs = [
        ("n=200 full T=100 z=8", dict(n=200, batch_size=200, batching="full", steps=100, noise_multiplier=8.0)),
        ("n=200 full T=100 z=16", dict(n=200, batch_size=200, batching="full", steps=100, noise_multiplier=16.0)),
        ("n=200 full T=100 z=32", dict(n=200, batch_size=200, batching="full", steps=100, noise_multiplier=32.0)),
        ("n=200 full T=400 z=32", dict(n=200, batch_size=200, batching="full", steps=400, noise_multiplier=32.0)),
        ("n=1797 cyclic b=100 3 ep z=2", dict(n=1797, batch_size=100, batching="cyclic", steps=51,
                                              noise_multiplier=2.0)),
    ]
    for label, kw in configs:
        run = canary_run(learning_rate=None, feature_clip=3.0, clip_norm=1.0, diameter=4.0, **kw)
        t0 = time.perf_counter()
        res = audit_canary(run, delta=DELTA, feature_clip=3.0, runs=runs, random_state=[seed, 3])
        secs = time.perf_counter() - t0
        out.append(dict(setting=label, run=run.to_dict(), certified=res.certified_epsilon,
                        certified_by=res.certified_by, empirical=res.epsilon_lower, test=res.test.describe("loss"),
                        counts=[res.lower_bound.false_positives, res.lower_bound.false_negatives], seconds=secs,
                        violation=res.violation))
        print(f"canary {label:30s} cert {fmt(res.certified_epsilon):>6s} ({res.certified_by:<21s}) "
              f"emp {fmt(res.epsilon_lower):>5s}  cert/emp {fmt(res.ratio):>5s}  ({secs:.1f} s, "
              f"{4 * runs} runs){'  VIOLATION' if res.violation else ''}", flush=True)
    return out


def speed():
    run = at_1d_run(n=10, batch_size=10, batching="full", steps=500, learning_rate=1.0, noise_multiplier=4.0,
                    diameter=4.0)
    X, y, _ = at_1d_datasets(10)
    t0 = time.perf_counter()
    train_replicas(run, Linear(), X, y, replicas=10_000, feature_clip=1.0, random_state=0)
    vec = time.perf_counter() - t0
    t0 = time.perf_counter()
    for s in range(200):
        train(run, Linear(), X, y, feature_clip=1.0, random_state=s)
    loop = (time.perf_counter() - t0) / 200 * 10_000
    print(f"10,000 runs of 500 steps (1-D, full batch): replicas {vec:.2f} s, loop of train() "
          f"{loop:.1f} s (extrapolated from 200), speed-up {loop / vec:.0f}x")
    return dict(replicas_seconds=vec, loop_seconds_extrapolated=loop, speedup=loop / vec)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000, help="runs per dataset (1-D)")
    ap.add_argument("--canary-runs", type=int, default=2000, help="runs per dataset (canary)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    result = {
        "benchmark": "audit_gap",
        "machine": {"python": sys.version.split()[0], "numpy": np.__version__, "platform": platform.platform()},
        "delta": DELTA,
        "confidence": 0.95,
        "runs_per_dataset": args.runs,
        "one_d": run_1d(args.runs, args.seed),
        "detectable_noise_reduction": detectable_noise_reduction(args.runs),
        "canary": canaries(args.canary_runs, args.seed),
        "speed": speed(),
    }
    result["seconds"] = time.perf_counter() - t0
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1, default=lambda v: v.item() if hasattr(v, "item") else str(v))
    print(f"total {result['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
