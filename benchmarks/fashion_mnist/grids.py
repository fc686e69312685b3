"""The hyperparameter grids: 8 configurations per method, 2 × 2 × 2, fixed in advance.

Every method gets the same number of trials; each grid varies three knobs
that matter for that method.  Fixed for every noisysgd row: the softmax loss
with its natural Lipschitz constant (no per-example clipping below it, so the
loss stays convex: L = √(2(R²+1)) = 2, M = (R²+1)/2 = 1 at R = 1), feature
clip R = 1, a constant step size, float32.

* ``hidden`` and ``composition`` (the same runs, two calibrations): cyclic
  batches (one fixed order; the batching with the strongest sound hidden-state
  bound here, shifted interpolation), η = 1.95/(M + λ) (just below the 2/(M +
  2λ) of Ye & Shokri and the 2/M of shifted interpolation), batch size b ∈
  {500, 2000} × epochs ∈ {30, 120} × λ ∈ {1e-5, 1e-4}.  (More epochs than
  DP-SGD gets: the hidden-state bound stops growing after a burn-in of a few
  1/(ηλ) steps, composition does not.)
* ``ryffel``: their Algorithm 1 needs fresh fixed-size batches
  (``sample``), η < 1/M — η = 0.95/(M + λ) — and the Gaussian start of
  Lemma 3.4; otherwise the same b × epochs × λ.
* ``opacus``, ``opacus-replace``: Poisson sampling, clip norm C = 1, no
  weight decay, no momentum; b ∈ {500, 2000} × epochs ∈ {10, 30} × learning
  rate ∈ {4, 16} (composition charges every epoch, so its grid has fewer;
  DP-SGD has no step-size limit, so the learning rate is tuned instead of λ).
* ``nonprivate``: the same softmax model, noisysgd's engine without noise or
  clipping, shuffled batches, λ = 0; b ∈ {100, 500} × epochs ∈ {20, 60} ×
  η ∈ {1.95, 5}.
"""

from __future__ import annotations

import itertools

BATCH_SIZES = (500, 2000)


def _product(**axes):
    keys = list(axes)
    return [dict(zip(keys, values)) for values in itertools.product(*axes.values())]


def grid(method: str) -> list[dict]:
    if method in ("hidden", "composition"):
        return [dict(loss="softmax", batching="cyclic", lr="x3.9", **c)
                for c in _product(batch_size=BATCH_SIZES, epochs=(30, 120), l2=(1e-5, 1e-4))]
    if method == "ryffel":
        return [dict(loss="softmax", batching="sample", lr="x1.9", **c)
                for c in _product(batch_size=BATCH_SIZES, epochs=(30, 120), l2=(1e-5, 1e-4))]
    if method in ("opacus", "opacus-replace"):
        return [dict(clip=1.0, **c)
                for c in _product(batch_size=BATCH_SIZES, epochs=(10, 30), lr=(4.0, 16.0))]
    if method == "nonprivate":
        return [dict(loss="softmax", batching="shuffle", l2=0.0, **c)
                for c in _product(batch_size=(100, 500), epochs=(20, 60), lr=("x3.9", "x10"))]
    raise ValueError(f"unknown method {method!r}")


def quick_grid(method: str) -> list[dict]:
    """Two short configurations per method (smoke test of the pipeline, not results)."""
    out = []
    for cfg in grid(method)[:2]:
        cfg = dict(cfg)
        cfg["epochs"] = 2
        out.append(cfg)
    return out


def edge_grid(method: str) -> list[dict]:
    """Two configurations beyond the edge of the main grid, for the methods whose chosen
    configuration sat on that edge (largest b, most epochs, largest learning rate): a check
    that the comparison does not turn once the grids are widened.  Not part of the table."""
    if method == "hidden":
        return [dict(loss="softmax", batching="cyclic", lr="x3.9", batch_size=5000, epochs=300,
                     l2=1e-5),
                dict(loss="softmax", batching="cyclic", lr="x3.9", batch_size=2000, epochs=400,
                     l2=1e-4)]
    if method in ("opacus", "opacus-replace"):
        return [dict(clip=1.0, batch_size=5000, epochs=30, lr=32.0),
                dict(clip=1.0, batch_size=5000, epochs=60, lr=32.0)]
    raise ValueError(f"no edge grid for {method!r}")
