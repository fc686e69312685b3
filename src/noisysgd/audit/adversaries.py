"""Two adversaries, run through the real trainer, and what they certify empirically.

Both follow one protocol.  A certified run (a :class:`~noisysgd.Run`) and two
adjacent datasets D, D′ (replace adjacency: one example differs).  The
trainer runs ``runs`` times on each, independently
(:func:`~noisysgd.train.replicas.train_replicas`); a test fixed in advance
— a declared threshold, or one chosen on ``calibration_runs`` further runs
per dataset that are then discarded — calls each final model "D" or "D′";
the error counts give an ε lower bound at ``confidence``
(:func:`~noisysgd.audit.stats.epsilon_lower_bound`), reported beside the
certified ε of the same run (:func:`noisysgd.epsilon`).

``trainer_run`` lets the replicas execute a run other than the certified
one — only to check that an audit *can* fail (e.g. the noise divided by 10).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..run import AdaptiveClip, Run
from ..train.losses import BinaryLogistic
from ..progress import bar
from ..train.release import check_average
from ..train.replicas import train_replicas
from .losses import Linear
from .stats import EpsilonLowerBound, Threshold, choose_threshold, evaluate_threshold

__all__ = [
    "LeakyCount",
    "adaptive_datasets",
    "adaptive_run",
    "audit_adaptive",
    "PAIRS",
    "AuditResult",
    "at_1d_datasets",
    "at_1d_run",
    "audit_at_1d",
    "digits_canary",
    "canary_run",
    "audit_canary",
    "certified_epsilon",
]

VARIANTS = ("opposed", "paper")


@dataclass(frozen=True)
class AuditResult:
    """An audit's outcome: the empirical lower bound beside the certified ε.

    ``violation`` is True when the lower bound exceeds the best certified ε:
    with probability ≥ ``confidence`` the run is then *not* as private as
    certified (a bug in the trainer, the analysis or the accounting).
    """

    adversary: str
    run: Run
    trainer_run: Run
    delta: float
    confidence: float
    runs: int
    calibration_runs: int
    statistic: str
    test: Threshold
    threshold_source: str
    lower_bound: EpsilonLowerBound
    certified: dict
    certified_epsilon: float | None
    certified_by: str | None
    seconds: dict
    details: dict = field(default_factory=dict)

    @property
    def epsilon_lower(self) -> float:
        return self.lower_bound.epsilon

    @property
    def violation(self) -> bool:
        return self.certified_epsilon is not None and self.lower_bound.epsilon > self.certified_epsilon

    @property
    def ratio(self) -> float | None:
        """certified ε / empirical lower bound (the gap; inf when the bound is 0)."""
        if self.certified_epsilon is None:
            return None
        lb = self.lower_bound.epsilon
        return math.inf if lb == 0 else self.certified_epsilon / lb

    def to_dict(self) -> dict:
        def finite(x):
            return x if x is None or math.isfinite(x) else None

        return {
            "adversary": self.adversary,
            "run": self.run.to_dict(),
            "trainer_run": None if self.trainer_run == self.run else self.trainer_run.to_dict(),
            "delta": self.delta,
            "confidence": self.confidence,
            "runs_per_dataset": self.runs,
            "calibration_runs_per_dataset": self.calibration_runs,
            "statistic": self.statistic,
            "test": self.test.describe(self.statistic) + " => D'",
            "threshold": self.test.threshold,
            "direction": self.test.direction,
            "threshold_source": self.threshold_source,
            "epsilon_lower_bound": finite(self.lower_bound.epsilon),
            "lower_bound": self.lower_bound.to_dict(),
            "certified_epsilon": finite(self.certified_epsilon),
            "certified_by": self.certified_by,
            "certified": self.certified,
            "violation": self.violation,
            "gap_ratio": finite(self.ratio) if self.ratio is not None else None,
            "seconds": self.seconds,
            "details": self.details,
        }


# --------------------------------------------------------------------------- helpers


def _runs(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}. Found {value!r}.")
    return int(value)


def _seed_sequence(random_state) -> np.random.SeedSequence:
    """None (fresh entropy, recorded in the result), a non-negative int, a
    sequence of them, or a SeedSequence."""
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    values = random_state if isinstance(random_state, (list, tuple)) else [random_state]
    if not values or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0 for v in values):
        raise ValueError(
            f"random_state must be None, a non-negative integer or a list of them. Found {random_state!r}."
        )
    return np.random.SeedSequence([int(v) for v in values] if len(values) > 1 else int(values[0]))


def certified_epsilon(run: Run, delta: float, analyses="best") -> tuple[dict, float | None, str | None]:
    """(per-analysis table, best sound ε, its analysis) from :func:`noisysgd.epsilon`.

    The table also lists analyses that do not apply (with the reason) and
    those flagged not sound (never the best; an audit may refute them)."""
    from ..accountant import epsilon as _epsilon

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = _epsilon(run, delta=delta, analyses=analyses)
    table = {}
    for name, res in report.results.items():
        table[name] = {
            "applies": res.applies,
            "sound": res.sound,
            "epsilon": res.epsilon if res.epsilon is None or math.isfinite(res.epsilon) else None,
            "reason": res.reason,
        }
    if report.combined is not None:
        c = report.combined
        table[c.analysis] = {"applies": True, "sound": c.sound, "epsilon": c.epsilon, "reason": None}
    best = report.best
    warn = sorted({str(w.message) for w in caught})
    if warn:
        table["_warnings"] = warn
    if best is None:
        return table, None, None
    return table, float(best.epsilon), best.analysis


@dataclass(frozen=True)
class _Adversary:
    """One adversary's side of the protocol: its name, ``fit(which, replicas, rng, on_step)``
    on D or D′, ``score(result)`` the statistic of each final model, what the statistic is,
    the details it reports and the direction of its default test (+1: large says D′)."""

    name: str
    fit: object
    score: object
    statistic: str
    details: dict
    direction: int = 1


def _audit(adv: _Adversary, *, run, trainer_run, delta, confidence, runs, calibration_runs, threshold,
           random_state, certify, progress=False):
    fit, score, direction = adv.fit, adv.score, adv.direction
    from ..rdp import validate_delta
    from .stats import confidence_level

    # every check before any run: δ, confidence, counts, threshold, seed, analyses (accounting first)
    d = validate_delta(delta)
    c = confidence_level("confidence", confidence)
    runs = _runs("runs", runs)
    if isinstance(threshold, Threshold):
        test, source = threshold, "declared before the runs"
    elif isinstance(threshold, str) and threshold == "tuned":
        test, source = None, None
    else:
        try:
            value = float(threshold)
        except (TypeError, ValueError):
            raise ValueError(f"threshold must be a number or 'tuned'. Found {threshold!r}.") from None
        if math.isnan(value) or isinstance(threshold, bool):
            raise ValueError(f"threshold must be a number or 'tuned'. Found {threshold!r}.")
        test, source = Threshold(value, direction), "declared before the runs"
    n_cal = 0
    if test is None:
        n_cal = runs if calibration_runs is None else _runs("calibration_runs", calibration_runs)
    elif calibration_runs is not None:
        raise ValueError(f"calibration_runs must be None when the threshold is declared. Found {calibration_runs!r}.")
    ss = _seed_sequence(random_state)
    times = {}
    t0 = time.perf_counter()
    table, best, by = certified_epsilon(run, d, certify)
    times["accounting"] = time.perf_counter() - t0
    gens = [np.random.default_rng(s) for s in ss.spawn(4)]
    passes = 2 + 2 * (test is None)
    steps = bar(passes * trainer_run.steps, f"audit: {passes} x {trainer_run.steps} steps of "
                f"{runs} replicas", progress, unit="step", unit_scale=True)
    tick = steps.update
    if test is None:
        t0 = time.perf_counter()
        cal0, cal1 = score(fit("D", n_cal, gens[2], tick)), score(fit("D'", n_cal, gens[3], tick))
        times["calibration_runs"] = time.perf_counter() - t0
        test = choose_threshold(cal0, cal1, delta=d, confidence=c)
        source = f"chosen on {n_cal} + {n_cal} separate calibration runs, then discarded"
    t0 = time.perf_counter()
    s0 = score(fit("D", runs, gens[0], tick))
    s1 = score(fit("D'", runs, gens[1], tick))
    steps.close()
    times["counted_runs"] = time.perf_counter() - t0
    lb = evaluate_threshold(s0, s1, test, delta=d, confidence=c)
    details = dict(adv.details)
    details["seed_entropy"] = str(ss.entropy)
    details["score_quantiles_D"] = [float(v) for v in np.quantile(s0, [0.01, 0.5, 0.99])]
    details["score_quantiles_D_prime"] = [float(v) for v in np.quantile(s1, [0.01, 0.5, 0.99])]
    return AuditResult(
        adversary=adv.name, run=run, trainer_run=trainer_run, delta=d, confidence=c, runs=runs,
        calibration_runs=n_cal, statistic=adv.statistic, test=test, threshold_source=source,
        lower_bound=lb, certified=table, certified_epsilon=best, certified_by=by, seconds=times,
        details=details,
    )


def _trainer_run(run, trainer_run):
    if not isinstance(run, Run):
        raise ValueError(f"run must be a noisysgd.Run. Found {type(run).__name__}.")
    if trainer_run is None:
        return run
    if not isinstance(trainer_run, Run):
        raise ValueError(f"trainer_run must be a noisysgd.Run or None. Found {type(trainer_run).__name__}.")
    if trainer_run.n != run.n:
        raise ValueError(f"trainer_run must have the same n as run ({run.n}). Found {trainer_run.n}.")
    return trainer_run


# --------------------------------------------------------------------------- Altschuler & Talwar, 1-D


def at_1d_datasets(n: int, *, lipschitz: float = 1.0, variant: str = "opposed"):
    """(X, y_D, y_D′) of Altschuler & Talwar's construction (§4), for :class:`Linear`.

    X has no features (shape (n, 0)): the model is one number ω, and example
    i's loss is y_i·ω.  Every loss is zero except the last: on D′ its slope
    is −L (their f′_n(ω) = L(D − ω): each step that uses it moves ω *up* by
    ηL/b); on D it is 0 (``variant="paper"``: the symmetric walk) or +L
    (``variant="opposed"``: the walks drift apart in both directions, the full
    gradient sensitivity 2L of replace adjacency).

    >>> X, y, y2 = at_1d_datasets(4)
    >>> X.shape, y.tolist(), y2.tolist()
    ((4, 0), [0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, -1.0])
    """
    n = _runs("n", n)
    L = float(lipschitz)
    if not (math.isfinite(L) and L > 0):
        raise ValueError(f"lipschitz must be a positive finite number. Found {lipschitz!r}.")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}. Found {variant!r}.")
    X = np.zeros((n, 0))
    y = np.zeros(n)
    y_prime = np.zeros(n)
    y_prime[-1] = -L
    if variant == "opposed":
        y[-1] = L
    return X, y, y_prime


def at_1d_run(*, n: int, batch_size: int | None, batching: str, steps: int, learning_rate: float,
              noise_multiplier: float, diameter: float | None, lipschitz: float = 1.0,
              smoothness: float | None = None, adjacency: str = "replace") -> Run:
    """The run of the 1-D construction: convex (linear losses), diameter D,
    and a declared smoothness (default: the largest M with η ≤ 2/M, and for
    ``poisson`` with η ≤ 2b/(nM) — a linear loss is M-smooth for every M ≥ 0)."""
    probe = Run(n=n, batch_size=batch_size, batching=batching, steps=steps, learning_rate=learning_rate,
                noise_multiplier=noise_multiplier, lipschitz=lipschitz, adjacency=adjacency)
    if smoothness is None:
        eta = probe.max_learning_rate
        smoothness = 2.0 / eta
        if probe.batching == "poisson":
            smoothness = 2.0 * probe.batch_size / (probe.n * eta)
    return probe.replace(smoothness=smoothness, diameter=diameter, convex=True)


def audit_at_1d(
    run: Run,
    *,
    delta: float,
    runs: int = 10_000,
    confidence: float = 0.95,
    variant: str = "opposed",
    threshold=0.0,
    calibration_runs: int | None = None,
    random_state=None,
    trainer_run: Run | None = None,
    certify="best",
    dtype=np.float64,
    progress: bool = False,
    average: bool | str = False,
) -> AuditResult:
    """Audit ``run`` with Altschuler & Talwar's 1-D construction (Theorem 4.1).

    The replicas run ``run`` (its n, batches, steps, η, z, clip norm L, λ,
    diameter D: K = [−D/2, D/2]) on the :class:`Linear` losses of
    :func:`at_1d_datasets`, from ω₀ = 0.  Test: "ω_T ≥ ``threshold`` ⇒ D′"
    (the paper's test is ``threshold=0``, declared in advance); with
    ``threshold="tuned"`` the threshold and direction are chosen on
    ``calibration_runs`` (default ``runs``) other runs per dataset.

    Under ``run.adjacency == "add-remove"`` (``poisson`` batches, the only
    ones :class:`~noisysgd.Run` admits there) the pair is D′ = the n
    examples of the ``"paper"`` variant (the last of slope −L) and D = D′
    without its last example: the replicas on D run the same ``run`` (its n
    the declared public size: the same rate b/n, divisor b and steps) on the
    n − 1 examples there are (``variant`` is not used).

    >>> import noisysgd
    >>> run = at_1d_run(n=10, batch_size=10, batching="full", steps=200, learning_rate=1.0,
    ...                 noise_multiplier=8.0, diameter=4.0)
    >>> res = audit_at_1d(run, delta=1e-5, runs=2000, random_state=0,
    ...                   certify=["altschuler-talwar"])
    >>> res.violation, res.certified_by, res.lower_bound.negatives
    (False, 'altschuler-talwar', 2000)
    >>> 0.5 < res.epsilon_lower < res.certified_epsilon
    True
    """
    trainer = _trainer_run(run, trainer_run)
    removal = run.adjacency == "add-remove"
    if removal:
        variant = "paper"
        if run.n < 2:
            raise ValueError(f"run.n must be at least 2 for an add/remove audit (D has n - 1 examples). "
                             f"Found {run.n}.")
    X, y, y_prime = at_1d_datasets(run.n, lipschitz=run.lipschitz, variant=variant)
    loss = Linear()

    check_average(average)
    if average:  # the released output is a function of every iterate: composition alone certifies it
        # ("auto" averages only under such a certificate: audited there, per replica as the rule decides)
        certify = _every_iterate(certify)

    def fit(which, R, rng, on_step):
        if removal and which == "D":  # D = D' without its last example: the same run on n - 1 examples
            return train_replicas(trainer, loss, X[:-1], y_prime[:-1], replicas=R, feature_clip=1.0,
                                  random_state=rng, dtype=dtype, on_step=on_step, average=average)
        return train_replicas(trainer, loss, X, y if which == "D" else y_prime, replicas=R, feature_clip=1.0,
                              random_state=rng, dtype=dtype, on_step=on_step, average=average)

    def score(result):
        return result.coef[:, 0].astype(np.float64)

    details = {
        "construction": (
            "Altschuler & Talwar Theorem 4.1 / Appendix A.4: 1-D linear losses on K = [-D/2, D/2], "
            f"all zero but the last (slope {y[-1]:g} on D, {y_prime[-1]:g} on D'), start 0"
        ),
        "variant": variant,
        "adjacency": run.adjacency,
    }
    if removal:
        details["construction"] = (
            "Altschuler & Talwar Theorem 4.1 / Appendix A.4, add/remove: 1-D linear losses on K = [-D/2, D/2]; "
            f"D' = {run.n} examples, all of slope zero but the last (slope {y_prime[-1]:g}); D = D' without "
            "it; start 0")
    if run.diameter is not None:
        details["burn_in_steps_T_bar"] = 0.75 * run.diameter * run.n / (run.lipschitz * run.max_learning_rate)
    released = ("tail average of the iterates (steps T/2+1..T)" if average is True
                else "average='auto': per run, the tail average where its iterates settled, else the final iterate"
                if average else "final iterate")
    return _audit(_Adversary("at-1d", fit, score, released, details, direction=1), run=run,
                  trainer_run=trainer, delta=delta, confidence=confidence, runs=runs,
                  calibration_runs=calibration_runs, threshold=threshold, random_state=random_state,
                  certify=certify, progress=progress)


def _every_iterate(certify):
    """The analyses that may certify an average of the iterates: composition's ("best" becomes
    them; a named other analysis is refused)."""
    every = ["composition", "composition-pld"]
    if certify is None or (isinstance(certify, str) and certify == "best"):
        return every
    named = [certify] if isinstance(certify, str) else list(certify)
    other = [a for a in named if a not in every]
    if other:
        raise ValueError(f"certify must name composition analyses with average=True (an average of the iterates "
                         f"is not the final model the others bound). Found {', '.join(map(repr, other))}.")
    return named


# --------------------------------------------------------------------------- canary in digits


PAIRS = ("label-flip", "replace")


def digits_canary(*, n: int | None = None, feature_clip: float = 1.0, label: int = 1,
                  pair: str = "label-flip"):
    """Digits (pixels/16, label 1[digit ≥ 5]) and a canary in place of the last example.

    The canary's features live on the pixels that are zero in every other
    image (0, 32 and 39 for the full set): its gradient x̄_c·φ'(s) is
    orthogonal to every other example's except along the bias, and its norm
    ‖x_c‖ = R (``feature_clip``) makes ‖x̄_c‖ = √(R²+1) the largest the
    feature clip allows, so the clip norm binds on it.

    ``pair`` (replace adjacency either way): ``"label-flip"`` (default) — D
    holds the canary with the other label, D′ with ``label``: the two
    gradients of the differing example point in opposite directions, the
    full sensitivity 2L along the canary; ``"replace"`` — D holds the last
    digit itself, D′ the canary.

    Returns a dict with X, y (dataset D), X_prime, y_prime (D′), canary_x,
    canary_y (= ``label``), pixels, pair.

    >>> d = digits_canary()
    >>> d["X"].shape, d["pixels"], round(float(np.linalg.norm(d["canary_x"])), 12)
    ((1797, 64), [0, 32, 39], 1.0)
    >>> bool(np.all(d["X"][:-1][:, d["pixels"]] == 0))   # orthogonal to every other example
    True
    >>> int(d["y"][-1]), int(d["y_prime"][-1])          # label-flip: the same canary, both labels
    (0, 1)
    """
    from sklearn.datasets import load_digits

    X, digit = load_digits(return_X_y=True)
    total = X.shape[0]
    n = total if n is None else _runs("n", n, minimum=2)
    if n > total:
        raise ValueError(f"n must be at most {total} (the digits). Found {n}.")
    R = float(feature_clip)
    if not (math.isfinite(R) and R > 0):
        raise ValueError(f"feature_clip must be a positive finite number. Found {feature_clip!r}.")
    if label not in (0, 1):
        raise ValueError(f"label must be 0 or 1. Found {label!r}.")
    if pair not in PAIRS:
        raise ValueError(f"pair must be one of {', '.join(PAIRS)}. Found {pair!r}.")
    X = X[:n] / 16.0
    y = (digit[:n] >= 5).astype(np.int64)
    unused = np.flatnonzero(np.all(X[:-1] == 0.0, axis=0))
    if unused.size == 0:  # pragma: no cover - digits always has some
        unused = np.argsort(np.count_nonzero(X[:-1], axis=0))[:3]
    canary = np.zeros(X.shape[1])
    canary[unused] = R / math.sqrt(unused.size)
    X_prime, y_prime = X.copy(), y.copy()
    X_prime[-1], y_prime[-1] = canary, label
    if pair == "label-flip":
        X, y = X_prime.copy(), y_prime.copy()
        y[-1] = 1 - label
    return {"X": X, "y": y, "X_prime": X_prime, "y_prime": y_prime, "canary_x": canary,
            "canary_y": int(label), "pixels": unused.tolist(), "pair": pair}


def canary_run(*, n: int, batch_size: int | None, batching: str, steps: int, learning_rate: float | None,
               noise_multiplier: float, feature_clip: float, clip_norm: float | None = None,
               l2: float = 0.0, diameter: float | None = None) -> Run:
    """The run of binary logistic regression with feature clip R, clip norm L
    (default: the natural √(R²+1)), L2 regularization λ: constants derived as
    the trainer derives them (M = (R²+1)/4 + λ, convex), ``learning_rate``
    None = 1/(2M)."""
    c = BinaryLogistic().constants(feature_clip=feature_clip, clip_norm=clip_norm)
    M = c.smoothness + float(l2)
    eta = 1.0 / (2.0 * M) if learning_rate is None else learning_rate
    return Run(n=n, batch_size=batch_size, batching=batching, steps=steps, learning_rate=eta,
               noise_multiplier=noise_multiplier, lipschitz=c.lipschitz, smoothness=M,
               strong_convexity=float(l2), diameter=diameter, convex=True)


def audit_canary(
    run: Run,
    *,
    delta: float,
    feature_clip: float,
    runs: int = 2000,
    confidence: float = 0.95,
    calibration_runs: int | None = None,
    threshold="tuned",
    label: int = 1,
    pair: str = "label-flip",
    random_state=None,
    trainer_run: Run | None = None,
    certify="best",
    dtype=np.float64,
    progress: bool = False,
) -> AuditResult:
    """Audit ``run`` (binary logistic on the first ``run.n`` digits) with a canary.

    D and D′ from :func:`digits_canary` (``pair``: by default the canary with
    either label; ``"replace"``: the last digit vs the canary).  Statistic: the final model's loss on the canary;
    the test "loss ≤ τ ⇒ D′" (or ≥, whichever the calibration runs favour),
    τ chosen on ``calibration_runs`` (default ``runs``) separate runs per
    dataset; or a declared ``threshold`` (a number τ: "loss ≤ τ ⇒ D′", or a
    :class:`Threshold`).

    >>> run = canary_run(n=60, batch_size=60, batching="full", steps=20, learning_rate=None,
    ...                  noise_multiplier=8.0, feature_clip=3.0, clip_norm=1.0, diameter=4.0)
    >>> res = audit_canary(run, delta=1e-5, feature_clip=3.0, runs=300, threshold=0.69,
    ...                    random_state=0, certify=["composition"])
    >>> res.test.describe(res.statistic), res.violation
    ('loss on the canary <= 0.69', False)
    """
    trainer = _trainer_run(run, trainer_run)
    data = digits_canary(n=run.n, feature_clip=feature_clip, label=label, pair=pair)
    loss = BinaryLogistic()
    cx = data["canary_x"][None, :]

    def fit(which, R, rng, on_step):
        X, y = (data["X"], data["y"]) if which == "D" else (data["X_prime"], data["y_prime"])
        return train_replicas(trainer, loss, X, y, replicas=R, feature_clip=feature_clip,
                              random_state=rng, dtype=dtype, on_step=on_step)

    def score(result):
        # ℓ(W; x̄_c, y_c) = log(1 + exp(−y·s)), y = ±1: per replica, from the scores
        s = result.scores(cx)[:, 0].astype(np.float64)
        sign = 1.0 if data["canary_y"] == 1 else -1.0
        return np.logaddexp(0.0, -sign * s)

    details = {
        "dataset": f"scikit-learn digits, first {run.n} images, pixels/16, label 1[digit >= 5]",
        "canary": (f"features R/sqrt({len(data['pixels'])}) on the pixels zero in every other image "
                   f"{data['pixels']}, label {data['canary_y']} in D', in place of the last example; "
                   + ("the same canary with the other label in D" if pair == "label-flip"
                      else "D keeps the last digit")),
        "pair": pair,
        "feature_clip": feature_clip,
    }
    return _audit(_Adversary("canary", fit, score, "loss on the canary", details, direction=-1), run=run,
                  trainer_run=trainer, delta=delta, confidence=confidence, runs=runs,
                  calibration_runs=calibration_runs, threshold=threshold, random_state=random_state,
                  certify=certify, progress=progress)


# --------------------------------------------------------------------------- adaptive clipping's count


class LeakyCount(AdaptiveClip):
    """An :class:`~noisysgd.run.AdaptiveClip` whose count is released **without noise** (the gradient
    keeps the whole noise multiplier): the broken trainer :func:`audit_adaptive` must catch.  For
    audits only — no certificate covers it."""

    #: No analysis certifies a run with this clip (``Analysis.why_not``): it trains, it is never certified.
    certifiable = False

    def __post_init__(self) -> None:  # (no lower bound on the count's noise: there is none)
        pass

    def count_std(self, z: float) -> float:
        return 0.0

    def gradient_noise_multiplier(self, z: float) -> float:
        return float(z)


def adaptive_datasets(n: int, *, feature_clip: float = 1.0):
    """D: ``n − 1`` rows on the clip's sphere, labels against their direction (gradients of norm
    ~√(R² + s²)/2: clipped while C_t is below that); D′: D and one more row, the canary, all zeros
    with label 1 (its gradient s·|φ'| is tiny: never clipped).  Under add/remove (public n = n) the
    canary's centred indicator adds +½ to the released count of every batch it is sampled into."""
    k = n - 1
    X = np.zeros((k, 2))
    X[:, 0] = feature_clip
    y = np.zeros(k, dtype=int)
    return {"X": X, "y": y, "X_prime": np.vstack([X, np.zeros((1, 2))]), "y_prime": np.append(y, 1)}


def adaptive_run(*, n: int, batch_size: int, steps: int, noise_multiplier: float, feature_clip: float = 1.0,
                 learning_rate: float = 1e-3, adaptive_clip: AdaptiveClip | None = None) -> Run:
    """The run :func:`audit_adaptive` trains: binary logistic, Poisson batches of expected size
    ``batch_size`` at the public n, add/remove adjacency, the clip starting at 0.3·L and adaptive."""
    c = BinaryLogistic().constants(feature_clip=feature_clip)
    return Run(n=n, batch_size=batch_size, batching="poisson", steps=steps, learning_rate=learning_rate,
               noise_multiplier=noise_multiplier, lipschitz=0.3 * c.lipschitz, adjacency="add-remove",
               adaptive_clip=AdaptiveClip() if adaptive_clip is None else adaptive_clip)


def audit_adaptive(
    run: Run,
    *,
    delta: float,
    feature_clip: float = 1.0,
    runs: int = 1000,
    confidence: float = 0.95,
    calibration_runs: int | None = None,
    threshold="tuned",
    random_state=None,
    leak_count: bool = False,
    certify="best",
    progress: bool = False,
) -> AuditResult:
    """Audit adaptive clipping's count: ``run`` (an :func:`adaptive_run`) trained on
    D or D′ of :func:`adaptive_datasets`; the statistic is the sum over the steps of the released
    counts, read back from the clip's trajectory (C_{t+1}/C_t = exp(−η_C·(b̄_t − γ)): b̄_t, hence
    the count, is a function of it — covered by the composition certificate, which accounts every
    step's output).  The canary adds +½ to each count it is sampled into; the honest count's noise
    (σ_b = r·z) hides it within the certificate, and ``leak_count`` trains with the count released
    un-noised (:class:`LeakyCount`), which the audit must catch.

    With two rows (public n = 2, Poisson batches of expected size 1, 200 steps, z = 12: certified
    ε = 2.41 at δ = 10⁻⁵), 300 runs per dataset: the honest count gives a lower bound of 0, the
    un-noised one 2.85 — a violation (``tests/test_adaptive_clip.py``; ~15 s)::

        run = adaptive_run(n=2, batch_size=1, steps=200, noise_multiplier=12.0)
        audit_adaptive(run, delta=1e-5, runs=300, random_state=0, leak_count=True).violation  # True
    """
    from ..train import PrivacyLeakWarning, train
    from ..train.engine import AdaptiveState

    if not isinstance(run, Run) or run.adaptive_clip is None:
        raise ValueError("run must be a noisysgd.Run with adaptive_clip (noisysgd.audit.adaptive_run). "
                         f"Found {run!r}.")
    if run.steps > AdaptiveState.TRAJECTORY_STEPS:
        raise ValueError(f"run.steps must be at most {AdaptiveState.TRAJECTORY_STEPS} for the adaptive audit (the "
                         f"clip's trajectory, which it reads the counts from, is recorded up to there). Found {run.steps}.")
    spec = run.adaptive_clip
    trainer = run.replace(adaptive_clip=LeakyCount(spec.target_quantile, spec.clip_learning_rate,
                                                   spec.count_noise, spec.scale_step)) if leak_count else run
    data = adaptive_datasets(run.n, feature_clip=feature_clip)
    loss = BinaryLogistic()

    def fit(which, R, rng, on_step):
        X, y = (data["X"], data["y"]) if which == "D" else (data["X_prime"], data["y_prime"])
        out = np.empty(R)
        for r in range(R):  # one run at a time (the replicated engine does not clip adaptively)
            with warnings.catch_warnings():  # (the rows lie on the clip's sphere by construction: declared, not read)
                warnings.simplefilter("ignore", PrivacyLeakWarning)
                res = train(trainer, loss, X, y, feature_clip=feature_clip, random_state=int(rng.integers(2**63)),
                            analyses=None if leak_count else ("composition",))  # (no bound covers the leak)
            C = np.asarray(res.enforced["adaptive_clip"]["trajectory"])
            fraction = spec.target_quantile - np.log(C[1:] / C[:-1]) / spec.clip_learning_rate
            out[r] = float(np.sum((fraction - 0.5) * run.batch_size))  # Σ_t released count
            if on_step is not None:
                on_step(run.steps / R if R else 0)
        return out

    details = {"dataset": f"{run.n - 1} rows on the clip's sphere; D' adds an all-zero canary with label 1",
               "statistic_source": "the released counts, read back from the clip's trajectory",
               "leak_count": leak_count, "count_noise_std": 0.0 if leak_count else spec.count_std(run.noise_multiplier)}
    return _audit(_Adversary("adaptive", fit, lambda s: s, "sum of the released counts", details, direction=1),
                  run=run, trainer_run=trainer, delta=delta, confidence=confidence, runs=runs,
                  calibration_runs=calibration_runs, threshold=threshold, random_state=random_state,
                  certify=certify, progress=progress)
