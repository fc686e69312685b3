"""Private training from raw rows to certificate, written once.

:func:`fit_declared` is what :class:`~noisysgd.NoisySGDClassifier`,
:class:`~noisysgd.NoisySGDRegressor`, ``noisysgd train`` (one process or several) and the CV
tuner's candidate runs call; they only translate their arguments into a :class:`Declared`.
It spends the privacy budget in this order, each private query a typed :class:`QueryEvent`:

1. **ranges** (``feature_range="private"``): :func:`noisysgd.preprocessing.private_ranges_within`,
   or public bounds (no cost);
2. **mean** (``center="private"``, or ``"auto"`` with a target ε): the rows minus a DP mean
   (:func:`noisysgd.preprocessing.private_center_within`), clipped to the radius it gives;
3. **curvature**: where the search will weigh DP-SGD's regime
   (:func:`noisysgd.curvature.curvature_for`), the data's smoothness;
4. **configuration**: every "auto" parameter chosen by :func:`noisysgd.config.configure` from
   public quantities and the curvature's answer (post-processing of a charged query);
5. **the run**, calibrated to the target composed with the queries, trained and certified by
   :func:`noisysgd.private_fit.fit_private` (its ``certify`` writes the certificate, the
   queries' composition included, in one place).

Each query lowers the training's share of (ε, δ) under basic composition; ``fit_private`` then
calibrates the noise to the *composed* total, so the certificate's total is at or below the
target.  Nothing here reads the data except through those charged queries (the rows themselves
go to the trainer): every decision the defaults take from the data is a function of the
queries' answers and of public quantities (n, d, the loss's constants, the declared bounds).
A data-parallel run (``Execution.trainer``) asks no query: a rank holds its shard only.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from .config import configure
from .curvature import curvature_for
from .prior import CHECK_MARGIN, check_margin, class_prior_within, prior_start, release_check, reserve_check, rows_right
from .preprocessing import (center_rows, combine_queries, private_center_within, private_ranges_within, recorded_part,
                            scaling_decision,
                            scale_to_ball)
from .private_fit import (Bounds, Execution, PrivateFit, Privacy, Schedule, default_delta, fit_private,
                          public_size)
from .train import BinaryLogistic, Loss, OneVsRestLogistic, Softmax

__all__ = ["Declared", "QueryEvent", "FeatureMap", "DeclaredFit", "fit_declared", "auto_intercept_scaling",
           "classification_loss", "AUTO_INTERCEPT_SHARE", "TASKS"]

#: ``intercept_scaling="auto"`` for classification: s = this share of the feature clip R.
AUTO_INTERCEPT_SHARE = 0.25

TASKS = ("classification", "regression")

#: The certificate's note for ranges the user declared.
DECLARED_RANGES = ("declared public bounds (no privacy cost): each feature clipped to [low, high], mapped to "
                   "[-1, 1] and scaled by feature_clip/sqrt(d)")


def auto_intercept_scaling(feature_clip: float, task: str = "classification") -> float:
    """The bias coordinate s that ``intercept_scaling="auto"`` means: R/4 for classification
    (:class:`~noisysgd.NoisySGDClassifier`), 1 for regression (:class:`~noisysgd.NoisySGDRegressor`'s
    default).

    >>> auto_intercept_scaling(2.0), auto_intercept_scaling(2.0, "regression")
    (0.5, 1.0)
    """
    return AUTO_INTERCEPT_SHARE * float(feature_clip) if task == "classification" else 1.0


def classification_loss(n_classes: int, multi_class: str = "softmax"):
    """The loss for ``n_classes`` labels: binary logistic for two, else softmax
    (cross-entropy) or one binary logistic loss per class (``"ovr"``)."""
    if n_classes == 2:
        return BinaryLogistic()
    return OneVsRestLogistic(n_classes) if multi_class == "ovr" else Softmax(n_classes)


@dataclass(frozen=True)
class Declared:
    """Everything a private fit is told before a row is read, as its caller checked it (each
    caller's messages name its own arguments: the estimators' parameters, the CLI's flags).

    ``epochs``, ``batch_size``, ``batching``, ``alpha`` may be ``"auto"`` (chosen together by
    :func:`noisysgd.config.configure`); ``learning_rate`` a number, ``"auto"`` or ``"max"``;
    ``clip_norm`` a number, None (the loss's own constant) or ``"auto"``; ``intercept_scaling`` a
    number, with ``intercept_auto`` when it is ``"auto"`` (it then follows the clip after
    centering); ``feature_range`` None, a pair of arrays (low, high) of public bounds, or
    ``"private"``; ``center`` None or ``"private"`` (the callers resolve ``"auto"``)."""

    task: str
    epsilon: float | None
    delta: float | None
    noise_multiplier: float | None
    epochs: Any = "auto"
    batch_size: Any = "auto"
    batching: str = "auto"
    learning_rate: Any = "auto"
    alpha: Any = "auto"
    feature_clip: float = 1.0
    intercept_scaling: float = 1.0
    intercept_auto: bool = False
    clip_norm: Any = None
    diameter: float | None = None
    target_bound: float | None = None
    adjacency: str = "replace"
    public_n: int | None = None
    analyses: Any = "best"
    release: str = "last"
    initialization: str = "fixed"
    feature_range: Any = None
    center: str | None = None
    prior: bool = False
    #: The columns that are declared categories' 0/1 indicators (a boolean mask over the encoded
    #: columns, or None): their range [0, 1] is public, so a private range query leaves them out.
    indicators: Any = None

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {', '.join(TASKS)}. Found {self.task!r}.")
        if self.center not in (None, "private"):
            raise ValueError(f"center must be None or 'private' (callers resolve 'auto'). Found {self.center!r}.")
        if self.epsilon is None and (self.center == "private" or _is_private(self.feature_range) or self.prior):
            raise ValueError("a private query (center or feature_range 'private', the class prior) spends a share "
                             "of epsilon, so it needs epsilon, not noise_multiplier.")
        if self.prior and self.task != "classification":
            raise ValueError("prior (the class prior and the release check) is for classification only.")

    @classmethod
    def from_params(cls, p: dict, **rest) -> "Declared":
        """A declaration from checked parameters in :func:`noisysgd.config.configure`'s vocabulary
        (the estimators' :func:`noisysgd.params.check_common`, the CLI's flags): every field ``p``
        names, then ``rest`` (what the caller resolves itself)."""
        names = {f.name for f in fields(cls)}
        return cls(**{**{k: v for k, v in p.items() if k in names}, **rest})

    def params(self) -> dict:
        """The mutable dict :func:`noisysgd.config.configure` and the queries read and fill."""
        return {k: getattr(self, k) for k in (
            "epochs", "batch_size", "batching", "learning_rate", "alpha", "epsilon", "delta", "noise_multiplier",
            "feature_clip", "intercept_scaling", "clip_norm", "diameter", "adjacency", "public_n")}


def _is_private(feature_range) -> bool:
    """A private range query: ``"private"`` (scale by its answer) or ``"auto"`` (ask, then decide)."""
    return isinstance(feature_range, str) and feature_range in ("private", "auto")


@dataclass(frozen=True)
class QueryEvent:
    """One private query answered on the rows before training: its ``kind`` ("feature_range",
    "center" or "curvature"), its cost — a Gaussian mechanism, ``mu``-GDP, and the (ε, δ) it was
    charged under basic composition — and its ``details`` (the answer, as recorded in the
    certificate's ``preprocessing`` and a checkpoint's context).  Kept apart from the accountant,
    as dp_accounting keeps a ``DpEvent`` apart from the accountant that composes it."""

    kind: str
    mu: float | None
    epsilon: float
    delta: float
    details: dict = field(repr=False)

    @classmethod
    def of(cls, kind: str, details: dict) -> "QueryEvent":
        return cls(kind, details.get("mu"), float(details["epsilon"]), float(details["delta"]), details)


@dataclass(frozen=True)
class FeatureMap:
    """The public map from a raw row to a trained one: clip to ``ranges`` (low, high) and scale
    into the ball of radius ``clip`` (None: the rows as given), then subtract ``center`` and clip
    to the ball again (None: not centered).  Its parameters are the queries' answers or declared
    bounds: applying it to other rows (a hold-out split, new data) releases nothing new."""

    ranges: tuple | None = None
    ranges_kind: str | None = None
    clip: float = 1.0
    center: np.ndarray | None = None

    def __call__(self, X):
        if self.ranges is not None:
            X = scale_to_ball(X, self.ranges, self.clip)
        if self.center is not None:
            X = center_rows(X, self.center, self.clip)
        return X


@dataclass(frozen=True)
class DeclaredFit:
    """The outcome of :func:`fit_declared`: the private fit (its certificate complete: the
    configuration and the queries in it), the queries asked (and ``query``, the one Gaussian the
    accountant composed them into: :func:`combine_queries`), the map the rows went through,
    the training's clip and bias coordinate (after centering), the rows as trained on (described,
    not copied), and the warnings the queries raised (the caller issues them once it has trained)."""

    fit: PrivateFit
    queries: tuple
    feature_map: FeatureMap
    feature_clip: float
    intercept_scaling: float
    schedule: Schedule
    config: dict
    query: dict | None = field(repr=False, default=None)
    rows: Any = field(repr=False, default=None)
    deferred: tuple = field(repr=False, default=())

    @property
    def total(self) -> tuple[float, float]:
        """(ε, δ) of everything released: the model and the queries' answers."""
        return self.fit.total


def fit_declared(X, y, loss: Loss, declared: Declared, execution: Execution = Execution(), *,
                 names=None, recorded: dict | None = None) -> DeclaredFit:
    """Ranges → mean → curvature → configuration → the run → the certificate (module docstring),
    for ``X`` (rows, or a lazily read table) and encoded labels ``y``.  ``names``: the columns'
    names for the warnings; ``recorded``: the queries a resumed checkpoint recorded (their answers
    are reused, never drawn again)."""
    d = int(np.shape(X)[1])
    p = declared.params()
    batching = "poisson" if p["batching"] == "auto" else p["batching"]
    n = public_size(Privacy(adjacency=p["adjacency"], public_n=p["public_n"]), int(np.shape(X)[0])
                    if execution.n_rows is None else execution.n_rows, batching)
    events, fmap = [], FeatureMap(clip=p["feature_clip"])
    with warnings.catch_warnings(record=True) as deferred:  # issued by the caller once it has trained
        warnings.simplefilter("always")
        if execution.trainer is None:  # (a data-parallel rank holds its shard only: no query)
            X, fmap = _ranges(X, declared, p, n, execution, recorded, events, fmap)
            X, fmap = _center(X, declared, p, n, execution, recorded, events, fmap, names)
            ratio, q = curvature_for(p, X, loss, n, declared.target_bound, seed=execution.random_state,
                                     secure_mode=execution.secure_mode, recorded=recorded)
            if q is not None:
                events.append(QueryEvent.of("curvature", q))
            prior = _prior(y, loss, declared, p, n, execution, recorded, events)
        else:
            ratio, prior = None, None
    query = combine_queries([e.details for e in events])
    if query is not None:  # each query took its share off the rest: the run's plus theirs is the target, exactly
        p["delta"] = _exact_share(p["delta"], query["delta"], _delta(declared.params(), n))
        p["epsilon"] = _exact_share(p["epsilon"], query["epsilon"], declared.epsilon)
    search_epsilon = _search_epsilon(p, [e for e in events if e.kind in ("class_prior", "release_check") or (
        e.kind == "feature_range" and declared.feature_range == "auto")])
    config = configure(p, loss, n, d, declared.target_bound, curvature=ratio, search_epsilon=search_epsilon)
    b = p["batch_size"]
    if p["batching"] == "full":
        b = None
    elif b is not None:
        b = min(b, n)  # fewer examples than a batch: one batch of all of them
    start = None
    if prior is not None and declared.initialization == "fixed":  # the first iterate predicts the base rate
        start = prior_start(prior, loss.param_shape(d), p["intercept_scaling"], ovr=_ovr(loss),
                            radius=None if p["diameter"] is None else 0.5 * p["diameter"] * (1.0 - 1e-9))
    schedule = Schedule(epochs=p["epochs"], batch_size=b, batching=p["batching"], learning_rate=p["learning_rate"],
                        l2=p["alpha"], initialization=declared.initialization, start=start)
    bounds = Bounds(feature_clip=p["feature_clip"], intercept_scaling=p["intercept_scaling"], clip_norm=p["clip_norm"],
                    diameter=p["diameter"], target_bound=declared.target_bound, adaptive_clip=p.get("adaptive_clip"))
    privacy = Privacy(epsilon=p["epsilon"], delta=p["delta"], noise_multiplier=p["noise_multiplier"],
                      adjacency=p["adjacency"], analyses=declared.analyses, query=query, public_n=p["public_n"],
                      release=declared.release)
    fit = fit_private(X, y, loss, schedule, bounds, privacy, execution)
    if prior is not None:
        fit = _checked_release(fit, X, y, loss, prior, events, p, execution, d)
    certificate = fit.certificate
    certificate["config"] = config
    if fmap.ranges_kind == "public":
        if query is not None:
            certificate["preprocessing"]["feature_range"] = DECLARED_RANGES
        else:
            certificate["preprocessing"] = {"feature_range": DECLARED_RANGES}
    return DeclaredFit(fit, tuple(events), fmap, p["feature_clip"], p["intercept_scaling"], schedule, config,
                       query=query, rows=X, deferred=tuple(deferred))


def _exact_share(share: float, spent: float, target: float) -> float:
    """The largest float ≤ ``share`` (or just above it) whose sum with ``spent`` is at most ``target``:
    the run's share after basic composition's subtractions, rounded so that the composed total is
    never an ulp over the target (and as close to it as the floats allow)."""
    while share > 0.0 and share + spent > target:
        share = math.nextafter(share, 0.0)
    while share + spent < target and math.nextafter(share, math.inf) + spent <= target:
        share = math.nextafter(share, math.inf)
    return share


def _delta(p: dict, n: int) -> float:
    return p["delta"] if p["delta"] is not None else default_delta(n)


def _ranges(X, declared: Declared, p: dict, n: int, execution: Execution, recorded, events, fmap):
    """Step 1: private ranges (charged) or declared public bounds (free); the rows scaled."""
    requested = declared.feature_range
    if requested is None:
        return X, fmap
    if isinstance(requested, str):  # "private", or "auto": ask, then decide from the answer
        auto = requested == "auto"
        mask = None if declared.indicators is None else np.asarray(declared.indicators, dtype=bool)
        if mask is not None and mask.all():  # every column a declared indicator: its range is public
            ones = np.ones(mask.size)
            fmap = replace(fmap, ranges=(0.0 * ones, ones), ranges_kind="public")
            return scale_to_ball(X, fmap.ranges, p["feature_clip"]), fmap
        numeric = None if mask is None or not mask.any() else np.flatnonzero(~mask)
        ranges, q, p["epsilon"], p["delta"] = private_ranges_within(
            X if numeric is None else _Columns(X, numeric), p["epsilon"], _delta(p, n), adjacency=p["adjacency"],
            seed=execution.random_state, secure_mode=execution.secure_mode, recorded=recorded, warn=not auto)
        if numeric is not None:  # the indicators' public [0, 1] beside the numeric columns' private ranges
            low, high = np.zeros(mask.size), np.ones(mask.size)
            low[numeric], high[numeric] = ranges
            ranges = (low, high)
            q["public_indicator_columns"] = int(mask.sum())
        events.append(QueryEvent.of("feature_range", q))
        if auto:
            replayed = recorded_part(recorded, "feature_range") is not None
            scaled, why = _scaling(q, replayed=replayed)
            if not replayed:  # (a replayed answer stays as its checkpoint recorded it: the resume compares them)
                q["decision"], q["scaled"] = why, scaled
            if not scaled:
                return X, fmap
        kind = "private"
    else:
        ranges, kind = requested, "public"
    fmap = replace(fmap, ranges=ranges, ranges_kind=kind)
    return scale_to_ball(X, ranges, p["feature_clip"]), fmap


def _scaling(q: dict, replayed: bool) -> tuple[bool, str]:
    """``feature_range="auto"``'s decision from the range query's answer ``q`` (post-processing of the
    charged answer, nothing else) and why.  A ``replayed`` answer (a resumed checkpoint's) keeps the
    decision its run took, whatever this version's rule says: the iterate was trained on those rows."""
    if replayed and "scaled" in q:
        return bool(q["scaled"]), q.get("decision", "")
    if replayed and "decision" in q:  # recorded before "scaled" was: every scaled run's reason says so
        return "were scaled" in q["decision"], q["decision"]
    scaled, why = scaling_decision(q)
    if scaled and q["uninformative_features"]:  # said in the certificate, not warned: the common case
        what = "numeric columns" if "public_indicator_columns" in q else "columns"
        why += (f"; the {q['uninformative_features']} of {len(q['scales'])} {what} the query did not see took "
                f"the lower median of the ranges read at its strict floor for those seen there "
                f"(±{q['unseen_scale']:g}): public bounds (feature_range=(low, high)) would replace the guess")
    return scaled, why


class _Columns:
    """Some columns of a table, read a block of rows at a time (``exponent_histogram``'s access): the
    numeric columns a private range query sees when the others are declared indicators."""

    def __init__(self, X, columns):
        self.X, self.columns = X, columns
        self.shape = (np.shape(X)[0], len(columns))

    def __getitem__(self, rows):
        return np.asarray(self.X[rows])[:, self.columns]


def _center(X, declared: Declared, p: dict, n: int, execution: Execution, recorded, events, fmap, names):
    """Step 2: the rows minus a DP mean, clipped to the radius R_c it gives (R_c becomes the
    training's clip, and s = R_c/4 under ``intercept_auto``); described, not formed."""
    if declared.center != "private":
        return X, fmap
    from .train.rows import CenteredRows

    center, clip, q, p["epsilon"], p["delta"] = private_center_within(
        X, p["epsilon"], _delta(p, n), radius=p["feature_clip"], adjacency=p["adjacency"],
        seed=execution.random_state, secure_mode=execution.secure_mode, recorded=recorded, names=names,
        warn=False)  # (its dominant columns are recorded; the estimators and the CLI say them in their one line)
    events.append(QueryEvent.of("center", q))
    if center is None:  # (not centered: the rows as they are, the trainer clips them)
        return X, fmap
    X = CenteredRows(X, center, p["feature_clip"])  # the trainer reads X a batch at a time
    if declared.intercept_auto:
        p["intercept_scaling"] = auto_intercept_scaling(clip, declared.task)
    p["feature_clip"] = clip
    return X, replace(fmap, center=center)


def _ovr(loss) -> bool:
    base = getattr(loss, "base", loss)
    return isinstance(base, OneVsRestLogistic)


def _prior(y, loss, declared: Declared, p: dict, n: int, execution: Execution, recorded, events):
    """Step 2½ (classification, ``declared.prior``): the class counts (charged), whose prior is the
    run's start, and the release check's budget, reserved (:mod:`noisysgd.prior`)."""
    if not declared.prior:
        return None
    from .gdp import gdp_mu

    k = 2 if len(loss.param_shape(0)) == 1 else loss.param_shape(0)[1]
    target_mu = gdp_mu(declared.epsilon, declared.delta if declared.delta is not None else default_delta(n))
    prior, q, p["epsilon"], p["delta"] = class_prior_within(
        y, k, p["epsilon"], _delta(p, n), adjacency=p["adjacency"], seed=execution.random_state,
        secure_mode=execution.secure_mode, recorded=recorded, target_mu=target_mu)
    events.append(QueryEvent.of("class_prior", q))
    check, p["epsilon"], p["delta"] = reserve_check(p["epsilon"], p["delta"], adjacency=p["adjacency"],
                                                    target_mu=target_mu)
    asked = recorded_part(recorded, "release_check")
    if asked is not None and "noisy_difference" in asked:  # a resumed fit whose check was answered: not again
        check.update(noisy_difference=asked["noisy_difference"], kept_model=asked["kept_model"], replayed=True,
                     **({"margin": asked["margin"]} if "margin" in asked else {}))
    events.append(QueryEvent.of("release_check", check))
    return prior


def _search_epsilon(p: dict, spent: list) -> float | None:
    """The ε the configuration search calibrates its candidates to, given the queries ``spent``
    that the defaults ask on their own (the automatic range query, the class prior, the release
    check): the run's ε once the final calibration composes them (GDP-like: the run keeps
    √(μ² − Σμ_q²) of the μ it would have without them), not basic composition's ε − Σε_q, which
    small-μ Gaussians make far lower (at ε = 0.5 the three would leave the search 0.25 and a run
    chosen for it, where the composed run gets about 0.47).  The run's own calibration and its
    certificate meet the total whatever the search assumed (:func:`fit_private`); the queries the
    user asks for (``center``, ``feature_range="private"``) and the curvature keep basic
    composition's share, as the search was designed with them.  None: no such query."""
    if not spent or p["epsilon"] is None:
        return None
    from .gdp import gdp_epsilon, gdp_mu_estimate

    eps = p["epsilon"] + sum(e.epsilon for e in spent)
    delta = p["delta"] + sum(e.delta for e in spent)
    mu = gdp_mu_estimate(eps, delta)  # what the search aims at, not a mechanism's noise
    left = math.sqrt(max(mu * mu - sum(e.mu ** 2 for e in spent), 0.0))
    return min(max(gdp_epsilon(left, p["delta"]), p["epsilon"]), eps) if left > 0 else p["epsilon"]


def _checked_release(fit: PrivateFit, X, y, loss, prior, events, p: dict, execution: Execution, d: int) -> PrivateFit:
    """Step 6: the release check (:func:`noisysgd.prior.release_check`, its budget reserved and
    composed before the run): the model, or the prior where the model did not beat it by the margin
    :func:`noisysgd.prior.check_margin` reads off the released prior."""
    check = next(e.details for e in events if e.kind == "release_check")
    margin, why = check_margin(prior)  # (a function of the released prior: post-processing)
    if check.get("replayed"):  # (the answer a checkpoint recorded: one query, one answer)
        kept = bool(check["kept_model"])
        if check.get("margin", CHECK_MARGIN) != margin:  # (recorded by a version with another rule, or before
            margin = check.get("margin", CHECK_MARGIN)   # the margin was recorded: +CHECK_MARGIN then)
            why = "the margin the recorded check was decided at"
    else:
        right = rows_right(fit.result.coef, X, y, feature_clip=p["feature_clip"],
                           intercept_scaling=p["intercept_scaling"], prior_class=int(np.argmax(prior)))
        kept = release_check(*right, check, margin=margin, seed=execution.random_state,
                             secure_mode=execution.secure_mode)
    certificate = fit.certificate
    certificate["release_check"] = {
        **{k: check[k] for k in ("mu", "epsilon", "delta", "noise_std", "noisy_difference", "query", "citation")},
        "margin": margin, "margin_rule": why,
        "released": (("the model: it beat the class prior on the check"
                      if check["noisy_difference"] >= CHECK_MARGIN * check["noise_std"] else
                      "the model: it was not behind the class prior on the check by more than "
                      f"{-margin:g} noise std (the margin its recorded check was decided at)") if kept else
                     "the class prior (coefficients 0, the intercept at its log-odds): the model did not beat "
                     "it on the check"),
        "kept_model": kept}
    if kept:
        return fit
    cert = certificate.get("certificate") or {}
    if "released" in cert:  # what is released is the prior now: the certificate says so, and what it replaced
        cert["released"] = (f"the class prior (coefficients 0): the release check replaced the run's output, "
                            f"{cert['released']}")
    W = prior_start(prior, loss.param_shape(d), p["intercept_scaling"], ovr=_ovr(loss))
    warnings.warn("the model did not beat the majority class on a private check of its training rows "
                  f"(noisy difference {check['noisy_difference']:+.1f} rows, noise std {check['noise_std']:.3g}); "
                  "the class prior was released instead (coefficients 0). Raise epsilon or train on more rows: "
                  "at this noise no model beat it", UserWarning, stacklevel=2)
    return replace(fit, result=replace(fit.result, coef=W))
