"""The scikit-learn steps of private preprocessing: :class:`PublicRangeScaler` (declared bounds, no
privacy cost) and the warning for a ``Pipeline`` step that learns from the private data before a
noisysgd estimator.  Kept apart from :mod:`noisysgd.preprocessing` so that the private queries and
``noisysgd train`` import no scikit-learn."""

from __future__ import annotations

import inspect
import math
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .preprocessing import check_feature_range
from .rowmaps import scale_to_ball
from .train import PrivacyLeakWarning

__all__ = ["PublicRangeScaler", "warn_if_private_preprocessing", "warn_about_private_preprocessing"]


class PublicRangeScaler(TransformerMixin, BaseEstimator):
    """Scale features into the R-ball with bounds declared from public knowledge.

    ``fit`` learns nothing from the data (only its number of columns);
    ``transform`` is :func:`scale_to_ball`.  Use it in a ``Pipeline`` before a
    noisysgd estimator instead of ``StandardScaler`` or ``MinMaxScaler``
    (whose statistics of the training data the certificate does not cover).

    Parameters
    ----------
    feature_range : pair (low, high) of floats or of arrays of shape (n_features,)
        Public bounds of every feature (e.g. (0, 16) for scikit-learn's digits).
    feature_clip : float, default=1.0
        Rows halfway across their ranges get this norm (:func:`scale_to_ball`); the estimator
        clips longer ones; give the estimator the same value.

    >>> from sklearn.pipeline import make_pipeline
    >>> from noisysgd.estimators import NoisySGDClassifier
    >>> pipe = make_pipeline(PublicRangeScaler(feature_range=(0, 16)), NoisySGDClassifier(epsilon=1.0))
    """

    def __init__(self, feature_range=(0.0, 1.0), feature_clip=1.0):
        self.feature_range = feature_range
        self.feature_clip = feature_clip

    def fit(self, X, y=None):
        X = validate_data(self, X, dtype=np.float64)
        self._bounds(X.shape[1])
        return self

    def _bounds(self, d):
        R = self.feature_clip
        if not (isinstance(R, numbers.Real) and not isinstance(R, bool) and math.isfinite(R) and R > 0):
            raise ValueError(f"The 'feature_clip' parameter of PublicRangeScaler must be a finite float "
                             f"in the range (0, inf). Got {R!r} instead.")
        return check_feature_range(self, self.feature_range, d)

    def transform(self, X):
        check_is_fitted(self, "n_features_in_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return scale_to_ball(X, self._bounds(X.shape[1]), self.feature_clip)


def _stateless(step) -> bool:
    """Whether a Pipeline step learns nothing from the data it is fitted on: passthrough,
    :class:`PublicRangeScaler`, a plain FunctionTransformer, a ``OneHotEncoder`` with its
    categories declared (no frequency-based grouping), or a ``ColumnTransformer`` of such
    steps on columns chosen by name or position."""
    if step is None or (isinstance(step, str) and step in ("passthrough", "drop")):
        return True
    if isinstance(step, PublicRangeScaler):
        return True
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import FunctionTransformer, OneHotEncoder

    if isinstance(step, OneHotEncoder):
        return (not isinstance(step.categories, str) and step.min_frequency is None
                and step.max_categories is None)
    if isinstance(step, ColumnTransformer):
        return (all(_stateless(t) and not callable(cols) for _, t, cols in step.transformers)
                and _stateless(step.remainder))
    return isinstance(step, FunctionTransformer) and step.inverse_func is None and not step.validate


def warn_if_private_preprocessing(estimator, *, depth: int = 12, stacklevel: int = 3) -> list[str]:
    """Warn for every step that learns from the data, before ``estimator`` in a
    ``Pipeline`` that is now fitting it (found on the call stack); the names."""
    from sklearn.pipeline import Pipeline

    frame = inspect.currentframe()
    found = []
    try:
        f = frame.f_back if frame is not None else None
        for _ in range(depth):
            if f is None:
                break
            owner = f.f_locals.get("self")
            if isinstance(owner, Pipeline) and owner.steps and owner.steps[-1][1] is estimator:
                found = [name for name, step in owner.steps[:-1] if not _stateless(step)]
                break
            f = f.f_back
    finally:
        del frame
    if found:
        warnings.warn(
            f"{type(estimator).__name__} is fitted in a Pipeline after {', '.join(map(repr, found))}, "
            "fitted on the same private data: the privacy certificate does not cover what those steps "
            "learn from it (e.g. StandardScaler's means and deviations); declare public bounds with "
            "noisysgd.PublicRangeScaler or feature_range= instead",
            PrivacyLeakWarning, stacklevel=stacklevel)
    return found


def warn_about_private_preprocessing(estimator) -> list[str]:
    return warn_if_private_preprocessing(estimator, stacklevel=5)
