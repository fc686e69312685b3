"""Randomness from the operating system's CSPRNG, for ``secure_mode``.

:class:`SecureRandom` offers the few methods of :class:`numpy.random.Generator`
the trainer uses (``standard_normal``, ``permutation``, ``choice`` without
replacement, ``binomial``, ``integers``, ``random``), every one computed from
bytes of :func:`os.urandom` — the kernel's cryptographically secure generator
(``getrandom(2)`` on Linux).  There is no seed and no state to save: two
instances, or two runs, never repeat each other, and nothing an adversary
learns about some draws predicts the others (short of breaking the kernel's
CSPRNG).

How the draws are made (all vectorised; the bytes are read in blocks of up
to 1 MiB, each byte used once, and a block is discarded in a child process
after a ``fork`` so that parent and child never share random bytes):

* uniform doubles: u = k·2⁻⁵³ with k uniform on {1, …, 2⁵³ − 1} (53 random
  bits of a 64-bit word, the value 0 redrawn): a grid symmetric about 1/2,
  never 0 or 1;
* standard normals: Φ⁻¹(u) (``scipy.special.ndtri``), computed in float64
  and rounded to the requested dtype, of u = (k + ½)·2⁻⁵³ with k uniform on
  {0, …, 2⁵³ − 1} (the centres of 2⁵³ equal cells) — except in the 2⁻³²
  of draws whose cell lies within 2⁻³³ of 0 or 1, where 53 more random bits
  place u uniformly inside the cell, u = (k + (j + ½)·2⁻⁵³)·2⁻⁵³ (the upper
  tail computed as −Φ⁻¹(1 − u) from 1 − u directly, so nothing rounds to 1).
  Without that refinement the law would be truncated at
  |x| ≤ Φ⁻¹(1 − 2⁻⁵⁴) ≈ 8.3, missing ~10⁻¹⁶ of the mass per draw — a
  hidden additive δ of 10⁻⁷ over 10⁹ noise coordinates; with it the
  truncation is at |x| ≤ −Φ⁻¹(2⁻¹⁰⁷) ≈ 11.9, and the missing mass (~10⁻³²
  per draw) is negligible beside any δ;
* integers below m: 64-bit words w accepted when w < m·⌊2⁶⁴/m⌋ and taken
  modulo m (rejection: exactly uniform);
* permutations of n: the order of n uniform 64-bit keys (redrawn in the
  improbable event of a tie): exactly uniform;
* b of n without replacement: the first b distinct values of a stream of
  uniform integers below n (exactly a uniform ordered sample), or the first
  b entries of a uniform permutation when b > n/2;
* Binomial(n, p): the inverse of its distribution function at a uniform u
  (``scipy.stats.binom.ppf``).

Why the batches and the start too, and why no seed.  The guarantees assume
randomness the adversary cannot predict: the Gaussian mechanism needs noise
nobody can reproduce, amplification by sampling (poisson, sample) needs
batches nobody can predict, and the hidden-state bounds treat the batch
order and the (gaussian) start as independent of anything the adversary
knows.  A seeded generator is reproducible by whoever has the seed (a seed
in a published script makes the noise public) and, for numpy's PCG64, by
whoever recovers its 128-bit state.  So ``secure_mode`` draws all three from
the OS and refuses ``random_state``; the price is that runs cannot be
repeated, and a resumed run continues with fresh draws (same run and law,
not the same bits).

What this does, and what it does not.  It closes the attacks that predict,
reproduce or replay the noise and the batches (a known or guessable seed, a
generator state recovered from outputs or from memory of another process).
It does not make floating-point noise Gaussian: the values a sample can take
are a finite, uneven set, and how x + noise rounds depends on x, so the low
bits of a released value can reveal x — shown for Laplace noise by Mironov
(2012, "On significance of the least significant bits for differential
privacy") and for Gaussian samplers, Opacus' among them, by Jin, McMurtry,
Rubinstein & Ohrimenko (2022, "Are we there yet? Timing and floating-point
attacks on differential privacy systems").  The certificate assumes exact
real arithmetic and exact Gaussian noise; nothing here changes that.
noisysgd does not implement the mitigation of Holohan & Braghin (2021,
"Secure random sampling in differential privacy", summing several Gaussian
draws, which Opacus' ``secure_mode`` uses) nor discrete or exact samplers,
and closes no timing channel (step times depend on batch sizes and data).
Only the final model is released here — a function of all the noisy steps —
which makes these attacks harder than on a single noisy value, but is not a
proof that they fail.
"""

from __future__ import annotations

import os

import numpy as np
from scipy import special

__all__ = ["SecureRandom"]

#: Random 64-bit words read from the OS at a time: 4 KiB at first, doubling with every
#: read up to 1 MiB (larger requests are read directly).
_FIRST_BLOCK_WORDS = 1 << 9
_BLOCK_WORDS = 1 << 17

_SHIFT = np.uint64(11)
_TWO_M53 = 2.0**-53
#: The 2⁵³ uniform cells of a normal draw, and how many at each end get 53
#: more bits (secure normals, module docstring).
_CELLS = np.uint64(2**53)
_TAIL_CELLS = np.uint64(2**20)


class SecureRandom:
    """The methods of :class:`numpy.random.Generator` the trainer uses, drawn
    from :func:`os.urandom` (module docstring).  Not seedable, not picklable.

    >>> rng = SecureRandom()
    >>> sorted(rng.permutation(5).tolist())
    [0, 1, 2, 3, 4]
    >>> x = rng.standard_normal(1000)
    >>> bool(abs(x.mean()) < 0.2 and 0.8 < x.std() < 1.2)
    True
    """

    def __init__(self):
        self._block = np.empty(0, dtype=np.uint64)
        self._pos = 0
        self._pid = os.getpid()
        self._next = _FIRST_BLOCK_WORDS

    def __repr__(self) -> str:
        return "SecureRandom(os.urandom)"

    def __reduce__(self):  # never copy random bytes into another process or a file
        raise TypeError("SecureRandom cannot be pickled: its random bytes must never be shared or stored")

    # ------------------------------------------------------------------ words

    def _raw(self, k: int) -> np.ndarray:
        """``k`` uniform 64-bit words from the OS (a read-only uint64 array, used once)."""
        if k >= _BLOCK_WORDS:
            return np.frombuffer(os.urandom(8 * k), dtype=np.uint64)
        if self._pid != os.getpid():  # forked: drop the words the parent may also use
            self._block, self._pos, self._pid = np.empty(0, dtype=np.uint64), 0, os.getpid()
        if self._pos + k > self._block.size:
            words = max(k, self._next)
            self._next = min(2 * self._next, _BLOCK_WORDS)
            self._block, self._pos = np.frombuffer(os.urandom(8 * words), dtype=np.uint64), 0
        out = self._block[self._pos:self._pos + k]
        self._pos += k
        return out

    def bytes(self, k: int) -> bytes:
        """``k`` random bytes from the OS."""
        return os.urandom(int(k))

    def _grid53(self, k: int) -> np.ndarray:
        """``k`` integers uniform on {1, …, 2⁵³ − 1} (a new uint64 array)."""
        w = self._raw(k) >> _SHIFT
        if not w.all():  # a zero: probability 2⁻⁵³ each
            zero = np.flatnonzero(w == 0)
            while zero.size:
                fresh = self._raw(zero.size) >> _SHIFT
                w[zero] = fresh
                zero = zero[fresh == 0]
        return w

    # ------------------------------------------------------------------ floats

    def random(self, size=None) -> np.ndarray | float:
        """Uniform doubles k·2⁻⁵³, k uniform on {1, …, 2⁵³ − 1}: in (0, 1)."""
        shape = () if size is None else size
        count = int(np.prod(shape, dtype=np.int64))
        u = self._grid53(count) * _TWO_M53  # exact: k < 2⁵³, times a power of two
        return float(u[0]) if size is None else u.reshape(shape)

    def standard_normal(self, size=None, dtype=np.float64, out=None):
        """Φ⁻¹(u) of uniform doubles u (module docstring), in ``dtype``, into ``out`` if given."""
        dt = np.dtype(dtype)
        if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"dtype must be float32 or float64. Found {dtype!r}.")
        if out is not None:
            if out.dtype != dt:
                raise ValueError(f"out must have dtype {dt.name}. Found {out.dtype.name}.")
            shape = out.shape
        else:
            shape = () if size is None else size
        count = int(np.prod(shape, dtype=np.int64))
        k = self._raw(count) >> _SHIFT  # uniform on {0, …, 2⁵³ − 1}
        u = (k.astype(np.float64) + 0.5) * _TWO_M53  # cell centres, exact, in (0, 1)
        special.ndtri(u, out=u)
        tail = np.flatnonzero((k < _TAIL_CELLS) | (k >= _CELLS - _TAIL_CELLS))
        if tail.size:  # refine within the cell: the normal's tails beyond ±8.3
            j = self._raw(tail.size) >> _SHIFT  # the position in the cell, 53 bits
            low = k[tail] < _TAIL_CELLS
            # f and 1 − f each from its own exact integer (computing 1 − f in floats
            # could round to 0 and give an infinite draw)
            f = (j.astype(np.float64) + 0.5) * _TWO_M53
            g = ((_CELLS - 1 - j).astype(np.float64) + 0.5) * _TWO_M53  # = 1 − f, in (0, 1]
            lower = (k[tail].astype(np.float64) + f) * _TWO_M53  # u in the lower tail
            upper = ((_CELLS - 1 - k[tail]).astype(np.float64) + g) * _TWO_M53  # 1 − u
            u[tail] = np.where(low, special.ndtri(lower), -special.ndtri(upper))
        if out is not None:
            out[...] = u.reshape(shape)  # rounds to nearest in float32
            return out
        if size is None:
            return dt.type(u[0])
        return u.reshape(shape).astype(dt, copy=False)

    # ------------------------------------------------------------------ integers

    def integers(self, high: int, size=None) -> np.ndarray | int:
        """Integers uniform on {0, …, high − 1} (rejection sampling: exact)."""
        high = int(high)
        if not 1 <= high <= 2**63:
            raise ValueError(f"high must be in [1, 2**63]. Found {high}.")
        shape = () if size is None else size
        count = int(np.prod(shape, dtype=np.int64))
        limit = np.uint64((2**64 // high) * high - 1)  # accept w <= limit: a multiple of high values
        m = np.uint64(high)
        out = np.empty(count, dtype=np.int64)
        filled = 0
        while filled < count:
            need = count - filled
            w = self._raw(need + need // 8 + 4)
            w = w[w <= limit][:need]
            out[filled:filled + w.size] = w % m
            filled += w.size
        return int(out[0]) if size is None else out.reshape(shape)

    def permutation(self, n) -> np.ndarray:
        """A uniform permutation of 0..n−1: the order of n uniform 64-bit keys."""
        n = int(n)
        while True:
            keys = self._raw(n)
            order = np.argsort(keys, kind="stable")
            ranked = keys[order]
            if n < 2 or not np.any(ranked[1:] == ranked[:-1]):  # a tie: probability < n²/2⁶⁵
                return order.astype(np.int64, copy=False)

    def choice(self, n, size: int, replace: bool = False) -> np.ndarray:
        """``size`` distinct indices of range(n), a uniform ordered sample (``replace=False`` only)."""
        if replace:
            raise ValueError("SecureRandom.choice draws without replacement only (replace=False).")
        n, size = int(n), int(size)
        if not 0 <= size <= n:
            raise ValueError(f"size must be in [0, n = {n}]. Found {size}.")
        if 2 * size > n:
            return self.permutation(n)[:size]
        chosen = np.empty(0, dtype=np.int64)
        while chosen.size < size:
            need = size - chosen.size
            stream = np.concatenate([chosen, self.integers(n, size=need + need // 4 + 4)])
            _, first = np.unique(stream, return_index=True)
            first.sort()  # first occurrences, in the order drawn (the earlier ones first)
            chosen = stream[first[:size]]
        return chosen

    def binomial(self, n, p, size=None):
        """Binomial(n, p) draws: the inverse distribution function at uniform u."""
        u = self.random(size=(1,) if size is None else size)
        from scipy import stats  # (scipy.stats takes ~0.5 s to import: only where a binomial is drawn)

        k = stats.binom.ppf(u, int(n), float(p)).astype(np.int64)
        return int(k.reshape(-1)[0]) if size is None else k
