"""Time ε for DP-SGD composition with noisysgd, dp_accounting and Opacus, side by side.

Same work for all three: T steps of the Poisson-sampled Gaussian mechanism
(add/remove adjacency, the peers' default), one 100-order grid, one δ.
Not a test: run it by hand after installing the test extras::

    python benchmarks/accountant_speed.py [--q 0.004] [--z 1.1] [--steps 10000]

Target (issue 2): noisysgd at least 2x faster than the fastest peer, with equal values.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings


ORDERS = [1 + x / 10 for x in range(1, 51)] + list(range(7, 57))  # 100 orders, as Opacus' style


def noisysgd_eps(q, z, steps, delta, n=1_000_000):
    import noisysgd

    run = noisysgd.Run(n=n, batch_size=round(q * n), batching="poisson", steps=steps, learning_rate=1.0,
                       noise_multiplier=z, lipschitz=1.0, adjacency="add-remove")
    return noisysgd.epsilon(run, delta=delta, analyses=["composition"], orders=ORDERS).epsilon


def dp_accounting_eps(q, z, steps, delta):
    import dp_accounting

    acc = dp_accounting.rdp.RdpAccountant(ORDERS)
    acc.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)), steps))
    return acc.get_epsilon(delta)


def opacus_eps(q, z, steps, delta):
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

    rdp = compute_rdp(q=q, noise_multiplier=z, steps=steps, orders=ORDERS)
    return get_privacy_spent(orders=ORDERS, rdp=rdp, delta=delta)[0]


def timed(fn, *args, repeat=30):
    fn(*args)  # warm-up (imports, caches)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        value = fn(*args)
        times.append(time.perf_counter() - t)
    return statistics.median(times), float(value)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--q", type=float, default=0.004)
    p.add_argument("--z", type=float, default=1.1)
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--json", help="also write the results to this JSON file")
    a = p.parse_args(argv)
    assert len(set(ORDERS)) == 100
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn in [("noisysgd", noisysgd_eps), ("dp_accounting", dp_accounting_eps), ("opacus", opacus_eps)]:
            t, eps = timed(fn, a.q, a.z, a.steps, a.delta, repeat=a.repeat)
            rows.append((name, t, eps))
    ours_t, ours_eps = rows[0][1], rows[0][2]
    fastest_peer = min(t for _, t, _ in rows[1:])
    print(f"q={a.q} z={a.z} steps={a.steps} delta={a.delta} orders={len(ORDERS)} (median of {a.repeat})")
    print(f"{'library':<15}{'ms':>10}{'epsilon':>22}{'rel. diff':>12}{'time / noisysgd':>17}")
    for name, t, eps in rows:
        print(f"{name:<15}{t * 1e3:>10.3f}{eps:>22.15f}{eps / ours_eps - 1:>12.1e}{t / ours_t:>17.2f}")
    ratio = fastest_peer / ours_t
    print(f"speed-up over the fastest peer: {ratio:.2f}x (target >= 2x): {'met' if ratio >= 2 else 'NOT met'}")
    if a.json:
        import json
        import platform
        from pathlib import Path

        import dp_accounting
        import opacus

        import noisysgd

        data = {
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
            "versions": {"noisysgd": noisysgd.__version__, "opacus": opacus.__version__,
                         "dp_accounting": getattr(dp_accounting, "__version__", "?")},
            "setting": {"q": a.q, "z": a.z, "steps": a.steps, "delta": a.delta, "orders": len(ORDERS),
                        "repeat": a.repeat, "statistic": "median seconds"},
            "rows": [{"library": name, "seconds": t, "epsilon": eps} for name, t, eps in rows],
            "speedup_over_fastest_peer": ratio,
        }
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
