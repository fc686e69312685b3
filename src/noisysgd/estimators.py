"""scikit-learn estimators: private linear models with a privacy certificate.

:class:`NoisySGDClassifier` (binary or multiclass logistic regression) and
:class:`NoisySGDRegressor` (Huber or squared loss) take a privacy target
(``epsilon``, ``delta``), calibrate the noise of the exact run they will
execute with the accountant (:func:`noisysgd.calibrate`, best sound analysis
by default), train it with :func:`noisysgd.train.train`, and keep the
certificate in ``privacy_report_``.  The hidden-state analyses certify the
*final model only*: nothing else of the training (iterates, losses) is
exposed.

Secure randomness (``secure_mode=True``): the noise, the batches and the
start come from the operating system's CSPRNG and ``random_state`` must be
None.  Checkpoints (``checkpoint=PATH``): ``fit`` writes the run's state
every ``checkpoint_every`` epochs; if the file exists when ``fit`` starts,
``fit`` resumes the run it holds (bit-identical to an uninterrupted fit with
the same seed; refused, naming what differs, if it is not this run on this
data), and the file is deleted once ``fit`` has finished.  **A checkpoint
holds a hidden iterate, which the certificate assumes is never released:
keep it as secret as the training data.**

scikit-learn conventions: ``__init__`` only stores parameters; they are
validated in ``fit``; fitted attributes end with ``_``; randomness comes from
``random_state``.  Some of scikit-learn's estimator checks do not fit a
private estimator — see :data:`EXPECTED_FAILED_CHECKS`.

Preprocessing is either fixed before looking at the data (``feature_clip``;
``target_bound`` for regression; ``feature_range``, public bounds of the
features; ``categorical``, declared categories one-hot encoded as ``noisysgd
train --categorical`` does) or a differentially private query whose cost the certificate
includes (``feature_range="private"``; ``center="private"``, the
classifier's default when ``epsilon`` is given: the rows minus a private
mean).  Features are clipped to norm ``feature_clip`` (in training and
prediction alike) and a bias coordinate is appended; scaling features with
statistics of the training data (e.g. ``StandardScaler``) would leak them
outside the certificate — a :class:`~noisysgd.train.PrivacyLeakWarning`
says so when such a scaler precedes the estimator in a ``Pipeline``
(:mod:`noisysgd.preprocessing`).  The set of class labels is taken from
``y`` and treated as public.

Configuration: ``epochs``, ``batch_size``, ``batching`` and ``alpha`` default
to ``"auto"``: chosen from public quantities (n, d, the number of classes, ε, δ, the
feature clip, the loss constants) and, on data large enough, a private curvature estimate
(:mod:`noisysgd.curvature`, charged) by :func:`noisysgd.config.auto_config` (``privacy_report_["config"]``).
When a choice of the user makes every hidden-state analysis refuse the run
(or lose to composition) and a hidden-state-friendly alternative would need
much less noise, ``fit`` issues one :class:`CompositionFallbackWarning`
naming the choice and the noise factor.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from .accountant import composed_epsilon, epsilon as epsilon_report
from .config import CompositionFallbackWarning
from .pipeline import Declared, auto_intercept_scaling, classification_loss, fit_declared
from .planning import BASELINES
from .preprocessing import check_feature_range, recorded_query
from .scalers import fit_rows, predict_rows, warn_about_private_preprocessing
from .params import check_choice, check_common, check_real, is_auto, param_error
from .run import Run
from .train import ClassWeighted, Huber, Squared, encode_labels
from .io import indicator_columns
from .train.diagnostics import fit_warnings, mean_dominant, remedy
from .train.losses import FLOATS as _FLOATS  # float32 features are kept (read a batch at a time)
from .train.rows import block_rows as _score_rows  # rows scored at a time (4 MiB temporaries)
from .private_fit import Execution, resolve_learning_rate

__all__ = ["NoisySGDClassifier", "NoisySGDRegressor", "EXPECTED_FAILED_CHECKS", "classification_loss",
           "CompositionFallbackWarning", "auto_intercept_scaling"]

#: scikit-learn checks that a differentially private estimator cannot pass,
#: and why (used by the tests with ``parametrize_with_checks``).
EXPECTED_FAILED_CHECKS = {
    "check_class_weight_classifiers": (
        "asks that weights {0: 1000, others: 1e-4} make > 87% of ~100 predictions class 0; the weights are "
        "normalized to at most 1 (the others then weigh 1e-7: every bound holds unchanged), and at the default "
        "(1, δ)-DP the noise on so few examples can dominate"
    ),
    "check_classifiers_train": (
        "asks for accuracy > 0.83 on ~100 noisy examples; at the default (1, δ)-DP the calibrated "
        "noise can dominate that little data (whether it passes depends on the noise drawn and the "
        "configuration chosen; with epsilon=1e4 it passes: see the tests)"
    ),
    "check_regressors_train": (
        "asks for R² > 0.5 on ~200 examples; at the default (1, δ)-DP the noise dominates (with "
        "epsilon=1e4 the check passes: see the tests)"
    ),
}


#: The classifier's default ``center``: "private" (:func:`noisysgd.preprocessing.private_center`)
#: when epsilon is given, None when the noise multiplier is.
CLASSIFIER_CENTER = "auto"

#: A CompositionFallbackWarning names an alternative only if, at the run's noise, it is certified at an
#: epsilon at least this factor below the run's.
FALLBACK_FACTOR = 1.25


class _NoisySGDBase(BaseEstimator):
    """Parameters and fit shared by the classifier and the regressor."""

    def _common(self) -> dict:
        return check_common(self)

    def _release(self) -> str:
        """``average`` checked: "tail-average" (True), "last" (False) or "auto"."""
        if is_auto(self.average):
            return "auto"
        if not isinstance(self.average, bool):
            raise param_error(self, "average", self.average, "True, False or 'auto'")
        return "tail-average" if self.average else "last"

    #: whether ``intercept_scaling="auto"`` (:func:`auto_intercept_scaling`) and ``clip_norm="auto"``
    #: (:data:`noisysgd.config.CLIP_FACTOR`) are accepted
    _INTERCEPT_AUTO = _CLIP_AUTO = False

    def _intercept_scaling(self) -> float:
        """The bias coordinate s of x̄ (``intercept_scaling``, "auto" resolved)."""
        value = self.intercept_scaling
        if is_auto(value) and self._INTERCEPT_AUTO:
            return auto_intercept_scaling(check_real(self, "feature_clip", self.feature_clip))
        return check_real(self, "intercept_scaling", value, auto_only=self._INTERCEPT_AUTO)

    def _validated(self, X, y, **kw):
        """``X`` and ``y`` checked (``validate_data``), X one-hot encoded as ``categorical`` declares
        (:func:`noisysgd.scalers.fit_rows`: the encoding of ``noisysgd train --categorical``)."""
        X, y, self._encoding, self._names = fit_rows(self, X, y, dtype=_FLOATS, **kw)
        if self._encoding is not None:
            self.encoded_feature_names_ = np.asarray(self._encoding.names, dtype=object)
        elif hasattr(self, "encoded_feature_names_"):  # (a refit without categorical)
            del self.encoded_feature_names_
        return X, y

    def _fit(self, X, y, loss, *, target_bound=None):
        """The private pipeline (:func:`noisysgd.pipeline.fit_declared`) on this estimator's
        parameters, translated into a :class:`~noisysgd.pipeline.Declared`; sets the fitted
        attributes and returns the released coefficients."""
        p = self._common()
        warn_about_private_preprocessing(self)
        declared = self._declared(p, target_bound)
        out = fit_declared(
            X, y, loss, declared,
            Execution(random_state=self.random_state, dtype=np.dtype(p["dtype"]), secure_mode=self.secure_mode,
                      checkpoint=self.checkpoint, checkpoint_every=p["checkpoint_every"],
                      resume=self.checkpoint is not None, keep_checkpoint=False),
            names=self._names, recorded=recorded_query(self.checkpoint))  # a resumed fit reuses the queries' answers
        for w in out.deferred:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        fit = out.fit
        self.fit_ = fit
        self.noise_multiplier_ = fit.noise_multiplier
        self.epsilon_, self.delta_ = fit.total  # the model and the queries (composed by fit_private's certify)
        self.privacy_report_ = fit.certificate
        if self._encoding is not None:  # declared, so free: the certificate says what was encoded
            self.privacy_report_["encoding"] = self._encoding.record()
        self.run_ = fit.run
        self.n_iter_ = out.schedule.epochs
        fmap = out.feature_map
        self.feature_map_ = fmap  # raw rows to the rows as trained on (public: the queries' answers, bounds)
        self._feature_range = fmap.ranges
        self._feature_clip = fmap.clip  # the clip of the rows the ranges map, before any centering
        self.center_ = fmap.center
        self.feature_clip_ = out.feature_clip  # the clip of the training rows (after centering: R_c)
        self.intercept_scaling_ = out.intercept_scaling
        if p["epsilon"] is not None:
            self._warn_if_composition(fit, {"epochs": out.schedule.epochs, "learning_rate": out.schedule.learning_rate,
                                            "epsilon": fit.certificate["calibration"]["target_epsilon"]},
                                      loss, target_bound, out.query)
        return fit.result.coef

    def _declared(self, p: dict, target_bound) -> Declared:
        """The parameters checked (``p``: :func:`noisysgd.params.check_common`) as the pipeline's
        :class:`~noisysgd.pipeline.Declared`: ``feature_range`` and ``center`` checked here, where
        the messages can name them."""
        requested = getattr(self, "feature_range", None)
        if isinstance(requested, str):
            if requested not in ("private", "auto"):
                raise param_error(self, "feature_range", requested,
                                  "None, a pair (low, high) of public bounds, 'private' or 'auto'")
            if p["epsilon"] is None and requested == "private":
                raise param_error(self, "feature_range", requested,
                                  "None, 'auto' or public bounds when noise_multiplier is given ('private' spends "
                                  "a share of epsilon, so it needs epsilon)")
            frange = requested if p["epsilon"] is not None else None
        else:
            frange = check_feature_range(self, requested, self.n_features_in_)  # (the columns as given)
            if self._encoding is not None:
                frange = self._encoding.ranges(frange)  # a category's 0/1 column in [0, 1]
        return Declared.from_params(
            p, task="regression" if target_bound is not None or isinstance(self, RegressorMixin) else "classification",
            intercept_auto=is_auto(self.intercept_scaling) and self._INTERCEPT_AUTO, target_bound=target_bound,
            analyses=self.analysis, feature_range=frange, center=self._center_rule(p), prior=self._prior_rule(p),
            indicators=None if self._encoding is None else indicator_columns(self._encoding.input_names,
                                                                             self._encoding.categorical))

    def _prior_rule(self, p) -> bool:
        """``prior`` checked and resolved (classifiers only): "auto" counts the class prior and
        checks the release when a target epsilon is given and no class weights are declared."""
        rule = getattr(self, "prior", None)
        if rule is None:
            return False
        if not is_auto(rule):
            raise param_error(self, "prior", rule, "'auto' or None")
        return p["epsilon"] is not None and getattr(self, "class_weight", None) is None

    def _center_rule(self, p) -> str | None:
        """``center`` checked and resolved: None or "private" ("auto": "private" when a target
        epsilon is given, None when the noise multiplier is; "private" needs epsilon, it spends a
        share of it)."""
        rule = getattr(self, "center", None)
        if is_auto(rule):
            return "private" if p["epsilon"] is not None else None
        if rule is None or (isinstance(rule, str) and rule == "private"):
            if rule == "private" and p["epsilon"] is None:
                raise param_error(self, "center", rule,
                                   "None or 'auto' when noise_multiplier is given ('private' spends a share "
                                   "of epsilon, so it needs epsilon)")
            return rule
        raise param_error(self, "center", rule, "None, 'private' or 'auto'")

    def _warn_if_composition(self, fit, p, loss, target_bound, query=None):
        """One :class:`CompositionFallbackWarning` when the calibration ended on a
        composition bound because every hidden-state analysis refused the run,
        naming the choice that lost them and what it costs: the epsilon at which the run's own noise
        would be certified with that choice changed (one report, composed with the preprocessing
        ``query`` as the run was; nothing is calibrated inside a warning)."""
        report = fit.report
        best = report.best
        if best is None or best.analysis not in BASELINES:
            return
        hidden = {k: r for k, r in report.results.items() if k not in BASELINES}
        if not hidden:  # composition only, asked for (``analysis=``) or by ``average=True``: nothing was lost
            return
        chosen = (self.privacy_report_.get("config") or {}).get("chosen") or {}
        if chosen.get("regime") == "amplified composition":
            # the automatic configuration chose DP-SGD's regime over every hidden-state candidate
            # composition is the point, not a fallback
            self.privacy_report_["config"]["regime"] = (
                f"amplified composition, chosen by the search: its proxy {chosen['proxy']:.4g} was the "
                f"smallest of every candidate; {best.analysis} certifies every iterate")
            return
        if self.batching in ("poisson", "sample") and not isinstance(self.learning_rate, str):
            # DP-SGD's regime, chosen on purpose: random batches and a step size of the user's,
            # certified by amplified composition; the report says so, no warning
            self.privacy_report_.setdefault("config", {})["regime"] = (
                "amplified composition: batching and learning_rate were given, the step size is free of the "
                f"hidden-state analyses' contraction limits, and {best.analysis} certifies every iterate")
            return
        refused = not any(r.applies and r.sound for r in hidden.values())
        run = fit.run
        epochs = p["epochs"]
        alternatives = []
        if run.batching not in ("cyclic", "full") and run.adjacency == "replace":
            # (add/remove admits no cyclic batches: Run refuses them)
            alternatives.append(({"batching": "cyclic"}, f"batching={run.batching!r}"))
        if run.strong_convexity == 0 and run.convex:
            alternatives.append(({"alpha": 0.01}, "alpha=0"))
        if (not isinstance(p["learning_rate"], str) and run.smoothness is not None
                and p["learning_rate"] > 0.5 / run.smoothness):
            alternatives.append(({"learning_rate": "auto"}, f"learning_rate={p['learning_rate']!r}"))
        if len(alternatives) > 1:
            both = {}
            for change, _ in alternatives:
                both.update(change)
            alternatives.append((both, " and ".join(name for _, name in alternatives)))
        reasons = "; ".join(f"{k}: {r.reason}" for k, r in hidden.items()
                            if r.reason and k in ("shifted-interpolation", "ye-shokri", "ye-shokri-reshuffle"))
        why = reasons or "see privacy_report_['analyses']"
        z = fit.noise_multiplier
        eps_now = fit.total[0]
        for change, name in alternatives:
            # advice from one report of the alternative at the run's own noise (no calibration): the
            # epsilon that noise would be certified at, composed with the queries as the run was
            alt = self._alternative_run(run, epochs, p, change).replace(noise_multiplier=z)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    alt_report = epsilon_report(alt, delta=report.delta, analyses=self.analysis)
                except ValueError:
                    continue
            if alt_report.best is None or alt_report.best.analysis in BASELINES:
                continue
            eps_alt = alt_report.epsilon if query is None else composed_epsilon(alt_report, query)
            if not eps_alt * FALLBACK_FACTOR <= eps_now:
                continue  # the hidden-state bound of the alternative would not save much
            fix = ", ".join(f"{k}={v!r}" for k, v in change.items())
            warnings.warn(
                f"{type(self).__name__}: with {name} "
                + ("no hidden-state analysis covers the run" if refused else
                   "every hidden-state bound is weaker than composition")
                + f", so the noise was calibrated by composition ({best.analysis}, as if every iterate were "
                f"released): noise multiplier {z:.4g}; the same noise with {fix} is certified at epsilon "
                f"{eps_alt:.4g} by {alt_report.best.analysis}, not {eps_now:.4g}, so it needs less noise for the "
                f"same target. Why: {why}",
                CompositionFallbackWarning, stacklevel=4)
            return
        if not refused or run.adjacency == "add-remove":
            # a hidden-state bound applies and composition was simply tighter; or add/remove, whose
            # minibatches are Poisson (Run refuses the others): composition is the designed certificate
            return
        if not run.convex:
            why = ("the clipped loss is not convex (clip_norm below the loss's Lipschitz constant; "
                   "multi_class='ovr' clips a multiclass model and stays convex)")
        warnings.warn(
            f"{type(self).__name__}: no hidden-state analysis covers the run, so the noise was "
            f"calibrated by composition ({best.analysis}, as if every iterate were released): noise "
            f"multiplier {z:.4g}. Why: {why}",
            CompositionFallbackWarning, stacklevel=4)

    @staticmethod
    def _alternative_run(run, epochs, p, change) -> Run:
        fields = {f.name: getattr(run, f.name) for f in dataclasses.fields(run)}
        fields.pop("steps")
        lam = change.get("alpha", run.strong_convexity)
        if "alpha" in change and run.smoothness is not None:
            fields["smoothness"] = run.smoothness - run.strong_convexity + lam
        fields["strong_convexity"] = lam
        if "batching" in change:
            fields["batching"] = change["batching"]
        rule = change.get("learning_rate", p["learning_rate"])
        if isinstance(rule, str) and fields["smoothness"] is not None:
            fields["learning_rate"] = resolve_learning_rate(rule, fields["smoothness"], lam)
        return Run.from_epochs(epochs=epochs, **fields)

    def _scores(self, X, validated=False):
        """Scores of the rows as trained on (scaled, centered, clipped), a block at a time."""
        check_is_fitted(self, "coef_")
        X = X if validated else predict_rows(self, X, getattr(self, "_encoding", None), dtype=_FLOATS)
        step = _score_rows(X.shape[1])
        return np.concatenate([self._block_scores(X[i:i + step]) for i in range(0, X.shape[0], step)])

    def _block_scores(self, X):
        fmap = getattr(self, "feature_map_", None)
        return self.fit_.result.scores(X if fmap is None else fmap(X))


class NoisySGDClassifier(ClassifierMixin, _NoisySGDBase):
    """Logistic regression trained with Noisy-SGD, (ε, δ)-DP for the released model.

    Parameters
    ----------
    epsilon : float or None, default=1.0
        Privacy target ε > 0; the noise multiplier is calibrated to it.  Set
        to None and give ``noise_multiplier`` to train with a fixed noise and
        report ε instead.
    delta : float or None, default=None
        δ in (0, 1); None means min(1e-5, 1/(10·n)).  A warning is issued
        when δ ≥ 1/n.
    noise_multiplier : float or None, default=None
        z > 0 (noise std z·L/b on the mean gradient), exclusive with ``epsilon``.
    epochs : int or "auto", default="auto"
        Passes over the data (steps per epoch as in :class:`noisysgd.Run`).
    batch_size : int, None or "auto", default="auto"
        b >= 1 (capped at n); ignored for ``batching="full"``.  An explicit
        batch size with ``batching="auto"`` means ``batching="cyclic"``.
    batching : {"auto", "cyclic", "shuffle", "shuffle-once", "sample", "poisson", "full"}, default="auto"
        How batches are formed (:data:`noisysgd.BATCHING_SCHEMES`).  ``cyclic``
        and ``full`` are covered by the most hidden-state analyses; with the
        others every hidden-state analysis may refuse the run, and the noise
        is then calibrated by composition (often ~10× larger; a
        :class:`CompositionFallbackWarning` says so and by how much).

        **"auto"** (the default for ``epochs``, ``batch_size``, ``batching``
        and ``alpha``): the parameters left to "auto" are chosen by
        :func:`noisysgd.config.auto_config` from public quantities (n, d, the
        number of classes, ε, δ, ``feature_clip``, the loss constants) and, on
        data large enough, a private curvature estimate (charged to the
        certificate: :mod:`noisysgd.curvature`) by the smallest excess-risk proxy over a
        small grid, each candidate's noise calibrated by the accountant; the
        explicit ones are kept.  The choice, its proxy terms and every
        candidate are in ``privacy_report_["config"]``.  The pre-auto run was epochs=100,
        batch_size=256, batching="cyclic", alpha=0.01 (give them explicitly).
    learning_rate : float, "auto" or "max", default="auto"
        Constant step size η.  "auto" depends on the regime of the run (``privacy_report_
        ["config"]["chosen"]["regime"]``): in a run certified by a hidden-state analysis it is
        1/(2·smoothness), within every analysis' contraction limit; in a run the search chose
        for amplified composition (which needs no contraction) it is chosen for optimisation:
        :data:`~noisysgd.config.STEP_FACTOR` times the smooth bound's η* = 1/(M + λ + √(VT/2)/B),
        at most 0.98/(M + λ), and with ``clip_norm="auto"`` :data:`~noisysgd.config.CLIP_STEP` /
        :data:`~noisysgd.config.CLIP_FACTOR` (5×) that (``config["clip"]`` has both steps).
        "max" is 0.98·2/(alpha + smoothness), just below the largest step Ye & Shokri's
        analysis allows (faster training, stronger contraction).  A number is used as given
        in any regime (no clamp outside the hidden-state analyses' limits: an analysis whose
        limit it exceeds refuses the run).
    alpha : float or "auto", default="auto"
        L2 regularization λ >= 0: the strong convexity the hidden-state
        analyses of strongly convex losses need (0: only convex analyses —
        with cyclic batches none applies and composition is used).
    feature_clip : float, default=1.0
        R > 0: every feature vector is scaled to norm at most R (in fit and
        predict).  Fix it from knowledge of the feature range, not the data.
    clip_norm : float, None or "auto", default="auto"
        Per-example clipping norm L of the unregularized gradient; None uses
        the loss's natural Lipschitz constant (no clipping); "auto" does too,
        except in a run the search chose for amplified composition, which
        clips at :data:`noisysgd.config.CLIP_FACTOR` of it (the certificate's
        ``config["clip"]`` says so).  With ``multi_class="softmax"`` a clip
        norm below √(2(R²+1)) makes the loss non-convex (only composition
        applies, ``alpha`` must be 0): use ``multi_class="ovr"`` to clip a
        multiclass model convexly.
    diameter : float or None, default=None
        D: iterates are projected onto the ball of diameter D centred at 0
        (``altschuler-talwar`` needs it).
    multi_class : {"softmax", "ovr"}, default="softmax"
        Multiclass loss: cross-entropy, or one binary logistic loss per class.
    analysis : "best" or list of str, default="best"
        Analyses to calibrate with (:data:`noisysgd.ANALYSES`); "best" takes
        the tightest sound one.
    adjacency : {"replace", "add-remove"}, default="replace"
        ``add-remove`` takes batching="poisson" only and needs ``public_n``.
    class_weight : dict or None, default=None
        {class: weight}, declared publicly (classes not named weigh 1), and
        normalized so that the largest weight is 1: each example's loss is
        scaled by its class's weight ≤ 1, so the gradients stay within the clip
        norm and every bound holds unchanged (up-weighting a rare class
        therefore down-weights the others).  ``"balanced"`` is refused: it
        needs the class counts, which are private.
    average : bool or "auto", default="auto"
        True: release the mean of the second half of the iterates instead of
        the last one (averaged DP-SGD, De et al. 2022).  An average is a
        function of every iterate, so only the composition analyses certify
        it (the hidden-state ones cover the final model alone), and the
        automatic batching is Poisson.  "auto": that mean where the
        certificate rests on composition alone and the iterates have settled
        (the means of successive blocks of steps revert:
        :mod:`noisysgd.train.release`), the last iterate where they are still
        travelling or a hidden-state bound certifies the run — read off the
        iterates, so free; no checkpointed fit averages.  False: the last
        iterate.  The certificate says which output was released and why.
    public_n : int or None, default=None
        The dataset size declared public, required under ``add-remove``: the
        sampling rate b/public_n, the number of steps and the default delta
        are fixed from it, so that a dataset with one row more or fewer runs
        the same mechanism (the data may hold any number of rows).  Under
        ``replace`` n is public: None, or the number of rows.
    initialization : {"fixed", "gaussian"}, default="fixed"
    dtype : {"float64", "float32"}, default="float64"
    random_state : int, numpy.random.Generator or None, default=None
        Seeds the batches, the noise and the start (numpy generators).  Must
        be None with ``secure_mode=True``.
    secure_mode : bool, default=False
        Draw the noise, the batches and the start from the operating
        system's CSPRNG (``os.urandom``) instead of seeded numpy generators:
        nobody can reproduce or predict the noise, not even with the code
        and a seed.  Floating-point noise is still not exactly Gaussian
        (Mironov 2012; Jin et al. 2022) and timing channels are not closed.
    checkpoint : str, path-like or None, default=None
        A file for the run's checkpoint.  If it exists when ``fit`` starts,
        ``fit`` resumes the run it holds (exactly; refused with an error
        naming what differs if the parameters or the data differ, or if it
        holds a finished run of fewer epochs); it is deleted once ``fit``
        has finished.  **It holds a hidden iterate, which the certificate
        assumes is never released: keep it as secret as the training data.**
    checkpoint_every : int or None, default=None
        Epochs between checkpoints (None: every epoch).
    feature_range : None, pair (low, high), "private" or "auto", default="auto"
        Public bounds of the features (numbers, or arrays of length
        n_features_in_), declared from knowledge of the data's domain, never
        computed from the data: each feature is clipped to [low, high],
        mapped to [-1, 1] and scaled so that a row halfway across its ranges has norm
        ``feature_clip`` (:func:`noisysgd.preprocessing.scale_to_ball`; no privacy cost),
        in fit and predict.  Use it instead of a ``StandardScaler`` (whose
        statistics of the private data the certificate does not cover: a
        ``PrivacyLeakWarning`` says so when one precedes the estimator in a
        ``Pipeline``).  ``"private"``: ranges (−s_j, s_j) from a
        differentially private query
        (:func:`noisysgd.preprocessing.private_feature_ranges`) spending 10 %
        of epsilon and delta; ``epsilon_``, ``delta_`` and the certificate
        then cover the model and the ranges together: the query (a
        Gaussian mechanism) is composed with the training bound in GDP or
        RDP where it has that form (basic composition otherwise), and the
        training noise is calibrated to that composed total — the query
        then costs the training little noise (0.5 % more than no query, in
        a case measured at ε = 2).
        Needs ``epsilon``; pays from about 10⁴ examples.  ``"auto"`` (the
        default; None when ``noise_multiplier`` is given): ask the same query,
        then decide from its answer alone whether to scale the rows by it or
        keep them as given (:func:`noisysgd.preprocessing.scaling_decision`:
        keep them where no column stands out of its noise, or where three or
        more do and the largest scale is within a factor 2 of their lower
        median; scale them otherwise) — raw tables in mixed units get
        scaled, rows seen to share one scale are left alone, and the
        query is charged either way (about 0.5 % more noise when unused);
        ``privacy_report_["preprocessing"]`` says what was decided and why.
    intercept_scaling : float or "auto", default="auto"
        s > 0, the constant appended to every clipped feature vector as the
        bias coordinate (scikit-learn's liblinear convention: the intercept
        is s times its weight).  The gradient bound L grows with
        √(R² + s²), so s = R (or 1 with R = 1) spends half of the squared
        bound on one coordinate, and every coordinate's noise grows with
        it.  **"auto"** is R/4: the noise is that of R alone up to 3 %
        (√(1 + 1/16)), and a step moves the intercept's score s²/R² = 1/16
        as much as a feature weight's (measured, ``benchmarks/auto_config.py``: digits at ε = 1, 0.589 →
        0.681; see docs/accuracy.md).  Set 1.0 for the behaviour before
        "auto".
    center : None, "private" or "auto", default="auto"
        ``"auto"``: ``"private"`` when ``epsilon`` is given, None (no
        centering) when ``noise_multiplier`` is.  ``"private"``: subtract a
        differentially private mean of the rows (clipped to ``feature_clip``
        R) in fit and predict, and clip the centered rows to R_c, an
        estimate of their root-mean-square norm made from the released mean
        (:func:`noisysgd.preprocessing.private_center`).  Rows of
        non-negative features (pixels, counts, raw tabular values) share one
        large direction, the mean; once it is removed, the clip is spent on
        what tells the examples apart.  The mean query (a Gaussian
        mechanism) gets 0.3 of the target's μ (GDP) and a tenth of δ;
        ``epsilon_``, ``delta_`` and the certificate cover the model and the
        mean together, composed as for ``feature_range="private"``, and the
        training noise is calibrated to that total (about 5 % more noise
        than with no query).  Measured (docs/accuracy.md): digits at ε = 1,
        0.681 → 0.806.  Needs ``epsilon``.

    categorical : dict or None, default=None
        Categorical columns and their categories, declared publicly (as
        ``noisysgd train --categorical``): ``{column: [category, ...]}``, each
        column a DataFrame column's name or a position (``{"color": ["red",
        "green"], 3: [0, 1, 2]}``; a cell matches a category as text stripped
        of blanks, or as a number: 1 and 1.0 are one category).  Each becomes one
        0/1 column per declared category, in the declared order, named
        ``column=category`` (``encoded_feature_names_``; the columns of
        ``coef_``), in fit and predict — the CLI's encoding
        (:func:`noisysgd.io.one_hot`): nothing is read off the data, so it
        costs no privacy, and ``privacy_report_["encoding"]`` records it.  A
        cell outside its column's categories is refused, naming the column,
        row and cell; so is a column of text not declared (with how to
        declare it).  With ``feature_range``, a category's 0/1 column lies in
        [0, 1] (the bounds given at a categorical column are not used).
    classes : list or None, default=None
        The labels, declared publicly before the data is seen (like
        diffprivlib's ``classes``): the model's outputs are these whatever
        the data holds, and a row with another label is refused.  None
        takes them from the data (``np.unique(y)``), which the certificate
        does not cover — one row with a label no other row has adds an
        output — and a :class:`~noisysgd.train.PrivacyLeakWarning` says so;
        ``privacy_report_["classes"]`` records which it was.
    prior : "auto" or None, default="auto"
        ``"auto"`` (with ``epsilon``, no ``class_weight``): count the classes
        privately (a Gaussian count, 0.1 of the target's μ) and start the
        run at their prior, so the first iterate already predicts the base
        rate; after training, a private check (0.2 of μ) counts the training
        rows the model gets right minus those the majority class gets right,
        and where that noisy count is under half its noise std the prior is released instead
        of the model (``coef_`` 0, ``intercept_`` its log-odds) with a
        warning: on a table without signal the model falls back to the prior
        rather than below it.  Both are charged to the certificate
        (``privacy_report_["release_check"]``; :mod:`noisysgd.prior`).
        None: neither (zeros as the start, the model always released).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The declared ``classes``, sorted (or the labels found in the data).
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
        s times the bias coordinate's weight.
    intercept_scaling_ : float
        The s used ("auto" resolved).
    center_ : ndarray of shape (n_features,) or None
        The private mean subtracted (None: not centered).  The scores are
        clip_{R_c}(clip_R(x) − center_)·coef_ + intercept_.
    feature_clip_ : float
        The clip of the training rows: ``feature_clip``, or R_c after centering.
    noise_multiplier_ : float
        The calibrated (or given) noise multiplier z.
    epsilon_ : float
        ε of the trained model at ``delta_`` under the best sound analysis.
    delta_ : float
    privacy_report_ : dict
        The privacy certificate (JSON-ready): the run, adjacency, δ, ε, every
        analysis' result, the assumptions the bound rests on and what the
        trainer enforced.
    run_ : noisysgd.Run
        The run that was accounted and executed.
    n_iter_ : int
        Epochs run.
    n_features_in_ : int
        The columns of X as given (before ``categorical``'s encoding).
    encoded_feature_names_ : ndarray of str
        Only with ``categorical``: the columns trained on (those of ``coef_``).

    Examples
    --------
    >>> import numpy as np
    >>> from noisysgd import NoisySGDClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(3000, 4)); y = (X[:, 0] - X[:, 1] > 0).astype(int)
    >>> clf = NoisySGDClassifier(epsilon=1.0, delta=1e-5, feature_clip=3.0, classes=[0, 1],
    ...                          random_state=0)
    >>> clf = clf.fit(X, y)
    >>> clf.epsilon_ <= 1.0, clf.score(X, y) > 0.9
    (True, True)
    >>> clf.privacy_report_["certificate"]["guarantee"].split(" for")[0]  # doctest: +ELLIPSIS
    '(0.99..., 1e-05)-DP'
    """

    _INTERCEPT_AUTO = _CLIP_AUTO = True

    def __init__(self, *, epsilon=1.0, delta=None, noise_multiplier=None, epochs="auto", batch_size="auto",
                 batching="auto", learning_rate="auto", alpha="auto", feature_clip=1.0, clip_norm="auto",
                 diameter=None, multi_class="softmax", analysis="best", adjacency="replace",
                 initialization="fixed", dtype="float64", random_state=None, secure_mode=False,
                 checkpoint=None, checkpoint_every=None, feature_range="auto", intercept_scaling="auto",
                 center=CLASSIFIER_CENTER, classes=None, public_n=None, average="auto", class_weight=None,
                 categorical=None, prior="auto"):
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.epochs = epochs
        self.batch_size = batch_size
        self.batching = batching
        self.learning_rate = learning_rate
        self.alpha = alpha
        self.feature_clip = feature_clip
        self.clip_norm = clip_norm
        self.diameter = diameter
        self.multi_class = multi_class
        self.analysis = analysis
        self.adjacency = adjacency
        self.initialization = initialization
        self.dtype = dtype
        self.random_state = random_state
        self.secure_mode = secure_mode
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every
        self.feature_range = feature_range
        self.intercept_scaling = intercept_scaling
        self.center = center
        self.classes = classes
        self.public_n = public_n
        self.average = average
        self.class_weight = class_weight
        self.categorical = categorical
        self.prior = prior

    def fit(self, X, y):
        """Calibrate the noise, train, and certify (see the class docstring)."""
        self._common()
        check_choice(self, "multi_class", self.multi_class, ("softmax", "ovr"))
        X, y = self._validated(X, y, ensure_min_samples=1)
        check_classification_targets(y)
        classes, encoded, source = encode_labels(y, self.classes)
        loss = self._class_weighted(classification_loss(classes.size, self.multi_class), classes.tolist())
        W = self._fit(X, encoded, loss)
        self.classes_ = classes
        self.privacy_report_["classes"] = {"source": source, "classes": classes.tolist()}
        if isinstance(loss, ClassWeighted):
            self.privacy_report_["class_weight"] = loss.record(classes.tolist())
        s = self.intercept_scaling_  # the score is clip(x)·W[:-1] + s·W[-1]
        if W.ndim == 1:
            self.coef_ = W[:-1][None, :].copy()
            self.intercept_ = s * W[-1:]
        else:
            self.coef_ = W[:-1].T.copy()
            self.intercept_ = s * W[-1]
        self._warn_if_near_chance(X, y)
        return self

    def _class_weighted(self, loss, labels):
        """``loss`` weighted by ``class_weight`` (:meth:`ClassWeighted.from_dict`), or as it is."""
        given = self.class_weight
        if given is None:
            return loss
        if isinstance(given, str):
            raise param_error(self, "class_weight", given,
                               "None or a dict {class: weight}: 'balanced' needs the class counts, which are "
                               "private; declare the weights instead (e.g. the inverse of a public prior)")
        if not isinstance(given, dict):
            raise param_error(self, "class_weight", given, "None or a dict {class: weight}")
        try:
            return ClassWeighted.from_dict(loss, given, labels)
        except LookupError:
            raise param_error(self, "class_weight", given,
                               f"a dict whose keys are among the classes {labels}") from None
        except ValueError:
            raise param_error(self, "class_weight", given, "a dict of positive finite weights") from None

    def _warn_if_near_chance(self, X, y) -> None:
        """:func:`noisysgd.train.diagnostics.fit_warnings` (raw columns taking the norm, unless the mean said it)."""
        if not (self.privacy_report_.get("release_check") or {}).get("kept_model", True):
            return  # the prior was released, and its warning said why: one line, not two
        mean = mean_dominant(self.privacy_report_)  # (recorded by the pipeline, said here: one line)
        raw = self._feature_range is None
        declared_raw = getattr(self, "feature_range", None) is None  # (the user's choice, not "auto"'s)
        predict = lambda rows: self._labels(self._scores(rows, validated=True))  # noqa: E731 (fit's rows, names checked)
        for line in fit_warnings(X, y, predict, who=f"{type(self).__name__}: ", raw=raw,
                                 clip=self._feature_clip,
                                 advice=lambda found, why=True: remedy((found or mean) if declared_raw else None,
                                                                       names=self._names, why=why),
                                 names=self._names, known=mean if raw else None):
            warnings.warn(line, UserWarning, stacklevel=3)

    def decision_function(self, X):
        """Scores of the (feature-clipped) examples: (n,) for two classes, else (n, k)."""
        return self._scores(X)

    def predict(self, X):
        return self._labels(self.decision_function(X))

    def _labels(self, scores):
        return self.classes_[(scores > 0).astype(int)] if scores.ndim == 1 else self.classes_[np.argmax(scores, axis=1)]

    def predict_proba(self, X):
        """Class probabilities of the model's own link (logistic, softmax, or
        one-vs-rest logistics normalized to sum to one)."""
        from scipy.special import expit, softmax

        scores = self.decision_function(X)
        if scores.ndim == 1:
            p = expit(scores)
            return np.column_stack([1.0 - p, p])
        if self.multi_class == "ovr":
            p = expit(scores)
            return p / p.sum(axis=1, keepdims=True)
        return softmax(scores, axis=1)

    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))


class NoisySGDRegressor(RegressorMixin, _NoisySGDBase):
    """Linear regression trained with Noisy-SGD, (ε, δ)-DP for the released model.

    Parameters are those of :class:`NoisySGDClassifier` except ``multi_class``, plus

    loss : {"huber", "squared"}, default="huber"
        Huber (bounded derivative: Lipschitz without a domain) or squared loss
        (needs ``clip_norm``, or ``diameter`` and ``target_bound``).
    huber_delta : float, default=1.0
        κ of the Huber loss.
    target_bound : float or None, default=None
        Y: labels are clipped to [−Y, Y] (fix it from knowledge of the target's
        range, not the data).
    intercept_scaling : float, default=1.0
        s > 0, the bias coordinate (see :class:`NoisySGDClassifier`); no
        "auto" here: a regression target's offset is often large, and a
        small s slows the intercept down.
    center : None, "private" or "auto", default=None
        As for :class:`NoisySGDClassifier` (off by default here: a regression
        target's offset is carried by the intercept, which a centered
        feature vector does not help).
    average : bool or "auto", default=False
        As for :class:`NoisySGDClassifier`; off by default here (the rule of
        "auto" was measured on classifiers only).

    Examples
    --------
    >>> import numpy as np
    >>> from noisysgd import NoisySGDRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(5000, 3)); y = X @ [0.5, -0.5, 0.25] + 0.1
    >>> reg = NoisySGDRegressor(epsilon=2.0, delta=1e-6, feature_clip=2.0, alpha=0.001,
    ...                         random_state=0).fit(X, y)
    >>> reg.epsilon_ <= 2.0, reg.score(X, y) > 0.8
    (True, True)
    """

    def __init__(self, *, epsilon=1.0, delta=None, noise_multiplier=None, epochs="auto", batch_size="auto",
                 batching="auto", learning_rate="auto", alpha="auto", feature_clip=1.0, clip_norm=None,
                 diameter=None, loss="huber", huber_delta=1.0, target_bound=None, analysis="best",
                 adjacency="replace", initialization="fixed", dtype="float64", random_state=None,
                 secure_mode=False, checkpoint=None, checkpoint_every=None, feature_range=None,
                 intercept_scaling=1.0, center=None, public_n=None, average=False, categorical=None):
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.epochs = epochs
        self.batch_size = batch_size
        self.batching = batching
        self.learning_rate = learning_rate
        self.alpha = alpha
        self.feature_clip = feature_clip
        self.clip_norm = clip_norm
        self.diameter = diameter
        self.loss = loss
        self.huber_delta = huber_delta
        self.target_bound = target_bound
        self.analysis = analysis
        self.adjacency = adjacency
        self.initialization = initialization
        self.dtype = dtype
        self.random_state = random_state
        self.secure_mode = secure_mode
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every
        self.feature_range = feature_range
        self.intercept_scaling = intercept_scaling
        self.center = center
        self.public_n = public_n
        self.average = average
        self.categorical = categorical

    def fit(self, X, y):
        """Calibrate the noise, train, and certify (see the class docstring)."""
        self._common()
        check_choice(self, "loss", self.loss, ("huber", "squared"))
        kappa = check_real(self, "huber_delta", self.huber_delta)
        bound = check_real(self, "target_bound", self.target_bound, optional=True)
        X, y = self._validated(X, y, y_numeric=True, ensure_min_samples=1)
        loss = Huber(kappa) if self.loss == "huber" else Squared()
        W = self._fit(X, y, loss, target_bound=bound)
        self.coef_ = W[:-1].copy()
        self.intercept_ = float(self.intercept_scaling_ * W[-1])
        return self

    def predict(self, X):
        return self._scores(X)
