"""A private fit end to end against plain numpy SGD on the same work (issue 28 §4).

The same data (60,000 × 784 in [0, 1), 10 classes), the same amount of work (SGD steps of
batches of 256 for the given epochs, softmax, lr 1), in one process, best of ``--repeats``:

* ``numpy SGD``: minibatch SGD written out here (rows clipped to norm 1 once, a fresh
  permutation per epoch; gather, forward, softmax derivative, backward, update): the floor.
* ``numpy DP-SGD``: the same loop with what DP-SGD adds to every step, written out: Poisson
  batches at rate b/n (a Binomial(n, b/n) size, then a uniform subset of it), the per-example gradient norms ‖ψ_i‖·‖x̄_i‖ and
  their clip at the loss's Lipschitz constant, and Gaussian noise on every coordinate of the
  summed gradient: the floor of any DP-SGD on this data (no calibration, no certificate).
* ``fit (fixed run)``: ``NoisySGDClassifier(epsilon=1, batching="poisson", batch_size=256,
  epochs=E, learning_rate=1, alpha=1e-5)``: validation, the private mean (centering), the
  calibration of the noise for the model and the mean together, training, the certificate.
* ``fit, center=None``: the same without the private mean (no query, one calibration).
* ``fit (defaults)``: ``NoisySGDClassifier(epsilon=1)``: the configuration search as well
  (it chooses its own epochs: the ratio is per call, not per epoch).
* ``calibration alone``: ``noisysgd.calibrate`` of the fixed run (best bound, no mean query), and
  ``dp_accounting calibration``: dp_accounting's own ``calibrate_dp_mechanism`` with its PLD
  accountant on the same events (as ``calibration_speed.py``): the part of a private fit that
  plain SGD does not have, and the floor under the end-to-end ratio at few epochs.

Every timed call starts with noisysgd's caches emptied (:func:`_cold`): the calibration is paid
each time, as on a first fit.  Prints each time and its ratio to numpy SGD, and the memory each fit allocates beyond the data
(tracemalloc's peak over the call, in units of X's size, one separate call: the caches of the
accountant count too); writes ``--json``.  Not a test::

    python benchmarks/fit_end_to_end.py [--epochs 5,30] [--json benchmarks/results/fit_end_to_end.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings
from pathlib import Path

import numpy as np

N, D, K, B = 60_000, 784, 10, 256


def _data():
    rng = np.random.default_rng(0)
    X = rng.random((N, D))
    W = rng.normal(size=(D, K))
    y = np.argmax(X @ W + 3.0 * rng.normal(size=(N, K)), axis=1)
    return X, y


def numpy_sgd(X, y, epochs: int, lr: float = 1.0):
    Xc = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    theta = np.zeros((D + 1, K))
    rng = np.random.default_rng(1)
    rows = np.arange(B)
    for _ in range(epochs):
        perm = rng.permutation(N)
        for s in range(0, N - B + 1, B):
            idx = perm[s:s + B]
            xb = Xc[idx]
            z = xb @ theta[:-1] + theta[-1]
            z -= z.max(axis=1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(axis=1, keepdims=True)
            p[rows, y[idx]] -= 1.0
            theta[:-1] -= lr * (xb.T @ p) / B
            theta[-1] -= lr * p.mean(axis=0)
    return theta


def numpy_dp_sgd(X, y, epochs: int, lr: float = 1.0, z: float = 1.0):
    Xc = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    xnorm = np.sqrt(np.einsum("ij,ij->i", Xc, Xc) + 1.0)  # ‖x̄_i‖ with the bias coordinate
    C = np.sqrt(2.0) * xnorm.max()  # softmax: ‖ψ_i‖ ≤ √2
    theta = np.zeros((D + 1, K))
    rng = np.random.default_rng(1)
    for _ in range(epochs * round(N / B)):
        idx = rng.choice(N, rng.binomial(N, B / N), replace=False)  # Poisson: a Binomial size, a uniform subset
        xb = Xc[idx]
        s = xb @ theta[:-1] + theta[-1]
        s -= s.max(axis=1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(len(idx)), y[idx]] -= 1.0
        p *= np.minimum(1.0, C / (np.linalg.norm(p, axis=1) * xnorm[idx]))[:, None]
        theta[:-1] -= lr * (xb.T @ p + z * C * rng.standard_normal((D, K))) / B
        theta[-1] -= lr * (p.sum(axis=0) + z * C * rng.standard_normal(K)) / B
    return theta


def _cold() -> None:
    """Empty noisysgd's own caches (the accountant's PLDs and RDP curves, the configuration's), so
    that every timed fit calibrates as a first fit does: a repeat must not find the noise already
    computed."""
    import sys

    for name, module in list(sys.modules.items()):
        if name == "noisysgd" or name.startswith("noisysgd."):
            for value in vars(module).values():
                if callable(getattr(value, "cache_clear", None)):  # functools.lru_cache
                    value.cache_clear()
    from noisysgd.analyses import ye_shokri

    ye_shokri._RECURSIONS.clear()


def _calibrations(epochs: int) -> dict:
    """The fixed run's calibration alone, noisysgd's best bound and dp_accounting's own PLD
    calibration of the same events (``calibration_speed.dp_accounting_calibration``; replace-one,
    ε = 1, δ = 1e-5, tolerance 1e-4·z)."""
    import sys

    import noisysgd

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from calibration_speed import dp_accounting_calibration

    run = noisysgd.Run.from_epochs(epochs=epochs, n=N, batch_size=B, batching="poisson", learning_rate=1.0,
                                   noise_multiplier=1.0, lipschitz=1.0)
    z = noisysgd.calibrate(run, epsilon=1.0, delta=1e-5).noise_multiplier
    return {
        "calibration alone": lambda: noisysgd.calibrate(run, epsilon=1.0, delta=1e-5),
        "dp_accounting calibration": lambda: dp_accounting_calibration(run, 1.0, 1e-5, 1e-4 * z),
    }


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        _cold()
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _peak_over_data(fn, nbytes: int) -> float:
    """tracemalloc's peak during ``fn()`` (numpy reports its buffers to it), over ``nbytes``."""
    import tracemalloc

    _cold()  # the accountant's work (its PLDs) counts as well
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / nbytes
    finally:
        tracemalloc.stop()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", default="5,30")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    from noisysgd import NoisySGDClassifier

    X, y = _data()
    classes = list(range(K))
    out = {"machine": f"{platform.machine()}, Python {platform.python_version()}", "n": N, "d": D,
           "batch_size": B, "rows": {}}
    for epochs in (int(e) for e in args.epochs.split(",")):
        fixed = dict(epsilon=1.0, batching="poisson", batch_size=B, epochs=epochs, learning_rate=1.0, alpha=1e-5,
                     classes=classes, random_state=0)
        runs = {
            "numpy SGD": lambda: numpy_sgd(X, y, epochs),
            "numpy DP-SGD": lambda: numpy_dp_sgd(X, y, epochs),
            "fit (fixed run)": lambda: NoisySGDClassifier(**fixed).fit(X, y),
            "fit, center=None": lambda: NoisySGDClassifier(**fixed, center=None).fit(X, y),
            **_calibrations(epochs),
        }
        # each row's repeats in a row, best kept: numpy SGD's copy of the rows then reuses memory it
        # has touched (interleaved with the fits, its first touch of 376 MiB cost it up to 0.8 s)
        times = {k: _best(f, args.repeats) for k, f in runs.items()}
        floor, dp_floor = times["numpy SGD"], times["numpy DP-SGD"]
        print(f"{epochs} epochs of batches of {B} on {N} x {D}:")
        for k, t in times.items():
            print(f"  {k:<26} {t:7.2f} s  {t / floor:5.2f}x numpy SGD  {t / dp_floor:5.2f}x numpy DP-SGD")
        out["rows"][str(epochs)] = {k: {"seconds": t, "ratio_to_numpy": t / floor, "ratio_to_numpy_dp_sgd": t / dp_floor}
                                    for k, t in times.items()}
        if epochs == min(int(e) for e in args.epochs.split(",")):
            peaks = {k: _peak_over_data(runs[k], X.nbytes) for k in ("fit (fixed run)", "fit, center=None")}
            for k, v in peaks.items():
                print(f"  {k:<20} allocates at most {v:.2f}x the data ({X.nbytes / 2**20:.0f} MiB)")
            out["peak_allocation_over_data"] = peaks
    t = _best(lambda: NoisySGDClassifier(epsilon=1.0, classes=classes, random_state=0).fit(X, y), args.repeats)
    print(f"  fit (defaults, its own configuration) {t:.2f} s")
    out["defaults_seconds"] = t
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
