"""Replace-one Poisson RDP (``rdp.replace_one_sampled_gaussian_rdp``): quadrature at every order
of the default grid versus quadrature at about a third of them plus the chord of the convex
log A_α in between (what the library does), side by side in one run.

Reports, per (q, z): the time of each (fresh caches), their ratio, the largest ratio of the
chord curve to the per-order curve, and the largest relative increase of ε at δ = 1e-5 over
T ∈ {10, …, 10⁵} steps.  Also a full ``calibrate`` of a Poisson replace-one run with
``analyses=["composition"]`` (RDP only).

    python benchmarks/replace_one_speed.py
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np

from noisysgd import Run, calibrate
from noisysgd import quadrature as Q, rdp as R

OUT = Path(__file__).resolve().parent / "results" / "replace_one_speed.json"
CASES = [(0.25, 7.0), (0.01, 2.0), (0.3, 0.6), (0.005, 0.8), (0.04, 16.3), (0.001, 1.0)]


def _eps(curve, T):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return R.epsilon_from_rdp(R.DEFAULT_ORDERS, curve * T, 1e-5).epsilon


def main() -> int:
    A = R.DEFAULT_ORDERS
    rows = []
    print(f"{'q':>6}{'z':>6}{'every order s':>15}{'chord s':>9}{'ratio':>7}{'max curve ratio':>17}{'max eps rel':>13}")
    for q, z in CASES:
        Q.replace_one_orders.cache_clear()
        Q._replace_one_pieces.cache_clear()
        t = time.perf_counter()
        every = np.array(Q.replace_one_orders(tuple(A.tolist()), q, z))
        t_every = time.perf_counter() - t
        Q.replace_one_orders.cache_clear()
        Q._replace_one_pieces.cache_clear()
        t = time.perf_counter()
        chord = R._replace_one_on_grid(A, q, z)
        t_chord = time.perf_counter() - t
        assert np.all(chord >= every * (1 - 1e-12))
        f = np.isfinite(every) & (every > 1e-12)
        curve = float((chord[f] / every[f]).max())
        rel = max(_eps(chord, T) / _eps(every, T) - 1 for T in (10, 100, 1000, 10_000, 100_000))
        rows.append({"q": q, "z": z, "every_order_s": t_every, "chord_s": t_chord, "speedup": t_every / t_chord,
                     "max_curve_ratio": curve, "max_epsilon_rel_increase": rel})
        print(f"{q:6g}{z:6g}{t_every:15.3f}{t_chord:9.3f}{t_every / t_chord:7.2f}{curve:17.4f}{rel:13.2e}")
    run = Run(n=60000, batch_size=600, batching="poisson", steps=20000, learning_rate=0.1, lipschitz=1.0,
              adjacency="replace")
    timings = {}
    for mode in ("every order", "chord"):
        Q.replace_one_orders.cache_clear()
        Q._replace_one_pieces.cache_clear()
        saved = R._replace_one_on_grid
        if mode == "every order":
            R._replace_one_on_grid = lambda a, q, s: np.array(Q.replace_one_orders(tuple(a.tolist()), q, s))
        try:
            t = time.perf_counter()
            c = calibrate(run, epsilon=2.0, delta=1e-5, analyses=["composition"])
            timings[mode] = {"seconds": time.perf_counter() - t, "noise_multiplier": c.noise_multiplier,
                             "evaluations": c.evaluations}
        finally:
            R._replace_one_on_grid = saved
    print("calibrate (q = 0.01, 20,000 steps, eps = 2, composition RDP): "
          + ", ".join(f"{k}: {v['seconds']:.2f} s, z = {v['noise_multiplier']:.5g}" for k, v in timings.items())
          + f"; ratio {timings['every order']['seconds'] / timings['chord']['seconds']:.2f}")
    OUT.write_text(json.dumps({"cases": rows, "calibrate": timings}, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
