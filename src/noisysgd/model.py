"""A trained model as ``noisysgd train`` / ``noisysgd tune`` write it, and back.

:func:`model_document` is the one place that writes ``model.json``;
:func:`load_model` reads it (or the output directory that holds it, with its
``certificate.json``) into a :class:`LinearModel` that predicts exactly as the
training engine does: the same feature map (each row scaled to norm at most
the feature clip R, the bias coordinate s = ``intercept_scaling`` appended) and
the same loss's scores,
so ``load_model(out).predict(X)`` equals the trainer's own predictions.

Reading a model and predicting import neither the trainer nor scipy (class probabilities
use scipy.special), so ``noisysgd predict`` starts about as fast as numpy: :func:`load_model`
keeps the loss as the file names it (its ``loss_spec``), and the trainer's loss object is
built on the first read of :attr:`LinearModel.loss`; the feature maps are the trainer's own
(:mod:`noisysgd.rowmaps`, which imports numpy alone).

>>> import numpy as np, tempfile, json, os
>>> from noisysgd.train import BinaryLogistic
>>> doc = model_document(task="classification", loss=BinaryLogistic(), target="y",
...                      feature_names=["a", "b"], classes=["no", "yes"], feature_clip=1.0,
...                      coef=np.array([2.0, -1.0, 0.5]), version="0")
>>> path = os.path.join(tempfile.mkdtemp(), "model.json")
>>> with open(path, "w") as f:
...     json.dump(doc, f)
>>> m = load_model(path)
>>> m
LinearModel(task='classification', loss=BinaryLogistic(), features=2, classes=['no', 'yes'])
>>> m.predict(np.array([[1.0, 0.0], [0.0, 3.0]])).tolist()
['yes', 'no']
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field

import numpy as np

from .io import plain_path
from .rowmaps import augment_rows, center_rows, scale_to_ball

__all__ = ["LinearModel", "load_model", "model_document", "FORMAT"]

FORMAT = "noisysgd-linear-model/4"
#: formats :func:`load_model` reads: /1 has no ``intercept_scaling`` (its bias coordinate is 1), /2 no
#: ``center`` (/3 adds it: a reader of /2 would ignore it and predict wrongly, so the format changed),
#: /3 no ``feature_range.spread`` (its spread is 1; /4 adds it, for the same reason)
FORMATS_READ = ("noisysgd-linear-model/1", "noisysgd-linear-model/2", "noisysgd-linear-model/3", FORMAT)

_LAYOUT = ("coef has one row per feature and a last row for the bias; columns are classes for a "
           "multiclass model (one column, flattened, otherwise)")
_PREDICT = ("x_bar = [x * min(1, feature_clip / ||x||), intercept_scaling]; s = x_bar @ coef; classification: class "
            "index argmax(s) (multiclass) or classes[1] if s > 0 else classes[0]; regression: s")


def _loss_spec(loss) -> dict:
    from .train import BinaryLogistic, ClassWeighted, Huber, OneVsRestLogistic, Softmax, Squared

    if isinstance(loss, ClassWeighted):  # the weights shape training, not prediction
        return _loss_spec(loss.base)

    if isinstance(loss, BinaryLogistic):
        return {"name": "logistic"}
    if isinstance(loss, Softmax):
        return {"name": "softmax", "n_classes": int(loss.n_classes)}
    if isinstance(loss, OneVsRestLogistic):
        return {"name": "ovr", "n_classes": int(loss.n_classes)}
    if isinstance(loss, Huber):
        return {"name": "huber", "delta": float(loss.delta)}
    if isinstance(loss, Squared):
        return {"name": "squared"}
    raise ValueError(f"loss must be one of noisysgd's losses to be written to model.json. Found {loss!r}.")


def _loss_from_spec(spec, where: str):
    from .train import BinaryLogistic, Huber, OneVsRestLogistic, Softmax, Squared

    name = spec.get("name") if isinstance(spec, dict) else None
    try:
        if name == "logistic":
            return BinaryLogistic()
        if name == "softmax":
            return Softmax(int(spec["n_classes"]))
        if name == "ovr":
            return OneVsRestLogistic(int(spec["n_classes"]))
        if name == "huber":
            return Huber(float(spec["delta"]))
        if name == "squared":
            return Squared()
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"model: {where} has an invalid loss {spec!r}: {exc}.") from None
    raise ValueError(f"model: {where} names an unknown loss {spec!r}.")


class _LossSpec:
    """A loss as ``model.json`` names it (its checked ``loss_spec``), for prediction without
    the trainer: the scores, predictions and repr of the :mod:`noisysgd.train` loss it names,
    computed as that loss computes them.  :meth:`build` makes the loss itself."""

    __slots__ = ("spec", "where")

    def __init__(self, spec: dict, where: str):
        self.spec, self.where = spec, where

    @property
    def name(self) -> str:
        return self.spec["name"]

    def __repr__(self) -> str:  # the trainer's losses' reprs
        if self.name in ("softmax", "ovr"):
            kind = "Softmax" if self.name == "softmax" else "OneVsRestLogistic"
            return f"{kind}(n_classes={self.spec['n_classes']})"
        if self.name == "huber":
            return f"Huber(delta={self.spec['delta']:g})"
        return "BinaryLogistic()" if self.name == "logistic" else "Squared()"

    def scores(self, W, Xbar) -> np.ndarray:  # Loss.scores
        return np.asarray(Xbar) @ np.asarray(W)

    def predict(self, W, Xbar) -> np.ndarray:
        s = self.scores(W, Xbar)
        if self.name == "logistic":  # BinaryLogistic.predict
            return np.where(s >= 0, 1, -1)
        if self.name in ("softmax", "ovr"):  # _Multiclass.predict
            return np.argmax(s, axis=1)
        return s  # Squared, Huber

    def build(self):
        return _loss_from_spec(self.spec, self.where)


def _deferred_loss(spec, where: str):
    """A :class:`_LossSpec` for ``spec`` when :func:`_loss_from_spec` would build its loss; else
    what :func:`_loss_from_spec` does (its error, word for word)."""
    name = spec.get("name") if isinstance(spec, dict) else None
    try:
        if name in ("logistic", "squared"):
            return _LossSpec({"name": name}, where)
        if name in ("softmax", "ovr"):
            n = int(spec["n_classes"])
            if n >= 2:
                return _LossSpec({"name": name, "n_classes": n}, where)
        if name == "huber":
            delta = float(spec["delta"])
            if math.isfinite(delta) and delta > 0:
                return _LossSpec({"name": name, "delta": delta}, where)
    except Exception:  # noqa: BLE001 - _loss_from_spec says what is wrong
        pass
    return _loss_from_spec(spec, where)


class _LossField:
    """:attr:`LinearModel.loss`: a loss of :mod:`noisysgd.train`, built on first read from the
    :class:`_LossSpec` that :func:`load_model` gave (predicting does not read it)."""

    def __get__(self, obj, owner=None):
        if obj is None:
            raise AttributeError("loss")  # no class-level value: the dataclass field has no default
        value = obj.__dict__["_given_loss"]
        if isinstance(value, _LossSpec):
            value = obj.__dict__["_given_loss"] = value.build()
        return value

    def __set__(self, obj, value):
        obj.__dict__["_given_loss"] = value


def _augment(X: np.ndarray, feature_clip: float, intercept_scaling: float) -> np.ndarray:
    """:func:`noisysgd.train.augment` (float64) of a validated float64 ``X``, by the same arithmetic
    (:func:`noisysgd.rowmaps.augment_rows`) without importing the trainer; a clip or bias coordinate
    that function would refuse is left to it (its error)."""
    R, s = feature_clip, intercept_scaling
    if not (isinstance(X, np.ndarray) and X.dtype == np.float64 and X.ndim == 2 and np.isfinite(X).all()
            and all(type(v) is float and math.isfinite(v) and v > 0 for v in (R, s))):
        from .train.losses import augment

        return augment(X, R, intercept_scaling=s)
    return augment_rows(X, R, np.dtype(np.float64), bias=s)[0]


def _jsonable(value):
    return value.item() if isinstance(value, np.generic) else value


def model_document(*, task: str, loss, target: str, feature_names, classes, feature_clip: float, coef,
                   version: str, feature_range=None, feature_range_kind: str | None = None,
                   intercept_scaling: float = 1.0, center=None, center_clip: float | None = None,
                   classes_source: str | None = None, encoding=None) -> dict:
    """The content of ``model.json`` (format :data:`FORMAT`).  ``feature_range``: (low, high)
    arrays the features were scaled with before training (:func:`noisysgd.preprocessing.scale_to_ball`);
    ``intercept_scaling``: the bias coordinate s of x̄ (the intercept is s·coef[-1]); ``center``:
    the private mean subtracted from the rows clipped to ``center_clip`` R₀ before the clip
    ``feature_clip`` (:func:`noisysgd.preprocessing.private_center`; then R_c);
    ``classes_source``: whether the classes were declared or taken from the data
    (:func:`noisysgd.train.encode_labels`); ``encoding``: (categorical, input_columns) — the
    {column: [category, ...]} declared for the columns one-hot encoded into ``feature_names``
    (``column=category``), and the columns as read (:func:`noisysgd.io.load_table`) — or None."""
    doc = {
        "format": FORMAT,
        "task": task,
        "loss": repr(loss),
        "loss_spec": _loss_spec(loss),
        "target": target,
        "feature_names": list(feature_names),
        "classes": None if classes is None else [_jsonable(c) for c in classes],
        **({"classes_source": classes_source} if classes_source is not None else {}),
        "feature_clip": float(feature_clip),
        "intercept_scaling": float(intercept_scaling),
        "coef": np.asarray(coef, dtype=float).tolist(),
        "layout": _LAYOUT,
        "predict": _PREDICT,
        "noisysgd_version": version,
    }
    if feature_range is not None:
        from .preprocessing import SPREAD

        low, high = feature_range
        doc["feature_range"] = {"low": np.asarray(low, dtype=float).tolist(),
                                "high": np.asarray(high, dtype=float).tolist(), "kind": feature_range_kind,
                                "spread": SPREAD}
    if center is not None:
        doc["center"] = {"mean": np.asarray(center, dtype=float).tolist(), "clip": float(center_clip)}
        doc["predict"] = "x = x * min(1, center.clip / ||x||) - center.mean (center); then " + _PREDICT
    categorical, input_columns = encoding if encoding else (None, None)
    if categorical:
        doc["encoding"] = {"categorical": {str(k): [str(c) for c in v] for k, v in categorical.items()},
                           "input_columns": [str(c) for c in input_columns]}
    if feature_range is not None:
        doc["predict"] = ("x = clip(x, low, high) mapped to [-1, 1] and scaled by "
                          f"{'center.clip' if center is not None else 'feature_clip'}/(spread * sqrt(d + 1)) "
                          "(feature_range; spread 1 where the file gives none); then " + doc["predict"])
    if categorical:
        doc["predict"] = ("one-hot encode the categorical columns of input_columns (encoding: one 0/1 column "
                          "per declared category, named column=category); then " + doc["predict"])
    return doc


@dataclass(frozen=True, eq=False)
class LinearModel:
    """A released linear model: predicts as the trainer did.

    ``certificate`` is the privacy certificate written beside the model
    (``None`` when only ``model.json`` was given and no ``certificate.json``
    sits next to it).
    """

    task: str
    #: a loss of :mod:`noisysgd.train` (built on first read when the model was loaded from a file)
    loss: object = _LossField()
    coef: np.ndarray
    feature_clip: float
    feature_names: list
    target: str
    classes: list | None = None
    certificate: dict | None = field(default=None, repr=False)
    path: str = ""
    #: (low, high) arrays the features are scaled with first (None: no scaling)
    feature_range: tuple | None = field(default=None, repr=False)
    #: the bias coordinate s of x̄ (1 in models written before it existed)
    intercept_scaling: float = field(default=1.0, repr=False)
    #: (mean, R₀): rows clipped to R₀ minus the private mean, before the clip (None: not centered)
    center: tuple | None = field(default=None, repr=False)
    #: {column: declared categories} one-hot encoded into the features (None: none), and the
    #: columns a table to predict must have (None: ``feature_names``)
    categorical: dict | None = field(default=None, repr=False)
    input_columns: list | None = field(default=None, repr=False)
    #: :func:`noisysgd.preprocessing.scale_to_ball`'s spread (1 in models written before it existed)
    feature_spread: float = field(default=1.0, repr=False)

    @property
    def n_features(self) -> int:
        return self.coef.shape[0] - 1

    def __repr__(self) -> str:
        extra = f", classes={self.classes!r}" if self.classes is not None and len(self.classes) <= 6 else (
            f", classes={len(self.classes)}" if self.classes is not None else "")
        return (f"LinearModel(task={self.task!r}, loss={self._loss!r}, features={self.n_features}"
                f"{extra})")

    @property
    def _loss(self):
        """The loss as given: a :mod:`noisysgd.train` loss, or a :class:`_LossSpec` (not built)."""
        return self.__dict__["_given_loss"]

    def _features(self, X) -> np.ndarray:
        try:
            X = np.asarray(X, dtype=float)
        except (TypeError, ValueError):
            raise ValueError("X must be a 2-D array of numbers.") from None
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"X must have {self.n_features} feature columns (the model's "
                             f"{', '.join(map(str, self.feature_names[:5]))}{', ...' if self.n_features > 5 else ''}). "
                             f"Found shape {X.shape}.")
        if not np.all(np.isfinite(X)):
            i, k = np.argwhere(~np.isfinite(X))[0]
            raise ValueError(f"X must hold finite numbers. Found {X[i, k]!r} at row {i}, column {k}.")
        first_clip = self.feature_clip if self.center is None else self.center[1]
        if self.feature_range is not None:
            X = scale_to_ball(X, self.feature_range, first_clip, spread=self.feature_spread)
        if self.center is not None:
            X = center_rows(X, self.center[0], first_clip)
        return _augment(X, self.feature_clip, self.intercept_scaling)

    def decision_function(self, X) -> np.ndarray:
        """Scores x̄ᵀW (features clipped as in training): shape (n,) or (n, k)."""
        return self._loss.scores(self.coef, self._features(X))

    def predict(self, X) -> np.ndarray:
        """Class labels (as written in ``classes``) or real values (regression)."""
        raw = self._loss.predict(self.coef, self._features(X))
        if self.task == "regression":
            return raw
        classes = np.asarray(self.classes, dtype=object)
        index = (raw > 0).astype(int) if len(self.classes) == 2 else raw.astype(int)
        out = classes[index]
        try:  # numeric labels come back as numbers
            return out.astype(float) if all(isinstance(c, (int, float)) for c in self.classes) else out
        except (TypeError, ValueError):
            return out

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities of the model's link (logistic, softmax, or one-vs-rest
        logistics normalized to sum to one), columns in the order of ``classes``."""
        if self.task != "classification":
            raise ValueError("predict_proba needs a classification model. Found a regression model.")
        from scipy.special import expit, softmax

        s = self.decision_function(X)
        if s.ndim == 1:
            p = expit(s)
            return np.column_stack([1.0 - p, p])
        if self._one_vs_rest():
            p = expit(s)
            return p / p.sum(axis=1, keepdims=True)
        return softmax(s, axis=1)

    def _one_vs_rest(self) -> bool:
        if isinstance(self._loss, _LossSpec):
            return self._loss.name == "ovr"
        from .train import OneVsRestLogistic

        return isinstance(self._loss, OneVsRestLogistic)


def _read_json(path: str, what: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise ValueError(f"model: cannot read {what} {str(path)!r}: {exc.strerror or exc}.") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"model: {str(path)!r} is not a JSON {what}: {exc}.") from None


def load_model(path) -> LinearModel:
    """Read a model written by ``noisysgd train`` or ``noisysgd tune``.

    ``path``: the output directory (``model.json`` and ``certificate.json``
    in it) or the ``model.json`` file itself (its sibling
    ``certificate.json`` is read when present).
    """
    p = plain_path(path)  # os.path, not pathlib: ``noisysgd predict`` does not import it
    if os.path.isdir(p):
        p = os.path.join(p, "model.json")
        if not os.path.exists(p):
            raise ValueError(f"path must be a model.json file or a directory holding one. Found {str(path)!r}: "
                             "no model.json in it.")
    elif not os.path.exists(p):
        raise ValueError(f"path must be a model.json file or a directory holding one. Found {str(path)!r}: "
                         "no such file.")
    doc = _read_json(p, "model file")
    if not isinstance(doc, dict) or doc.get("format") not in FORMATS_READ:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"model: {p!r} must be a {FORMAT} file (or {' or '.join(FORMATS_READ[:-1])}). "
                         "Found format "
                         f"{found!r}.")
    task = doc.get("task")
    if task not in ("classification", "regression"):
        raise ValueError(f"model: {p!r} has an unknown task {task!r}.")
    spec = doc.get("loss_spec")
    if spec is None:  # written before loss_spec existed: the repr names the loss
        spec = _spec_from_repr(doc.get("loss"), p)
    loss = _deferred_loss(spec, repr(p))  # the trainer's loss, built when first read
    try:
        coef = np.asarray(doc["coef"], dtype=float)
        clip = float(doc["feature_clip"])
        bias = float(doc.get("intercept_scaling", 1.0))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"model: {p!r} lacks valid coef/feature_clip/intercept_scaling: {exc}.") from None
    if coef.ndim not in (1, 2) or coef.shape[0] < 2 or not np.all(np.isfinite(coef)) or not clip > 0:
        raise ValueError(f"model: {p!r} has invalid coefficients (shape {coef.shape}) or feature_clip {clip}.")
    if not (np.isfinite(bias) and bias > 0):
        raise ValueError(f"model: {p!r} has an invalid intercept_scaling {bias!r} (must be > 0).")
    classes = doc.get("classes")
    if task == "classification":
        k = 2 if coef.ndim == 1 else coef.shape[1]
        if not isinstance(classes, list) or len(classes) != k:
            raise ValueError(f"model: {p!r} must list {k} classes for its coefficients. Found {classes!r}.")
    names = doc.get("feature_names") or [f"x{i}" for i in range(coef.shape[0] - 1)]
    if len(names) != coef.shape[0] - 1:
        raise ValueError(f"model: {p!r} names {len(names)} features but has {coef.shape[0] - 1} "
                         "coefficient rows besides the bias.")
    frange, spread = None, 1.0
    if doc.get("feature_range") is not None:
        try:
            low = np.asarray(doc["feature_range"]["low"], dtype=float)
            high = np.asarray(doc["feature_range"]["high"], dtype=float)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"model: {p!r} has an invalid feature_range: {exc}.") from None
        if low.shape != (len(names),) or high.shape != low.shape or not np.all(low < high):
            raise ValueError(f"model: {p!r} has a feature_range that does not fit its {len(names)} features.")
        frange = (low, high)
        spread = doc["feature_range"].get("spread", 1.0)  # files before it: every row inside the ball
        if not (isinstance(spread, (int, float)) and not isinstance(spread, bool) and 0 < spread <= 1):
            raise ValueError(f"model: {p!r} has an invalid feature_range spread {spread!r} (in (0, 1]).")
    center = None
    if doc.get("center") is not None:
        try:
            mean = np.asarray(doc["center"]["mean"], dtype=float)
            r0 = float(doc["center"]["clip"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"model: {p!r} has an invalid center: {exc}.") from None
        if mean.shape != (len(names),) or not np.all(np.isfinite(mean)) or not (np.isfinite(r0) and r0 > 0):
            raise ValueError(f"model: {p!r} has a center that does not fit its {len(names)} features "
                             "(or a clip that is not > 0).")
        center = (mean, r0)
    categorical, inputs = _encoding(doc.get("encoding"), names, p)
    cert_path = os.path.join(os.path.dirname(p), "certificate.json")
    certificate = _read_json(cert_path, "certificate") if os.path.exists(cert_path) else None
    _warn_if_refuted(certificate, cert_path)
    return LinearModel(task, loss, coef, clip, list(names), doc.get("target", ""), classes, certificate, p,
                       frange, bias, center, categorical, inputs, float(spread) if frange is not None else 1.0)


def _encoding(encoding, names, where: str):
    """({column: categories}, input columns) of a model's one-hot encoding, checked against
    its feature names; (None, None) when it has none."""
    if encoding is None:
        return None, None
    try:
        categorical = {str(k): [str(c) for c in v] for k, v in encoding["categorical"].items()}
        inputs = [str(c) for c in encoding["input_columns"]]
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"model: {where!r} has an invalid encoding: {exc}.") from None
    expanded = [name for c in inputs
                for name in ([f"{c}={v}" for v in categorical[c]] if c in categorical else [c])]
    if expanded != list(names):
        raise ValueError(f"model: {where!r} has an encoding that does not give its feature names.")
    return categorical, inputs


class InvalidCertificateWarning(UserWarning):
    """A certificate written by an earlier noisysgd for a run it certified too small."""


def _warn_if_refuted(certificate, where) -> None:
    """Warn when ``certificate`` is one that earlier versions issued wrongly (CHANGELOG 0.2.0): add/remove
    adjacency with a batching other than poisson (an added row moves every later batch, or every
    other row's chance b/n; the exact ε of a linear instance is up to μ = 2√T/z against the
    certified √E/z), or with poisson batches whose rate and steps came from the data's own size
    (no declared public n: a neighbour ran another rate and another number of steps)."""
    run = (certificate or {}).get("run") if isinstance(certificate, dict) else None
    if not isinstance(run, dict) or run.get("adjacency") != "add-remove":
        return
    from .run import ADD_REMOVE_BATCHINGS

    batching = run.get("batching")
    data = ((certificate.get("certificate") or {}).get("data") or {}) if isinstance(
        certificate.get("certificate"), dict) else {}
    if batching in ADD_REMOVE_BATCHINGS and ("n_is" in data or "data" not in (certificate.get("certificate") or {})):
        return  # poisson at a declared public n (or a certificate of the accountant alone: n was given)
    import warnings

    why = (f"{batching!r} batches (an added row moves every later batch, or every other row's chance to be "
           "drawn)" if batching not in ADD_REMOVE_BATCHINGS else
           "a sampling rate and a number of steps taken from the data's own size (no declared public_n)")
    warnings.warn(
        f"certificate: {str(where)!r} certifies add/remove adjacency with {why}, which noisysgd "
        f"{certificate.get('noisysgd_version', '< 0.2')} accounted too small (CHANGELOG 0.2.0: add/remove): do not rely on its "
        "epsilon; retrain with adjacency='replace', or batching='poisson' and public_n",
        InvalidCertificateWarning, stacklevel=3)


def _spec_from_repr(text, where: str) -> dict:
    import re

    text = text or ""
    if text == "BinaryLogistic()":
        return {"name": "logistic"}
    if text == "Squared()":
        return {"name": "squared"}
    m = re.fullmatch(r"(Softmax|OneVsRestLogistic)\(n_classes=(\d+)\)", text)
    if m:
        return {"name": "softmax" if m.group(1) == "Softmax" else "ovr", "n_classes": int(m.group(2))}
    m = re.fullmatch(r"Huber\(delta=([0-9.eE+-]+)\)", text)
    if m:
        return {"name": "huber", "delta": float(m.group(1))}
    raise ValueError(f"model: {where} names an unknown loss {text!r}.")
