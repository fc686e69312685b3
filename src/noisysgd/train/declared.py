"""The frozen declarations a trainer takes: :class:`Bounds` (the constants the bound rests on) and
:class:`Execution` (how the engine runs), and :func:`takes_declarations`, which lets each of the six
trainers (:func:`~noisysgd.train.train`, :func:`~noisysgd.train.sgd`,
:func:`~noisysgd.train.replicas.train_replicas`, :func:`~noisysgd.train.distributed.train_distributed`,
:func:`~noisysgd.train.torch_backend.train_torch`, :func:`~noisysgd.train.torch_backend.sgd_torch`)
take them in place of their keywords::

    train(run, loss, X, y, bounds=Bounds(feature_clip=3.0), execution=Execution(random_state=0))

is ``train(run, loss, X, y, feature_clip=3.0, random_state=0)``: the same run, bit for bit.

What a field means to a trainer:

* ``Bounds.feature_clip``, ``intercept_scaling``, ``target_bound``: its keywords of those names.
  ``clip_norm``, ``diameter`` and ``adaptive_clip`` describe the *run* (its ``lipschitz``,
  ``diameter`` and ``adaptive_clip``), which the trainer takes from ``run``: where given they must
  agree with it (a Bounds of another run is refused, naming both).
* ``Execution.random_state``, ``dtype``, ``record``, ``secure_mode``: its keywords of those names;
  ``progress(step, total)``: its ``callback`` (called with the run's steps as the total);
  ``checkpoint``, ``checkpoint_every``, ``resume``, ``keep_checkpoint``: its ``checkpointing``.
  ``n_rows`` and ``trainer`` are :func:`noisysgd.private_fit.fit_private`'s (the whole data's rows,
  which trainer it calls): a trainer refuses them.

A value set both in an object and as a keyword is refused (naming both), as is a field set to
other than its default that the trainer has no keyword for (e.g. ``Execution(record=True)`` to
:func:`~noisysgd.train.torch_backend.train_torch`): nothing is silently dropped.  Both classes are
:mod:`noisysgd.private_fit`'s too (its pipeline builds them; they live here, in the trainers' layer,
so that the trainers can take them)."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, fields
from typing import Any, Callable

import numpy as np

from .leaks import TRAINER_FRAMES

__all__ = ["Bounds", "Execution", "takes_declarations", "TRAINER_FRAMES"]


@dataclass(frozen=True)
class Bounds:
    """The constants the bound rests on, declared (never measured from the data): the
    feature clip R, the bias coordinate s of x̄, the per-example clip norm (None: the loss's
    Lipschitz constant), the diameter of the projection set and the label bound."""

    feature_clip: float
    intercept_scaling: float = 1.0
    clip_norm: float | None = None
    diameter: float | None = None
    target_bound: float | None = None
    #: :class:`noisysgd.run.AdaptiveClip`: the clip starts at ``clip_norm`` and moves (None: fixed).
    adaptive_clip: Any = None


@dataclass(frozen=True)
class Execution:
    """How the engine runs, changing nothing in the run's law: seeds (or the OS CSPRNG in
    ``secure_mode``), dtype, the trajectory ``record``, ``progress(step, total)`` after
    every step (it sees no iterate), checkpoints (:func:`noisysgd.train.train`'s; a
    checkpoint holds a hidden iterate: as secret as the data), and for data-parallel
    training the whole data set's ``n_rows`` and the shard ``trainer``
    (:func:`noisysgd.train.distributed.train_distributed`)."""

    random_state: Any = None
    dtype: Any = np.float64
    record: bool = False
    progress: Callable | None = None
    secure_mode: bool = False
    checkpoint: Any = None
    checkpoint_every: int | None = None
    resume: bool = False
    keep_checkpoint: bool = False
    n_rows: int | None = None
    trainer: Callable | None = None


#: Bounds' fields that are a trainer's keywords of the same name.
_BOUNDS_KEYWORDS = ("feature_clip", "intercept_scaling", "target_bound")
#: Bounds' fields that describe the run: (field, the Run's attribute).
_BOUNDS_OF_RUN = (("clip_norm", "lipschitz"), ("diameter", "diameter"), ("adaptive_clip", "adaptive_clip"))
#: Execution's fields that are a trainer's keywords of the same name.
_EXECUTION_KEYWORDS = ("random_state", "dtype", "record", "secure_mode")
#: Execution's checkpoint fields (the trainer's ``checkpointing``).
_CHECKPOINT_FIELDS = ("checkpoint", "checkpoint_every", "resume", "keep_checkpoint")


def _defaults(cls) -> dict:
    return {f.name: f.default for f in fields(cls)}


def _is_default(value, default) -> bool:
    """Whether a field holds its default (then the trainer's own keyword or default applies)."""
    if default is np.float64:
        try:
            return value is np.float64 or (value is not None and np.dtype(value) == np.float64)
        except TypeError:  # a dtype numpy does not read (torch's): not the default
            return False
    return value is default or (value == default if isinstance(value, (bool, int, float, str)) else False)


def declared_keywords(name: str, accepts, run, bounds: Bounds | None, execution: Execution | None,
                      given: dict) -> dict:
    """``given`` (the keywords a trainer ``name`` was called with) and what ``bounds`` and ``execution``
    set, as that trainer's keywords (``accepts``: their names); a ValueError names a value set twice,
    a field the trainer has no keyword for, or a Bounds that does not describe ``run``."""
    out = dict(given)

    def put(keyword: str, value, source: str) -> None:
        if keyword in given:
            raise ValueError(f"{name}: {keyword} is given twice, as {keyword}={given[keyword]!r} and in "
                             f"{source}; give it once.")
        if keyword not in accepts:
            raise ValueError(f"{name} takes no {keyword}. Found {source}.")
        out[keyword] = value

    if bounds is not None:
        if not isinstance(bounds, Bounds):
            raise ValueError(f"bounds must be a noisysgd.private_fit.Bounds. Found {bounds!r}.")
        defaults = _defaults(Bounds)
        for field in _BOUNDS_KEYWORDS:
            value = getattr(bounds, field)
            if field == "feature_clip" or not _is_default(value, defaults[field]):
                put(field, value, f"bounds.{field}={value!r}")
        for field, attr in _BOUNDS_OF_RUN:
            value = getattr(bounds, field)
            if value is not None and value != getattr(run, attr):
                raise ValueError(f"{name}: bounds.{field} must describe the run (run.{attr}). Found "
                                 f"bounds.{field}={value!r} and run.{attr}={getattr(run, attr)!r}.")
    if execution is not None:
        if not isinstance(execution, Execution):
            raise ValueError(f"execution must be a noisysgd.private_fit.Execution. Found {execution!r}.")
        defaults = _defaults(Execution)
        for field in ("n_rows", "trainer"):
            if getattr(execution, field) is not None:
                raise ValueError(f"{name} takes no execution.{field} (fit_private's: which trainer it calls "
                                 f"and the whole data's rows). Found execution.{field}="
                                 f"{getattr(execution, field)!r}.")
        for field in _EXECUTION_KEYWORDS:
            value = getattr(execution, field)
            if not _is_default(value, defaults[field]):
                put(field, value, f"execution.{field}={value!r}")
        if execution.progress is not None:
            progress, total = execution.progress, run.steps

            def callback(step, _W):
                progress(step, total)

            put("callback", callback, f"execution.progress={execution.progress!r}")
        if any(not _is_default(getattr(execution, f), defaults[f]) for f in _CHECKPOINT_FIELDS):
            from .checkpoint import Checkpointing

            put("checkpointing", Checkpointing(path=execution.checkpoint, every=execution.checkpoint_every,
                                               resume=execution.resume, keep=execution.keep_checkpoint),
                f"execution.checkpoint={execution.checkpoint!r}")
    return out


def takes_declarations(trainer: Callable) -> Callable:
    """``trainer`` (run, loss, X, y, *, keywords) taking also ``bounds=`` and ``execution=``
    (:func:`declared_keywords`); its signature says so (``feature_clip`` may then come from
    ``bounds``)."""
    signature = inspect.signature(trainer)
    accepts = frozenset(p.name for p in signature.parameters.values() if p.kind is p.KEYWORD_ONLY)

    @functools.wraps(trainer)
    def wrapper(run, loss, X, y, *, bounds: Bounds | None = None, execution: Execution | None = None, **keywords):
        if bounds is not None or execution is not None:
            keywords = declared_keywords(trainer.__name__, accepts, run, bounds, execution, keywords)
        if "feature_clip" in accepts and "feature_clip" not in keywords:
            raise TypeError(f"{trainer.__name__}() needs feature_clip (a keyword, or bounds=Bounds(feature_clip=...)).")
        return trainer(run, loss, X, y, **keywords)

    params = [p.replace(default=None) if p.name == "feature_clip" and p.default is p.empty else p
              for p in signature.parameters.values()]
    extra = [inspect.Parameter("bounds", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="Bounds | None"),
             inspect.Parameter("execution", inspect.Parameter.KEYWORD_ONLY, default=None,
                               annotation="Execution | None")]
    wrapper.__signature__ = signature.replace(parameters=params + extra)
    return wrapper
