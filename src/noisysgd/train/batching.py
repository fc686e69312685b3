"""Batch index streams, exactly as the privacy analyses assume them.

Every stream is driven by a :class:`numpy.random.Generator` and yields, for
each of ``steps`` steps, the indices of that step's batch: an integer array,
or ``slice(0, n)`` for ``full`` (so that ``X[batch]`` is a view, not a copy).
The schemes (see :data:`noisysgd.run.BATCHING_SCHEMES`):

``poisson``
    every index independently with probability q = b/n, afresh each step.
    Drawn as a Binomial(n, q) batch size and then a uniform subset of that
    size — the same distribution, at a cost O(|B|) instead of O(n) per step.
    The batch size is random; the trainer still divides by b.
``sample``
    a uniform subset of exactly b distinct indices, afresh each step
    (``Generator.choice(n, b, replace=False)``, which uses Floyd's O(b)
    algorithm when b ≪ n).
``shuffle``
    a fresh uniform permutation each epoch, cut into ⌊n/b⌋ batches of exactly
    b; the n mod b indices at its end are not used that epoch.
``cyclic``
    *one* uniform permutation, drawn once from the generator before the first
    step, cut into ⌊n/b⌋ batches of exactly b and reused in the same order
    every epoch.  The data's own order is never used: it could depend on the
    data (sorted by label, by date, …), while a random order drawn
    independently of the data is a fixed order in the sense of the analyses.
``full``
    all n indices every step.

A run may stop inside an epoch: the stream simply ends after ``steps``
batches.

>>> import numpy as np
>>> stream = batches("cyclic", n=5, batch_size=2, steps=4, rng=np.random.default_rng(0))
>>> [b.tolist() for b in stream]
[[2, 4], [3, 0], [2, 4], [3, 0]]
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..run import BATCHING_SCHEMES, Run, _choice, _integer

__all__ = ["batches", "run_batches"]


def batches(
    scheme: str, *, n: int, batch_size: int, steps: int, rng: np.random.Generator
) -> Iterator[np.ndarray | slice]:
    """Yield the batch of each of ``steps`` steps under ``scheme``.

    Parameters
    ----------
    scheme : {"poisson", "sample", "shuffle", "cyclic", "full"}
        The batching scheme (module docstring).
    n : int
        Number of examples.
    batch_size : int
        b, 1 <= b <= n (the expected size under ``poisson``; n for ``full``).
    steps : int
        Number of batches to yield.
    rng : numpy.random.Generator
        The only source of randomness.

    Yields
    ------
    numpy.ndarray of int64, or slice
        Indices into the n examples (``slice(0, n)`` for ``full``).  Arrays
        of ``shuffle``/``cyclic`` are views of the epoch's permutation: copy
        them if you keep them past the next epoch.
    """
    scheme = _choice("batching", scheme, BATCHING_SCHEMES)
    n = _integer("n", n)
    b = _integer("batch_size", batch_size)
    steps = _integer("steps", steps)
    if b > n:
        raise ValueError(f"batch_size must be at most n ({n}). Found {batch_size!r}.")
    if scheme == "full" and b != n:
        raise ValueError(f"batch_size must equal n ({n}) for batching='full'. Found {batch_size!r}.")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator. Found {type(rng).__name__}.")
    return _GENERATORS[scheme](n, b, steps, rng)


def run_batches(run: Run, rng: np.random.Generator) -> Iterator[np.ndarray | slice]:
    """The batch stream of ``run`` (its n, batch size, batching and steps)."""
    if not isinstance(run, Run):
        raise ValueError(f"run must be a noisysgd.Run. Found {type(run).__name__}.")
    return batches(run.batching, n=run.n, batch_size=run.batch_size, steps=run.steps, rng=rng)


def _poisson(n, b, steps, rng):
    q = b / n
    if q >= 1.0:  # b = n: every example every step
        for _ in range(steps):
            yield np.arange(n)
        return
    # Size ~ Binomial(n, q), then a uniform subset of that size: the law of
    # independent inclusions with probability q.  Sizes drawn in chunks.
    done = 0
    while done < steps:
        sizes = rng.binomial(n, q, size=min(steps - done, 4096))
        for size in sizes:
            yield rng.choice(n, int(size), replace=False)
        done += len(sizes)


def _sample(n, b, steps, rng):
    for _ in range(steps):
        yield rng.choice(n, b, replace=False)


def _partition(perm, b, per_epoch):
    for j in range(per_epoch):
        yield perm[j * b:(j + 1) * b]


def _shuffle(n, b, steps, rng):
    per_epoch = n // b
    done = 0
    while done < steps:
        perm = rng.permutation(n)
        yield from _partition(perm, b, min(per_epoch, steps - done))
        done += per_epoch


def _cyclic(n, b, steps, rng):
    per_epoch = n // b
    perm = rng.permutation(n)  # drawn once: a data-independent fixed order
    perm.setflags(write=False)
    done = 0
    while done < steps:
        yield from _partition(perm, b, min(per_epoch, steps - done))
        done += per_epoch


def _full(n, b, steps, rng):
    everything = slice(0, n)
    for _ in range(steps):
        yield everything


_GENERATORS = {
    "poisson": _poisson,
    "sample": _sample,
    "shuffle": _shuffle,
    "cyclic": _cyclic,
    "full": _full,
}
