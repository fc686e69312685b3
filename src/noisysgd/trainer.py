"""Private training end to end: describe the run, calibrate its noise, train, certify.

:func:`fit_private` is what the estimators, ``noisysgd train`` and ``noisysgd
demo`` call.  It builds the one :class:`~noisysgd.Run` the accountant and the
engine both read — n, batch size and batching, steps, step size, the clip
norm L, the smoothness M + λ and strong convexity λ derived by the loss from
the declared feature clip (never measured from the data), the diameter, the
adjacency and the start — calibrates the noise multiplier to the target
(ε, δ) under the best sound analysis (or uses a given one and reports its
ε), refuses to train unless every analysis the certificate rests on applies
to that run, trains exactly it, and returns the model with its privacy
certificate.
"""

from __future__ import annotations

import math
import numbers
import os
import warnings
from dataclasses import dataclass

import numpy as np

from . import __version__
from .accountant import Calibration, EpsilonReport, calibrate, epsilon
from .run import ADJACENCIES, BATCHING_SCHEMES, INITIALIZATIONS, Run, _choice, _integer, _real
from .train import Loss, TrainResult, train
from .train import checkpoint as _ckpt
from .train.engine import _check_secure_mode

__all__ = ["PrivateFit", "DeltaWarning", "fit_private", "default_delta"]


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
        return self.report.epsilon


#: ``learning_rate="max"`` is this fraction of 2/(m + M), the strictest limit
#: of the analyses for minibatch runs (Ye–Shokri; A&T and shifted
#: interpolation allow up to 2/M).
MAX_LR_FRACTION = 0.98


def _learning_rate(value, smoothness: float | None, strong_convexity: float = 0.0) -> float:
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
    return _real("learning_rate", value)


def fit_private(
    X,
    y,
    loss: Loss,
    *,
    epochs: int,
    batch_size: int | None,
    batching: str,
    feature_clip: float,
    intercept_scaling: float = 1.0,
    epsilon_target: float | None = None,
    delta: float | None = None,
    noise_multiplier: float | None = None,
    learning_rate="auto",
    l2: float = 0.0,
    clip_norm: float | None = None,
    diameter: float | None = None,
    target_bound: float | None = None,
    adjacency: str = "replace",
    initialization: str = "fixed",
    analyses="best",
    random_state=None,
    dtype=np.float64,
    record: bool = False,
    progress=None,
    secure_mode: bool = False,
    checkpoint=None,
    checkpoint_every: int | None = None,
    resume: bool = False,
    keep_checkpoint: bool = False,
    n_rows: int | None = None,
    trainer=None,
    composed_with: dict | None = None,
) -> PrivateFit:
    """Calibrate, train and certify Noisy-SGD on (``X``, ``y``) with ``loss``.

    Give exactly one of ``epsilon_target`` (calibrate the smallest noise
    multiplier meeting (ε, δ) under ``analyses``) and ``noise_multiplier``
    (train with it and report its ε).  ``delta`` defaults to
    :func:`default_delta`; a δ ≥ 1/n warns (:class:`DeltaWarning`).
    ``l2`` is λ, the L2 regularization: it is the strong convexity m = λ of
    the run and the smoothness is M + λ.  ``learning_rate="auto"`` is
    1/(2(M + λ)), below the step-size limit of every analysis; ``"max"`` is
    0.98·2/(λ + M + λ), just below Ye & Shokri's limit (faster, and a
    stronger contraction per step).  The other arguments are those of
    :class:`~noisysgd.Run` and :func:`noisysgd.train.train` (``intercept_scaling``:
    the bias coordinate s of x̄, default 1); ``progress``,
    if given, is called as ``progress(step, total_steps)`` after every step
    (it sees no iterate).

    ``secure_mode``, ``checkpoint``, ``checkpoint_every``, ``resume`` and
    ``keep_checkpoint`` are :func:`noisysgd.train.train`'s.  The checkpoint
    also records the target ε, δ, the analyses asked for and the calibrated
    noise multiplier; resuming takes that noise multiplier instead of
    calibrating again (the resumed certificate is the original one, with the
    same calibration record), and refuses a checkpoint of another run, target
    or data set.  **A checkpoint holds a hidden iterate: keep it as secret as
    the training data and delete it after training** (done here unless
    ``keep_checkpoint``).

    Everything is validated before anything is computed.

    Data-parallel training (``noisysgd train --workers``): ``X``, ``y`` are
    this process's shard, ``n_rows`` the number of rows of the whole data
    set (the run's n), and ``trainer`` a callable with the signature of
    :func:`noisysgd.train.train` that trains on the shard
    (:func:`noisysgd.train.distributed.train_distributed` with the shard's
    rows and process group).  None: ``len(X)`` and :func:`~noisysgd.train.train`.

    ``composed_with``: a Gaussian query already answered on the same data (the
    private feature ranges: a dict with its ``mu``, ``epsilon`` and ``delta``,
    :func:`noisysgd.preprocessing.private_feature_ranges`).  The target
    (``epsilon_target``, ``delta``) is then training's share under basic
    composition, and the calibration goes on below that noise as long as the
    query and the training *composed* (:func:`noisysgd.preprocessing.compose_range_query`:
    GDP or RDP composition where the training bound has that form) stay within
    (``epsilon_target`` + query ε, ``delta`` + query δ); ``certificate["calibration"]``
    says so.  The training's own ε (``fit.epsilon``) may then exceed its share.

    >>> import numpy as np
    >>> from noisysgd.train import BinaryLogistic
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 5)); y = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
    >>> fit = fit_private(X, y, BinaryLogistic(), epochs=30, batch_size=100, batching="cyclic",
    ...                   feature_clip=3.0, epsilon_target=1.0, delta=1e-5, l2=0.01, random_state=0)
    >>> fit.epsilon <= 1.0, fit.report.best.analysis
    (True, 'shifted-interpolation')
    >>> bool(np.mean(fit.result.predict(X) == 2 * y - 1) > 0.9)
    True
    """
    if not isinstance(loss, Loss):
        raise ValueError(f"loss must be a noisysgd.train loss (e.g. BinaryLogistic()). Found {loss!r}.")
    try:
        n = len(X)
    except TypeError:
        raise ValueError(f"X must be a 2-D array of numbers. Found {type(X).__name__}.") from None
    if n_rows is not None:
        n = _integer("n_rows", n_rows)
    if n == 0:
        raise ValueError("X must hold at least one example. Found 0 rows.")
    epochs = _integer("epochs", epochs)
    batching = _choice("batching", batching, BATCHING_SCHEMES)
    if batch_size is None or batching == "full":
        b = n if batching == "full" else None
        if b is None:
            raise ValueError(f"batch_size must be an integer >= 1 for batching={batching!r}. Found None.")
    else:
        b = _integer("batch_size", batch_size)
        if b > n:
            raise ValueError(f"batch_size must be at most the number of examples ({n}). Found {b}.")
    R = _real("feature_clip", feature_clip)
    s = _real("intercept_scaling", intercept_scaling)
    lam = _real("l2", l2, positive=False)
    adjacency = _choice("adjacency", adjacency, ADJACENCIES)
    initialization = _choice("initialization", initialization, INITIALIZATIONS)
    if (epsilon_target is None) == (noise_multiplier is None):
        raise ValueError(
            "epsilon and noise_multiplier: give exactly one (a privacy target to calibrate the noise "
            f"to, or the noise to report epsilon for). Found epsilon={epsilon_target!r}, "
            f"noise_multiplier={noise_multiplier!r}."
        )
    target = None if epsilon_target is None else _real("epsilon", epsilon_target)
    z = None if noise_multiplier is None else _real("noise_multiplier", noise_multiplier)
    d = default_delta(n) if delta is None else delta
    d = _real("delta", d)
    if not 0.0 < d < 1.0:
        raise ValueError(f"delta must be in (0, 1). Found {delta!r}.")
    _check_secure_mode(secure_mode, random_state)  # before calibrating
    constants = loss.constants(feature_clip=R, clip_norm=clip_norm, diameter=diameter,
                               target_bound=target_bound, intercept_scaling=s)
    if lam > 0 and not constants.convex:
        raise ValueError(
            f"l2 must be 0 for {loss!r} clipped at {constants.lipschitz:g}: the clipped loss is not "
            "convex, so no strong convexity can be claimed (" + "; ".join(constants.notes)
            + f"). Found l2={l2!r}."
        )
    smoothness = None if constants.smoothness is None else constants.smoothness + lam
    eta = _learning_rate(learning_rate, smoothness, lam)
    run = Run.from_epochs(
        epochs=epochs, n=n, batch_size=b, batching=batching, learning_rate=eta,
        noise_multiplier=1.0 if z is None else z, lipschitz=constants.lipschitz,
        smoothness=smoothness, strong_convexity=lam, convex=constants.convex,
        diameter=diameter, adjacency=adjacency, initialization=initialization,
    )
    d_total = d + (composed_with["delta"] if composed_with is not None else 0.0)  # what the user asked for
    if d_total >= 1.0 / n:
        warnings.warn(
            f"delta = {d_total:g} is not below 1/n = {1.0 / n:g}: (epsilon, delta)-DP with such a delta "
            "permits releasing some examples outright; use delta well below 1/n",
            DeltaWarning, stacklevel=3,
        )
    context = {
        "fit": "noisysgd.fit_private",
        "epsilon_target": target,
        "delta": d,
        "noise_multiplier_given": z,
        "analyses": _requested(analyses),
    }
    if composed_with is not None:
        # the private preprocessing the data went through: a resume reuses its answer
        # (noisysgd.preprocessing.recorded_query) and is refused if the data were prepared otherwise
        context["preprocessing"] = _plain(composed_with)
    recorded = _checkpoint_to_resume(checkpoint, resume, run, context)
    calibration = None
    if recorded is not None and z is None:  # resumed: the noise the run was calibrated with, never anew
        cal = recorded["calibration"]
        run = run.replace(noise_multiplier=cal["noise_multiplier"])
        report = epsilon(run, delta=d, analyses=analyses)
        ok = report.best is not None and (
            report.epsilon <= target if composed_with is None
            else _composed_epsilon(report, composed_with) <= target + composed_with["epsilon"])
        if not ok:
            raise _ckpt.CheckpointError(
                f"checkpoint {str(checkpoint)!r} was calibrated to noise multiplier "
                f"{cal['noise_multiplier']!r} for epsilon = {target:g}, but this version's accountant "
                f"gives epsilon = {report.epsilon!r} for it: the resumed run would not meet its target. "
                "Start a new run."
            )
        calibration = Calibration(cal["noise_multiplier"], target, d, report, cal["rel_tol"],
                                  cal["evaluations"])
        z = calibration.noise_multiplier
    elif z is None:
        calibration = calibrate(run, epsilon=target, delta=d, analyses=analyses)
        if composed_with is not None:
            calibration = _calibrate_composed(run, calibration, composed_with, analyses)
        z, report = calibration.noise_multiplier, calibration.report
        run = run.replace(noise_multiplier=z)
    else:
        report = epsilon(run, delta=d, analyses=analyses)
        if report.best is None:
            raise ValueError("no sound analysis applies to this run; see noisysgd.epsilon(...).results")
    context["calibration"] = None if calibration is None else {
        "noise_multiplier": calibration.noise_multiplier, "rel_tol": calibration.rel_tol,
        "evaluations": calibration.evaluations}
    certificate = report.certificate()
    rests_on = certificate["certificate"]["rests_on"]
    callback = None
    if progress is not None:
        total = run.steps

        def report_step(step, _W):
            progress(step, total)

        callback = report_step

    result = (train if trainer is None else trainer)(run, loss, X, y, feature_clip=R, intercept_scaling=s,
                   target_bound=target_bound,
                   random_state=random_state, dtype=dtype, analyses=rests_on, record=record,
                   callback=callback, secure_mode=secure_mode, checkpoint=checkpoint,
                   checkpoint_every=checkpoint_every, resume=resume, keep_checkpoint=keep_checkpoint,
                   checkpoint_context=context if checkpoint is not None else None)
    certificate["certificate"]["trainer_enforced"] = _plain(result.enforced)
    certificate["certificate"]["data"] = {"n": n, "n_features": int(np.shape(X)[1])}
    certificate["noisysgd_version"] = __version__
    if calibration is not None:
        certificate["calibration"] = {"target_epsilon": target, "noise_multiplier": z,
                                      "rel_tol": calibration.rel_tol,
                                      "evaluations": calibration.evaluations}
        if composed_with is not None:
            certificate["calibration"]["composed_with_query"] = {
                "target_epsilon_total": target + composed_with["epsilon"],
                "target_delta_total": d + composed_with["delta"],
                "note": "the noise is the smallest whose composition with the query (GDP, RDP or basic, the "
                        "tightest) meets the total target; training's own epsilon may exceed target_epsilon"}
    return PrivateFit(result, report, z, calibration, certificate)


def _composed_epsilon(report: EpsilonReport, query: dict) -> float:
    """The total ε of ``report``'s training run composed with the Gaussian ``query``
    (:func:`noisysgd.preprocessing.compose_range_query`, on a scratch certificate)."""
    from .preprocessing import compose_range_query

    if report.best is None:
        return math.inf
    return compose_range_query({}, report.epsilon, report.delta, report.run.adjacency, query, report=report)[0]


def _calibrate_composed(run: Run, cal: Calibration, query: dict, analyses) -> Calibration:
    """From ``cal`` (training calibrated to its share, basic composition), the smallest noise
    multiplier (to ``cal.rel_tol``) whose composition with ``query`` meets the total target.

    The answer lies between the training calibrated *alone* to the whole target (no composed
    bound can be below its training part's own bound at the same δ: √(μ² + μ_q²) ≥ μ, an added
    RDP term ≥ 0, and basic composition adds ε_q) and ``cal``'s noise; bisection in log z
    (each composed ε is non-increasing in z).  The returned z was evaluated and met the total."""
    total, delta_total = cal.target_epsilon + query["epsilon"], cal.delta + query["delta"]
    hi, hi_report = cal.noise_multiplier, cal.report
    evaluations = cal.evaluations

    def at(z):
        nonlocal evaluations
        evaluations += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = epsilon(run.replace(noise_multiplier=z), delta=cal.delta, analyses=analyses)
        return r, _composed_epsilon(r, query)

    if _composed_epsilon(hi_report, query) > total * (1 + 1e-12):  # cannot happen (basic composition)
        return cal
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = calibrate(run, epsilon=total, delta=delta_total, analyses=analyses, rel_tol=cal.rel_tol)
    evaluations += alone.evaluations
    lo = alone.noise_multiplier / (1 + cal.rel_tol)
    if lo >= hi:
        return cal
    r, e = at(lo)
    if e <= total:  # (only if the bounds are not monotone): take it, it was evaluated and meets
        hi, hi_report, lo = lo, r, None
    while lo is not None and hi / lo > 1 + cal.rel_tol:
        mid = math.sqrt(hi * lo)
        r, e = at(mid)
        if e <= total:
            hi, hi_report = mid, r
        else:
            lo = mid
    final = epsilon(run.replace(noise_multiplier=hi), delta=cal.delta, analyses=analyses)  # warnings as usual
    return Calibration(hi, cal.target_epsilon, cal.delta, final, cal.rel_tol, evaluations + 1)


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


def _plain(value):
    """JSON-ready copy (numpy scalars to Python numbers)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        v = float(value)
        return v if math.isfinite(v) else None
    return value
