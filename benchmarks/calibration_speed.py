"""Calibration and planning speed, side by side with Opacus on the composition case.

Same work for both, in one run: DP-SGD with Poisson batches (add/remove
adjacency, Opacus' default), q = 256/60,000, δ = 1e-5, 100 Rényi orders.

* calibration: the smallest noise multiplier z for ε = 1 after 1,000 epochs —
  ``noisysgd.calibrate(..., analyses="composition")`` against Opacus'
  ``get_noise_multiplier`` (RDP accountant).  Opacus stops when ε is within
  0.01 of the target; noisysgd when z is within a relative 1e-4 and always
  returns a z that meets the target.  Both are also run at matched precision
  (Opacus ``epsilon_tolerance=1e-4``).
* plan: ε after each of 1..1,000 epochs — ``noisysgd.plan(...,
  analyses=["composition"])`` against Opacus' ``RDPAccountant.get_epsilon``
  once per epoch (its RDP is linear in the steps, but its API composes anew).

Also timed, without a peer: ``noisysgd.plan`` with every analysis on a
strongly convex run (Ye–Shokri's recursion, shifted interpolation, the PLD at
a few epochs), and ``noisysgd.calibrate`` with the best sound bound.

Not a test: run it by hand after installing the test extras::

    python benchmarks/calibration_speed.py [--epochs 1000] [--json benchmarks/results/calibration_speed.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings
from pathlib import Path

import numpy as np

ORDERS = [1 + x / 10 for x in range(1, 51)] + list(range(7, 57))  # 100 orders
N, B, DELTA, TARGET = 60_000, 256, 1e-5, 1.0


def timed(fn, repeat: int = 3):
    fn()  # warm-up: imports, caches
    best, value = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t)
    return best, value


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=1000)
    p.add_argument("--json", help="write the results to this JSON file")
    a = p.parse_args(argv)
    warnings.simplefilter("ignore")
    import opacus
    from opacus.accountants import RDPAccountant
    from opacus.accountants.utils import get_noise_multiplier

    import noisysgd

    q = B / N
    steps_per_epoch = int(np.ceil(N / B))
    steps = a.epochs * steps_per_epoch
    run = noisysgd.Run(n=N, batch_size=B, batching="poisson", steps=steps, learning_rate=0.1,
                       noise_multiplier=1.0, lipschitz=1.0, adjacency="add-remove")
    results: dict = {"machine": f"{platform.machine()}, {platform.processor() or '?'}, "
                                f"Python {platform.python_version()}",
                     "noisysgd": noisysgd.__version__, "opacus": opacus.__version__,
                     "setting": {"n": N, "batch_size": B, "q": q, "epochs": a.epochs, "delta": DELTA,
                                 "target_epsilon": TARGET, "orders": len(ORDERS)}}

    def ours(rel_tol=1e-4):
        return noisysgd.calibrate(run, epsilon=TARGET, delta=DELTA, analyses="composition",
                                  orders=ORDERS, rel_tol=rel_tol)

    def theirs(tol=0.01):
        return get_noise_multiplier(target_epsilon=TARGET, target_delta=DELTA, sample_rate=q,
                                    steps=steps, accountant="rdp", epsilon_tolerance=tol, alphas=ORDERS)

    def opacus_eps(z):
        acc = RDPAccountant()
        acc.history = [(z, q, steps)]
        return acc.get_epsilon(DELTA, alphas=ORDERS)

    print(results["machine"])
    print(f"composition, Poisson q = {q:.5f}, {a.epochs} epochs ({steps} steps), delta = {DELTA}, "
          f"{len(ORDERS)} orders, target epsilon = {TARGET}")
    print(f"{'calibration':<44}{'seconds':>9}{'z':>12}{'epsilon at z':>15}")
    rows = {}
    for label, fn in [("noisysgd calibrate (z rel. tol 1e-4)", ours),
                      ("opacus get_noise_multiplier (eps tol 0.01)", theirs),
                      ("opacus get_noise_multiplier (eps tol 1e-4)", lambda: theirs(1e-4))]:
        t, value = timed(fn)
        z = value.noise_multiplier if hasattr(value, "noise_multiplier") else float(value)
        eps = opacus_eps(z)
        rows[label] = {"seconds": t, "noise_multiplier": z, "epsilon_at_z": eps}
        print(f"{label:<44}{t:>9.4f}{z:>12.6f}{eps:>15.6f}")
    t_ours = rows["noisysgd calibrate (z rel. tol 1e-4)"]["seconds"]
    for label in list(rows)[1:]:
        print(f"  {label}: {rows[label]['seconds'] / t_ours:.2f}x the time of noisysgd")
    results["calibration"] = rows

    epochs = np.arange(1, a.epochs + 1)
    base = run.replace(steps=1)

    def plan_ours():
        return noisysgd.plan(base, delta=DELTA, epochs=epochs, analyses=["composition"], orders=ORDERS)

    def plan_theirs():
        out = []
        for e in epochs:
            acc = RDPAccountant()
            acc.history = [(1.0, q, int(e) * steps_per_epoch)]
            out.append(acc.get_epsilon(DELTA, alphas=ORDERS))
        return np.array(out)

    t1, plan = timed(plan_ours)
    t2, eps_theirs = timed(plan_theirs, repeat=1)
    diff = float(np.max(np.abs(plan.curves["composition"].epsilon / eps_theirs - 1)))
    print(f"\nplan: epsilon after each of {a.epochs} epochs (composition, z = 1)")
    print(f"noisysgd plan: {t1:.4f} s; opacus get_epsilon per epoch: {t2:.4f} s "
          f"({t2 / t1:.1f}x the time of noisysgd); largest relative difference {diff:.1e}")
    results["plan_composition"] = {"noisysgd_seconds": t1, "opacus_seconds": t2,
                                   "opacus_over_noisysgd": t2 / t1, "max_rel_diff": diff}

    strong = noisysgd.Run(n=N, batch_size=B, batching="sample", steps=1, learning_rate=0.05,
                          noise_multiplier=2.0, lipschitz=1.0, smoothness=1.25, strong_convexity=0.01)
    t3, best_plan = timed(lambda: noisysgd.plan(strong, delta=DELTA, epochs=epochs, orders=ORDERS),
                          repeat=1)
    t4, cal = timed(lambda: noisysgd.calibrate(strong.replace(steps=100 * steps_per_epoch),
                                               epsilon=TARGET, delta=DELTA, orders=ORDERS), repeat=1)
    print(f"\nno peer: plan with every analysis (sample batches, m = 0.01, {a.epochs} epochs): "
          f"{t3:.2f} s; calibrate with the best sound bound (100 epochs): {t4:.2f} s, "
          f"z = {cal.noise_multiplier:.4f} ({cal.report.best.analysis}, {cal.evaluations} evaluations)")
    results["no_peer"] = {"plan_best_seconds": t3, "calibrate_best_seconds": t4,
                          "calibrate_best_analysis": cal.report.best.analysis}
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
