"""Time a 1,000-point ε-versus-T curve of the Altschuler–Talwar bound, side by side
with the composition baseline (dp_accounting's RDP accountant) on the same T's.

Same work: one run (sample batches, n = 60,000, b = 256, z = 1, D = 10, η = 0.5,
M = 1), 1,000 values of T log-spaced in [1, 10⁹], 100 Rényi orders, δ = 1e-5.
Not a test: run it by hand after installing the test extras::

    python benchmarks/altschuler_talwar_curve.py [--batching sample|poisson|cyclic|full]

Target (issue 3): the curve well under a second on 2 cores.  Also reported: one
single-T evaluation (``rdp``), so the ratio says what the shared precomputation
buys, and the cost of the same curve for composition through dp_accounting.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
import warnings

import numpy as np

ORDERS = [1 + x / 10 for x in range(1, 51)] + list(range(7, 57))  # 100 orders


def make_run(batching: str):
    import noisysgd

    lr = 0.5 if batching != "poisson" else 0.008  # poisson needs η <= 2b/(nM)
    return noisysgd.Run(n=60_000, batch_size=None if batching == "full" else 256, batching=batching,
                        steps=1, learning_rate=lr, noise_multiplier=1.0 if batching != "full" else 100.0,
                        lipschitz=1.0, smoothness=1.0, diameter=10.0, convex=True)


def at_curve(run, steps, delta):
    from noisysgd.analyses import get_analysis
    from noisysgd.rdp import epsilon_from_rdp

    rows = get_analysis("altschuler-talwar").rdp_over_steps(run, steps, ORDERS)
    return [epsilon_from_rdp(ORDERS, row, delta).epsilon for row in rows]


def dpa_curve(run, steps, delta):
    import dp_accounting

    out = []
    for T in steps.tolist():
        acc = dp_accounting.rdp.RdpAccountant(ORDERS)
        acc.compose(dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(run.sampling_rate, dp_accounting.GaussianDpEvent(0.5)), T))
        out.append(acc.get_epsilon(delta))
    return out


def timed(fn, *args, repeat=3):
    times, value = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        value = fn(*args)
        times.append(time.perf_counter() - t)
    return statistics.median(times), value


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batching", default="sample", choices=["sample", "poisson", "cyclic", "full"])
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    from noisysgd.analyses import get_analysis

    run = make_run(args.batching)
    steps = np.unique(np.concatenate([np.arange(1, 101), np.geomspace(101, 1e9, 900).astype(np.int64)]))
    t_curve, eps = timed(at_curve, run, steps, 1e-5)
    t_single, _ = timed(lambda: get_analysis("altschuler-talwar").rdp(run.replace(steps=10**6), ORDERS), repeat=5)
    print(f"machine: {platform.machine()}, {platform.python_version()}, batching = {args.batching}")
    print(f"altschuler-talwar curve, {steps.size} values of T x {len(ORDERS)} orders: {t_curve:.3f} s")
    print(f"one single-T evaluation: {t_single:.3f} s  "
          f"(curve / single = {t_curve / t_single:.1f}x; {steps.size} singles would be "
          f"{steps.size * t_single:.0f} s)")
    if args.batching in ("sample", "poisson"):
        t_dpa, comp = timed(dpa_curve, run, steps, 1e-5, repeat=1)
        print(f"composition curve through dp_accounting RDP, same T's: {t_dpa:.3f} s "
              f"(ratio A&T / dp_accounting = {t_curve / t_dpa:.2f})")
        print(f"epsilon at T = {steps[-1]}: altschuler-talwar {eps[-1]:.4g}, composition {comp[-1]:.4g}")
    else:
        print(f"epsilon at T = {steps[-1]}: altschuler-talwar {eps[-1]:.4g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
