"""Cost of an epoch of noisy SGD (train) against plain minibatch SGD.

Three loops over the same augmented data and the same shuffled batches:

* ``noisy``: :func:`noisysgd.train.train` — closed-form per-example clipping,
  Gaussian noise, λ, projection;
* ``plain``: :func:`noisysgd.train.sgd` — the same code path, no clipping, no noise;
* ``naive``: a minimal numpy minibatch SGD loop written out here (gather,
  forward matmul, derivative, backward matmul, update) — the floor.

Not a test: run it by hand::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/train_epoch_cost.py [--epochs 5]

Setup (validation, feature clipping, label encoding) is timed separately:
it is paid once per call, not per epoch.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import noisysgd
from noisysgd.train import BinaryLogistic, Softmax, augment, sgd, train

CASES = [
    ("softmax k=10, d=784, b=256, n=60000", lambda: Softmax(10), 60_000, 784, 256),
    ("binary logistic, d=100, b=256, n=60000", BinaryLogistic, 60_000, 100, 256),
    ("binary logistic, d=20, b=64, n=20000", BinaryLogistic, 20_000, 20, 64),
]


def naive_epochs(loss, Xbar, Y, b, epochs, eta, lam, seed):
    rng = np.random.default_rng(seed)
    n = Xbar.shape[0]
    W = np.zeros(loss.param_shape(Xbar.shape[1] - 1), dtype=Xbar.dtype)
    for _ in range(epochs):
        perm = rng.permutation(n)
        for j in range(n // b):
            idx = perm[j * b:(j + 1) * b]
            Xb = Xbar[idx]
            D = loss.derivative(Xb @ W, Y[idx])
            W = W - eta * (Xb.T @ D / b + lam * W)
    return W


def best_of(f, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    args = parser.parse_args()
    dtype = np.dtype(args.dtype)
    rng = np.random.default_rng(0)
    for name, make_loss, n, d, b in CASES:
        loss = make_loss()
        X = rng.normal(size=(n, d))
        y = rng.integers(0, loss.n_classes or 2, size=n)
        R = 30.0
        natural = loss.constants(feature_clip=R).natural_lipschitz
        lam = 0.0 if isinstance(loss, Softmax) else 1e-3  # clipped softmax is not convex: λ = 0
        run = noisysgd.Run.from_epochs(epochs=args.epochs, n=n, batch_size=b, batching="shuffle",
                                       learning_rate=0.1, noise_multiplier=1.0, lipschitz=0.1 * natural,
                                       strong_convexity=lam, diameter=100.0)
        one = run.replace(steps=1)
        setup = best_of(lambda: train(one, loss, X, y, feature_clip=R, random_state=0, dtype=dtype), args.repeats)
        noisy = best_of(lambda: train(run, loss, X, y, feature_clip=R, random_state=0, dtype=dtype), args.repeats)
        plain = best_of(lambda: sgd(run, loss, X, y, feature_clip=R, random_state=0, dtype=dtype), args.repeats)
        Xbar = augment(X, R, dtype=dtype)
        Y = loss.encode_labels(y)
        Y = Y.astype(dtype) if Y.dtype.kind == "f" else Y
        naive = best_of(lambda: naive_epochs(loss, Xbar, Y, b, args.epochs, 0.1, lam, 0), args.repeats)
        per = lambda t: (t - setup) / args.epochs * 1e3
        print(f"{name} [{dtype.name}]: setup {setup * 1e3:.1f} ms; per epoch noisy {per(noisy):.1f} ms, "
              f"plain {per(plain):.1f} ms, naive {naive / args.epochs * 1e3:.1f} ms; "
              f"noisy/plain {per(noisy) / per(plain):.2f}, noisy/naive {per(noisy) / (naive / args.epochs * 1e3):.2f}")


if __name__ == "__main__":
    main()
