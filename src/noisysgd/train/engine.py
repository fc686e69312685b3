"""The trainer: exactly the Noisy-SGD the privacy analyses assume.

One :class:`~noisysgd.Run` drives both the accountant and the trainer: n, b,
batching, steps, step sizes η_t, noise multiplier z, clip norm L, λ = m and
the diameter D are read from it and nowhere else.  Each step is

    ω ← Π_K[ω − η_t·(g_t + λ·ω + ξ_t)],   ξ_t ~ N(0, (z·L/b)²·I),

    g_t = (1/b)·Σ_{i∈B_t} clip_L(∇ℓ_i(ω)),

with b = ``run.batch_size`` the fixed denominator (also under ``poisson``,
where |B_t| is random), λ = ``run.strong_convexity`` the L2 regularization
(which is what supplies the strong convexity m = λ), clip_L the per-example
clipping of the *unregularized* gradient at L = ``run.lipschitz`` (always
applied: a no-op when L is at least the loss's natural Lipschitz constant,
and the guarantee of the sensitivity whatever happens), η_t =
``run.step_sizes()``, and Π_K the projection onto the L2 (Frobenius) ball of
radius D/2 centred at 0 (none when ``run.diameter`` is None).

Randomness: ``random_state`` seeds one root generator, split
(:func:`rng_streams`) into independent streams for the batches, the noise
and the initialization.  So :func:`sgd` (no noise) with the same
``random_state`` sees the same batches as :func:`train`.

Secure mode (``secure_mode=True``): every random draw — noise, batches and
start — comes from the operating system's CSPRNG (:mod:`.secure`), and
``random_state`` must be None.  Checkpoints (``checkpoint=PATH``): the run
can be stopped and resumed exactly, without ever losing or double-counting
the privacy spent (:mod:`.checkpoint`); a checkpoint holds a hidden
iterate and must be kept as secret as the training data.

What is released.  The hidden-state analyses cover ``coef`` only.  The
``callback`` sees every hidden iterate, ``history`` (``record=True``) is
the training objective computed on the data, and a checkpoint file holds a
hidden iterate and the generator states: none is covered by any
certificate; use them for diagnostics and recovery, never for publication.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..analyses import get_analysis
from ..run import Run
from . import checkpoint as _ckpt
from .batching import BatchStream, describe_batches, generator_from_state, run_batches
from .leaks import TRAINER_FRAMES, check_declared_constants
from .losses import Loss, LossConstants, feature_rows, float_dtype, positive_real
from .rows import CenteredRows, Rows, rows_of, source_norms
from .secure import SecureRandom
from .declared import takes_declarations

__all__ = ["TrainResult", "AdaptiveState", "refuse_adaptive", "RNGStreams", "rng_streams", "secure_streams", "train", "sgd", "noisy_sgd_core", "StepHooks"]



def random_source(random_state):
    """``random_state`` validated (None, a non-negative int or a Generator), untouched."""
    if random_state is None or isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool) and random_state >= 0:
        return int(random_state)
    raise ValueError(
        "random_state must be None, a non-negative integer or a numpy.random.Generator. "
        f"Found {random_state!r}."
    )


def check_secure_mode(secure_mode, random_state) -> None:
    """secure_mode is a bool, and excludes a seed."""
    if not isinstance(secure_mode, bool):
        raise ValueError(f"secure_mode must be True or False. Found {secure_mode!r}.")
    if secure_mode and random_state is not None:
        raise ValueError(
            "random_state must be None with secure_mode=True: every random draw (noise, batches, start) "
            "then comes from the operating system's CSPRNG, and a seed would make them reproducible by "
            f"whoever knows it. Found {random_state!r}."
        )


class RNGStreams(NamedTuple):
    """Independent generators for the batches, the noise and the initialization."""

    batches: np.random.Generator
    noise: np.random.Generator
    init: np.random.Generator


def rng_streams(random_state=None) -> RNGStreams:
    """Split ``random_state`` (None, a non-negative int or a Generator) into
    the three streams :func:`train` and :func:`sgd` use.

    >>> s = rng_streams(0)
    >>> int(s.batches.integers(100)) == int(rng_streams(0).batches.integers(100))
    True
    """
    root = np.random.default_rng(random_source(random_state))
    try:
        children = root.spawn(3)
    except (TypeError, ValueError, AttributeError):  # a bit generator without a seed sequence
        children = [np.random.default_rng(s) for s in root.integers(0, 2**63, size=3)]
    return RNGStreams(*children)


def secure_streams() -> RNGStreams:
    """The three streams of ``secure_mode``: each a :class:`~noisysgd.train.secure.SecureRandom`
    drawing from the operating system's CSPRNG (no seed, no state)."""
    return RNGStreams(SecureRandom(), SecureRandom(), SecureRandom())


@dataclass(frozen=True, eq=False)
class TrainResult:
    """The outcome of :func:`train` or :func:`sgd`.

    Attributes
    ----------
    coef : numpy.ndarray
        The final iterate W, shape (d+1,) or (d+1, k) (last row: the bias).
        The only thing a hidden-state certificate covers.
    steps : int
        Steps run (``run.steps``).
    history : tuple of dict
        With ``record=True``: ``{"step", "epoch", "objective"}`` after every
        epoch and at the end (training objective, *not private*).  Else empty.
    enforced : dict
        What the trainer enforced: clip norm, feature clip, λ, projection
        radius, initialization, batching, denominator b, noise std, dtype,
        the loss constants and their derivation, the analyses checked,
        ``secure_mode``, and with a checkpoint the ledger of the sessions
        that ran the steps (``checkpoint``: ``sessions`` [[from, to], …],
        ``resumed_at_step``).
    run : Run
        The run that drove the trainer.
    loss : Loss
    feature_clip : float
    intercept_scaling : float
        s, the bias coordinate of x̄ (the intercept is s·W[-1]).
    """

    coef: np.ndarray
    steps: int
    history: tuple = ()
    enforced: dict = field(default_factory=dict)
    run: Run | None = None
    loss: Loss | None = None
    feature_clip: float | None = None
    intercept_scaling: float = 1.0

    def _blocks(self, X):
        """x̄ of the rows of ``X`` (an array, or a :class:`~noisysgd.train.rows.CenteredRows`), a
        block of rows at a time: predicting on the training rows forms no copy of them."""
        from .losses import augment
        from .rows import block_rows

        if not isinstance(X, CenteredRows):
            X = feature_rows(X)
        step = block_rows(X.shape[1])
        for i in range(0, max(X.shape[0], 1), step):
            yield augment(X[i:i + step], self.feature_clip, intercept_scaling=self.intercept_scaling,
                          dtype=self.coef.dtype)

    def scores(self, X) -> np.ndarray:
        """Scores x̄ᵀW of new examples (features clipped as in training)."""
        return np.concatenate([self.loss.scores(self.coef, Xbar) for Xbar in self._blocks(X)])

    def predict(self, X) -> np.ndarray:
        """Predictions of the loss (±1, class index, or real value)."""
        return np.concatenate([self.loss.predict(self.coef, Xbar) for Xbar in self._blocks(X)])


# --------------------------------------------------------------------------- core


@dataclass(frozen=True)
class StepHooks:
    """What :func:`noisy_sgd_core` does after a step t: ``callback(t, W)`` (W is the live
    iterate: do not modify it); every ``record_every`` steps (and after the last) the
    training objective appended to ``history`` (the records so far, for a resumed run);
    every ``save_every`` steps ``save(t, W, history)`` after the record (a checkpoint)."""

    callback: Callable | None = None
    record_every: int | None = None
    history: list | None = None
    save: Callable | None = None
    save_every: int | None = None


#: What :func:`refuse_adaptive` says an engine that cannot clip adaptively should use instead.
NUMPY_ENGINE = "the numpy engine, noisysgd.train.train, clips adaptively"


def refuse_adaptive(run, what: str, why: str = NUMPY_ENGINE) -> None:
    """The ValueError for an adaptively clipped ``run`` (``Run.adaptive_clip``) where the engine
    cannot clip adaptively yet: it cannot be ``what`` (``why``)."""
    if run.adaptive_clip is not None:
        raise ValueError(f"run.adaptive_clip: an adaptively clipped run cannot be {what} ({why}) yet.")


class AdaptiveState:
    """The clip of an adaptively clipped run as it moves (:class:`noisysgd.run.AdaptiveClip`):
    C_t, the per-example thresholds C_t·``unit`` (``unit`` = 1/‖x̄_i‖, a few ulps smaller), the
    gradient noise std z_Δ·C_t/b, and the update from the noisy count of the batch's unclipped
    examples; ``trajectory`` holds C_0, C_1, …"""

    def __init__(self, spec, *, clip: float, unit: np.ndarray, gradient_noise: float, expected_batch: float,
                 count_std: float):
        self.spec, self.clip, self.unit = spec, float(clip), unit
        self.gradient_noise, self.expected_batch = float(gradient_noise), float(expected_batch)
        self.count_std = float(count_std)
        self.trajectory = [self.clip]

    def derivative(self, loss, S, Y, batch):
        """(φ' clipped at C_t, which examples it left unclipped) — the same clip as a fixed one at C_t."""
        free = loss.derivative(S.copy(), Y)  # (a derivative may reuse its scores)
        D = loss.clipped_derivative(S, Y, self.unit[batch] * self.unit.dtype.type(self.clip))
        same = D == free
        return D, (same if same.ndim == 1 else same.all(axis=1))

    def noise_std(self) -> float:
        return self.gradient_noise * self.clip

    def update(self, unclipped, rng) -> None:
        """C_{t+1} = C_t·exp(−η_C·(b̄_t − γ)), b̄_t = (Σ(b_i − ½) + N(0, σ_b²))/m + ½ (the released count)."""
        b = np.asarray(unclipped)
        count = float(np.count_nonzero(b)) - 0.5 * b.size
        count += self.count_std * float(rng.standard_normal(1)[0])
        fraction = count / self.expected_batch + 0.5
        self.clip *= math.exp(-self.spec.clip_learning_rate * (fraction - self.spec.target_quantile))
        c0 = self.trajectory[0]  # kept within public bounds of C_0 (post-processing): no under- or overflow
        self.clip = min(max(self.clip, c0 * self.SPAN ** -1), c0 * self.SPAN)
        self.trajectory.append(self.clip)

    #: C_t stays within [C_0/SPAN, C_0·SPAN] (a function of the released counts and public C_0: post-processing;
    #: a clip 2^16 times off its start is noise, and float32 thresholds keep their ulp margin there).
    SPAN = 2.0 ** 16
    #: Runs of at most this many steps record the whole trajectory C_0..C_T in their summary (a function of
    #: the released counts, so covered by the certificate; what an audit reads back).
    TRAJECTORY_STEPS = 2000

    def summary(self) -> dict:
        t = np.asarray(self.trajectory)
        whole = {"trajectory": [float(c) for c in t]} if t.size <= self.TRAJECTORY_STEPS + 1 else {}
        return {**self.spec.to_dict(), **whole, "count_noise_std": self.count_std, "initial_clip": float(t[0]), "final_clip": float(t[-1]),
                "min_clip": float(t.min()), "max_clip": float(t.max()), "mean_clip": float(t.mean()),
                "gradient_noise_multiplier": self.gradient_noise * self.expected_batch}


def noisy_sgd_core(
    loss: Loss,
    Xbar: np.ndarray,
    Y: np.ndarray,
    *,
    batches: Iterable,
    step_sizes,
    denominator: int,
    init: np.ndarray,
    l2: float = 0.0,
    thresholds: np.ndarray | None = None,
    noise_std: float = 0.0,
    radius: float | None = None,
    noise_rng: np.random.Generator | None = None,
    start_step: int = 0,
    hooks: "StepHooks | None" = None,
    adaptive: "AdaptiveState | None" = None,
) -> tuple[np.ndarray, int, list]:
    """The step loop, without validation (use :func:`train` or :func:`sgd`).

    W ← Π[W − η_t·(X̄_Bᵀψ(X̄_B W)/b + λW + ξ_t)] for each batch B of
    ``batches`` and η_t of ``step_sizes``, with ψ the loss's derivative,
    clipped per example to ``thresholds[i]`` = L/‖x̄_i‖ unless ``thresholds``
    is None, ξ_t ~ N(0, noise_std²·I) from ``noise_rng`` (none when
    ``noise_std`` is 0), Π the projection onto the ball of ``radius`` (none
    when None).  Arrays must already be in one float dtype (that of ``Xbar``).
    ``Xbar`` is X̄ formed (n, d+1), or described (a :class:`~noisysgd.train.rows.Rows`, which
    :func:`train` passes: the caller's rows are read a batch at a time, never copied whole).

    Returns (W, steps run, history); ``hooks`` (:class:`StepHooks`) says what
    runs after a step: the callback, the objective's records, the checkpoints.
    ``noise_rng`` may be a :class:`~noisysgd.train.secure.SecureRandom`.

    Continuing a run: ``start_step`` steps were already taken (``init`` is
    the iterate after them, ``batches`` and ``step_sizes`` start at the next
    step, steps are numbered from ``start_step + 1``, and ``hooks.history``
    holds the records so far).

    ``adaptive`` (:class:`AdaptiveState`, a run with ``Run.adaptive_clip``): the thresholds are
    C_t·``adaptive.unit`` and the noise std z_Δ·C_t/b at step t, and after each step the noisy
    count of the batch's unclipped examples moves C_t (``thresholds`` and ``noise_std`` unused).
    """
    hooks = StepHooks() if hooks is None else hooks
    callback, record_every, save, save_every = hooks.callback, hooks.record_every, hooks.save, hooks.save_every
    dt = Xbar.dtype
    W = np.array(init, dtype=dt, copy=True)
    flat = W.reshape(-1)
    inv_b = 1.0 / denominator
    noise_std = float(noise_std)
    noise = np.empty_like(W) if noise_std > 0.0 or adaptive is not None else None
    if noise is not None and noise_rng is None:
        raise ValueError("noise_rng must be a numpy.random.Generator when noise_std > 0. Found None.")
    r2 = None if radius is None else float(radius) ** 2
    history = [] if hooks.history is None else hooks.history
    etas = [float(e) for e in np.asarray(step_sizes, dtype=float)]
    t = start_step
    implicit = isinstance(Xbar, Rows)  # X̄ described, not formed (.rows): the same two matmuls
    G = np.empty_like(W) if implicit else None
    for t, (batch, eta) in enumerate(zip(batches, etas), start=start_step + 1):
        if implicit:
            Xb = Xbar.gather(batch)
            S = Xbar.scores(Xb, W)
        else:
            Xb = Xbar[batch]
            S = Xb @ W
        if adaptive is not None:
            D, unclipped = adaptive.derivative(loss, S, Y[batch], batch)
        elif thresholds is None:
            D = loss.derivative(S, Y[batch])
        else:
            D = loss.clipped_derivative(S, Y[batch], thresholds[batch])
        if implicit:
            Xbar.gradient_sum(Xb, D, out=G)
        else:
            G = Xb.T @ D  # Σ_{i∈B} clipped ∇ℓ_i, one matmul back
        G *= inv_b
        if noise is not None:
            noise_rng.standard_normal(dtype=dt, out=noise)
            noise *= noise_std if adaptive is None else adaptive.noise_std()
            G += noise
        if adaptive is not None:  # the released count moves the clip for the next step
            adaptive.update(unclipped, noise_rng)
        if adaptive is not None and adaptive.spec.scale_step:
            eta *= adaptive.trajectory[0] / adaptive.trajectory[-2]  # (the clip G was computed at: C_0/C_t)
        if l2:
            W *= 1.0 - eta * l2  # the λω term of the step
        G *= eta
        W -= G
        if r2 is not None:
            sq = float(flat @ flat)
            if sq > r2:
                W *= math.sqrt(r2 / sq)
        if callback is not None:
            callback(t, W)
        if record_every and t % record_every == 0:
            history.append(_record(loss, W, Xbar, Y, l2, t, record_every))
        if save_every and t % save_every == 0:
            save(t, W, history)
    if record_every and t % record_every != 0 and t > start_step:
        history.append(_record(loss, W, Xbar, Y, l2, t, record_every))
    return W, t, history


def _record(loss, W, Xbar, Y, l2, t, per_epoch):
    value = Xbar.mean_value(loss, W, Y) if isinstance(Xbar, Rows) else loss.value(W, Xbar, Y)
    value += 0.5 * l2 * float(np.sum(np.square(W, dtype=float)))
    return {"step": t, "epoch": t / per_epoch, "objective": value}


# --------------------------------------------------------------------------- validation


@dataclass
class PreparedRun:
    run: Run
    loss: Loss
    feature_clip: float
    target_bound: float | None
    dtype: np.dtype
    X: np.ndarray
    Y: np.ndarray
    init: object
    random_state: object
    callback: Callable | None
    row_norms: np.ndarray
    raw_y: np.ndarray
    secure_mode: bool = False
    intercept_scaling: float = 1.0


def _centered(X: CenteredRows) -> CenteredRows:
    """A :class:`CenteredRows` validated: finite 2-D features, a finite center of one entry per
    column, a positive radius."""
    rows = feature_rows(X.X)
    center = np.asarray(X.center, dtype=np.float64)
    if center.shape != (rows.shape[1],) or not np.all(np.isfinite(center)):
        raise ValueError(f"the center must be {rows.shape[1]} finite numbers (one per column of X). "
                         f"Found shape {center.shape}.")
    return CenteredRows(rows, center, positive_real("radius", X.radius))


def prepare_run(run, loss, X, y, *, feature_clip, target_bound, init, random_state, dtype, callback,
             secure_mode=False, n_rows=None, intercept_scaling=1.0):
    """Validate and convert the inputs of a training run.  ``n_rows``: the rows ``X`` must
    have (default ``run.n``; a data-parallel rank holds a shard of the run's n rows)."""
    if not isinstance(run, Run):
        raise ValueError(f"run must be a noisysgd.Run. Found {type(run).__name__}.")
    run.require("steps", "learning_rate", "noise_multiplier", why="to train")
    if not isinstance(loss, Loss):
        raise ValueError(f"loss must be a noisysgd.train loss (e.g. BinaryLogistic()). Found {loss!r}.")
    R = positive_real("feature_clip", feature_clip)
    s = positive_real("intercept_scaling", intercept_scaling)
    Yb = positive_real("target_bound", target_bound, optional=True)
    if Yb is not None and not getattr(loss, "uses_target_bound", False):
        raise ValueError(f"target_bound applies to regression losses only, not {loss!r}. Found {target_bound!r}.")
    dt = float_dtype(dtype)
    X = _centered(X) if isinstance(X, CenteredRows) else feature_rows(X)
    if run.adjacency == "add-remove" and n_rows is not None:
        raise ValueError("run.adjacency must be 'replace' for data-parallel training (its shards tile run.n "
                         "rows, while under add-remove n is the declared public size and the data may hold "
                         "any number of rows): train on one process, or use adjacency='replace'. "
                         "Found 'add-remove'.")
    if n_rows is None and X.shape[0] != run.n and run.adjacency != "add-remove":
        # under add-remove (poisson at the fixed rate b/run.n) any number of rows is the same mechanism
        raise ValueError(f"X must have run.n = {run.n} rows. Found {X.shape[0]}.")
    if n_rows is not None and X.shape[0] != n_rows:
        raise ValueError(f"X must have this shard's {n_rows} rows. Found {X.shape[0]}.")
    raw_y = np.asarray(y)
    Y = loss.encode_labels(y, target_bound=Yb)
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have one label per row of X ({X.shape[0]}). Found {Y.shape[0]}.")
    if callback is not None and not callable(callback):
        raise ValueError(f"callback must be callable or None. Found {callback!r}.")
    random_state = random_source(random_state)  # the streams are split only once every check passed
    check_secure_mode(secure_mode, random_state)
    shape = loss.param_shape(X.shape[1])
    radius = None if run.diameter is None else run.diameter / 2.0
    if run.initialization == "gaussian":
        if init is not None:
            raise ValueError(
                "init must be None when run.initialization is 'gaussian' (the start is drawn from "
                f"Π_K(N(0, (2σ²/λ)·I))). Found {type(init).__name__}."
            )
        if run.strong_convexity <= 0:
            raise ValueError(
                "run.initialization 'gaussian' draws from N(0, (2σ²/λ)·I) and needs strong_convexity "
                f"λ > 0. Found {run.strong_convexity!r}."
            )
        if not run.constant_learning_rate:
            raise ValueError(
                "run.initialization 'gaussian' needs a constant learning_rate (σ depends on η). Found "
                f"learning_rate={run.learning_rate!r}, lr_decay={run.lr_decay!r}."
            )
    elif init is not None:
        try:
            W0 = np.asarray(init, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"init must be None or an array (a fixed start). Found {init!r}.") from None
        if W0.shape != shape:
            raise ValueError(f"init must have shape {shape} (the parameter shape). Found {W0.shape}.")
        if not np.all(np.isfinite(W0)):
            raise ValueError("init must be finite. Found NaN or infinite entries.")
        if radius is not None:
            norm = float(np.linalg.norm(W0))
            if norm > radius * (1.0 + 1e-12):
                raise ValueError(
                    f"init must lie in the ball of radius D/2 = {radius:g} (run.diameter); found norm {norm!r}."
                )
        init = W0
    row_norms = source_norms(X)
    return PreparedRun(run, loss, R, Yb, dt, X, Y, init, random_state, callback, row_norms, raw_y, secure_mode, s)


def checked_constants(run: Run, loss: Loss, p, analyses):
    """The loss constants derived from the declared feature clip, checked against the
    run, and the analyses the certificate rests on, checked to apply (every engine
    does both before any step)."""
    constants = loss.constants(feature_clip=p.feature_clip, clip_norm=run.lipschitz,
                               diameter=run.diameter, target_bound=p.target_bound,
                               intercept_scaling=p.intercept_scaling)
    _check_constants(run, loss, constants)
    return constants, _check_analyses(run, analyses)


def _check_constants(run: Run, loss: Loss, constants: LossConstants) -> None:
    lam = run.strong_convexity
    if run.convex and not constants.convex:
        raise ValueError(
            f"run declares convex=True (strong_convexity = {lam:g}) but {loss!r} clipped at run.lipschitz "
            f"= {run.lipschitz:g} is not known to be convex: {'; '.join(constants.notes)}"
        )
    if run.smoothness is not None:
        if constants.smoothness is None:
            raise ValueError(
                f"run declares smoothness = {run.smoothness:g} but {loss!r} clipped at run.lipschitz = "
                f"{run.lipschitz:g} has no known smoothness constant: {'; '.join(constants.notes)}"
            )
        needed = constants.smoothness + lam
        if run.smoothness < needed * (1.0 - 1e-12):
            raise ValueError(
                f"run.smoothness must be at least M + λ = {constants.smoothness:.6g} + {lam:g} = "
                f"{needed:.6g} for {loss!r} ({constants.derivation}). Found {run.smoothness:g}."
            )


def _check_analyses(run: Run, analyses) -> tuple[str, ...]:
    if analyses is None:
        return ()
    names = (analyses,) if isinstance(analyses, str) else analyses
    try:
        names = tuple(names)
    except TypeError:
        raise ValueError(f"analyses must be a list of analysis names. Found {analyses!r}.") from None
    for name in names:
        try:
            analysis = get_analysis(name)
        except ValueError as err:
            raise ValueError(f"analyses: {err}") from None
        if not analysis.sound:
            raise ValueError(
                f"analyses: {name} is flagged not sound ({analysis.unsound_reason}); a certificate cannot "
                "rest on it"
            )
        reason = analysis.why_not(run)
        if reason is not None:
            raise ValueError(f"analyses: {name} does not apply to this run: {reason}")
    return names


def initial_iterate(p: PreparedRun, shape, init_rng) -> tuple[np.ndarray, str]:
    run = p.run
    radius = None if run.diameter is None else run.diameter / 2.0
    if run.initialization == "gaussian":  # the start chourasia (and ryffel) assume
        sigma = run.sigma("ye-shokri")
        var = 2.0 * sigma * sigma / run.strong_convexity
        W0 = init_rng.standard_normal(shape) * math.sqrt(var)
        if radius is not None:
            radius *= _margin(p.dtype)
            norm = float(np.linalg.norm(W0))
            if norm > radius:
                W0 *= radius / norm
        return W0, (f"gaussian: Π_K(N(0, {var:.6g}·I)), variance 2σ²/λ with σ = {sigma:.6g} "
                    "(ye-shokri convention)")
    if p.init is None:
        return np.zeros(shape), "fixed: zeros (the centre of K)"
    return p.init, "fixed: an explicit array in K"


#: Relative margin, in units of the dtype's machine epsilon, taken off the
#: clip thresholds and the projection radius so that the bounds the analyses
#: rely on (‖clipped gradient‖ ≤ L, ‖W‖ ≤ D/2) survive the rounding of the
#: features, of τ/√k and of the rescaling (each a few ulps at most).
_ULP_MARGIN = 16


def _margin(dt: np.dtype) -> float:
    return 1.0 - _ULP_MARGIN * float(np.finfo(dt).eps)


def safe_radius(run: Run, dt) -> float | None:
    """The projection radius D/2, a few ulps smaller (see _ULP_MARGIN)."""
    return None if run.diameter is None else run.diameter / 2.0 * _margin(np.dtype(dt))


def clip_thresholds(L: float, norms: np.ndarray, dt: np.dtype) -> np.ndarray:
    """L/‖x̄_i‖ in ``dt``, a few ulps smaller (_ULP_MARGIN) and rounded down, so
    that rounding never raises a per-example bound."""
    t64 = L / norms * _margin(dt)
    t = t64.astype(dt)
    if dt != np.float64:
        up = t.astype(np.float64) > t64
        t[up] = np.nextafter(t[up], dt.type(0))
    return t


def enforced_record(p: PreparedRun, *, clip_norm, radius, init_kind: str, steps: int, noise_std: float) -> dict:
    """What a trainer enforced, for TrainResult.enforced (every backend reports these keys)."""
    run = p.run
    return {
        "loss": repr(p.loss),
        "clip_norm": clip_norm,
        "feature_clip": p.feature_clip,
        "intercept_scaling": p.intercept_scaling,
        "target_bound": p.target_bound,
        "l2": run.strong_convexity,
        "projection_radius": radius,
        "init": init_kind,
        "batching": run.batching,
        "batches": describe_batches(run.batching, secure=p.secure_mode),
        "denominator": run.batch_size,
        "steps": steps,
        "step_sizes": _step_description(run),
        "noise_std": noise_std,
        "dtype": p.dtype.name,
    }


def _step_description(run: Run) -> str:
    if isinstance(run.learning_rate, tuple):
        return f"explicit schedule of {run.steps} steps (max {run.max_learning_rate:g})"
    if run.lr_decay:
        return f"η_t = {run.learning_rate:g}·(t+1)^(−{run.lr_decay:g})"
    return f"constant η = {run.learning_rate:g}"


def checkpoint_options(run: Run, checkpointing):
    """(path or None, steps between checkpoints, resume, keep, JSON-ready context) of
    ``checkpointing`` (a :class:`~.checkpoint.Checkpointing` or None), validated."""
    c = _ckpt.Checkpointing() if checkpointing is None else checkpointing
    if not isinstance(c, _ckpt.Checkpointing):
        raise ValueError(f"checkpointing must be a noisysgd.train.checkpoint.Checkpointing or None. Found {c!r}.")
    checkpoint, checkpoint_every = c.path, c.every
    for name, value in (("resume", c.resume), ("keep_checkpoint", c.keep)):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False. Found {value!r}.")
    if c.context is not None and not isinstance(c.context, dict):
        raise ValueError(f"checkpoint_context must be a dict or None. Found {c.context!r}.")
    if checkpoint is not None:
        refuse_adaptive(run, "checkpointed", "a checkpoint does not hold the clip C_t: train it without one")
    if checkpoint is None:
        if checkpoint_every is not None:
            raise ValueError(f"checkpoint_every needs a checkpoint path. Found checkpoint=None, "
                             f"checkpoint_every={checkpoint_every!r}.")
        if c.resume:
            raise ValueError("resume needs a checkpoint path to resume from. Found checkpoint=None.")
        return None, None, False, False, None
    from ..io import check_output_file

    if not isinstance(checkpoint, (str, os.PathLike)) or not str(checkpoint):
        raise ValueError(f"checkpoint must be a file path. Found {checkpoint!r}.")
    path = check_output_file(checkpoint, "checkpoint")
    every = 1 if checkpoint_every is None else checkpoint_every
    if isinstance(every, bool) or not isinstance(every, numbers.Integral) or every < 1:
        raise ValueError(f"checkpoint_every must be a whole number of epochs >= 1. Found {checkpoint_every!r}.")
    try:
        context = _ckpt.plain(c.context or {})
    except (TypeError, ValueError):
        raise ValueError("checkpoint_context must be JSON-ready (numbers, strings, lists, dicts). "
                         f"Found {c.context!r}.") from None
    return path, int(every) * run.steps_per_epoch, c.resume, c.keep, context


def _init_description(p: PreparedRun):
    if p.run.initialization == "gaussian":
        return "gaussian"
    if p.init is None:
        return "zeros"
    W0 = np.ascontiguousarray(p.init, dtype=np.float64)
    return {"array_sha256": hashlib.sha256(memoryview(W0).cast("B")).hexdigest(), "shape": list(W0.shape)}


def run_description(p: PreparedRun, checked, context) -> dict:
    """Everything given to :func:`train` that changes the algorithm (what a checkpoint must match)."""
    return {
        "algorithm": "noisysgd.train.train",
        "run": p.run.to_dict(),
        "loss": repr(p.loss),
        "feature_clip": p.feature_clip,
        "target_bound": p.target_bound,
        "dtype": p.dtype.name,
        "init": _init_description(p),
        "analyses": list(checked),
        "secure_mode": p.secure_mode,
        "context": context,
        # recorded only when not 1, so that a checkpoint written before the parameter existed
        # (always s = 1) still matches its run
        **({} if p.intercept_scaling == 1.0 else {"intercept_scaling": p.intercept_scaling}),
    }


# --------------------------------------------------------------------------- public


@takes_declarations
def train(
    run: Run,
    loss: Loss,
    X,
    y,
    *,
    feature_clip: float,
    target_bound: float | None = None,
    intercept_scaling: float = 1.0,
    init=None,
    random_state=None,
    dtype=np.float64,
    callback: Callable | None = None,
    analyses=None,
    record: bool = False,
    secure_mode: bool = False,
    checkpointing: _ckpt.Checkpointing | None = None,
) -> TrainResult:
    """Train with the Noisy-SGD that ``run`` describes (module docstring).

    Parameters
    ----------
    run : noisysgd.Run
        The run the accountant reads: batches, steps, step sizes, z, the clip
        norm L (``lipschitz``), λ = ``strong_convexity``, ``diameter``.
    loss : Loss
        A loss of :mod:`noisysgd.train.losses`.
    X : array_like, shape (run.n, d)
        Finite features; each row is clipped to norm ``feature_clip`` and a
        bias coordinate ``intercept_scaling`` is appended.
    y : array_like, shape (run.n,)
        Labels: {0, 1} or {−1, +1} (binary), 0..k−1 (multiclass), reals
        (regression; clipped to [−target_bound, target_bound] when given).
    feature_clip, target_bound : float
        R > 0, fixed independently of the data; Y > 0 for regression losses.
    intercept_scaling : float
        s > 0, the bias coordinate appended to every clipped row (default 1).
    init : None or array
        The start, fixed independently of the data: None = 0 (the centre of
        K) or an array in K; None with ``run.initialization="gaussian"``
        (Π_K(N(0, (2σ²/λ)·I)), σ = ``run.sigma("ye-shokri")``).
    random_state : None, int or numpy.random.Generator
        Seeds the batch, noise and start streams (:func:`rng_streams`).
        Must be None with ``secure_mode``.
    dtype : float32 or float64
        Precision of the data, parameters and noise.
    callback : callable, optional
        ``callback(step, W)`` after every step (hidden iterates: not private).
    analyses : list of str, optional
        Names of the analyses the certificate will rest on; each must apply
        to ``run`` (``why_not`` is None) and be sound, else ``ValueError``.
    record : bool
        Record the training objective after every epoch (``history``; not
        private, one pass over the data per epoch; kept across a resume).
    secure_mode : bool
        Draw the noise, the batches and the start from the operating
        system's CSPRNG (:class:`~noisysgd.train.secure.SecureRandom`)
        instead of numpy's seeded generators; ``random_state`` must then be
        None (a seed would make noise and batches predictable).
        Floating-point noise is still not exactly Gaussian (Mironov 2012)
        and no timing channel is closed.
    checkpointing : Checkpointing, optional
        The checkpoint file and its options
        (:class:`~noisysgd.train.checkpoint.Checkpointing`, which states
        what a resume must match).  **It holds a hidden iterate, which the
        certificate assumes is never released: keep it as secret as the
        training data.**  A resumed run is bit-identical to the
        uninterrupted one with the same seed (in secure mode: the same law).

    Returns
    -------
    TrainResult

    Raises
    ------
    ValueError
        Bad input (named), a loss contradicting the run's constants, an
        analysis that does not apply, a checkpoint not to be used
        (:class:`~.checkpoint.CheckpointError`); before anything is computed.

    Examples
    --------
    >>> import numpy as np, noisysgd
    >>> from noisysgd.train import BinaryLogistic, train
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = (X[:, 0] > 0).astype(int)
    >>> c = BinaryLogistic().constants(feature_clip=2.0, clip_norm=1.0)
    >>> run = noisysgd.Run.from_epochs(epochs=20, n=200, batch_size=20, batching="cyclic",
    ...     learning_rate=0.5, noise_multiplier=2.0, lipschitz=c.lipschitz,
    ...     strong_convexity=0.01, smoothness=c.smoothness + 0.01)
    >>> result = train(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=0,
    ...                analyses=["ye-shokri"])
    >>> result.coef.shape, result.steps, result.enforced["noise_std"]
    ((4,), 200, 0.1)
    >>> bool(np.mean(result.predict(X) == 2 * y - 1) > 0.8)
    True
    """
    p = prepare_run(run, loss, X, y, feature_clip=feature_clip, target_bound=target_bound, init=init,
                 random_state=random_state, dtype=dtype, callback=callback, secure_mode=secure_mode,
                 intercept_scaling=intercept_scaling)
    constants, checked = checked_constants(run, loss, p, analyses)
    if not isinstance(record, bool):
        raise ValueError(f"record must be True or False. Found {record!r}.")
    path, every, resume, keep, context = checkpoint_options(run, checkpointing)
    ledger = None
    if path is not None:
        ledger = _ckpt.Ledger.open(path, resume=resume, description=run_description(p, checked, context),
                                   X=p.X, Y=p.Y, random_state=p.random_state, every_steps=every, keep=keep)
    # every check passed: warn, then compute
    check_declared_constants(feature_clip=p.feature_clip, row_norms=p.row_norms, target_bound=p.target_bound,
                             y=p.raw_y if p.target_bound else None, stacklevel=3 + TRAINER_FRAMES)
    noise_std = run.noise_multiplier * run.lipschitz / run.batch_size
    return _execute(p, noise_std=noise_std, clip_norm=run.lipschitz, record=record, ledger=ledger, extra={
        "constants": constants.to_dict(),
        "derivation": constants.derivation,
        "analyses_checked": list(checked),
        "noise_multiplier": run.noise_multiplier,
        "secure_mode": p.secure_mode,
    })


@takes_declarations
def sgd(
    run: Run,
    loss: Loss,
    X,
    y,
    *,
    feature_clip: float,
    target_bound: float | None = None,
    intercept_scaling: float = 1.0,
    init=None,
    random_state=None,
    dtype=np.float64,
    callback: Callable | None = None,
    record: bool = False,
    clip: bool = False,
) -> TrainResult:
    """Non-private baseline: the run's projected minibatch SGD with no noise.

    Same batches (same ``random_state`` ⇒ same batches as :func:`train`),
    step sizes, λ, projection and code path as :func:`train`, but no noise
    and — unless ``clip=True`` — no per-example clipping; ``noise_multiplier``
    (and ``lipschitz`` unless ``clip``) of the run are ignored, and so are
    its declared constants.  For comparisons and speed benchmarks only.

    >>> import numpy as np, noisysgd
    >>> from noisysgd.train import Squared, sgd
    >>> X = np.eye(4); y = np.array([1.0, -1.0, 0.5, 0.0])
    >>> run = noisysgd.Run(n=4, batch_size=4, batching="full", steps=500, learning_rate=0.5,
    ...                    noise_multiplier=1.0, lipschitz=1.0)
    >>> np.round(sgd(run, Squared(), X, y, feature_clip=1.0).predict(X), 6).tolist()
    [1.0, -1.0, 0.5, 0.0]
    """
    p = prepare_run(run, loss, X, y, feature_clip=feature_clip, target_bound=target_bound, init=init,
                 random_state=random_state, dtype=dtype, callback=callback, intercept_scaling=intercept_scaling)
    if not isinstance(record, bool):
        raise ValueError(f"record must be True or False. Found {record!r}.")
    if not isinstance(clip, bool):
        raise ValueError(f"clip must be True or False. Found {clip!r}.")
    return _execute(p, noise_std=0.0, clip_norm=run.lipschitz if clip else None, record=record,
                    extra={"private": False})


def _execute(p: PreparedRun, *, noise_std, clip_norm, record, extra, ledger=None) -> TrainResult:
    run, loss, dt = p.run, p.loss, p.dtype
    Xbar = rows_of(p.X, p.feature_clip, dt, p.row_norms, bias=p.intercept_scaling)  # not formed: no copy
    norms = Xbar.norms
    Y = p.Y.astype(dt) if p.Y.dtype.kind == "f" else p.Y
    shape = loss.param_shape(p.X.shape[1])
    resumed = None if ledger is None else ledger.resumed
    if resumed is None:
        streams = secure_streams() if p.secure_mode else rng_streams(p.random_state)
        W0, init_kind = initial_iterate(p, shape, streams.init)
        batch_stream = run_batches(run, streams.batches, rows=p.X.shape[0])
        noise_rng, start, history = streams.noise, 0, []
    else:  # the run the checkpoint holds, from where it stopped
        W0, init_kind, start, history = resumed.W.astype(dt), resumed.init_kind, resumed.step, resumed.history
        if p.secure_mode:  # fresh draws from the OS for the steps to come (cyclic keeps its order)
            noise_rng = SecureRandom()
            batch_stream = BatchStream.from_state(resumed.batch_meta, resumed.batch_arrays, SecureRandom())
        else:
            noise_rng = generator_from_state(resumed.noise_state)
            batch_stream = BatchStream.from_state(resumed.batch_meta, resumed.batch_arrays, None)
    thresholds = None if clip_norm is None else clip_thresholds(clip_norm, norms, dt)
    adaptive = None
    if run.adaptive_clip is not None and noise_std > 0.0:  # (sgd's noiseless baseline clips at C_0, fixed)
        adaptive = AdaptiveState(run.adaptive_clip, clip=run.lipschitz, unit=clip_thresholds(1.0, norms, dt),
                                 gradient_noise=run.adaptive_clip.gradient_noise_multiplier(run.noise_multiplier)
                                 / run.batch_size, expected_batch=run.batch_size,
                                 count_std=run.adaptive_clip.count_std(run.noise_multiplier))
    radius = safe_radius(run, dt)

    def save(t, W, hist):  # a checkpoint after step t (atomic; see .checkpoint)
        ledger.save(t, W, batch_stream, noise_rng, hist, init_kind)

    if ledger is not None and resumed is None:
        save(0, np.asarray(W0, dtype=dt), history)  # the start, the generators' states, the path claimed
    W, steps, history = noisy_sgd_core(
        loss, Xbar, Y,
        batches=batch_stream,
        step_sizes=run.step_sizes(start),
        denominator=run.batch_size,
        init=W0,
        l2=run.strong_convexity,
        thresholds=thresholds,
        noise_std=noise_std,
        radius=radius,
        noise_rng=noise_rng,
        start_step=start,
        hooks=StepHooks(callback=p.callback, record_every=run.steps_per_epoch if record else None,
                        history=history, save=None if ledger is None else save,
                        save_every=None if ledger is None else ledger.every_steps),
        adaptive=adaptive,
    )
    if ledger is not None:
        if ledger.keep:
            if steps > start and steps % ledger.every_steps != 0:
                save(steps, W, history)  # the finished run, for a caller that deletes it itself
        else:
            ledger.sessions[-1][1] = steps
            _ckpt.delete_checkpoint(ledger.path)
        extra = {**extra, "checkpoint": ledger.summary()}
    enforced = enforced_record(p, clip_norm=clip_norm, radius=radius, init_kind=init_kind, steps=steps,
                         noise_std=noise_std)
    enforced.update(extra)
    if adaptive is not None:
        enforced["adaptive_clip"] = adaptive.summary()
        enforced["noise_std"] = "z_Δ·C_t/b at step t (adaptive_clip)"
    return TrainResult(coef=W, steps=steps, history=tuple(history), enforced=enforced, run=run,
                       loss=loss, feature_clip=p.feature_clip, intercept_scaling=p.intercept_scaling)
