"""What a run releases: its final iterate, the mean of its second half, or — ``average="auto"`` —
the mean where the iterates have settled and the final iterate where they are still travelling.

An average of the iterates is a function of every iterate: post-processing (Dwork & Roth 2014,
Proposition 2.1) of what the composition analyses account (every noisy gradient, under either
adjacency), and of nothing the hidden-state analyses cover (they bound the final iterate alone).  So an average is released only under a certificate
that rests on composition alone (:data:`EVERY_ITERATE`), whatever the rule.

The rule of ``"auto"`` reads nothing but the iterates, so it costs no privacy where an average
may be released at all.  It cuts the run into :data:`BLOCKS` blocks of consecutive steps and
takes the mean m_j of each; over the last three quarters of the run it asks whether the
increments δ_j = m_{j+1} − m_j of successive block means anticorrelate:

    c = Σ_j ⟨δ_j, δ_{j+1}⟩ / √(Σ_j ‖δ_j‖² · Σ_j ‖δ_{j+1}‖²)      (:func:`mean_reversion`, in [−1, 1]).

Iterates fluctuating around a fixed point (a stationary process whose memory is shorter than a
block) give block means that are nearly independent draws, and c ≈ −1/2: their mean has less noise
than any one of them, and the tail average is released.  Iterates still travelling give c ≥ 0 — a
random walk +1/4, a steady drift +1 — and averaging them would release a point behind the last, so
the final iterate is.  The threshold is the sign, where reverting ends.  docs/accuracy.md §1a
shows the statistic and both releases' accuracy on every data set it was read on.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable

import numpy as np

from .engine import TrainResult

#: The analyses that account every iterate (hence any function of them).
EVERY_ITERATE = ("composition", "composition-pld")
#: The blocks of consecutive steps whose means ``average="auto"`` compares.
BLOCKS = 8
#: The first block the statistic reads (the last three quarters of the run: the first quarter is
#: the approach to where the iterates settle, if they do).
FIRST_BLOCK = 2
#: Fewer steps than this and ``"auto"`` keeps the final iterate (blocks of at least 4 steps).
MIN_STEPS = 4 * BLOCKS


def mean_reversion(block_means) -> float:
    """c = Σ_j ⟨δ_j, δ_{j+1}⟩ / √(Σ_j ‖δ_j‖² · Σ_j ‖δ_{j+1}‖²), j over all but the last increment
    δ_j = m_{j+1} − m_j of the block means ``block_means`` (a sequence of arrays of one shape, at
    least three): the correlation of successive increments, in [−1, 1] (Cauchy–Schwarz) — about
    −1/2 for independent block means, +1/4 for a random walk, +1 for a steady drift; 0 where
    nothing moved.

    >>> round(mean_reversion([np.array([0.0]), np.array([1.0]), np.array([0.0]), np.array([1.0])]), 3)
    -1.0
    >>> mean_reversion([np.array([float(j)]) for j in range(5)])
    1.0
    """
    means = [np.asarray(m, dtype=np.float64).ravel() for m in block_means]
    if len(means) < 3:
        raise ValueError(f"block_means must hold at least 3 means. Found {len(means)}.")
    deltas = [b - a for a, b in zip(means[:-1], means[1:])]
    num = sum(float(deltas[j] @ deltas[j + 1]) for j in range(len(deltas) - 1))
    den = math.sqrt(sum(float(d @ d) for d in deltas[:-1]) * sum(float(d @ d) for d in deltas[1:]))
    return max(-1.0, min(1.0, num / den)) if den > 0 else 0.0


def settled(c: float) -> bool:
    """The rule's threshold: the iterates settled where the increments anticorrelate, c < 0."""
    return c < 0


def block_of(t: int, steps: int) -> int:
    """The block (0 … BLOCKS − 1) of the 1-indexed step ``t`` of ``steps``."""
    return (t - 1) * BLOCKS // steps


def check_average(average):
    """``average`` as the trainers take it: True, False or "auto" (else a ValueError naming it)."""
    if isinstance(average, bool) or (isinstance(average, str) and average == "auto"):
        return average
    raise ValueError(f"average must be True, False or 'auto'. Found {average!r}.")


class BlockSums:
    """The sums of the iterates of blocks FIRST_BLOCK … BLOCKS − 1 of a ``steps``-step run (``add`` after
    every step; W of any shape, e.g. a stack of replicas), and their means once every step was seen."""

    def __init__(self, steps: int):
        self.steps = steps
        self.sums = [None] * BLOCKS
        self.counts = [0] * BLOCKS

    def add(self, t: int, W) -> None:
        j = block_of(t, self.steps)
        if j >= FIRST_BLOCK:
            W64 = np.asarray(W, dtype=np.float64)
            self.sums[j] = W64.copy() if self.sums[j] is None else self.sums[j] + W64
            self.counts[j] += 1

    def means(self) -> list:
        expected = [sum(1 for t in range(1, self.steps + 1) if block_of(t, self.steps) == j) for j in range(BLOCKS)]
        if self.counts[FIRST_BLOCK:] != expected[FIRST_BLOCK:]:  # every step of the blocks read was seen
            raise RuntimeError(f"the block means saw {self.counts[FIRST_BLOCK:]} iterates of "
                               f"{expected[FIRST_BLOCK:]}")
        return [self.sums[j] / self.counts[j] for j in range(FIRST_BLOCK, BLOCKS)]


class TailAverage:
    """The running mean of the iterates after steps ⌊T/2⌋+1..T (a step callback that then calls
    ``then``); ``released`` puts it in place of the final iterate."""

    def __init__(self, steps: int, then: Callable | None):
        self.first, self.steps, self.then = steps // 2 + 1, steps, then
        self.total, self.count = None, 0

    def __call__(self, t, W):
        if t >= self.first:
            W64 = np.asarray(W, dtype=np.float64)
            self.total = W64.copy() if self.total is None else self.total + W64
            self.count += 1
        if self.then is not None:
            self.then(t, W)

    def mean(self) -> np.ndarray:
        if self.count != self.steps - self.first + 1:  # every step of the tail was seen
            raise RuntimeError(f"the tail average saw {self.count} of {self.steps - self.first + 1} iterates")
        return self.total / self.count

    def describe(self) -> str:
        return f"tail average: the mean of the iterates after steps {self.first}..{self.steps} ({self.count} iterates)"

    def released(self, result: TrainResult) -> TrainResult:
        enforced = {**result.enforced, "released": (
            f"{self.describe()}, post-processing of every iterate, which composition accounts")}
        return replace(result, coef=self.mean().astype(result.coef.dtype), enforced=enforced)


class AutoRelease(TailAverage):
    """``average="auto"``: the tail average where the certificate rests on composition alone and the
    iterates' block means revert (:func:`mean_reversion` < 0), else the final iterate; the
    certificate's ``trainer_enforced["release"]`` records the statistic and the reason."""

    def __init__(self, steps: int, then: Callable | None):
        super().__init__(steps, then)
        self.blocks = BlockSums(steps)

    def __call__(self, t, W):
        self.blocks.add(t, W)
        super().__call__(t, W)

    def statistic(self) -> float:
        return mean_reversion(self.blocks.means())

    def released(self, result: TrainResult, rests_on=()) -> TrainResult:
        record = {"rule": "auto", "statistic": None}
        why = self.cannot_average(rests_on, self.steps)
        if why is None:
            c = self.statistic()
            record["statistic"] = c
            if settled(c):
                record.update(released="tail-average", why=(
                    f"the increments of the means of {BLOCKS} blocks of steps anticorrelate (c = {c:.2f} < 0): the "
                    "iterates fluctuate around a point, and their mean has less noise than the last"))
                out = super().released(result)
                out.enforced["release"] = record
                out.enforced["released"] = (f"{self.describe()}, chosen by average='auto' ({record['why']}); "
                                            "post-processing of every iterate, which composition accounts")
                return out
            why = (f"the increments of the means of {BLOCKS} blocks of steps do not anticorrelate (c = {c:.2f} ≥ 0): "
                   "the iterates are still travelling")
        record.update(released="last", why=why)
        return replace(result, enforced={**result.enforced, "release": record})

    @staticmethod
    def cannot_average(rests_on, steps: int) -> str | None:
        """Why a run of ``steps`` steps whose certificate rests on ``rests_on`` releases its final iterate
        whatever its iterates do (None: the statistic decides)."""
        if not (rests_on and set(rests_on) <= set(EVERY_ITERATE)):
            return (f"the certificate rests on {', '.join(rests_on) or 'no analysis'}, which covers the final "
                    "iterate alone")
        if steps < MIN_STEPS:
            return f"{steps} steps, too few to tell settled iterates from travelling ones ({MIN_STEPS})"
        return None

    @staticmethod
    def kept_last(result: TrainResult, rests_on, otherwise: str) -> TrainResult:
        """The final iterate of a run that kept no block means (checkpointed, data-parallel), recorded as
        "auto"'s release: the certificate's reason first, where it forbids an average, else ``otherwise``."""
        why = AutoRelease.cannot_average(rests_on, result.steps) or otherwise
        return replace(result, enforced={**result.enforced, "release": {
            "rule": "auto", "statistic": None, "released": "last", "why": why}})
