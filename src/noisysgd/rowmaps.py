"""The maps from a raw row to the row the trainer sees, in numpy alone: one place for the arithmetic
that training and prediction share, so ``noisysgd predict`` applies the trainer's own operations
without importing the trainer (or scipy).

* :func:`scale_to_ball` — declared or private per-column ranges: clip, map to [−1, 1], scale;
* :func:`clip_rows`, :func:`center_rows` — the private centering's map;
* :func:`augment_blocks`, :func:`augment_rows` — X̄ = (x_i·min(1, R/‖x_i‖), s), ‖x̄_i‖;
* :func:`row_norms` — ‖x_i‖ in float64 without overflow.

Each is a function of one example at a time (no privacy cost); the callers validate their inputs
(:func:`noisysgd.train.augment` is the checked entry point).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["SPREAD", "scale_to_ball", "row_norms", "clip_rows", "center_rows", "augment_blocks", "augment_rows"]

#: :func:`scale_to_ball` scales rows so that one whose every coordinate lies this fraction of
#: its half-range from the middle has norm ``feature_clip``; rows beyond are clipped by the
#: trainer, as any row is.  1.0 (the worst case, every row inside the ball: what models written
#: before 0.2.0 used) shrinks the typical row — coordinates spread over their range — to about
#: half the ball, and halves the signal against the same noise: with 0.5, feature_range="private"
#: on the mixed-units make_classification(20000, 50) at ε = 1 scores 0.793 against 0.776, and
#: breast_cancer at ε = 3 0.950 against 0.708 (3 seeds; benchmarks/private_scaling.py).
SPREAD = 0.5


def scale_to_ball(X, feature_range, feature_clip: float, *, spread: float = SPREAD) -> np.ndarray:
    """Clip each column j of ``X`` to [low_j, high_j] (``feature_range`` = (low,
    high), arrays of shape (d,)), map it to [−1, 1] and scale by
    ``feature_clip``/(``spread``·√(d + 1)): a row whose every coordinate lies at ``spread`` of
    its half-range from the middle has norm ``feature_clip`` (:data:`SPREAD`); longer rows are
    clipped to it by the trainer, as every row is.  With ``spread=1`` every row lies inside
    the ball.  A fixed function of each example alone: no privacy cost.

    >>> scale_to_ball(np.array([[0.0, 16.0], [8.0, 40.0]]), (np.zeros(2), np.full(2, 16.0)), 1.0, spread=1.0)
    array([[-0.57735027,  0.57735027],
           [ 0.        ,  0.57735027]])
    >>> scale_to_ball(np.array([[0.0, 16.0]]), (np.zeros(2), np.full(2, 16.0)), 1.0)  # spread 0.5
    array([[-1.15470054,  1.15470054]])
    """
    low, high = feature_range
    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1]
    Z = (2.0 * np.clip(X, low, high) - (low + high)) / (high - low)
    return Z * (float(feature_clip) / (float(spread) * math.sqrt(d + 1)))


def row_norms(X: np.ndarray) -> np.ndarray:
    """‖x_i‖ in float64 for a finite float X, without overflow for huge entries."""
    norms = np.sqrt(np.einsum("ij,ij->i", X, X, dtype=np.float64))
    bad = ~np.isfinite(norms)
    if np.any(bad):  # a square overflowed: rescale those rows by their largest entry
        big = np.max(np.abs(X[bad]), axis=1).astype(np.float64)
        norms[bad] = big * np.linalg.norm(X[bad].astype(np.float64) / big[:, None], axis=1)
    return norms


def clip_rows(X, radius: float, out: np.ndarray | None = None) -> np.ndarray:
    """Each row of ``X`` scaled down to norm ``radius`` if it is longer (as the trainer clips),
    into ``out`` if given (a float64 array of X's shape).

    >>> clip_rows(np.array([[3.0, 4.0], [0.3, 0.4]]), 1.0)
    array([[0.6, 0.8],
           [0.3, 0.4]])
    """
    X = np.asarray(X, dtype=np.float64)
    norms = row_norms(X)[:, None]  # the trainer's norms: no overflow for huge entries
    return np.multiply(X, radius / np.maximum(norms, radius), out=out)


def center_rows(X, center, radius: float) -> np.ndarray:
    """clip_radius(x) − ``center`` for every row: the map ``center="private"`` applies before the
    trainer's own clip, in fit and in predict alike (:func:`noisysgd.preprocessing.private_center`).
    One new array: the clipped copy, centered in place.  (A fit does not form it: the trainer reads
    the rows through :class:`noisysgd.train.rows.CenteredRows`, a batch at a time.)"""
    rows = clip_rows(X, radius)
    rows -= center
    return rows


def augment_blocks(X: np.ndarray, R: float, dt: np.dtype, norms: np.ndarray | None = None,
                   bias: float = 1.0, step: int = 4096):
    """X̄'s arithmetic, in one place: (blocks, ‖x̄_i‖ in float64) for a validated float X
    (``norms``: its ‖x_i‖; ``bias``: the intercept scaling s, the last coordinate of every x̄).
    ``blocks`` yields (a slice of ``step`` rows, X̄'s first d columns there in ``dt``): each row's
    float64 product x_i·min(1, R/‖x_i‖), rounded once to ``dt`` (a block at a time, so no float64
    copy of a float32 X is made).  :func:`augment_rows` writes the blocks into an array, the torch
    backend into a device tensor."""
    norms = row_norms(X) if norms is None else norms
    scale = R / np.maximum(norms, R)  # = min(1, R/‖x‖), no division by zero
    clipped = np.minimum(norms, R)
    blocks = ((slice(i, i + step), np.multiply(X[i:i + step], scale[i:i + step, None], dtype=np.float64)
               .astype(dt, copy=False)) for i in range(0, X.shape[0], step))
    return blocks, np.sqrt(clipped * clipped + bias * bias)


def augment_rows(X: np.ndarray, R: float, dt: np.dtype, norms: np.ndarray | None = None, bias: float = 1.0):
    """(X̄ in ``dt``, ‖x̄_i‖ in float64) for a validated float X: :func:`augment_blocks` formed."""
    blocks, bar_norms = augment_blocks(X, R, dt, norms, bias)
    Xbar = np.empty((X.shape[0], X.shape[1] + 1), dtype=dt)
    for rows, values in blocks:
        Xbar[rows, :-1] = values
    Xbar[:, -1] = bias
    return Xbar, bar_norms
