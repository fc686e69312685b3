"""The estimators' parameter checks: each bad value is refused with an error that names the
estimator, the parameter and the value (scikit-learn's wording), before anything is read or
written.  :func:`check_common` checks the parameters that :class:`~noisysgd.NoisySGDClassifier`
and :class:`~noisysgd.NoisySGDRegressor` share; the helpers serve their own parameters too."""

from __future__ import annotations

import numbers
import os

import numpy as np

from .run import ADJACENCIES, BATCHING_SCHEMES, INITIALIZATIONS

__all__ = ["check_common", "check_choice", "check_int", "check_real", "is_auto", "param_error"]


def param_error(estimator, name, value, what):
    """The ValueError for ``estimator``'s parameter ``name`` = ``value``, which must be ``what``."""
    return ValueError(
        f"The {name!r} parameter of {type(estimator).__name__} must be {what}. Got {value!r} instead."
    )


def check_choice(estimator, name, value, choices):
    """``value`` if it is one of ``choices``, else :func:`param_error`."""
    if value not in choices:
        raise param_error(estimator, name, value, "one of " + ", ".join(map(repr, choices)))
    return value


def check_real(estimator, name, value, *, low=0.0, low_open=True, optional=False, auto=False,
               auto_only=False):
    """``value`` as a finite float above ``low`` (at or above it if not ``low_open``); None kept if
    ``optional``, "auto" kept if ``auto`` (whose message also names "max", the learning rate's);
    ``auto_only`` names "auto" in the message only (the caller resolves it)."""
    if value is None and optional:
        return None
    if auto and isinstance(value, str) and value == "auto":
        return value
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
    ok = ok and (value > low if low_open else value >= low)
    if not ok:
        what = (f"a finite float in the range {'(' if low_open else '['}{low}, inf)" + (" or None" if optional else "")
                + (", 'auto' or 'max'" if auto else "") + (" or 'auto'" if auto_only else ""))
        raise param_error(estimator, name, value, what)
    return float(value)


def is_auto(value) -> bool:
    """Whether ``value`` is the string "auto" (never an array's elementwise comparison)."""
    return isinstance(value, str) and value == "auto"


def check_int(estimator, name, value, *, low=1, optional=False, auto=False):
    """``value`` as an int ≥ ``low`` (None if ``optional``); the message lists "auto" if ``auto``."""
    if value is None and optional:
        return None
    if not (isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= low):
        what = f"an int in the range [{low}, inf)"
        if optional and auto:
            what += ", None or 'auto'"
        elif optional or auto:
            what += " or None" if optional else " or 'auto'"
        raise param_error(estimator, name, value, what)
    return int(value)


def check_common(estimator) -> dict:
    """The parameters the classifier and the regressor share, checked (an error names the parameter
    and the value) and with their "auto" flags kept for :func:`noisysgd.config.configure`."""
    p = {
        "epsilon": check_real(estimator, "epsilon", estimator.epsilon, optional=True),
        "delta": check_real(estimator, "delta", estimator.delta, optional=True),
        "noise_multiplier": check_real(estimator, "noise_multiplier", estimator.noise_multiplier,
                                        optional=True),
        "epochs": "auto" if is_auto(estimator.epochs) else check_int(estimator, "epochs", estimator.epochs, auto=True),
        "batch_size": "auto" if is_auto(estimator.batch_size) else check_int(
            estimator, "batch_size", estimator.batch_size, optional=True, auto=True),
        "batching": check_choice(estimator, "batching", estimator.batching, BATCHING_SCHEMES + ("auto",)),
        "learning_rate": estimator.learning_rate if estimator.learning_rate in ("auto", "max") else check_real(
            estimator, "learning_rate", estimator.learning_rate, auto=True),
        "alpha": "auto" if is_auto(estimator.alpha) else check_real(estimator, "alpha", estimator.alpha,
                                                                   low_open=False, auto_only=True),
        "feature_clip": check_real(estimator, "feature_clip", estimator.feature_clip),
        "intercept_scaling": estimator._intercept_scaling(),
        "clip_norm": ("auto" if (estimator._CLIP_AUTO and is_auto(estimator.clip_norm)) else "adaptive" if (
            estimator._CLIP_AUTO and isinstance(estimator.clip_norm, str) and estimator.clip_norm == "adaptive")
            else check_real(estimator, "clip_norm", estimator.clip_norm, optional=True, auto_only=estimator._CLIP_AUTO)),
        "diameter": check_real(estimator, "diameter", estimator.diameter, optional=True),
        "adjacency": check_choice(estimator, "adjacency", estimator.adjacency, ADJACENCIES),
        "public_n": check_int(estimator, "public_n", estimator.public_n, optional=True),
        "release": estimator._release(),
        "initialization": check_choice(estimator, "initialization", estimator.initialization,
                                        INITIALIZATIONS),
        "dtype": check_choice(estimator, "dtype", estimator.dtype, ("float64", "float32")),
    }
    if p["delta"] is not None and not p["delta"] < 1:
        raise param_error(estimator, "delta", estimator.delta, "a float in the range (0, 1) or None")
    if (p["epsilon"] is None) == (p["noise_multiplier"] is None):
        raise ValueError(
            f"{type(estimator).__name__} needs exactly one of 'epsilon' (a privacy target; the noise "
            "is calibrated to it) and 'noise_multiplier' (the noise; epsilon is reported). Got "
            f"epsilon={estimator.epsilon!r}, noise_multiplier={estimator.noise_multiplier!r}."
        )
    if p["release"] == "tail-average" and p["batching"] == "auto":
        p["batching"] = "poisson"  # composition certifies an average: DP-SGD's batches, not the hidden-state grid
    if p["batching"] not in ("full", "auto") and p["batch_size"] is None:
        raise param_error(estimator, "batch_size", None, f"an int >= 1 for batching={p['batching']!r}")
    analysis = estimator.analysis
    if not (isinstance(analysis, str) or (isinstance(analysis, (list, tuple)) and analysis)):
        raise param_error(estimator, "analysis", analysis, "'best' or a list of analysis names")
    if not isinstance(estimator.secure_mode, bool):
        raise param_error(estimator, "secure_mode", estimator.secure_mode, "True or False")
    if estimator.secure_mode and estimator.random_state is not None:
        raise param_error(
            estimator, "random_state", estimator.random_state,
            "None with secure_mode=True (every random draw then comes from the operating system's "
            "CSPRNG; a seed would make the noise reproducible by whoever knows it)")
    if estimator.checkpoint is not None and not isinstance(estimator.checkpoint, (str, os.PathLike)):
        raise param_error(estimator, "checkpoint", estimator.checkpoint, "a file path or None")
    p["checkpoint_every"] = check_int(estimator, "checkpoint_every", estimator.checkpoint_every, optional=True)
    if p["checkpoint_every"] is not None and estimator.checkpoint is None:
        raise param_error(estimator, "checkpoint_every", estimator.checkpoint_every,
                           "None when checkpoint is None (there is no file to write)")
    return p
