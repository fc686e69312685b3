"""The scikit-learn steps of private preprocessing: :class:`PublicRangeScaler` (declared bounds, no
privacy cost), the estimators' declared one-hot encoding (``categorical=``, :class:`DeclaredEncoding`:
the encoding of ``noisysgd train --categorical``, :func:`noisysgd.io.one_hot`), the rows an estimator
fits and predicts on (:func:`fit_rows`, :func:`predict_rows`: a text column named, not numpy's
error), the names of a ``Pipeline``'s columns for the warnings, and the warning for a ``Pipeline``
step that learns from the private data before a noisysgd estimator.  Kept apart from
:mod:`noisysgd.preprocessing` so that the private queries and ``noisysgd train`` import no
scikit-learn."""

from __future__ import annotations

import inspect
import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .io import (absent_value, category_codes, declared_categories, encoding_record, indicator_columns, one_hot,
                 one_hot_names, text_cell_error)
from .params import param_error
from .preprocessing import check_feature_range
from .rowmaps import scale_to_ball
from .train import PrivacyLeakWarning

__all__ = ["PublicRangeScaler", "warn_if_private_preprocessing", "warn_about_private_preprocessing",
           "DeclaredEncoding", "declared_encoding", "fit_rows", "predict_rows", "fitting_pipeline",
           "pipeline_feature_names"]


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


def fitting_pipeline(estimator, *, depth: int = 12):
    """The scikit-learn ``Pipeline`` now fitting ``estimator`` as its last step, found within
    ``depth`` frames up the call stack from the caller (None if there is none)."""
    from sklearn.pipeline import Pipeline

    frame = inspect.currentframe()
    try:
        f = frame.f_back.f_back if frame is not None and frame.f_back is not None else None
        for _ in range(depth):
            if f is None:
                return None
            owner = f.f_locals.get("self")
            if isinstance(owner, Pipeline) and owner.steps and owner.steps[-1][1] is estimator:
                return owner
            f = f.f_back
        return None
    finally:
        del frame


def pipeline_feature_names(estimator, d: int) -> list[str] | None:
    """The names the steps before ``estimator`` in the ``Pipeline`` fitting it give its ``d`` input
    columns (``get_feature_names_out``: a ``ColumnTransformer``'s ``"num__age"``, ``"cat__color_red"``),
    for the warnings; None where there is no such Pipeline or a step cannot name its output."""
    try:
        pipe = fitting_pipeline(estimator, depth=14)
        if pipe is None or len(pipe.steps) < 2:
            return None
        names = [str(name) for name in pipe[:-1].get_feature_names_out()]
    except Exception:  # noqa: BLE001 - a step without names, or not fitted: positions it is
        return None
    return names if len(names) == d else None


def warn_if_private_preprocessing(estimator, *, depth: int = 12, stacklevel: int = 3) -> list[str]:
    """Warn for every step that learns from the data, before ``estimator`` in a
    ``Pipeline`` that is now fitting it (found on the call stack); the names."""
    owner = fitting_pipeline(estimator, depth=depth)
    found = [] if owner is None else [name for name, step in owner.steps[:-1] if not _stateless(step)]
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


@dataclass(frozen=True)
class DeclaredEncoding:
    """The one-hot encoding an estimator's ``categorical=`` declares: each categorical input column
    becomes one 0/1 column per declared category (named ``column=category``), in the declared
    order, as ``noisysgd train --categorical`` encodes (:func:`noisysgd.io.one_hot`); the others
    stay numbers.  Nothing is read off the data, so it costs no privacy."""

    #: every input column's name: a DataFrame's, the Pipeline's steps', else x0, x1, ...
    input_names: tuple
    #: {input column name: [category, ...]} of the encoded columns, in column order
    categorical: dict

    @property
    def names(self) -> list[str]:
        """The encoded columns' names (those of ``coef_``)."""
        return one_hot_names(self.input_names, self.categorical)

    def transform(self, X, owner, column_keys=None) -> np.ndarray:
        """``X`` (validated rows of the input columns, any dtype) encoded, as float64; a cell
        outside its column's categories, or text in another column, is a ValueError naming both."""
        X = np.asarray(X)
        codes = np.empty(X.shape, dtype=np.float64)
        for j, name in enumerate(self.input_names):
            if name in self.categorical:
                codes[:, j] = category_codes(X[:, j], name, self.categorical[name], lambda i: f"row {i} of X",
                                              subject="X")
            else:
                codes[:, j] = _numbers(X[:, j], j, column_keys, owner)
        return one_hot(codes, self.input_names, self.categorical)

    def ranges(self, frange):
        """Public bounds (low, high) of the input columns as bounds of the encoded ones: a category's
        0/1 column lies in [0, 1] (the bounds given at a categorical column are not used)."""
        if frange is None or isinstance(frange, str):
            return frange
        low, high = frange
        source = np.array([j for j, name in enumerate(self.input_names)
                           for _ in (self.categorical.get(name) or [None])], dtype=np.int64)
        mask = indicator_columns(self.input_names, self.categorical)
        return np.where(mask, 0.0, low[source]), np.where(mask, 1.0, high[source])

    def record(self) -> dict:
        """``privacy_report_["encoding"]``: what was declared, the columns as given and as trained on."""
        return {**encoding_record(self.categorical, self.input_names), "columns": self.names}


def declared_encoding(estimator, categorical, d: int, column_names=None, names=None) -> DeclaredEncoding:
    """``categorical`` ({column: [category, ...]}, each column a name of ``column_names`` — a
    DataFrame's ``feature_names_in_`` — or a position below ``d``) checked, as a
    :class:`DeclaredEncoding` of columns named ``names`` (the Pipeline's; default x0, x1, ...)."""
    what = "a dict {column: [category, ...]} naming columns of X (names of a DataFrame's columns, or positions)"
    if not isinstance(categorical, dict):
        raise param_error(estimator, "categorical", categorical, what)
    given = list(column_names) if column_names is not None else None
    names = [str(n) for n in (given or names or [f"x{j}" for j in range(d)])]
    cats = {}
    for key, values in categorical.items():
        if isinstance(key, str):
            if given is None:
                raise param_error(estimator, "categorical", categorical,
                                  f"{what}; X has no column names, so {key!r} must be given by its position")
            if key not in given:
                shown = ", ".join(map(repr, given[:20])) + (", ..." if len(given) > 20 else "")
                raise param_error(estimator, "categorical", categorical,
                                  f"{what}; {key!r} is not a column of X (its columns: {shown})")
            j = given.index(key)
        elif isinstance(key, numbers.Integral) and not isinstance(key, bool) and 0 <= key < d:
            j = int(key)
        else:
            raise param_error(estimator, "categorical", categorical, f"{what}; {key!r} is not one of X's "
                              f"{d} columns")
        if names[j] in cats:
            raise param_error(estimator, "categorical", categorical, f"{what}, each column once; column "
                              f"{names[j]!r} is given twice")
        cats[names[j]] = declared_categories(values, f"categorical[{key!r}]")
    return DeclaredEncoding(tuple(names), {n: cats[n] for n in names if n in cats})


def _numbers(column, j: int, keys, owner) -> np.ndarray:
    """One input column as float64; a cell of text is a ValueError naming it and how to declare the
    column categorical (as ``noisysgd train`` does), instead of numpy's."""
    try:
        return np.asarray(column).astype(np.float64)
    except (TypeError, ValueError):  # (TypeError: a missing value, pandas' NA, or an object that is no number)
        pass
    for i, value in enumerate(column):
        try:
            float(value)
        except (TypeError, ValueError):
            break
    else:  # every cell a number to Python (numpy's parser refused one): read them as Python does
        return np.array([float(v) for v in column], dtype=np.float64)
    key = keys[j] if keys is not None else j
    shown = value.strip() if isinstance(value, str) else value
    text = isinstance(shown, str) and bool(shown)  # (a missing cell gets no hint, as in noisysgd train)
    shown = "(empty)" if absent_value(shown) else shown
    raise text_cell_error(shown, "not a number", f"row {i}, column {key!r} of X",
                          f"categorical={{{key!r}: [...]}} in {type(owner).__name__}" if text else None, subject="X")


def _text_cell(estimator, X) -> ValueError | None:
    """The error naming the first cell of text in a column of ``X`` (as :func:`_numbers`), or None."""
    try:
        columns = getattr(X, "columns", None)
        keys = [str(c) for c in columns] if columns is not None and all(isinstance(c, str) for c in columns) else None
        A = np.asarray(X, dtype=object)
        if A.ndim != 2:
            return None
        for j in range(A.shape[1]):
            if any(isinstance(v, str) for v in A[:, j]):
                try:
                    _numbers(A[:, j], j, keys, estimator)
                except ValueError as exc:
                    return exc
    except Exception:  # noqa: BLE001 - whatever X is, the caller's own error stands
        return None
    return None


def _numeric_data(estimator, X, *args, **kw):
    """``validate_data(estimator, X, *args, **kw)``, with a text column named instead of numpy's error."""
    try:
        return validate_data(estimator, X, *args, **kw)
    except (TypeError, ValueError):  # (a column of text with a missing cell is numpy's TypeError)
        found = _text_cell(estimator, X)
        if found is None:
            raise
    raise found


def fit_rows(estimator, X, y, *, dtype, **kw):
    """(X, y, encoding, names) for ``estimator.fit``: ``validate_data``'s X and y, X one-hot encoded as
    its ``categorical`` declares (:class:`DeclaredEncoding`, or None: X as numbers); ``names``: the
    columns' names for the warnings (a DataFrame's, or the Pipeline's steps' where the estimator is
    fitted after a ``ColumnTransformer``; the encoded columns' where encoded; else None)."""
    categorical = getattr(estimator, "categorical", None)
    if categorical is None or (isinstance(categorical, dict) and not categorical):
        X, y = _numeric_data(estimator, X, y, dtype=dtype, **kw)
        given = getattr(estimator, "feature_names_in_", None)
        names = list(map(str, given)) if given is not None else pipeline_feature_names(estimator, X.shape[1])
        return X, y, None, names
    X, y = validate_data(estimator, X, y, dtype=None, ensure_all_finite=False, **kw)
    given = getattr(estimator, "feature_names_in_", None)
    names = None if given is not None else pipeline_feature_names(estimator, X.shape[1])
    encoding = declared_encoding(estimator, categorical, X.shape[1], given, names)
    rows = check_array(encoding.transform(X, estimator, given), dtype=dtype, input_name="X")
    return rows, y, encoding, encoding.names


def predict_rows(estimator, X, encoding, *, dtype):
    """The rows ``estimator`` scores: validated (``reset=False``) and encoded as in fit."""
    if encoding is None:
        return _numeric_data(estimator, X, reset=False, dtype=dtype)
    X = validate_data(estimator, X, reset=False, dtype=None, ensure_all_finite=False)
    given = getattr(estimator, "feature_names_in_", None)
    return check_array(encoding.transform(X, estimator, given), dtype=dtype, input_name="X")
