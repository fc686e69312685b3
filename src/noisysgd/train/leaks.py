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

__all__ = ["PrivacyLeakWarning", "check_declared_constants"]

#: Relative tolerance under which a declared constant "equals" a data statistic.
RELATIVE_TOLERANCE = 1e-9


class PrivacyLeakWarning(UserWarning):
    """A declared constant looks computed from the training data."""


def _equal(a: float, b: float) -> bool:
    return abs(a - b) <= RELATIVE_TOLERANCE * max(abs(a), abs(b))


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
