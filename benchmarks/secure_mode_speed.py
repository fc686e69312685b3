"""What ``secure_mode`` costs: :func:`noisysgd.train.train` with the noise, the
batches and the start drawn from the operating system's CSPRNG
(``secure_mode=True``) beside the default (numpy generators seeded by
``random_state``), same run and data.

Two problems, every batching scheme: the MNIST-shaped softmax of
``train_speed.py`` (n = 60,000, d = 784, k = 10, b = 256: 7,850 noise
coordinates a step) and a small logistic regression (n = 10,000, d = 20,
b = 100: 21 a step, where the fixed cost of a draw dominates).  ``loop`` is
the time in the engine's step loop (``noisy_sgd_core``, which draws batches
and noise as it goes; measured by wrapping it), ``call`` the whole call; each
the best of ``--repeats`` interleaved repetitions after a warm-up.  Also the
noise alone: 785 × 10 standard normals from numpy's ziggurat and from
``SecureRandom``.

    python benchmarks/secure_mode_speed.py [--repeats 7] [--threads 1] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (set before numpy loads)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)

    import numpy as np

    from noisysgd import Run
    from noisysgd.train import BinaryLogistic, Softmax, engine, train
    from noisysgd.train.secure import SecureRandom

    core = engine.noisy_sgd_core
    last = {}

    def timed(*a, **k):
        t = time.perf_counter()
        out = core(*a, **k)
        last["loop"] = time.perf_counter() - t
        return out

    engine.noisy_sgd_core = timed
    rng = np.random.default_rng(0)
    rows = []

    def case(problem, n, d, k, b, batching, epochs):
        X = rng.normal(size=(n, d)) / np.sqrt(d)
        y = rng.integers(0, k, size=n) if k > 2 else (X[:, 0] > 0).astype(int)
        loss = Softmax(k) if k > 2 else BinaryLogistic()
        run = Run.from_epochs(epochs=epochs, n=n, batch_size=b, batching=batching, learning_rate=0.1,
                              noise_multiplier=1.0, lipschitz=loss.constants(feature_clip=1.0).lipschitz)
        best = {}
        for rep in range(args.repeats + 1):
            for secure in (False, True):
                kw = {"secure_mode": True} if secure else {"random_state": rep}
                t = time.perf_counter()
                train(run, loss, X, y, feature_clip=1.0, **kw)
                call = time.perf_counter() - t
                if rep:  # the first round warms up
                    for what, value in (("call", call), ("loop", last["loop"])):
                        best[secure, what] = min(best.get((secure, what), float("inf")), value)
        row = {"problem": problem, "batching": batching, "steps": run.steps,
               "loop_us_per_step": {"default": 1e6 * best[False, "loop"] / run.steps,
                                    "secure": 1e6 * best[True, "loop"] / run.steps},
               "loop_slowdown": best[True, "loop"] / best[False, "loop"],
               "call_s": {"default": best[False, "call"], "secure": best[True, "call"]},
               "call_slowdown": best[True, "call"] / best[False, "call"]}
        rows.append(row)
        print(f"{problem:34s} {batching:8s} loop {row['loop_us_per_step']['default']:8.1f} -> "
              f"{row['loop_us_per_step']['secure']:8.1f} us/step ({row['loop_slowdown']:.2f}x)   "
              f"call {best[False, 'call']:.3f} -> {best[True, 'call']:.3f} s ({row['call_slowdown']:.2f}x)",
              flush=True)

    for batching in ("cyclic", "shuffle", "poisson", "sample"):
        case("softmax n=60000 d=784 k=10 b=256", 60000, 784, 10, 256, batching, 1)
    for batching in ("cyclic", "shuffle", "poisson", "sample"):
        case("logistic n=10000 d=20 b=100", 10000, 20, 2, 100, batching, 10)

    out = np.empty((785, 10))
    numpy_rng, secure_rng = np.random.default_rng(0), SecureRandom()
    noise = {}
    for name, draw in (("numpy", lambda: numpy_rng.standard_normal(out=out)),
                       ("secure", lambda: secure_rng.standard_normal(out=out))):
        for _ in range(args.repeats):
            t = time.perf_counter()
            for _ in range(200):
                draw()
            noise[name] = min(noise.get(name, float("inf")), (time.perf_counter() - t) / 200 * 1e6)
    print(f"noise, 785 x 10 normals: numpy {noise['numpy']:.1f} us, secure {noise['secure']:.1f} us "
          f"({noise['secure'] / noise['numpy']:.2f}x)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"threads": args.threads, "repeats": args.repeats, "rows": rows,
                       "noise_785x10_us": noise, "cpu_count": os.cpu_count(), "python": sys.version},
                      f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
