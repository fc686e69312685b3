"""What a fitted classifier's predictions on its own training rows, and those rows, say about it.

These are statistics of the training data — *not* covered by any certificate —
shown only to whoever fits (a warning line, the CLI's ``metrics.json``, which
say so).  :func:`near_chance` finds the majority-class models that must never
be silent; :func:`dominant_columns` the raw tables whose few columns on large
scales take the clipped rows' norm.
"""

from __future__ import annotations

import numpy as np

from .losses import float_array
from .rows import block_rows

__all__ = ["remedy", "mean_dominant", "mixed_scales", "MIXED_RATIO", "REMEDIES", "balanced_accuracy", "near_chance", "check_rows", "dominant_columns", "few_carry", "fit_warnings", "columns_text", "NEAR_CHANCE",
           "NEAR_MAJORITY", "CHECK_ROWS", "DOMINANT_SHARE"]

#: A classifier whose balanced accuracy is within this of a constant's (1/k for the k classes
#: present) is said to be near chance.
NEAR_CHANCE = 0.05
#: ... and so is one whose accuracy is within this of predicting the majority class (the
#: target: within 2 points of the majority, a warning says why), or within a fifth of the
#: majority's own error rate where that is smaller (at 99 % majority, 0.2 points: a model
#: cannot be 2 points above it).
NEAR_MAJORITY = 0.02

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


def near_chance(truth, pred, *, margin: float = NEAR_CHANCE, majority_margin: float = NEAR_MAJORITY) -> dict | None:
    """``{"balanced", "chance", "accuracy", "majority", "label", "share"}`` when the balanced
    accuracy of ``pred`` is within ``margin`` of a constant's, or its accuracy within
    min(``majority_margin``, (1 − ``majority``)/5) of predicting the majority class
    (``majority``: that class's share of ``truth``; ``label``: the class predicted most, for
    ``share`` of the rows), else None (also when ``truth`` holds a single class).

    >>> found = near_chance([0] * 180 + [1] * 20, [0] * 180 + [1] * 3 + [0] * 17)  # 3 of the 20 found
    >>> found["balanced"], found["accuracy"], found["majority"]  # balanced 0.575 > 0.55, accuracy within 2 points
    (0.575, 0.915, 0.9)
    """
    truth, pred = np.asarray(truth), np.asarray(pred)
    classes, counts_truth = np.unique(truth, return_counts=True)
    k = classes.size
    if k < 2:
        return None
    balanced = balanced_accuracy(truth, pred)
    accuracy = float(np.mean(pred == truth))
    majority = float(counts_truth.max() / truth.size)
    if balanced > 1.0 / k + margin and accuracy > majority + min(majority_margin, (1.0 - majority) / 5.0):
        return None
    values, counts = np.unique(pred, return_counts=True)
    i = int(np.argmax(counts))
    label = values[i].item() if hasattr(values[i], "item") else values[i]
    return {"balanced": balanced, "chance": 1.0 / k, "accuracy": accuracy, "majority": majority, "label": label,
            "share": float(counts[i] / pred.size)}


def near_chance_message(found: dict, who: str, advice: str) -> str:
    """The one warning line for :func:`near_chance`'s finding."""
    return (f"{who}the model is barely better than predicting one class: balanced accuracy {found['balanced']:.3f} "
            f"on the training rows against {found['chance']:.3f} for a constant, accuracy {found['accuracy']:.3f} "
            f"against {found['majority']:.3f} for the majority class; class {found['label']!r} predicted for "
            f"{found['share']:.1%} of them (statistics of the training data, not private). {advice[0].upper()}{advice[1:]}")


#: A few raw columns carrying this share of the training rows' squared norm take the norm the rows
#: are clipped to (:func:`dominant_columns`).
DOMINANT_SHARE = 0.99


def dominant_columns(X, *, share: float = DOMINANT_SHARE) -> dict | None:
    """``{"columns", "share"}`` when at most max(1, d // 5) columns (and fewer than d) carry
    ``share`` of the total squared norm of the rows ``X`` (raw features, before any scaling),
    else None: rows clipped to a norm are then mostly those columns, and the columns on
    smaller scales keep little signal — the mixed units of raw tables, which the private mean
    cannot show when the columns are centered.

    >>> X = np.array([[1000.0, 0.1, -0.2, 0.3, 0.1], [-900.0, 0.2, 0.1, -0.1, 0.2]])
    >>> dominant_columns(X)["columns"], dominant_columns(X[:, 1:]) is None
    ([0], True)
    """
    X = float_array(X)
    top = max(float(X.max()), -float(X.min())) if X.size else 0.0  # max |x| without an |X| temporary
    if not top > 0.0:
        return None
    weights = np.zeros(X.shape[1])
    step = block_rows(X.shape[1])
    for i in range(0, X.shape[0], step):  # scaled (no square overflows), a block at a time (no copy of X)
        block = X[i:i + step].astype(np.float64) / top
        weights += np.einsum("ij,ij->j", block, block)
    found = few_carry(weights, share)
    return None if found is None else {"columns": found[0], "share": found[1]}


def few_carry(weights, share: float) -> tuple[list[int], float] | None:
    """(the fewest columns whose non-negative ``weights`` carry more than ``share`` of the total,
    the share they carry) when they are at most max(1, d // 5) columns and fewer than d, else
    None — the rule of :func:`dominant_columns` (squared norms of the rows) and of the private
    mean's own diagnosis (its squared coordinates, :mod:`noisysgd.preprocessing`).

    >>> cols, carried = few_carry([0.1, 9.5, 0.2, 0.1, 0.1, 0.5], 0.9)
    >>> cols, round(carried, 4), few_carry([1.0, 1.0, 1.0, 1.0, 1.0, 1.0], 0.9)
    ([1], 0.9048, None)
    """
    w = np.asarray(weights, dtype=np.float64)
    d, total = w.size, float(w.sum())
    if d < 2 or not total > 0.0:
        return None
    order = np.argsort(w)[::-1]
    cum = np.cumsum(w[order]) / total
    k = int(np.searchsorted(cum, share, side="right")) + 1
    if k > max(1, d // 5) or k >= d:
        return None
    return sorted(int(j) for j in order[:k]), float(cum[k - 1])


def columns_text(cols, names=None, limit: int = 8) -> str:
    """"feature column 3" or "feature columns 0, 3, ...", each with its name when ``names`` (the
    table's column names, e.g. a DataFrame's ``feature_names_in_``) are given.

    >>> columns_text([2], ["age", "income", "rooms"]), columns_text([0, 2])
    ("feature column 2 ('rooms')", 'feature columns 0, 2')
    """
    def one(j):
        return f"{j} ({str(names[j])!r})" if names is not None and 0 <= j < len(names) else str(j)

    if len(cols) == 1:
        return f"feature column {one(cols[0])}"
    more = ", ..." if len(cols) > limit else ""
    return f"feature columns {', '.join(one(j) for j in cols[:limit])}{more}"


def dominant_columns_message(found: dict, who: str, clip: float, advice: str, names=None) -> str:
    """The one warning line for a few columns taking the norm: :func:`dominant_columns`' finding on the
    training rows, or the private mean's (:func:`mean_dominant`, post-processing of a charged answer).
    ``names``: the columns' names."""
    cols = found["columns"]
    which = f"{columns_text(cols, names)} {'carries' if len(cols) == 1 else 'carry'}"
    those = "that column" if len(cols) == 1 else "those columns"
    share = "most" if found.get("share") is None else f"{found['share']:.0%}"
    of = ("the private mean's squared norm (post-processing of the released mean)" if found.get("of") == "private mean"
          else "the training rows' squared norm (statistics of the training data, not private)")
    return (f"{who}{which} {share} of {of}: rows clipped to norm {clip:g} are mostly {those}, and the columns on "
            f"smaller scales keep little signal. {advice}")


#: The one remedy a near-chance warning names, by what the fit saw (:func:`remedy`); the others are
#: in docs/accuracy.md §6a.  ``bounds``: rows trained as given in mixed units; ``epsilon``: everything
#: else.
REMEDIES = {
    "bounds": "declare the columns' public bounds ({flag})",
    "epsilon": "raise epsilon or train on more rows: the noise, not the preprocessing, is what holds the model "
               "back here",
}


def mean_dominant(certificate: dict) -> dict | None:
    """The private mean's own finding that a few columns take its norm (``preprocessing``'s
    ``dominant_columns``: post-processing of the released mean), as :func:`remedy` reads it."""
    pre = certificate.get("preprocessing") or {}
    cols = pre.get("dominant_columns")
    return None if not cols else {"columns": list(cols), "share": pre.get("dominant_share"), "of": "private mean"}


#: :func:`mixed_scales`: columns whose root-mean-square values differ by more than this factor are in
#: mixed units (a diagnosis of the raw rows shown to their owner; ``feature_range="auto"`` decides from
#: the private range query instead: :func:`noisysgd.preprocessing.scaling_decision`).
MIXED_RATIO = 16.0


def mixed_scales(X) -> dict | None:
    """``{"columns": [the largest], "ratio"}`` when the columns' root-mean-square values (over the
    rows ``X``, raw, before any scaling; columns all 0 left out) differ by more than
    :data:`MIXED_RATIO` (largest over smallest), else None."""
    X = float_array(X)
    rms = np.sqrt(np.mean(np.square(X, dtype=np.float64), axis=0)) if X.size else np.zeros(0)
    live = rms[rms > 0]
    if live.size < 2:
        return None
    ratio = float(live.max() / live.min())
    return {"columns": [int(np.argmax(rms))], "ratio": ratio} if ratio > MIXED_RATIO else None


def remedy(found: dict | None, *, flag: str = "feature_range=(low, high)", names=None, why: bool = True) -> str:
    """The remedy most likely to help a near-chance fit first: public bounds where the user kept the
    rows as given (``feature_range=None``, ``--feature-range none``) in mixed units (``found``:
    :func:`dominant_columns`, :func:`mixed_scales` or :func:`mean_dominant`; the callers pass None
    otherwise), else a larger ε or more rows — measured on the raw-tables benchmark's design half
    (benchmarks/raw_tables/README.md §8, the defaults' warned fits at ε < 3, where the automatic
    range query had scaled the rows or kept them): the next ε lifted balanced accuracy by 1-3 points
    on average, bounds read off the data (a stand-in for public ones) by −2 to 0, private ranges by
    −5 to 0, also where the range query had seen too few columns to scale by.

    >>> remedy(None)[:13], remedy({"columns": [2], "share": 0.99})[:29]
    ('raise epsilon', "declare the columns' public b")
    >>> remedy({"columns": [2], "share": 0.99}, why=False)
    "declare the columns' public bounds (feature_range=(low, high))"
    """
    if found is None:
        return REMEDIES["epsilon"]
    action = REMEDIES["bounds"].format(flag=flag)
    if not why:  # (a line that has named the columns already)
        return action
    cols = found["columns"]
    if "ratio" in found:
        reason = (f"the columns' scales differ by a factor {found['ratio']:.3g} ({columns_text(cols, names)} the "
                  "largest), and the rows were trained as given")
    else:
        share = f"{found['share']:.0%} of" if found.get("share") is not None else "most of"
        of = found.get("of", "training rows")
        whose = of + ("'" if of.endswith("s") else "'s")  # the training rows', the private mean's
        reason = f"{columns_text(cols, names)} {'carries' if len(cols) == 1 else 'carry'} {share} the {whose} squared norm"
    return f"{action}: {reason}"


def fit_warnings(X, y, predict, *, who: str, raw: bool, clip: float, advice, names=None, known=None) -> list[str]:
    """At most one line about a fit's training rows (a strided sample, :func:`check_rows`): a model
    near chance, with the one remedy ``advice(dominant)`` names (``advice(dominant, why=False)``: without
    the reason, on the line that gives it) (``dominant``: a few raw columns
    taking the rows' norm, found where ``raw``, the rows not scaled by ranges); else such columns
    alone (``names``: the columns' names).  ``known``: such columns as the private mean found them
    (:func:`mean_dominant`), said in preference to the rows' own statistics."""
    rows = check_rows(len(y))
    found = known or (dominant_columns(X[rows]) if raw else None)
    chance = near_chance(np.asarray(y)[rows], predict(X[rows]))
    if chance is not None:
        return [near_chance_message(chance, who, advice(found or (mixed_scales(X[rows]) if raw else None)))]
    # (advice: the caller's remedy, which names public bounds only where the user kept the rows as given)
    if found is not None:
        return [dominant_columns_message(found, who, clip, advice(found, why=False), names)]
    return []
