"""Private training in the steps a reader names: describe, calibrate, train, certify.

:func:`fit_private` is what the estimators, ``noisysgd train`` (one process or
several), the CV tuner and the benchmarks call.  Its arguments are four small
frozen objects — :class:`Schedule` (how long, which batches, which step size
and λ), :class:`Bounds` (the declared constants: feature clip, bias
coordinate, clip norm, diameter, label bound), :class:`Privacy` (the target
(ε, δ) or the noise, the adjacency, the analyses, and the private
preprocessing query already answered) and :class:`Execution` (seeds, dtype,
checkpoints, progress: nothing that changes the run's law) — and it is the
composition of five steps, each a function of frozen values:

1. :func:`describe` — the one :class:`~noisysgd.Run` the accountant and the
   engine both read (n — the rows under replace, the declared ``public_n`` under
   add-remove: :func:`public_size` —, batches, steps, η, L, M + λ, λ derived by the loss from
   the declared bounds, never measured; the adjacency rules are the Run's own);
2. the preprocessing queries are answered by the caller
   (:mod:`noisysgd.preprocessing`) and passed in ``Privacy.query``;
3. :func:`calibrate_run` — the noise multiplier for the target, composed with
   the query (:func:`noisysgd.accountant.calibrate_with_query`: the accountant's
   job), or the given noise's report, or the one a resumed checkpoint recorded;
4. :func:`execute` — the engine (:func:`noisysgd.train.train`, or the
   data-parallel trainer) on exactly that run, refusing unless every analysis
   the certificate rests on applies;
5. :func:`certify` — the certificate of the run that was executed.
"""

from __future__ import annotations

import math
import numbers
import os
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from . import __version__
from .accountant import (Calibration, EpsilonReport, calibrate, calibrate_with_query, certify_composed,
                         compose_with_query, composed_epsilon, epsilon)
from .run import (ADD_REMOVE_BATCHINGS, ADJACENCIES, BATCHING_SCHEMES, INITIALIZATIONS, Run, checked_choice, checked_integer,
                  checked_real, add_remove_refusal)
from .train import Loss, TrainResult, train
from .train import checkpoint as _ckpt
from .train.checkpoint import Checkpointing
from .train.declared import Bounds, Execution
from .train.engine import check_secure_mode
from .train.release import EVERY_ITERATE, AutoRelease, TailAverage

__all__ = ["PrivateFit", "DeltaWarning", "fit_private", "default_delta", "Schedule", "Bounds", "Privacy",
           "Execution", "Calibrated", "RELEASES", "public_size", "describe", "calibrate_run", "execute", "certify",
           "release_basis"]


class DeltaWarning(UserWarning):
    """δ is not small compared with 1/n: (ε, δ)-DP then allows releasing an example outright."""


def default_delta(n: int) -> float:
    """δ = min(1e-5, 1/(10·n)): below 1/n by a factor of 10 at least.

    >>> default_delta(1000), default_delta(1_000_000)
    (1e-05, 1e-07)
    """
    return min(1e-5, 1.0 / (10.0 * n))


@dataclass(frozen=True)
class PrivateFit:
    """The outcome of :func:`fit_private`."""

    result: TrainResult
    report: EpsilonReport
    noise_multiplier: float
    calibration: Calibration | None
    certificate: dict

    @property
    def run(self) -> Run:
        return self.result.run

    @property
    def epsilon(self) -> float:
        """The training's own ε (at ``report.delta``)."""
        return self.report.epsilon

    @property
    def total(self) -> tuple[float, float]:
        """(ε, δ) of everything released: the model, and the preprocessing query's answer
        when there was one (the certificate's ``epsilon_total``, ``delta_total``)."""
        return (self.certificate.get("epsilon_total", self.report.epsilon),
                self.certificate.get("delta_total", self.report.delta))


#: ``learning_rate="max"`` is this fraction of 2/(m + M), the strictest limit
#: of the analyses for minibatch runs (Ye–Shokri; A&T and shifted
#: interpolation allow up to 2/M).
MAX_LR_FRACTION = 0.98


def resolve_learning_rate(value, smoothness: float | None, strong_convexity: float = 0.0) -> float:
    """A number, "auto" = 1/(2M) (comfortably below every analysis' limit), or
    "max" = 0.98·2/(m + M) (just below Ye & Shokri's η < 2/(m+M), which is
    below A&T's 2/M; ``chourasia`` needs η < 1/M and will not apply)."""
    if isinstance(value, str):
        if value not in ("auto", "max"):
            raise ValueError(f"learning_rate must be 'auto', 'max' or a positive number. Found {value!r}.")
        if smoothness is None:
            raise ValueError(
                f"learning_rate must be a positive number here: {value!r} is set from the loss's "
                f"smoothness, which this configuration does not have. Found {value!r}."
            )
        if value == "auto":
            return 0.5 / smoothness
        return MAX_LR_FRACTION * 2.0 / (strong_convexity + smoothness)
    return checked_real("learning_rate", value)


@dataclass(frozen=True)
class Schedule:
    """How the run goes: ``epochs`` passes of ``batching`` batches of ``batch_size``
    (None with ``"full"``), the step size (a number, ``"auto"`` = 1/(2(M + λ)) or
    ``"max"`` = 0.98·2/(λ + M + λ)), the L2 regularization ``l2`` = λ (the strong
    convexity of the run; the smoothness is M + λ) and the start."""

    epochs: int
    batch_size: int | None
    batching: str
    learning_rate: Any = "auto"
    l2: float = 0.0
    initialization: str = "fixed"
    #: W₀ under ``initialization="fixed"``: None (zeros), or an array in the run's ball fixed
    #: before the run (e.g. :func:`noisysgd.prior.prior_start`, from a charged answer).
    start: Any = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Privacy:
    """Exactly one of a target ``epsilon`` (the noise is calibrated to it) and a
    ``noise_multiplier`` (its ε is reported); ``delta`` (None: :func:`default_delta`);
    the adjacency; the analyses the accountant may use; and ``query``, the private
    preprocessing already answered on the same data (a dict with its ``mu``,
    ``epsilon`` and ``delta``: :func:`noisysgd.preprocessing.combine_queries`).  With a
    query the target is training's share under basic composition, and the calibration
    goes on below that noise as long as query and training *composed* stay within
    (``epsilon`` + query ε, ``delta`` + query δ); the training's own ε may then exceed
    its share.

    ``public_n``: the dataset size declared public, which ``add-remove`` needs (the
    sampling rate b/n, the number of steps and δ's default are fixed from it, so that a
    dataset with one row more or fewer runs the same mechanism; the data may hold any
    number of rows).  Under ``replace`` n is public anyway: ``public_n``, if given, must
    equal the number of rows.

    ``release``: what is released, one of :data:`RELEASES`: ``"last"`` (the final
    iterate, what every analysis covers), ``"tail-average"`` (the mean of the iterates
    after steps ⌊T/2⌋+1..T — post-processing of every iterate, so only the composition
    analyses, which account every iterate, certify it) or ``"auto"`` (that
    mean where the certificate rests on composition alone and the iterates have settled,
    else the final iterate: :class:`noisysgd.train.release.AutoRelease`; every analysis
    stays in play, and a checkpointed or data-parallel run releases its final iterate)."""

    epsilon: float | None = None
    delta: float | None = None
    noise_multiplier: float | None = None
    adjacency: str = "replace"
    analyses: Any = "best"
    query: dict | None = None
    public_n: int | None = None
    release: str = "last"


#: What a private fit may release: the final iterate, the mean of the second half of the
#: iterates (De et al. 2022 average DP-SGD's iterates; only composition covers it), or "auto":
#: that mean where the certificate rests on composition and the iterates have settled, else the
#: final iterate (:mod:`noisysgd.train.release`).
RELEASES = ("last", "tail-average", "auto")


@dataclass(frozen=True)
class Calibrated:
    """The run with its noise, the accountant's report of it, and the calibration (None
    when the noise was given)."""

    run: Run
    report: EpsilonReport
    calibration: Calibration | None

    @property
    def noise_multiplier(self) -> float:
        return self.run.noise_multiplier


def fit_private(X, y, loss: Loss, schedule: Schedule, bounds: Bounds, privacy: Privacy,
                execution: Execution = Execution()) -> PrivateFit:
    """Calibrate, train and certify Noisy-SGD on (``X``, ``y``) with ``loss`` (module
    docstring).  Everything is validated before anything is computed.  Resuming a
    checkpoint takes the noise multiplier it recorded instead of calibrating again (the
    resumed certificate is the original one) and refuses a checkpoint of another run,
    target or data set; the checkpoint is deleted after training unless
    ``execution.keep_checkpoint``.

    >>> import numpy as np
    >>> from noisysgd.train import BinaryLogistic
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 5)); y = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
    >>> fit = fit_private(X, y, BinaryLogistic(), Schedule(epochs=30, batch_size=100, batching="cyclic",
    ...                   l2=0.01), Bounds(feature_clip=3.0), Privacy(epsilon=1.0, delta=1e-5),
    ...                   Execution(random_state=0))
    >>> fit.epsilon <= 1.0, fit.report.best.analysis
    (True, 'shifted-interpolation')
    >>> bool(np.mean(fit.result.predict(X) == 2 * y - 1) > 0.9)
    True
    """
    if not isinstance(loss, Loss):
        raise ValueError(f"loss must be a noisysgd.train loss (e.g. BinaryLogistic()). Found {loss!r}.")
    rows = _rows(X, execution.n_rows)
    n = public_size(privacy, rows, schedule.batching)
    run = describe(n, loss, schedule, bounds, privacy)
    privacy = _checked_privacy(privacy, n, max(n, rows))
    privacy = _checked_release(privacy, execution)
    check_secure_mode(execution.secure_mode, execution.random_state)  # before calibrating
    context = _context(privacy)
    recorded = _checkpoint_to_resume(execution.checkpoint, execution.resume, run, context)
    calibrated = calibrate_run(run, privacy, recorded, execution.checkpoint)
    context["calibration"] = None if calibrated.calibration is None else {
        "noise_multiplier": calibrated.calibration.noise_multiplier, "rel_tol": calibrated.calibration.rel_tol,
        "evaluations": calibrated.calibration.evaluations}
    result = execute(calibrated, loss, X, y, bounds, execution, context, release=privacy.release, query=privacy.query,
                     start=schedule.start)
    certificate = certify(calibrated, result, privacy, n, int(np.shape(X)[1]))
    return PrivateFit(result, calibrated.report, calibrated.noise_multiplier, calibrated.calibration, certificate)


def _rows(X, n_rows) -> int:
    try:
        n = len(X)
    except TypeError:
        raise ValueError(f"X must be a 2-D array of numbers. Found {type(X).__name__}.") from None
    if n_rows is not None:
        n = checked_integer("n_rows", n_rows)
    if n == 0:
        raise ValueError("X must hold at least one example. Found 0 rows.")
    return n


def public_size(privacy: Privacy, rows: int, batching: str = "poisson") -> int:
    """The n the run is built on: the data's ``rows`` under ``replace`` (n is public there),
    ``privacy.public_n`` under ``add-remove`` (required: the rows a dataset holds are not
    public, and a rate, a step count or a δ taken from them would differ between
    neighbours; docs/privacy.md).  A ``batching`` add/remove cannot take is refused first."""
    adjacency = checked_choice("adjacency", privacy.adjacency, ADJACENCIES)
    if adjacency == "add-remove" and batching not in ADD_REMOVE_BATCHINGS:
        raise ValueError(add_remove_refusal(batching))
    declared = privacy.public_n
    if declared is not None:
        declared = checked_integer("public_n", declared)
    if adjacency == "add-remove":
        if declared is None:
            raise ValueError(ADD_REMOVE_NEEDS_PUBLIC_N)
        return declared
    if declared is not None and declared != rows:
        raise ValueError(f"public_n must equal the number of rows ({rows}) under adjacency='replace', where n "
                         f"is public (or leave it None). Found {declared}.")
    return rows


#: The refusal every entry point gives for add/remove without a declared dataset size.
ADD_REMOVE_NEEDS_PUBLIC_N = (
    "public_n must be given with adjacency='add-remove': the dataset size declared public before the data "
    "are seen, from which the sampling rate b/n, the number of steps and the default delta are fixed (a "
    "neighbour has one row more or fewer, so a rate or a step count taken from the data's own size would "
    "differ between them and the certificate would not hold). Give a round number near your data's size, "
    "or use adjacency='replace'. Found None.")


def describe(n: int, loss: Loss, schedule: Schedule, bounds: Bounds, privacy: Privacy) -> Run:
    """Step 1: the run on ``n`` examples (its noise multiplier the given one, or 1 until
    calibrated), every argument validated; the loss derives L, M from the declared bounds."""
    epochs = checked_integer("epochs", schedule.epochs)
    batching = checked_choice("batching", schedule.batching, BATCHING_SCHEMES)
    if schedule.batch_size is None or batching == "full":
        b = n if batching == "full" else None
        if b is None:
            raise ValueError(f"batch_size must be an integer >= 1 for batching={batching!r}. Found None.")
    else:
        b = checked_integer("batch_size", schedule.batch_size)
        if b > n:
            raise ValueError(f"batch_size must be at most the number of examples ({n}). Found {b}.")
    R = checked_real("feature_clip", bounds.feature_clip)
    s = checked_real("intercept_scaling", bounds.intercept_scaling)
    lam = checked_real("l2", schedule.l2, positive=False)
    adjacency = checked_choice("adjacency", privacy.adjacency, ADJACENCIES)
    initialization = checked_choice("initialization", schedule.initialization, INITIALIZATIONS)
    constants = loss.constants(feature_clip=R, clip_norm=bounds.clip_norm, diameter=bounds.diameter,
                               target_bound=bounds.target_bound, intercept_scaling=s)
    if lam > 0 and not constants.convex:
        raise ValueError(
            f"l2 must be 0 for {loss!r} clipped at {constants.lipschitz:g}: the clipped loss is not "
            "convex, so no strong convexity can be claimed (" + "; ".join(constants.notes)
            + f"). Found l2={schedule.l2!r}."
        )
    smoothness = None if constants.smoothness is None else constants.smoothness + lam
    eta = resolve_learning_rate(schedule.learning_rate, smoothness, lam)
    z = privacy.noise_multiplier
    return Run.from_epochs(
        epochs=epochs, n=n, batch_size=b, batching=batching, learning_rate=eta,
        noise_multiplier=1.0 if z is None else checked_real("noise_multiplier", z), lipschitz=constants.lipschitz,
        smoothness=smoothness, strong_convexity=lam, convex=constants.convex,
        diameter=bounds.diameter, adjacency=adjacency, initialization=initialization,
        adaptive_clip=bounds.adaptive_clip,
    )


def _checked_privacy(privacy: Privacy, n: int, rows: int | None = None) -> Privacy:
    """``privacy`` with exactly one of ε and z, and δ set (:func:`default_delta` of the public
    ``n``); warns (:class:`DeltaWarning`) when the total δ asked for is not below 1/``rows``
    (default n; under add/remove the larger of the declared n and the rows there are: a
    warning to the data's holder, not part of the release)."""
    if (privacy.epsilon is None) == (privacy.noise_multiplier is None):
        raise ValueError(
            "epsilon and noise_multiplier: give exactly one (a privacy target to calibrate the noise "
            f"to, or the noise to report epsilon for). Found epsilon={privacy.epsilon!r}, "
            f"noise_multiplier={privacy.noise_multiplier!r}."
        )
    target = None if privacy.epsilon is None else checked_real("epsilon", privacy.epsilon)
    d = checked_real("delta", default_delta(n) if privacy.delta is None else privacy.delta)
    if not 0.0 < d < 1.0:
        raise ValueError(f"delta must be in (0, 1). Found {privacy.delta!r}.")
    query = privacy.query
    d_total = d + (query["delta"] if query is not None else 0.0)  # what the user asked for
    check = n if rows is None else rows
    if d_total >= 1.0 / check:
        warnings.warn(
            f"delta = {d_total:g} is not below 1/n = {1.0 / check:g}: (epsilon, delta)-DP with such a delta "
            "permits releasing some examples outright; use delta well below 1/n",
            DeltaWarning, stacklevel=4,
        )
    return replace(privacy, epsilon=target, delta=d)


def _checked_release(privacy: Privacy, execution: Execution) -> Privacy:
    """``privacy`` with its ``release`` checked; for ``"tail-average"`` the analyses restricted
    to those that account every iterate ("best" becomes the composition baselines; a named
    hidden-state analysis is refused), and no checkpoint or data-parallel trainer (the running
    mean lives in this process only)."""
    release = checked_choice("release", privacy.release, RELEASES)
    if release in ("last", "auto"):  # ("auto" checkpointed or data-parallel: the final iterate, see execute)
        return privacy
    named = privacy.analyses
    if named is None or (isinstance(named, str) and named == "best"):
        analyses = list(EVERY_ITERATE)
    else:
        analyses = [named] if isinstance(named, str) else list(named)
        other = [a for a in analyses if a not in EVERY_ITERATE]
        if other:
            raise ValueError(f"analyses must account every iterate with release='tail-average' (composition, "
                             f"composition-pld): an average of the iterates is not the final model the others "
                             f"certify. Found {', '.join(map(repr, other))}.")
    if execution.checkpoint is not None or execution.trainer is not None:
        raise ValueError("release='tail-average' runs in one process without a checkpoint (the running mean is "
                         "not saved). Found " + ("a checkpoint." if execution.checkpoint is not None
                                                 else "a data-parallel trainer."))
    return replace(privacy, analyses=analyses, release=release)


def _context(privacy: Privacy) -> dict:
    """What a checkpoint records of the target (a resume must ask for the same)."""
    context = {
        "fit": "noisysgd.fit_private",
        "epsilon_target": privacy.epsilon,
        "delta": privacy.delta,
        "noise_multiplier_given": None if privacy.noise_multiplier is None else float(privacy.noise_multiplier),
        "analyses": _requested(privacy.analyses),
    }
    if privacy.query is not None:
        # the private preprocessing the data went through: a resume reuses its answer
        # (noisysgd.preprocessing.recorded_query) and is refused if the data were prepared otherwise
        context["preprocessing"] = plain_json(privacy.query)
    return context


def calibrate_run(run: Run, privacy: Privacy, recorded: dict | None = None, checkpoint=None) -> Calibrated:
    """Step 3: the noise of ``run`` — recorded by the checkpoint a fit resumes (checked
    against this version's accountant), calibrated to ``privacy``'s target (composed with
    its query by the accountant), or given (its report; refused if no sound analysis
    applies)."""
    target, d, analyses, query = privacy.epsilon, privacy.delta, privacy.analyses, privacy.query
    if recorded is not None and target is not None:  # resumed: the noise it was calibrated with, never anew
        cal = recorded["calibration"]
        run = run.replace(noise_multiplier=cal["noise_multiplier"])
        report = epsilon(run, delta=d, analyses=analyses)
        ok = report.best is not None and (
            report.epsilon <= target if query is None
            else composed_epsilon(report, query) <= target + query["epsilon"])
        if not ok:
            raise _ckpt.CheckpointError(
                f"checkpoint {str(checkpoint)!r} was calibrated to noise multiplier "
                f"{cal['noise_multiplier']!r} for epsilon = {target:g}, but this version's accountant "
                f"gives epsilon = {report.epsilon!r} for it: the resumed run would not meet its target. "
                "Start a new run."
            )
        return Calibrated(run, report, Calibration(cal["noise_multiplier"], target, d, report, cal["rel_tol"],
                                                   cal["evaluations"]))
    if target is not None:
        if query is None:
            calibration = calibrate(run, epsilon=target, delta=d, analyses=analyses)
        else:
            calibration = calibrate_with_query(run, epsilon=target, delta=d, query=query, analyses=analyses)
        return Calibrated(run.replace(noise_multiplier=calibration.noise_multiplier), calibration.report,
                          calibration)
    report = epsilon(run, delta=d, analyses=analyses)
    if report.best is None:
        raise ValueError("no sound analysis applies to this run; see noisysgd.epsilon(...).results")
    return Calibrated(run, report, None)


def release_basis(report: EpsilonReport, query: dict | None) -> list:
    """The analyses the released output's total rests on: the training certificate's
    ``rests_on``, or with a preprocessing query those of the composed total
    (:func:`noisysgd.accountant.compose_with_query`: the analysis whose composition with the query
    is the smallest).  ``average="auto"`` may release an average only where they all account every
    iterate, and :func:`certify` then composes over those alone — so the release and the
    certificate's total rest on the same analyses, whatever the near-ties between bounds."""
    if query is None or report.best is None:
        return report.certificate()["certificate"]["rests_on"]
    return list(compose_with_query(report, query).rests_on)


def execute(calibrated: Calibrated, loss: Loss, X, y, bounds: Bounds, execution: Execution,
            context: dict, release: str = "last", query: dict | None = None, start=None) -> TrainResult:
    """Step 4: the engine on exactly ``calibrated.run``; it refuses to train unless every
    analysis the certificate rests on applies to the run (``analyses=``).  ``release``
    "tail-average" returns the mean of the second half of the iterates as ``coef``
    (:func:`_checked_release` has restricted the analyses to composition); "auto" returns it
    where ``rests_on`` is composition alone and the iterates settled (:class:`AutoRelease`)."""
    rests_on = calibrated.report.certificate()["certificate"]["rests_on"]
    basis = release_basis(calibrated.report, query)
    callback = None
    if execution.progress is not None:
        total, progress = calibrated.run.steps, execution.progress

        def report_step(step, _W):
            progress(step, total)

        callback = report_step
    kept = None  # "auto" where no block means can be kept: the final iterate, and why
    if release == "auto" and (execution.checkpoint is not None or execution.trainer is not None):
        kept = ("a checkpointed run keeps no block means" if execution.checkpoint is not None
                else "a data-parallel run keeps no block means")
        release = "last"
    average = {"tail-average": TailAverage, "auto": AutoRelease}.get(release)
    average = None if average is None else average(calibrated.run.steps, callback)
    trainer = train if execution.trainer is None else execution.trainer
    start = {} if start is None else {"init": start}  # (W₀: Schedule.start)
    result = trainer(calibrated.run, loss, X, y, **start, feature_clip=bounds.feature_clip,
                     intercept_scaling=bounds.intercept_scaling, target_bound=bounds.target_bound,
                     random_state=execution.random_state, dtype=execution.dtype, analyses=rests_on,
                     record=execution.record, callback=callback if average is None else average,
                     secure_mode=execution.secure_mode,
                     checkpointing=Checkpointing(execution.checkpoint, execution.checkpoint_every, execution.resume,
                                                 execution.keep_checkpoint,
                                                 context if execution.checkpoint is not None else None))
    if kept is not None:
        return AutoRelease.kept_last(result, basis, kept)
    if average is None:
        return result
    return average.released(result, basis) if release == "auto" else average.released(result)


def certify(calibrated: Calibrated, result: TrainResult, privacy: Privacy, n: int, n_features: int) -> dict:
    """Step 5: the certificate of the executed run (the report's, with what the trainer
    enforced, the data's shape, the version and the calibration record), composed with the
    preprocessing query when there is one (:func:`noisysgd.accountant.compose_query`: the
    certificate's ``epsilon_total``, ``delta_total`` and ``guarantee`` then cover both)."""
    certificate = calibrated.report.certificate()
    certificate["certificate"]["trainer_enforced"] = plain_json(result.enforced)
    rule = result.enforced.get("release")  # average="auto": what it released and why
    certificate["certificate"]["released"] = result.enforced.get(
        "released", "the final iterate (every analysis covers it)"
        + (f"; average='auto' kept it: {rule['why']}" if rule else ""))
    certificate["certificate"]["data"] = {"n": n, "n_features": n_features}
    if calibrated.run.adjacency == "add-remove":  # the rows the data hold are not recorded: not public
        certificate["certificate"]["data"]["n_is"] = (
            "the declared public size (public_n): the sampling rate, the steps and the default delta come "
            "from it; the number of rows trained on is not recorded")
    certificate["noisysgd_version"] = __version__
    calibration, query = calibrated.calibration, privacy.query
    if query is not None:  # the release is the model *and* the query's answer: the certificate covers both
        # an average of the iterates: only the analyses that account every iterate may carry the total
        covering = EVERY_ITERATE if "released" in result.enforced else None
        composed = compose_with_query(calibrated.report, query, covering=covering)
        certify_composed(certificate, composed, calibrated.report.delta, calibrated.run.adjacency, query)
    if "released" in result.enforced:  # the tail average, which composition (every iterate) covers
        guarantee = certificate["certificate"]["guarantee"]
        certificate["certificate"]["guarantee"] = guarantee.replace(
            "for the final model", "for the released tail average of the iterates")
    if calibration is not None:
        certificate["calibration"] = {"target_epsilon": privacy.epsilon, "noise_multiplier": calibrated.noise_multiplier,
                                      "rel_tol": calibration.rel_tol, "evaluations": calibration.evaluations}
        if query is not None:
            certificate["calibration"]["composed_with_query"] = {
                "target_epsilon_total": privacy.epsilon + query["epsilon"],
                "target_delta_total": privacy.delta + query["delta"],
                "note": "the noise is the smallest whose composition with the query (GDP, RDP or basic, the "
                        "tightest) meets the total target; training's own epsilon may exceed target_epsilon"}
    return certificate


def _requested(analyses):
    """The analyses asked for, JSON-ready (validated by the accountant)."""
    if analyses is None or isinstance(analyses, str):
        return analyses
    try:
        return [str(a) for a in analyses]
    except TypeError:
        return repr(analyses)


def _checkpoint_to_resume(checkpoint, resume, run: Run, context: dict) -> dict | None:
    """The recorded context of the checkpoint a resumed fit continues (None: nothing
    to resume), after checking that it is of this run (up to the noise multiplier,
    which it supplies) and this target; the full check, data included, is train's."""
    if not isinstance(checkpoint, (str, os.PathLike)) or not os.path.isfile(checkpoint):
        return None  # a new run (train validates the path and the options)
    if resume is not True:
        raise _ckpt.exists_error(checkpoint)  # before calibrating
    h = _ckpt.read_checkpoint(checkpoint).header
    description = h.get("description", {})
    recorded = dict(description.get("context") or {})
    rec_run = {k: v for k, v in description.get("run", {}).items() if k != "noise_multiplier"}
    now_run = {k: v for k, v in _ckpt.plain(run.to_dict()).items() if k != "noise_multiplier"}
    diffs = _ckpt.describe_differences(rec_run, now_run, "run")
    diffs += _ckpt.describe_differences({k: v for k, v in recorded.items() if k != "calibration"},
                                        _ckpt.plain(context), "context")
    if diffs:
        progress = h.get("progress", {})
        raise _ckpt.mismatch_error(checkpoint, diffs, finished=bool(progress.get("finished")),
                                   steps=rec_run.get("steps"), steps_now=run.steps)
    if context["noise_multiplier_given"] is None and not isinstance(recorded.get("calibration"), dict):
        raise _ckpt.CheckpointError(f"checkpoint {str(checkpoint)!r} records no calibration to resume with.")
    return recorded


def plain_json(value):
    """JSON-ready copy (numpy scalars to Python numbers)."""
    if isinstance(value, dict):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [plain_json(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        v = float(value)
        return v if math.isfinite(v) else None
    return value
