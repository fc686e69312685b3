"""What a fitted classifier's predictions on its own training rows say about it.

These are statistics of the training data — *not* covered by any certificate —
shown only to whoever fits (a warning line, the CLI's ``metrics.json``, which
say so).  :func:`near_chance` finds the majority-class models that must never
be silent (issue 27 §3).
"""

from __future__ import annotations

import numpy as np

__all__ = ["balanced_accuracy", "near_chance", "check_rows", "NEAR_CHANCE", "CHECK_ROWS"]

#: A classifier whose balanced accuracy is within this of a constant's (1/k for the k classes
#: present) is said to be near chance.
NEAR_CHANCE = 0.05

#: Most training rows an estimator predicts on for :func:`near_chance` after a fit: beyond, every
#: k-th row (a strided sample: no random draw, the same rows each time).  A class with m rows in
#: the sample has its share predicted right to about ±1/√m; the threshold is 5 points.
CHECK_ROWS = 16384


def check_rows(n: int) -> slice:
    """The rows of n a fit's near-chance check predicts on: all of them up to :data:`CHECK_ROWS`,
    else every ⌈n/CHECK_ROWS⌉-th (a 60,000-row fit spends 0.1 s on it, not 0.4 s).

    >>> check_rows(1000), check_rows(60000)
    (slice(None, None, 1), slice(None, None, 4))
    """
    return slice(None, None, max(1, -(-int(n) // CHECK_ROWS)))


def balanced_accuracy(truth, pred) -> float:
    """The mean over the classes present in ``truth`` of the share of their rows predicted
    right (scikit-learn's ``balanced_accuracy_score``; 1/k for a constant prediction).

    >>> balanced_accuracy([0, 0, 0, 1], [0, 0, 0, 0])
    0.5
    """
    truth, pred = np.asarray(truth), np.asarray(pred)
    return float(np.mean([np.mean(pred[truth == c] == c) for c in np.unique(truth)]))


def near_chance(truth, pred, *, margin: float = NEAR_CHANCE) -> dict | None:
    """``{"balanced", "chance", "label", "share"}`` when the balanced accuracy of ``pred`` is
    within ``margin`` of a constant's (``label``: the class predicted most, for ``share`` of
    the rows), else None (also when ``truth`` holds a single class)."""
    truth, pred = np.asarray(truth), np.asarray(pred)
    k = np.unique(truth).size
    if k < 2:
        return None
    balanced = balanced_accuracy(truth, pred)
    if balanced > 1.0 / k + margin:
        return None
    values, counts = np.unique(pred, return_counts=True)
    i = int(np.argmax(counts))
    label = values[i].item() if hasattr(values[i], "item") else values[i]
    return {"balanced": balanced, "chance": 1.0 / k, "label": label, "share": float(counts[i] / pred.size)}


def near_chance_message(found: dict, who: str, advice: str) -> str:
    """The one warning line for :func:`near_chance`'s finding."""
    return (f"{who}the model is barely better than predicting one class: balanced accuracy {found['balanced']:.3f} "
            f"on the training rows against {found['chance']:.3f} for a constant, class {found['label']!r} "
            f"predicted for {found['share']:.1%} of them (statistics of the training data, not private). {advice}")
