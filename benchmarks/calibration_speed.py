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

Also (issue 28 §3): noisysgd's best-bound calibration of a Poisson run (10 epochs) against
dp_accounting's ``calibrate_dp_mechanism`` with its PLD accountant on the same events,
replace-one and add/remove, caches cleared before each call.

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


def dp_accounting_calibration(run, epsilon: float, delta: float, z_tol: float | None):
    """dp_accounting's own ``calibrate_dp_mechanism`` with its PLD accountant (1e-4 discretisation)
    for a Poisson ``run`` of noisysgd (its rate, its steps, its adjacency): the peer calibration
    of the same events (replace: std z·L and shifts ±L; add/remove: std z, sensitivity 1)."""
    import dp_accounting

    relation = (dp_accounting.NeighboringRelation.REPLACE_ONE if run.adjacency == "replace"
                else dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)

    def event(z):
        return dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(run.sampling_rate, dp_accounting.GaussianDpEvent(z)), run.steps)

    return dp_accounting.calibrate_dp_mechanism(
        lambda: dp_accounting.pld.PLDAccountant(relation, value_discretization_interval=1e-4), event, epsilon, delta,
        tol=z_tol)


def _pld_calibration_vs_dp_accounting(epochs: int = 10, repeat: int = 3) -> dict:
    """Issue 28 §3: the best-bound calibration of a Poisson run (every analysis; the PLD decides)
    against dp_accounting's own ``calibrate_dp_mechanism`` with its PLD accountant on the same
    events (1e-4 discretisation, tolerance 1e-4·z on z, as noisysgd's rel_tol=1e-4), caches
    cleared before every call, best of ``repeat``; replace-one and add/remove."""
    import noisysgd
    from noisysgd.analyses import composition as comp

    from noisysgd import quadrature

    def cold():
        quadrature.replace_one_orders.cache_clear()
        quadrature._replace_one_pieces.cache_clear()
        comp._pld_epsilon.cache_clear()
        comp._one_step_pld.cache_clear()
        comp._self_composed.cache_clear()
        comp._query_epsilon.cache_clear()

    out = {}
    print(f"\nPLD calibration, Poisson q = {B}/{N}, {epochs} epochs, epsilon = {TARGET}, delta = {DELTA} "
          "(caches cleared before each call)")
    for adjacency in ("replace", "add-remove"):
        run = noisysgd.Run.from_epochs(epochs=epochs, n=N, batch_size=B, batching="poisson", learning_rate=0.1,
                                       noise_multiplier=1.0, lipschitz=1.0, adjacency=adjacency)

        def ours(run=run):
            cold()
            return noisysgd.calibrate(run, epsilon=TARGET, delta=DELTA).noise_multiplier

        def theirs(run=run, z_tol=None):
            cold()
            return dp_accounting_calibration(run, TARGET, DELTA, z_tol)

        t_ours, z_ours = timed(ours, repeat)
        t_theirs, z_theirs = timed(lambda: theirs(z_tol=1e-4 * z_ours), repeat)
        out[adjacency] = {"noisysgd_seconds": t_ours, "dp_accounting_seconds": t_theirs,
                          "noisysgd_over_dp_accounting": t_ours / t_theirs, "noise_multiplier": z_ours,
                          "dp_accounting_noise_multiplier": z_theirs}
        print(f"  {adjacency:<11} noisysgd calibrate (best bound) {t_ours:.3f} s, dp_accounting "
              f"calibrate_dp_mechanism (PLD) {t_theirs:.3f} s: {t_ours / t_theirs:.2f}x; "
              f"z {z_ours:.6f} vs {z_theirs:.6f}")
    return out


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
    results["pld_calibration"] = _pld_calibration_vs_dp_accounting()
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
