"""Batch index streams, exactly as the privacy analyses assume them.

Every stream is driven by a :class:`numpy.random.Generator` and yields, for
each of ``steps`` steps, the indices of that step's batch: an integer array,
or ``slice(0, n)`` for ``full`` (so that ``X[batch]`` is a view, not a copy).
The schemes (see :data:`noisysgd.run.BATCHING_SCHEMES`):

``poisson``
    every index independently with probability q = b/n, afresh each step.
    Drawn as a Binomial(n, q) batch size and then a uniform subset of that
    size — the same distribution, at a cost O(|B|) instead of O(n) per step.
    The batch size is random; the trainer still divides by b.  With ``rows``
    (add/remove adjacency: n is the declared public size, the data hold
    ``rows`` examples) each of the ``rows`` indices is drawn with the same
    q = b/n: the law of every row does not depend on how many others there are.
``sample``
    a uniform subset of exactly b distinct indices, afresh each step
    (``Generator.choice(n, b, replace=False)``, which uses Floyd's O(b)
    algorithm when b ≪ n).
``shuffle``
    a fresh uniform permutation each epoch, cut into ⌊n/b⌋ batches of exactly
    b; the n mod b indices at its end are not used that epoch.
``shuffle-once``
    *one* uniform permutation, drawn once from the generator before the first
    step, cut into ⌊n/b⌋ batches of exactly b and reused in the same order
    every epoch (the n mod b indices at its end are never used): Ye &
    Shokri's "shuffle and partition" (Algorithm 1, line 3).  The permutation
    is secret — it comes from the run's batch generator (the operating
    system's CSPRNG in secure mode), is never released, and a checkpoint that
    holds it must be kept as secret as the data — so the analyses may average
    over the unknown position of an example (Theorem 4.2).
``cyclic``
    exactly the same stream as ``shuffle-once`` (one uniform permutation drawn
    once, reused every epoch).  The accountant's ``cyclic`` means *any*
    data-independent fixed order and takes the worst position in it; a
    random order drawn once is one such order, so ``cyclic`` runs are
    accounted soundly without using the randomness of the order (declare
    ``shuffle-once`` to use it).  The data's own order is never used: it
    could depend on the data (sorted by label, by date, …).
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

from ..run import BATCHING_SCHEMES, PARTITION_BATCHINGS, Run, checked_choice, checked_integer
from .secure import SecureRandom

__all__ = ["batches", "run_batches", "BatchStream", "describe_batches"]

#: The batchings whose one permutation is drawn once and kept for the whole run.
_ONE_ORDER = ("shuffle-once", "cyclic")


def describe_batches(scheme: str, *, secure: bool = False) -> str:
    """What the trainer does for ``scheme``, in words (recorded in the
    certificate's ``trainer_enforced["batches"]``)."""
    scheme = checked_choice("batching", scheme, BATCHING_SCHEMES)
    source = ("the operating system's CSPRNG (secure mode)" if secure
              else "the run's seeded batch generator")
    once = (f"one uniformly random permutation of the n indices, drawn once from {source} "
            "before the first step and never released, cut into ⌊n/b⌋ batches of exactly b and "
            "reused in the same order every epoch; the n mod b indices at its end are never used")
    return {
        "poisson": f"each index independently with probability b/n, afresh each step, from {source}; "
                   "the batch gradient sum is divided by b",
        "sample": f"b distinct indices drawn uniformly afresh each step, from {source}",
        "shuffle": f"a fresh uniformly random permutation each epoch, from {source}, cut into ⌊n/b⌋ "
                   "batches of exactly b; the n mod b indices at its end are not used that epoch",
        "shuffle-once": once + " (shuffle-once: a secret random partition, Ye & Shokri Algorithm 1 "
                        "line 3)",
        "cyclic": once + " (cyclic: accounted as an arbitrary fixed order, worst position)",
        "full": "all n examples every step",
    }[scheme]


def batches(
    scheme: str, *, n: int, batch_size: int, steps: int, rng, rows: int | None = None
) -> "BatchStream":
    """Yield the batch of each of ``steps`` steps under ``scheme``.

    Parameters
    ----------
    scheme : {"poisson", "sample", "shuffle", "shuffle-once", "cyclic", "full"}
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
    rows : int or None
        ``poisson`` only: the number of examples the indices run over, when it
        differs from n (add/remove: n declared public fixes q = b/n, the data
        hold ``rows``).  None: n.

    Yields
    ------
    numpy.ndarray of int64, or slice
        Indices into the n examples (``slice(0, n)`` for ``full``).  Arrays
        of ``shuffle``/``shuffle-once``/``cyclic`` are views of the epoch's permutation: copy
        them if you keep them past the next epoch.

    The stream is a :class:`BatchStream`: its :meth:`~BatchStream.state`
    between two steps is enough to continue it exactly
    (:meth:`BatchStream.from_state`).
    """
    scheme = checked_choice("batching", scheme, BATCHING_SCHEMES)
    n = checked_integer("n", n)
    b = checked_integer("batch_size", batch_size)
    steps = checked_integer("steps", steps)
    if b > n:
        raise ValueError(f"batch_size must be at most n ({n}). Found {batch_size!r}.")
    if scheme == "full" and b != n:
        raise ValueError(f"batch_size must equal n ({n}) for batching='full'. Found {batch_size!r}.")
    if not isinstance(rng, (np.random.Generator, SecureRandom)):
        raise ValueError(f"rng must be a numpy.random.Generator or a SecureRandom. Found {type(rng).__name__}.")
    if rows is not None:
        rows = checked_integer("rows", rows, minimum=0)
        if rows != n and scheme != "poisson":
            raise ValueError(f"rows must equal n ({n}) for batching={scheme!r} (only poisson draws at a rate "
                             f"fixed apart from the number of rows). Found {rows}.")
    return BatchStream(scheme, n, b, steps, rng, rows=rows)


def run_batches(run: Run, rng, rows: int | None = None) -> "BatchStream":
    """The batch stream of ``run`` (its n, batch size, batching and steps) over ``rows``
    examples (None: run.n; another number only under ``poisson``, for add/remove)."""
    if not isinstance(run, Run):
        raise ValueError(f"run must be a noisysgd.Run. Found {type(run).__name__}.")
    return batches(run.batching, n=run.n, batch_size=run.batch_size, steps=run.steps, rng=rng, rows=rows)


#: Poisson batch sizes are drawn this many steps at a time.
_POISSON_CHUNK = 4096


class BatchStream:
    """An iterator over the batches of one run that can be stopped between two
    steps and continued exactly (checkpoints).

    Draws, from ``rng`` and in this order, exactly what the schemes of the
    module docstring say: ``poisson`` the sizes of up to 4096 steps at a time
    (Binomial(n, b/n)) and then each batch (a uniform subset of its size);
    ``sample`` each batch; ``shuffle`` a permutation at the start of every
    epoch; ``shuffle-once`` and ``cyclic`` one permutation before the first
    step; ``full`` nothing.  Its state between two steps (:meth:`state`) is
    the step, the generator's state, and what was drawn ahead: the one
    permutation of shuffle-once/cyclic, the
    current epoch's permutation under shuffle, the Poisson sizes not yet used.
    """

    def __init__(self, scheme: str, n: int, batch_size: int, steps: int, rng, *, step: int = 0,
                 perm=None, pending=None, rows: int | None = None):
        self.scheme, self.n, self.batch_size, self.steps, self.rng = scheme, n, batch_size, steps, rng
        self.rows = n if rows is None else rows
        self.step = step
        self.per_epoch = n // batch_size if scheme in PARTITION_BATCHINGS else None
        self._perm = None if perm is None else np.asarray(perm, dtype=np.int64)
        if self._perm is not None and scheme in _ONE_ORDER:
            self._perm.setflags(write=False)
        self._pending = np.empty(0, dtype=np.int64) if pending is None else np.asarray(pending, np.int64)
        self._everything = slice(0, n)

    def __iter__(self):
        return self

    def __next__(self):
        if self.step >= self.steps:
            raise StopIteration
        batch = getattr(self, "_" + self.scheme.replace("-", "_"))()
        self.step += 1
        return batch

    # -------------------------------------------------------------- schemes

    def _poisson(self):
        n, q = self.rows, self.batch_size / self.n  # q from the (public) n, over the rows there are
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

    def _once(self):
        if self._perm is None:  # drawn once, independently of the data, and kept
            self._perm = np.asarray(self.rng.permutation(self.n))
            self._perm.setflags(write=False)
        return self._slice()

    _shuffle_once = _cyclic = _once

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
        if self.rows != self.n:
            meta["rows"] = self.rows
        arrays = {}
        keep_perm = self.scheme in _ONE_ORDER or (self.scheme == "shuffle" and self.step % self.per_epoch != 0)
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
                   step=int(meta["step"]), perm=arrays.get("perm"), pending=arrays.get("pending"),
                   rows=int(meta["rows"]) if "rows" in meta else None)


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
