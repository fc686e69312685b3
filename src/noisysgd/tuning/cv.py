"""``NoisySGDClassifierCV``: private hyperparameter selection whose cost is accounted
(the mechanism and its proofs: :mod:`noisysgd.tuning`; the accounting:
:mod:`noisysgd.tuning.selection`)."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.model_selection import ParameterGrid
from sklearn.utils.validation import check_is_fitted

from ..params import is_auto
from ..private_fit import plain_json
from ..rdp import DEFAULT_ORDERS
from .selection import (SELECTIONS, selection_real, draw_runs, liu_talwar, liu_talwar_split, truncated_negative_binomial_gamma,
                        tuning_epsilon)

__all__ = ["NoisySGDClassifierCV", "NoRunsDrawn"]


# --------------------------------------------------------------------------- the estimator


class NoRunsDrawn(RuntimeError):
    """The random number of runs was 0 (Poisson): there is nothing to release."""


#: Parameters the tuner sets itself (they may not be tuned or preset).
_RESERVED = ("epsilon", "delta", "noise_multiplier", "random_state", "checkpoint", "checkpoint_every")


class NoisySGDClassifierCV(ClassifierMixin, BaseEstimator):
    """Private hyperparameter selection for :class:`~noisysgd.NoisySGDClassifier`
    whose certificate covers the whole tuning.

    ``fit`` runs the random-stopping mechanism described in
    :mod:`noisysgd.tuning`: K runs (K drawn independently of the data), each a
    uniformly random candidate of ``param_grid`` trained on a fresh random
    split and scored on the rest by a noisy count; it keeps the best (model,
    candidate, noisy score) and discards the others.  Before any data is read
    beyond its size and label set, the noise of every candidate and of the
    score is calibrated so that the **whole tuning** is (``epsilon``,
    ``delta``)-DP under the chosen ``selection`` rule.

    Parameters
    ----------
    param_grid : dict or list of dict
        Candidate values of :class:`~noisysgd.NoisySGDClassifier` parameters
        (as for scikit-learn's ``ParameterGrid``).  Not ``epsilon``, ``delta``,
        ``noise_multiplier``, ``random_state`` or checkpoint parameters.
    param_distributions : dict or None
        Alternative to ``param_grid``: each key maps to a *list* of values,
        drawn uniformly and independently for every run (the same candidate
        set and law as the grid of those lists).  Continuous distributions are
        refused: the per-run bound is a maximum over every candidate that can
        be drawn, which a continuous distribution does not make finite here.
    estimator : NoisySGDClassifier or None
        The base estimator whose other parameters every candidate shares
        (default ``NoisySGDClassifier()``).  Its ``adjacency`` must be
        ``"replace"``; its ``center``, ``feature_range`` and ``prior`` None or
        "auto": the candidates are trained on the rows as they are, not
        centered, not scaled by private ranges, started at zeros and always
        released (the private queries of ``NoisySGDClassifier`` are not part
        of the tuning's accounting).
    epsilon, delta : float
        The target for the whole tuning; δ defaults to min(1e-5, 1/(10 n)).
    selection : {"poisson", "negative-binomial", "liu-talwar"}, default="poisson"
        The random-stopping rule and its bound: Papernot & Steinke Theorem 6
        (K ~ Poisson), Theorem 2 (K ~ truncated negative binomial with shape
        ``eta``), Liu & Talwar Theorem 3.4 (geometric, capped at T).
    expected_runs : float, default=5
        E[K] (for ``liu-talwar`` the mean 1/γ of the uncapped geometric).
    eta : float, default=1.0
        η ∈ (−1, ∞) of the truncated negative binomial (1: geometric,
        0: logarithmic).
    validation_fraction : float, default=0.2
        n_val = max(1, round(fraction · n)) examples score each run.
    score_noise : "auto" or float, default="auto"
        σ_s of the noisy count of correct validation predictions.  "auto"
        scales it with the training noise (see :meth:`fit`).
    random_state : int, Generator or None
        Seeds K, the candidates, the splits, the score noise and the runs.

    Attributes
    ----------
    best_fit_ : noisysgd.private_fit.PrivateFit
        The selected run (model, run, per-run report).  **Its own certificate
        covers one run only; the release is covered by this object's
        ``privacy_report_``.**
    coef_, intercept_ : ndarray
        The selected model, laid out as in :class:`~noisysgd.NoisySGDClassifier`.
    classes_ : ndarray
        The label set (taken from ``y`` and treated as public, as the
        classifier does; every run uses the loss of the whole label set).
    best_params_ : dict
    best_score_ : float
        The selected run's noisy validation accuracy (noisy count / n_val);
        released, and covered by the certificate.
    n_runs_ : int
        K, the number of runs drawn.
    noise_multipliers_ : list of float
        The calibrated z of each candidate (in grid order).
    score_noise_ : float
    epsilon_, delta_ : float
        The (ε, δ)-DP of the whole tuning.
    privacy_report_ : dict
        The certificate covering the whole tuning: selection rule and theorem,
        E[K] and the K drawn, every candidate's run and per-run bound, the
        score mechanism, the per-run and tuning RDP, ε.
    """

    def __init__(self, param_grid=None, *, param_distributions=None, estimator=None, epsilon=1.0,
                 delta=None, selection="poisson", expected_runs=5.0, eta=1.0, validation_fraction=0.2,
                 score_noise="auto", random_state=None):
        self.param_grid = param_grid
        self.param_distributions = param_distributions
        self.estimator = estimator
        self.epsilon = epsilon
        self.delta = delta
        self.selection = selection
        self.expected_runs = expected_runs
        self.eta = eta
        self.validation_fraction = validation_fraction
        self.score_noise = score_noise
        self.random_state = random_state

    # ----------------------------------------------------------------- checks

    def _candidates(self) -> list[dict]:
        if (self.param_grid is None) == (self.param_distributions is None):
            raise ValueError(
                "NoisySGDClassifierCV needs exactly one of 'param_grid' and 'param_distributions'. Got "
                f"param_grid={self.param_grid!r}, param_distributions={self.param_distributions!r}."
            )
        if self.param_grid is not None:
            spec, name = self.param_grid, "param_grid"
        else:
            spec, name = self.param_distributions, "param_distributions"
            if not isinstance(spec, dict):
                raise ValueError(f"param_distributions must be a dict of lists. Found {spec!r}.")
            for key, values in spec.items():
                if not isinstance(values, (list, tuple)):
                    raise ValueError(
                        f"param_distributions[{key!r}] must be a list of values (drawn uniformly): "
                        "continuous distributions are not supported, since the per-run privacy bound "
                        f"is a maximum over every candidate that can be drawn. Found {values!r}."
                    )
        try:
            grid = list(ParameterGrid(spec))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name} is not a valid parameter grid: {exc}") from None
        if not grid or grid == [{}]:
            raise ValueError(f"{name} must name at least one parameter with one value. Found {spec!r}.")
        for cand in grid:
            bad = sorted(set(cand) & set(_RESERVED))
            if bad:
                raise ValueError(
                    f"{name} may not set {', '.join(map(repr, bad))}: the tuner sets the privacy "
                    f"parameters and the seeds itself. Found {spec!r}."
                )
        return grid

    def _base(self):
        from ..estimators import NoisySGDClassifier

        base = NoisySGDClassifier() if self.estimator is None else self.estimator
        if not isinstance(base, NoisySGDClassifier):
            raise ValueError(f"estimator must be a NoisySGDClassifier or None. Found {base!r}.")
        return base

    # ----------------------------------------------------------------- planning

    @staticmethod
    def _resolve_auto(params: dict, n_train: int, d: int, n_classes: int, epsilon: float, delta: float) -> dict:
        """``params`` with "auto" epochs, batch_size, batching and alpha replaced by what
        :func:`noisysgd.auto_config` chooses for one run on ``n_train`` examples at the tuning's
        (``epsilon``, ``delta``): a function of public quantities only, so the candidates (and
        their accounting) are fixed before the data are touched.  The candidate's own noise is
        then calibrated for the whole tuning, as for explicit parameters."""
        from ..config import configure, declared_clip_norm
        from ..estimators import classification_loss
        keys = ("epochs", "batch_size", "batching", "alpha")
        if not any(is_auto(params.get(k)) for k in keys):
            return {**params, "clip_norm": declared_clip_norm(params.get("clip_norm"))}
        loss = classification_loss(n_classes, params.get("multi_class", "softmax"))
        p = {k: params.get(k) for k in keys}
        p.update(epsilon=float(epsilon), delta=float(delta), noise_multiplier=None,
                 learning_rate=params.get("learning_rate", "auto"), feature_clip=float(params["feature_clip"]),
                 clip_norm=params.get("clip_norm"), diameter=params.get("diameter"),
                 adjacency=params.get("adjacency", "replace"), intercept_scaling=_intercept_scaling(params))
        configure(p, loss, n_train, d, None)
        out = dict(params)
        out.update({k: p[k] for k in keys + ("clip_norm",)})
        if not isinstance(p["learning_rate"], str):  # the composition regime chose its step size
            out["learning_rate"] = p["learning_rate"]
        if out["batching"] == "full":
            out["batch_size"] = None
        return out

    @staticmethod
    def _planned_run(params: dict, n_train: int, n_classes: int):
        """The Run that NoisySGDClassifier(**params).fit on n_train examples executes
        (checked against ``run_`` after every fit: a mismatch stops the tuning)."""
        from ..estimators import classification_loss
        from ..run import Run
        from ..private_fit import resolve_learning_rate

        loss = classification_loss(n_classes, params.get("multi_class", "softmax"))
        c = loss.constants(feature_clip=float(params["feature_clip"]), clip_norm=params.get("clip_norm"),
                           diameter=params.get("diameter"), intercept_scaling=_intercept_scaling(params))
        lam = float(params["alpha"])
        smooth = None if c.smoothness is None else c.smoothness + lam
        batching = params["batching"]
        b = n_train if batching == "full" else min(int(params["batch_size"]), n_train)
        return Run.from_epochs(
            epochs=int(params["epochs"]), n=n_train, batch_size=b, batching=batching,
            learning_rate=resolve_learning_rate(params["learning_rate"], smooth, lam), noise_multiplier=1.0,
            lipschitz=c.lipschitz, smoothness=smooth, strong_convexity=lam, convex=c.convex,
            diameter=params.get("diameter"), adjacency=params["adjacency"],
            initialization=params["initialization"],
        )

    def _per_run(self, runs, analyses, zs, sigma, delta, selection, delta1=None):
        """Per-run bound at noise levels ``zs`` (one per candidate) and score noise σ:
        the order-wise max RDP curve (and, for liu-talwar, ε₁ at δ₁)."""
        from ..accountant import epsilon as account
        from ..gdp import gdp_epsilon

        alpha = DEFAULT_ORDERS
        curves, eps1, reports = [], [], []
        for run, z in zip(runs, zs):
            r = run.replace(noise_multiplier=z)
            if selection == "liu-talwar":
                rep = account(r, delta=delta1, analyses=analyses)
                if rep.best is None:
                    raise ValueError(f"no sound analysis applies to the candidate run {r!r}.")
                eps1.append(rep.epsilon)
            else:
                names = analyses
                rep = account(r, delta=delta, analyses=names, orders=alpha)
                rows = [res.rdp for res in rep.results.values()
                        if res.applies and res.sound and res.rdp is not None
                        and np.array_equal(res.orders, alpha)]
                if not rows:
                    raise ValueError(
                        f"no sound RDP or Gaussian-DP analysis applies to the candidate run {r!r}; the "
                        f"{selection} rule needs an RDP curve (composition-pld has none): use "
                        "selection='liu-talwar'")
                curves.append(np.min(np.vstack(rows), axis=0))
            reports.append(rep)
        if selection == "liu-talwar":
            score_eps = gdp_epsilon(1.0 / sigma, delta1)
            return max(max(eps1), score_eps), eps1, score_eps, reports
        score = alpha / (2.0 * sigma * sigma)
        per_run = np.max(np.vstack(curves + [score]), axis=0)
        return per_run, curves, score, reports

    def _tuned(self, per_run, delta, selection, expected_runs, eta):
        if selection == "liu-talwar":
            gamma = 1.0 / expected_runs
            delta1, delta2, T = liu_talwar_split(delta, gamma)
            eps, dtot = liu_talwar(per_run, delta1, gamma=gamma, delta2=delta2)
            return eps, {"delta1": delta1, "delta2": delta2, "T": T, "delta_total": dtot}
        eps, order, tuned = tuning_epsilon(DEFAULT_ORDERS, per_run, delta, selection=selection,
                                           expected_runs=expected_runs, eta=eta)
        return eps, {"order": order, "rdp": tuned}

    def _calibrate(self, runs, analyses, target, delta, selection, expected_runs, eta, sigma_fixed):
        """Noise levels z_c = s·z_c⁰ and σ_s = s·σ⁰ (or the fixed σ), with z_c⁰ the
        candidate's own calibrated noise for (target, δ) and σ⁰ the Gaussian's; the
        smallest scale s (bisection, relative 1e-3) at which the tuning meets the
        target.  The tuning ε is non-increasing in s (every per-run bound is)."""
        from ..accountant import calibrate
        from ..gdp import gdp_epsilon

        delta1 = liu_talwar_split(delta, 1.0 / expected_runs)[0] if selection == "liu-talwar" else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            z0 = [calibrate(r, epsilon=target, delta=delta, analyses=analyses).noise_multiplier
                  for r in runs]
        # σ⁰: the Gaussian count alone meets (target, δ): μ = 1/σ with gdp_epsilon(μ, δ) = target
        lo, hi = 1e-6, 1e6
        for _ in range(200):
            mid = math.sqrt(lo * hi)
            if gdp_epsilon(1.0 / mid, delta) > target:
                lo = mid
            else:
                hi = mid
            if hi / lo < 1 + 1e-9:
                break
        sigma0 = hi

        def at(s):
            sigma = sigma_fixed if sigma_fixed is not None else s * sigma0
            zs = [s * z for z in z0]
            per_run, parts, score, reports = self._per_run(runs, analyses, zs, sigma, delta, selection,
                                                           delta1)
            eps, extra = self._tuned(per_run, delta, selection, expected_runs, eta)
            return eps, (zs, sigma, per_run, parts, score, reports, extra)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s_lo, s_hi = 1.0, 1.0
            eps, state = at(s_hi)
            while not eps <= target:
                s_lo, s_hi = s_hi, 2.0 * s_hi
                if s_hi > 1e6:
                    raise ValueError(
                        f"epsilon {target!r} for the whole tuning is not met even with 1e6 times each "
                        "candidate's own noise; raise epsilon or lower expected_runs")
                eps, state = at(s_hi)
            if s_hi > 1.0:
                while s_hi / s_lo > 1.0 + 1e-3:
                    mid = math.sqrt(s_lo * s_hi)
                    e, st = at(mid)
                    if e <= target:
                        s_hi, eps, state = mid, e, st
                    else:
                        s_lo = mid
        return s_hi, eps, state, z0, sigma0

    # ----------------------------------------------------------------- fit

    def fit(self, X, y):
        """Calibrate, run the random-stopping selection, keep the best (see the class docstring):
        the tuning planned from public quantities (:meth:`_plan`), its noise calibrated for the
        whole (:meth:`_account`), the K runs drawn (:meth:`_select`), the best published."""
        plan, X, encoded = self._plan(X, y)
        acct = self._account(plan)
        K, best = self._select(plan, acct, X, encoded)
        self.n_runs_ = K
        self.noise_multipliers_ = list(acct.zs)
        self.score_noise_ = acct.sigma
        self.epsilon_ = acct.eps
        self.delta_ = plan.delta
        self.classes_ = plan.classes
        self.privacy_report_ = self._report(plan, acct, K)
        self.privacy_report_["classes"] = {"source": plan.classes_source, "classes": plan.classes.tolist()}
        if best is None:
            self.best_fit_ = None
            raise NoRunsDrawn(
                f"the random number of runs drawn was K = 0 (probability exp(-{plan.mean:g})): no model to "
                "release. The privacy_report_ is set; running fit again is a second tuning (compose).")
        noisy, c, fit = best
        self.best_fit_ = fit
        W, s = fit.result.coef, fit.result.intercept_scaling  # score = clip(x)·W[:-1] + s·W[-1]
        if W.ndim == 1:
            self.coef_, self.intercept_ = W[:-1][None, :].copy(), s * W[-1:]
        else:
            self.coef_, self.intercept_ = W[:-1].T.copy(), s * W[-1]
        self.best_params_ = dict(plan.grid[c])
        self.best_index_ = c
        self.best_score_ = noisy / plan.n_val
        self.privacy_report_["selected"] = {"params": plain_json(plan.grid[c]), "index": c,
                                            "noisy_validation_accuracy": self.best_score_}
        return self

    def _checked_options(self) -> dict:
        """The tuner's own parameters, checked: target, selection rule, E[K], η, the
        validation fraction and the score noise."""
        target = selection_real("epsilon", self.epsilon, low=0.0)
        if self.selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {', '.join(map(repr, SELECTIONS))}. "
                             f"Found {self.selection!r}.")
        if self.selection == "liu-talwar":
            warnings.warn(
                "selection='liu-talwar': Liu & Talwar's Theorem 3.4 was transcribed without the paper's text at "
                "hand and has not been checked against it (docs/tuning.md); prefer 'poisson' (Papernot & "
                "Steinke, checked), which is also much tighter", UserWarning, stacklevel=4)
        mean = selection_real("expected_runs", self.expected_runs, low=1.0, low_open=False)
        eta = selection_real("eta", self.eta, low=-1.0)
        if self.selection == "negative-binomial" and mean == 1.0:
            raise ValueError("expected_runs must be > 1 for the negative-binomial rule (gamma < 1). Found 1.0.")
        frac = selection_real("validation_fraction", self.validation_fraction, low=0.0, high=1.0)
        sigma_fixed = None
        if not is_auto(self.score_noise):
            sigma_fixed = selection_real("score_noise", self.score_noise, low=0.0)
        return dict(target=target, selection=self.selection, mean=mean, eta=eta, frac=frac, sigma_fixed=sigma_fixed)

    @staticmethod
    def _check_base(base_params: dict, grid: list) -> None:
        """The base estimator's parameters that a tuning cannot account, refused."""
        if base_params.get("adjacency") != "replace":
            raise ValueError(
                "estimator.adjacency must be 'replace' for tuning (the split into training and validation "
                f"parts has public, fixed sizes only then). Found {base_params.get('adjacency')!r}.")
        for key in ("checkpoint", "checkpoint_every", "feature_range", "categorical"):
            if base_params.get(key) is not None and not (key == "feature_range" and is_auto(base_params[key])):
                hint = {"feature_range": " (scale with noisysgd.PublicRangeScaler in a Pipeline before the tuning "
                                         "instead)",
                        "categorical": " (one-hot encode with the declared categories before the tuning, e.g. a "
                                       "OneHotEncoder(categories=...) in a Pipeline)"}.get(key, "")
                raise ValueError(f"estimator.{key} must be None for tuning{hint}. Found {base_params[key]!r}.")
        if base_params.get("center", None) not in (None, "auto"):
            raise ValueError(
                "estimator.center must be None or 'auto' for tuning: the tuner trains every candidate on "
                f"the rows as they are (it does not center them privately). Found {base_params['center']!r}.")
        averages = [base_params.get("average", False)] + [cand["average"] for cand in grid if "average" in cand]
        refused = [a for a in averages if a is not False and not is_auto(a)]  # "auto" is read as False
        if refused:
            raise ValueError("estimator.average must be False or 'auto' for tuning: the tuner accounts and trains "
                             "every candidate's final iterate (an average is certified by composition only). Found "
                             f"{refused[0]!r}.")
        if base_params.get("class_weight") is not None or any(cand.get("class_weight") for cand in grid):
            raise ValueError("estimator.class_weight must be None for tuning (the tuner trains and scores every "
                             "candidate unweighted). Found a class_weight.")
        if base_params.get("public_n") is not None:
            raise ValueError("estimator.public_n must be None for tuning (tuning is replace adjacency, where n is "
                             f"public). Found {base_params['public_n']!r}.")
        if base_params.get("prior", None) not in (None, "auto"):
            raise ValueError("estimator.prior must be None or 'auto' for tuning (the tuner asks no class-prior "
                             f"query). Found {base_params['prior']!r}.")
        valid = set(base_params) - {"center", "classes", "average", "public_n", "class_weight", "prior"}
        for cand in grid:
            unknown = sorted(set(cand) - valid)
            if unknown:
                raise ValueError(f"param_grid names unknown NoisySGDClassifier parameters: {unknown}.")

    def _plan(self, X, y):
        """(the :class:`_Plan`, X, the encoded labels): every check, and every candidate's run
        fixed from public quantities before any fit."""
        from sklearn.utils.multiclass import check_classification_targets
        from sklearn.utils.validation import validate_data

        from ..private_fit import default_delta
        from ..train.leaks import encode_labels

        grid = self._candidates()
        options = self._checked_options()
        base_params = self._base().get_params()
        self._check_base(base_params, grid)
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2)
        check_classification_targets(y)
        classes, encoded, classes_source = encode_labels(y, base_params.get("classes"), name="estimator.classes",
                                                         stacklevel=4)
        n = X.shape[0]
        n_val = max(1, int(round(options["frac"] * n)))
        n_train = n - n_val
        if n_train < 1:
            raise ValueError(f"validation_fraction leaves no training example (n = {n}). Found {options['frac']!r}.")
        delta = default_delta(n) if self.delta is None else selection_real("delta", self.delta, low=0.0, high=1.0)
        if delta >= 1.0 / n:
            from ..private_fit import DeltaWarning

            warnings.warn(
                f"delta = {delta:g} is not below 1/n = {1.0 / n:g}: (epsilon, delta)-DP with such a delta "
                "permits releasing some examples outright; use delta well below 1/n",
                DeltaWarning, stacklevel=3)
        # a candidate's "auto" parameters are chosen as the estimator chooses them (public quantities
        # only: n_train, d, classes, the tuning's epsilon and delta), so every run is known before any fit
        cand_params = [self._resolve_auto({**base_params, **c}, n_train, X.shape[1], classes.size,
                                          options["target"], delta) for c in grid]
        runs = [self._planned_run(p, n_train, classes.size) for p in cand_params]
        cand_analyses = [p.get("analysis", "best") for p in cand_params]
        if len(set(map(repr, cand_analyses))) != 1:
            raise ValueError("param_grid may not vary 'analysis' (one accountant for the whole tuning).")
        analyses = cand_analyses[0]
        if options["selection"] != "liu-talwar" and analyses == "best":
            from ..analyses import ANALYSES

            analyses = [a for a in ANALYSES if a != "composition-pld"]  # no RDP curve
        plan = _Plan(grid=grid, cand_params=cand_params, runs=runs, analyses=analyses, delta=delta, n=n,
                     n_val=n_val, classes=classes, classes_source=classes_source,
                     secure=bool(base_params.get("secure_mode", False)),
                     **{k: v for k, v in options.items() if k != "frac"})
        return plan, X, encoded

    def _account(self, plan: "_Plan") -> "_Account":
        scale, eps, state, _, _ = self._calibrate(plan.runs, plan.analyses, plan.target, plan.delta, plan.selection,
                                                  plan.mean, plan.eta, plan.sigma_fixed)
        zs, sigma, per_run, parts, score_part, reports, extra = state
        return _Account(scale, eps, zs, sigma, per_run, parts, score_part, reports, extra)

    def _select(self, plan: "_Plan", acct: "_Account", X, encoded):
        """The mechanism: K runs, each a random candidate on a random split, scored by a noisy
        count; (K, (noisy score, candidate, fit) of the best, or None when K = 0)."""
        rng = np.random.default_rng(self.random_state)
        K = draw_runs(plan.selection, plan.mean, rng, eta=plan.eta, delta=plan.delta)
        best = None
        for _ in range(K):
            c = int(rng.integers(len(plan.grid)))
            perm = rng.permutation(plan.n)
            val, tr = perm[:plan.n_val], perm[plan.n_val:]
            seed = None if plan.secure else int(rng.integers(2**63 - 1))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = self._train(plan.cand_params[c], X[tr], encoded[tr], plan.classes.size, acct.zs[c],
                                  plan.delta, seed)
            expected = plan.runs[c].replace(noise_multiplier=acct.zs[c])
            if fit.run != expected:
                raise RuntimeError(
                    "the candidate's executed run differs from the one accounted for; refusing to "
                    f"certify. accounted: {expected!r}; executed: {fit.run!r}")
            pred = self._predict_encoded(fit, X[val])
            correct = float(np.sum(pred == encoded[val]))
            noisy = correct + acct.sigma * float(rng.standard_normal())
            if best is None or noisy > best[0]:
                best = (noisy, c, fit)
        return K, best

    def _report(self, plan: "_Plan", acct: "_Account", K: int) -> dict:
        grid, runs, selection, analyses = plan.grid, plan.runs, plan.selection, plan.analyses
        zs, sigma, reports, per_run, parts, extra = acct.zs, acct.sigma, acct.reports, acct.per_run, acct.parts, acct.extra
        eps, delta, mean, eta = acct.eps, plan.delta, plan.mean, plan.eta
        n, n_val, target, scale = plan.n, plan.n_val, plan.target, acct.scale
        theorem = {
            "poisson": "Papernot & Steinke (ICLR 2022), Theorem 6 (K ~ Poisson)",
            "negative-binomial": "Papernot & Steinke (ICLR 2022), Theorem 2 (K ~ truncated negative binomial)",
            "liu-talwar": "Liu & Talwar (STOC 2019), Theorem 3.4 (geometric random stopping, capped at T)",
        }[selection]
        cands = []
        for i, (g, run, z, rep) in enumerate(zip(grid, runs, zs, reports)):
            entry = {"params": plain_json(g), "noise_multiplier": z, "run": plain_json(run.replace(noise_multiplier=z).to_dict())}
            if selection == "liu-talwar":
                entry["epsilon_at_delta1"] = rep.epsilon
                entry["analysis"] = rep.best.analysis
            else:
                used = [name for name, res in rep.results.items()
                        if res.applies and res.sound and res.rdp is not None]
                entry["rdp_analyses"] = used
                entry["rdp"] = plain_json(parts[i])
            cands.append(entry)
        dist = {"poisson": {"K": "Poisson", "mean": mean},
                "negative-binomial": {"K": "truncated negative binomial", "eta": eta,
                                      "gamma": truncated_negative_binomial_gamma(eta, mean)
                                      if selection == "negative-binomial" else None, "mean": mean},
                "liu-talwar": {"K": "min(Geometric(gamma), T)", "gamma": 1.0 / mean}}[selection]
        out = {
            "epsilon": eps,
            "delta": delta,
            "target_epsilon": target,
            "covers": ("the whole tuning: the selected model, its candidate and its noisy validation "
                       "score; no other run's model or score is released"),
            "selection": selection,
            "theorem": theorem,
            "distribution": dist,
            "runs_drawn": K,
            "n": n,
            "n_validation": n_val,
            "adjacency": "replace",
            "candidates": cands,
            "score": {"mechanism": "count of correct validation predictions + N(0, sigma^2), sensitivity 1 "
                                   "(Gaussian mechanism, Mironov 2017 Prop. 7)", "sigma": sigma},
            "per_run": ("order-wise maximum over the candidates (uniform mixture) and the score (disjoint "
                        "parts of a data-independent random split); per candidate the order-wise minimum "
                        "of its applicable sound RDP/GDP analyses" if selection != "liu-talwar" else
                        "(eps1, delta1)-DP: the largest of the candidates' best sound epsilon and the "
                        "score's exact Gaussian epsilon at delta1"),
            "analyses": analyses if isinstance(analyses, str) else list(analyses),
            "noise_scale": scale,
        }
        if selection == "liu-talwar":
            out["per_run_epsilon1"] = per_run
            out.update({k: v for k, v in extra.items()})
        else:
            out["orders"] = plain_json(DEFAULT_ORDERS)
            out["per_run_rdp"] = plain_json(per_run)
            out["tuning_rdp"] = plain_json(extra["rdp"])
            out["order"] = extra["order"]
        out["certificate"] = {
            "guarantee": f"({eps:.6g}, {delta:g})-DP for the released selection (the whole tuning), "
                         "replace adjacency",
            "rests_on": [theorem] + sorted({a for c in cands for a in c.get("rdp_analyses", [c.get("analysis")])
                                            if a}),
        }
        return out

    # ----------------------------------------------------------------- prediction

    @staticmethod
    def _train(params, X, y_encoded, n_classes, z, delta, seed):
        """One candidate run: Noisy-SGD with noise multiplier ``z`` on (X, y) with the loss
        of the *whole* label set (public), exactly as NoisySGDClassifier.fit would run it
        for those parameters — but with a label set that does not depend on which
        classes the random training part happens to contain."""
        from ..estimators import classification_loss
        from ..pipeline import Declared, fit_declared
        from ..private_fit import Execution

        loss = classification_loss(n_classes, params.get("multi_class", "softmax"))
        b = params["batch_size"]
        if params["batching"] != "full":
            b = min(int(b), X.shape[0])
        declared = Declared(
            task="classification", epsilon=None, delta=delta, noise_multiplier=z, epochs=params["epochs"],
            batch_size=b, batching=params["batching"], learning_rate=params["learning_rate"], alpha=params["alpha"],
            feature_clip=params["feature_clip"], intercept_scaling=_intercept_scaling(params),
            clip_norm=params["clip_norm"], diameter=params["diameter"], adjacency=params["adjacency"],
            analyses=params["analysis"], initialization=params["initialization"])
        return fit_declared(X, y_encoded, loss, declared, Execution(
            random_state=seed, dtype=np.dtype(params["dtype"]), secure_mode=bool(params["secure_mode"]))).fit

    @staticmethod
    def _predict_encoded(fit, X):
        s = fit.result.scores(X)
        return (s > 0).astype(int) if s.ndim == 1 else np.argmax(s, axis=1)

    def _fitted(self):
        check_is_fitted(self, "best_fit_")
        if self.best_fit_ is None:
            raise NoRunsDrawn("no run was drawn (K = 0): there is no model")
        return self.best_fit_

    def decision_function(self, X):
        """Scores of the selected model: (n,) for two classes, else (n, k)."""
        from sklearn.utils.validation import validate_data

        fit = self._fitted()
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return fit.result.scores(X)

    def predict(self, X):
        s = self.decision_function(X)
        return self.classes_[(s > 0).astype(int) if s.ndim == 1 else np.argmax(s, axis=1)]

    def predict_proba(self, X):
        from scipy.special import expit, softmax

        s = self.decision_function(X)
        if s.ndim == 1:
            p = expit(s)
            return np.column_stack([1.0 - p, p])
        if self.best_params_.get("multi_class", self._base().multi_class) == "ovr":
            p = expit(s)
            return p / p.sum(axis=1, keepdims=True)
        return softmax(s, axis=1)


def _intercept_scaling(params: dict) -> float:
    """The bias coordinate s a candidate's NoisySGDClassifier uses ("auto" resolved as it would)."""
    from ..estimators import auto_intercept_scaling

    value = params.get("intercept_scaling", "auto")
    return auto_intercept_scaling(params["feature_clip"]) if value == "auto" else float(value)


@dataclass(frozen=True)
class _Plan:
    """A tuning fixed before any fit: the candidates and their runs, the selection rule and
    its parameters, the target, δ, the split sizes and the declared (or found) classes."""

    grid: list
    cand_params: list
    runs: list
    analyses: object
    selection: str
    mean: float
    eta: float
    target: float
    sigma_fixed: float | None
    delta: float
    n: int
    n_val: int
    classes: np.ndarray
    classes_source: str
    secure: bool


@dataclass(frozen=True)
class _Account:
    """The calibrated tuning: the noise scale s, its ε, each candidate's noise multiplier,
    the score's σ, and the per-run bound with its parts (what the report shows)."""

    scale: float
    eps: float
    zs: list
    sigma: float
    per_run: object
    parts: list
    score_part: object
    reports: list
    extra: dict
