"""The training rows x̄_i, used without forming X̄ (no copy of the data).

Every row the trainer sees is an affine image of the caller's row x_i:

    x̄_i = (a_i·x_i − c_i·m, s),

with a_i, c_i per-row scalars, m a vector (the private mean of ``center="private"``, or none)
and s the intercept scaling.  Without centering a_i = min(1, R/‖x_i‖) (the feature clip) and
c_i = 0; with centering, the rows are first clipped to R₀ and centered, then clipped to R_c:
x̄_i = c_i·(b_i·x_i − m) with b_i = min(1, R₀/‖x_i‖), c_i = min(1, R_c/‖b_i·x_i − m‖),
a_i = c_i·b_i.  So a batch's scores and gradient sum are, with X_B the caller's rows gathered
(b × d, the only temporary of the data's width):

    S = a_B ⊙ (X_B·W') − c_B ⊗ (mᵀW') + s·w₀,
    Σ_{i∈B} x̄_i ψ_iᵀ = (X_Bᵀ(a_B ⊙ ψ) − m ⊗ (c_Bᵀψ),  s·Σ_i ψ_i),

one matmul forward and one back, as with a formed X̄, plus O(b·k + d·k) work.

The clip thresholds need ‖x̄_i‖ of the rows the arithmetic uses: a_i, c_i and m are rounded
to the training dtype, so ‖x̄_i‖ is bounded above by the float64 norm plus ``_SLACK_ULPS``
units of that dtype's rounding times a_i‖x_i‖ + c_i‖m‖ (every rounding of x_i, a_i, c_i and m
is within that), times 1 + (d + 4) units of float64 rounding (the worst-case error of the norm
computed as a sum of d squares), and the trainer's own margin (engine._ULP_MARGIN) comes on top.
``tests/test_rows.py`` checks the bound in exact rationals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..rowmaps import center_rows, clip_rows, row_norms

__all__ = ["CenteredRows", "Rows", "rows_of", "source_norms", "clip_rows", "center_rows"]

#: bytes of a block of rows, when a pass over all the rows needs a temporary of their width
BLOCK_BYTES = 1 << 22


def block_rows(d: int) -> int:
    """Rows of d float64 features per block of :data:`BLOCK_BYTES` (at least 64)."""
    return max(64, BLOCK_BYTES // (8 * max(1, int(d))))


#: rounding units (of the training dtype) added to a row norm per unit of a_i‖x_i‖ + c_i‖m‖
_SLACK_ULPS = 8


@dataclass(frozen=True, eq=False)
class CenteredRows:
    """clip_R(x_i) − m for every row x_i of ``X`` (R = ``radius``, m = ``center``): the rows
    ``center="private"`` trains on, described rather than computed (the trainer reads ``X``
    itself).  ``np.asarray`` forms them (:func:`center_rows`)."""

    X: np.ndarray
    center: np.ndarray
    radius: float

    @property
    def shape(self) -> tuple[int, int]:
        return self.X.shape

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float64)

    ndim = 2

    def __len__(self) -> int:
        return self.X.shape[0]

    def __getitem__(self, rows) -> np.ndarray:
        """The centered rows ``rows`` (an index array or a slice), formed: :func:`center_rows`,
        with the first clip's factors of :attr:`first_clip` (the same norms, computed once)."""
        out = np.multiply(self.X[rows], self.first_clip[rows, None], dtype=np.float64)
        out -= self.center
        return out

    def __array__(self, dtype=None, copy=None):
        out = self[:]  # (the same values as center_rows, with the norms computed once)
        return out if dtype is None else out.astype(dtype, copy=False)

    @cached_property
    def raw_norms(self) -> np.ndarray:
        """‖x_i‖ of the caller's rows (float64)."""
        return row_norms(self.X)

    @cached_property
    def first_clip(self) -> np.ndarray:
        """b_i = min(1, R/‖x_i‖), the clip before centering."""
        return self.radius / np.maximum(self.raw_norms, self.radius)

    def blocks(self):
        """The formed rows, a block (:func:`block_rows`) at a time."""
        step = block_rows(self.X.shape[1])
        for i in range(0, self.X.shape[0], step):
            yield self[i:i + step]


def source_norms(X) -> np.ndarray:
    """‖x_i‖ of the rows the trainer clips: the caller's rows, or the centered ones of a
    :class:`CenteredRows` (what the leak check compares to the feature clip)."""
    if isinstance(X, CenteredRows):
        return np.concatenate([row_norms(block) for block in X.blocks()] or [np.empty(0)])  # a block at a time
    return row_norms(X)


class Rows:
    """X̄ of the module docstring, never formed: ``X`` the caller's (n, d) array (not copied),
    ``a``, ``c`` (n,) and ``m`` (d,) in the training dtype (``c``, ``m`` None without
    centering), ``bias`` s, ``norms`` an upper bound on ‖x̄_i‖ (float64).

    A step reads ``gather(batch)`` (the rows and their scalars), then ``scores`` and
    ``gradient_sum`` of it.  With centering the per-row terms of c_i and s are one (b × 2)
    matrix E = (−c_i, s), so that they cost one small matmul each way, and m's share of the
    gradient is one BLAS rank-one update (``ger``) in place."""

    __slots__ = ("X", "a", "c", "m", "bias", "norms", "dtype", "shape", "_E", "_ger", "_full")

    def __init__(self, X, a, c, m, bias, norms, dtype):
        self.X, self.a, self.c, self.m, self.bias, self.norms, self.dtype = X, a, c, m, bias, norms, dtype
        self.shape = (X.shape[0], X.shape[1] + 1)
        self._E = self._ger = self._full = None
        if m is not None:
            from scipy.linalg.blas import get_blas_funcs

            self._E = np.empty((X.shape[0], 2), dtype=dtype)
            np.negative(c, out=self._E[:, 0])
            self._E[:, 1] = bias
            self._ger = get_blas_funcs("ger", dtype=dtype)

    def gather(self, batch) -> tuple:
        """What a step reads of ``batch``: the caller's rows in the training dtype (b × d), their
        a_i (shaped to multiply scores), and their (−c_i, s) rows (None without centering)."""
        Xb = self.X[batch]
        if Xb.dtype != self.dtype:
            if isinstance(batch, slice) and Xb.shape[0] == self.X.shape[0]:
                # a full batch, read at every step: cast once (the batch is the data: O(b·d) all the same)
                if self._full is None:
                    self._full = Xb.astype(self.dtype)
                Xb = self._full
            else:
                Xb = Xb.astype(self.dtype)
        return Xb, self.a[batch], None if self._E is None else self._E[batch]

    def scores(self, rows, W) -> np.ndarray:
        """x̄_iᵀW for the rows ``rows`` = :meth:`gather` (batch)."""
        Xb, a, E = rows
        S = Xb @ W[:-1]
        S *= a if S.ndim == 1 else a[:, None]
        if E is None:
            S += self.bias * W[-1]
        else:  # − c_i·(mᵀW') + s·w₀ for every row, one (b × 2) by (2 × k) product
            S += E @ np.stack((self.m @ W[:-1], W[-1]))
        return S

    def gradient_sum(self, rows, D, out) -> np.ndarray:
        """Σ_{i∈B} x̄_i ψ_iᵀ into ``out`` (W's shape), ψ = ``D``."""
        Xb, a, E = rows
        top = out[:-1]
        np.matmul(Xb.T, D * (a if D.ndim == 1 else a[:, None]), out=top)
        if E is None:
            out[-1] = self.bias * D.sum(axis=0)
            return out
        H = E.T @ D  # (−Σ c_i ψ_i, s·Σ ψ_i)
        if D.ndim == 1:
            top += H[0] * self.m
        else:  # top += m ⊗ H[0], in place (top.T is Fortran-ordered)
            done = self._ger(1.0, H[0], self.m, a=top.T, overwrite_a=1)
            if not np.shares_memory(done, top):
                top[...] = done.T
        out[-1] = H[1]
        return out

    def block(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of X̄, formed (for the objective's records and diagnostics)."""
        Xb = self.gather(slice(start, stop))[0]
        out = np.empty((Xb.shape[0], Xb.shape[1] + 1), dtype=self.dtype)
        np.multiply(Xb, self.a[start:stop, None], out=out[:, :-1])
        if self.m is not None:
            out[:, :-1] -= np.multiply.outer(self.c[start:stop], self.m)
        out[:, -1] = self.bias
        return out

    def mean_value(self, loss, W, Y) -> float:
        """The loss's mean over all the rows, a block at a time."""
        n, step = self.shape[0], block_rows(self.shape[1])
        total = 0.0
        for i in range(0, n, step):
            j = min(i + step, n)
            total += loss.value(W, self.block(i, j), Y[i:j]) * (j - i)
        return total / n

    def __array__(self, dtype=None, copy=None):
        step = block_rows(self.shape[1])
        out = np.concatenate([self.block(i, i + step) for i in range(0, self.shape[0], step)])
        return out if dtype is None else out.astype(dtype, copy=False)


def rows_of(X, feature_clip: float, dt: np.dtype, norms: np.ndarray, bias: float = 1.0) -> Rows:
    """The training rows of ``X`` (a validated float array, or a :class:`CenteredRows`) under the
    feature clip R = ``feature_clip``; ``norms``: ‖x_i‖ of the rows the clip applies to
    (:func:`source_norms`)."""
    R = float(feature_clip)
    eps = float(np.finfo(dt).eps)
    clip = R / np.maximum(norms, R)  # min(1, R/‖·‖), no division by zero
    if isinstance(X, CenteredRows):
        raw = X.X
        m64 = np.asarray(X.center, dtype=np.float64)
        a = (clip * X.first_clip).astype(dt)
        c = clip.astype(dt)
        m = m64.astype(dt)
        slack = _SLACK_ULPS * eps * (a.astype(np.float64) * X.raw_norms
                                     + c.astype(np.float64) * math.sqrt(m64 @ m64))
        bar = np.minimum(norms, R) + slack
    else:
        raw = X
        a = clip.astype(dt)
        c = m = None
        bar = a.astype(np.float64) * norms * (1.0 + _SLACK_ULPS * eps)
    # the float64 norms themselves: a sum of d squares and a square root, relative error at most
    # (d/2 + 1) units of float64 rounding (Higham 2002, §3.1): (d + 4) covers it and this line's own
    bar *= 1.0 + (raw.shape[1] + 4) * float(np.finfo(np.float64).eps)
    s = float(bias)
    s_up = s * (1.0 + eps)  # s as rounded to dt
    norms_up = np.sqrt(bar * bar + s_up * s_up) * (1.0 + 4.0 * float(np.finfo(np.float64).eps))  # this sqrt's
    return Rows(raw, a, c, m, s, norms_up, dt)
