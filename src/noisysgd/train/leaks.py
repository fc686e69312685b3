"""Warnings for constants that look derived from the data.

Every constant the privacy analyses rely on (feature clip R, target bound Y,
clip norm L, diameter D, …) must be fixed *before* looking at the data: a
constant computed from the data — e.g. R = max_i ‖x_i‖ — leaks information
about the examples that attain it, which no analysis accounts for.  The
trainer never computes a constant from the data; it warns with
:class:`PrivacyLeakWarning` when a declared constant coincides with a
data statistic.
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["PrivacyLeakWarning", "check_declared_constants", "encode_labels", "LABELS_FROM_DATA",
           "LABELS_DECLARED"]

#: Relative tolerance under which a declared constant "equals" a data statistic.
RELATIVE_TOLERANCE = 1e-9


class PrivacyLeakWarning(UserWarning):
    """A declared constant looks computed from the training data."""


def _equal(a: float, b: float) -> bool:
    return abs(a - b) <= RELATIVE_TOLERANCE * max(abs(a), abs(b))


#: The frames :func:`noisysgd.train.declared.takes_declarations` puts between a trainer and its
#: caller: a warning that names the caller's line (``stacklevel``) counts them.
TRAINER_FRAMES = 1


def check_declared_constants(*, feature_clip: float, row_norms=None, target_bound=None, y=None,
                             stacklevel: int = 3) -> list[str]:
    """Warn (and return the messages) if ``feature_clip`` equals max_i ‖x_i‖
    (``row_norms`` are the raw ‖x_i‖) or ``target_bound`` equals max_i |y_i|.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = check_declared_constants(feature_clip=5.0, row_norms=np.array([3.0, 5.0]))
    >>> caught[0].category.__name__
    'PrivacyLeakWarning'
    """
    messages = []
    if row_norms is not None and len(row_norms):
        top = float(np.max(row_norms))
        if _equal(float(feature_clip), top):
            messages.append(
                f"feature_clip = {feature_clip!r} equals the largest feature norm of the data passed "
                f"({top!r}): a clipping bound computed from the data leaks it; fix it from prior "
                "knowledge (e.g. the feature range)"
            )
    if target_bound is not None and y is not None and len(y):
        top = float(np.max(np.abs(y)))
        if _equal(float(target_bound), top):
            messages.append(
                f"target_bound = {target_bound!r} equals the largest |label| of the data passed "
                f"({top!r}): a bound computed from the data leaks it; fix it from prior knowledge"
            )
    for message in messages:
        warnings.warn(message, PrivacyLeakWarning, stacklevel=stacklevel)
    return messages


#: What a certificate says of its classes (``certificate["classes"]["source"]``).
LABELS_DECLARED = "declared (public: fixed before the data was seen)"
LABELS_FROM_DATA = ("taken from the data (np.unique of the labels): not covered by the certificate, a row "
                    "whose label no other row has changes the model's output space")


def encode_labels(y, classes=None, *, name: str = "classes", stacklevel: int = 3):
    """``(classes, encoded, source)`` for the labels ``y`` of a classifier.

    ``classes`` declared (a public list, fixed before the data is seen, like
    diffprivlib's ``classes``): every label of ``y`` must be one of them —
    rows with another label are refused with an error naming it — and the
    model's output space is the declared one whatever the data holds.  None:
    the classes are ``np.unique(y)``, a function of the data that no
    certificate covers (one row with a label no other row has adds an
    output): a :class:`PrivacyLeakWarning` says so.  ``classes`` comes back
    sorted (``np.unique``), ``encoded`` indexes it, ``source`` is
    :data:`LABELS_DECLARED` or :data:`LABELS_FROM_DATA`.

    >>> classes, encoded, source = encode_labels(np.array(["b", "a", "b"]), classes=["a", "b", "c"])
    >>> classes.tolist(), encoded.tolist(), source == LABELS_DECLARED
    (['a', 'b', 'c'], [1, 0, 1], True)
    >>> encode_labels(np.array([0, 1, 2]), classes=[0, 1])
    Traceback (most recent call last):
    ...
    ValueError: y holds a label that classes does not declare: 2 (row 2). Declare every label in classes, or drop those rows before fitting.
    """
    y = np.asarray(y)
    if classes is None:
        found = np.unique(y)
        if found.size < 2:
            raise ValueError(f"y must contain at least two classes to train a classifier. Found 1 class: "
                             f"{found[0].item() if hasattr(found[0], 'item') else found[0]!r}.")
        warnings.warn(
            f"{name} not given: the {found.size} classes were taken from the data, which the certificate "
            f"does not cover (a row whose label no other row has changes the model's outputs); declare "
            f"them ({name}=...)", PrivacyLeakWarning, stacklevel=stacklevel)
        return found, np.searchsorted(found, y), LABELS_FROM_DATA
    if isinstance(classes, (str, bytes)) or not hasattr(classes, "__iter__"):
        raise ValueError(f"{name} must be a list of at least two labels or None. Found {classes!r}.")
    declared = list(classes)
    try:
        unique = np.unique(np.asarray(declared))
    except TypeError:
        raise ValueError(f"{name} must hold labels of one kind (all numbers or all strings). "
                         f"Found {declared!r}.") from None
    if unique.ndim != 1 or unique.size < 2 or unique.size != len(declared):
        what = "repeats a label" if unique.size != len(declared) else "has fewer than two labels"
        raise ValueError(f"{name} must be a list of at least two distinct labels. Found {declared!r} ({what}).")
    unknown = ~np.isin(y, unique)
    if unknown.any():
        row = int(np.flatnonzero(unknown)[0])
        more = int(unknown.sum()) - 1
        extra = f" and {more} more row{'s' if more > 1 else ''}" if more else ""
        label = y[row].item() if hasattr(y[row], "item") else y[row]
        raise ValueError(f"y holds a label that {name} does not declare: {label!r} (row {row}){extra}. "
                         f"Declare every label in {name}, or drop those rows before fitting.")
    return unique, np.searchsorted(unique, y), LABELS_DECLARED
