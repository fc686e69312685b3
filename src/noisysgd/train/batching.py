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

import numpy as np

from ..run import BATCHING_SCHEMES, Run, _choice, _integer
from .secure import SecureRandom

__all__ = ["batches", "run_batches", "BatchStream"]


def batches(
    scheme: str, *, n: int, batch_size: int, steps: int, rng
) -> "BatchStream":
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
    rng : numpy.random.Generator or SecureRandom
        The only source of randomness (:class:`~noisysgd.train.secure.SecureRandom`
        draws from the operating system's CSPRNG).

    Yields
    ------
    numpy.ndarray of int64, or slice
        Indices into the n examples (``slice(0, n)`` for ``full``).  Arrays
        of ``shuffle``/``cyclic`` are views of the epoch's permutation: copy
        them if you keep them past the next epoch.

    The stream is a :class:`BatchStream`: its :meth:`~BatchStream.state`
    between two steps is enough to continue it exactly
    (:meth:`BatchStream.from_state`).
    """
    scheme = _choice("batching", scheme, BATCHING_SCHEMES)
    n = _integer("n", n)
    b = _integer("batch_size", batch_size)
    steps = _integer("steps", steps)
    if b > n:
        raise ValueError(f"batch_size must be at most n ({n}). Found {batch_size!r}.")
    if scheme == "full" and b != n:
        raise ValueError(f"batch_size must equal n ({n}) for batching='full'. Found {batch_size!r}.")
    if not isinstance(rng, (np.random.Generator, SecureRandom)):
        raise ValueError(f"rng must be a numpy.random.Generator or a SecureRandom. Found {type(rng).__name__}.")
    return BatchStream(scheme, n, b, steps, rng)


def run_batches(run: Run, rng) -> "BatchStream":
    """The batch stream of ``run`` (its n, batch size, batching and steps)."""
    if not isinstance(run, Run):
        raise ValueError(f"run must be a noisysgd.Run. Found {type(run).__name__}.")
    return batches(run.batching, n=run.n, batch_size=run.batch_size, steps=run.steps, rng=rng)


#: Poisson batch sizes are drawn this many steps at a time.
_POISSON_CHUNK = 4096


class BatchStream:
    """An iterator over the batches of one run that can be stopped between two
    steps and continued exactly (checkpoints).

    Draws, from ``rng`` and in this order, exactly what the schemes of the
    module docstring say: ``poisson`` the sizes of up to 4096 steps at a time
    (Binomial(n, b/n)) and then each batch (a uniform subset of its size);
    ``sample`` each batch; ``shuffle`` a permutation at the start of every
    epoch; ``cyclic`` one permutation before the first step; ``full``
    nothing.  Its state between two steps (:meth:`state`) is the step, the
    generator's state, and what was drawn ahead: cyclic's permutation, the
    current epoch's permutation under shuffle, the Poisson sizes not yet used.
    """

    def __init__(self, scheme: str, n: int, batch_size: int, steps: int, rng, *, step: int = 0,
                 perm=None, pending=None):
        self.scheme, self.n, self.batch_size, self.steps, self.rng = scheme, n, batch_size, steps, rng
        self.step = step
        self.per_epoch = n // batch_size if scheme in ("shuffle", "cyclic") else None
        self._perm = None if perm is None else np.asarray(perm, dtype=np.int64)
        if self._perm is not None and scheme == "cyclic":
            self._perm.setflags(write=False)
        self._pending = np.empty(0, dtype=np.int64) if pending is None else np.asarray(pending, np.int64)
        self._everything = slice(0, n)

    def __iter__(self):
        return self

    def __next__(self):
        if self.step >= self.steps:
            raise StopIteration
        batch = getattr(self, "_" + self.scheme)()
        self.step += 1
        return batch

    # -------------------------------------------------------------- schemes

    def _poisson(self):
        n, q = self.n, self.batch_size / self.n
        if q >= 1.0:  # b = n: every example every step
            return np.arange(n)
        # Size ~ Binomial(n, q), then a uniform subset of that size: the law of
        # independent inclusions with probability q.  Sizes drawn in chunks.
        if self._pending.size == 0:
            self._pending = np.asarray(
                self.rng.binomial(n, q, size=min(self.steps - self.step, _POISSON_CHUNK)), dtype=np.int64)
        size, self._pending = int(self._pending[0]), self._pending[1:]
        return self.rng.choice(n, size, replace=False)

    def _sample(self):
        return self.rng.choice(self.n, self.batch_size, replace=False)

    def _slice(self):
        j = self.step % self.per_epoch
        b = self.batch_size
        return self._perm[j * b:(j + 1) * b]

    def _shuffle(self):
        if self.step % self.per_epoch == 0:
            self._perm = np.asarray(self.rng.permutation(self.n))
        return self._slice()

    def _cyclic(self):
        if self._perm is None:  # drawn once: a data-independent fixed order
            self._perm = np.asarray(self.rng.permutation(self.n))
            self._perm.setflags(write=False)
        return self._slice()

    def _full(self):
        return self._everything

    # -------------------------------------------------------------- state

    def state(self) -> tuple[dict, dict]:
        """(``meta``, ``arrays``): the stream between two steps — JSON-ready facts
        (scheme, n, b, steps, step, the generator's state or None for a
        :class:`SecureRandom`) and the arrays drawn ahead (``perm``, ``pending``)."""
        rng_state = None
        if isinstance(self.rng, np.random.Generator):
            rng_state = self.rng.bit_generator.state
        meta = {"scheme": self.scheme, "n": self.n, "batch_size": self.batch_size, "steps": self.steps,
                "step": self.step, "rng": rng_state}
        arrays = {}
        keep_perm = self.scheme == "cyclic" or (self.scheme == "shuffle" and self.step % self.per_epoch != 0)
        if self._perm is not None and keep_perm:
            arrays["perm"] = np.array(self._perm, dtype=np.int64)
        if self.scheme == "poisson" and self._pending.size:
            arrays["pending"] = np.array(self._pending, dtype=np.int64)
        return meta, arrays

    @classmethod
    def from_state(cls, meta: dict, arrays: dict, rng) -> "BatchStream":
        """The stream :meth:`state` describes, continued with ``rng`` — a
        :class:`numpy.random.Generator` set to the recorded state (a fresh
        one is made of the recorded bit generator when ``rng`` is None), or a
        :class:`SecureRandom` (then the batches to come are fresh draws)."""
        if rng is None:
            rng = generator_from_state(meta["rng"])
        return cls(meta["scheme"], int(meta["n"]), int(meta["batch_size"]), int(meta["steps"]), rng,
                   step=int(meta["step"]), perm=arrays.get("perm"), pending=arrays.get("pending"))


def generator_from_state(state: dict) -> np.random.Generator:
    """A :class:`numpy.random.Generator` whose bit generator is in ``state``
    (a ``bit_generator.state`` dict)."""
    name = state.get("bit_generator") if isinstance(state, dict) else None
    cls = getattr(np.random, str(name), None)
    if not (isinstance(cls, type) and issubclass(cls, np.random.BitGenerator)):
        raise ValueError(f"rng state must name a numpy bit generator. Found {name!r}.")
    bit_generator = cls()
    bit_generator.state = state
    return np.random.Generator(bit_generator)
