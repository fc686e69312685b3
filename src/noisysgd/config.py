"""Automatic configuration of a private fit from public quantities (and a private curvature).

:func:`auto_config` chooses the batching, batch size, epochs, step size and
L2 regularization λ of a Noisy-SGD run for a privacy target (ε, δ) from the
quantities that are public before any data is seen: the number of examples
n, the number of features d, the loss (hence the number of classes and the
constants L, M), the feature clip R and the adjacency.  It never looks at a
feature or a label.  The one exception is the step size of the
amplified-composition regime (below), which may use the answer of a private
curvature query (:mod:`noisysgd.curvature`, charged to the certificate).

For every candidate of a small grid it calibrates the noise multiplier z
with the accountant (:func:`noisysgd.calibrate`, restricted to a few fast
analyses: the estimator's final calibration, over every analysis, can only
find a smaller z) — or shows without calibrating that the candidate cannot win
(the proxy is increasing in z: a row whose proxy at the z where it would tie the
best so far misses the target is pruned after one report; :func:`_candidate`),
so the choice is the exhaustive search's (:data:`PRUNE` = False runs that, for
checking) at a tenth of its cost — and scores the candidate with a **utility proxy**: an upper
bound on the excess risk of projected noisy gradient descent on a λ-strongly
convex, (M + λ)-smooth objective, with the calibrated noise.  For
θ_{t+1} = θ_t − η(∇F_λ(θ_t) + ξ_t), E ξ_t = 0, E‖ξ_t‖² ≤ V and η ≤ 1/(M + λ),

    E‖θ_{t+1} − θ*_λ‖² ≤ (1 − ηλ) E‖θ_t − θ*_λ‖² + η²V

(the standard one-step inequality of SGD on strongly convex smooth
objectives, e.g. Bubeck 2015, *Convex Optimization: Algorithms and
Complexity*, Thm 6.3 proof; the same decomposition — optimisation error plus
a noise term η·p·σ²/contraction — underlies the excess-risk bounds of noisy
SGD in Bassily, Smith & Thakurta 2014, Thm 2.4, and Feldman, Koren & Talwar
2020, §4), so with c = 1 − ηλ after T steps from θ_0 = 0

    E‖θ_T − θ*_λ‖² ≤ c^T·B² + η²V·(1 − c^T)/(1 − c),

and the unregularized excess risk over models of norm ≤ B is at most

    proxy = (M + λ)/2 · [c^T·B² + η V (1 − c^T)/λ]  +  λ B²/2,

the last term the bias of the regularization (F₀(θ*_λ) − min_{‖θ‖≤B} F₀ ≤
λB²/2).  The regularized objective is also merely convex with gradients of
norm ≤ G, G² = (L + λB)² + p(zL/b)², which gives the second bound
B²/(2ηT) + ηG²/2 (Bubeck 2015, Thm 6.1, for the averaged iterate; the last
iterate, which is what is released, costs a factor O(log T) more: Shamir &
Zhang 2013, Thm 2) — much smaller when T ≪ 1/(ηλ); the proxy takes the
smaller of the two, plus λB²/2.  V = p·(zL/b)² + L²/b (the privacy noise on p = (d + 1)·outputs
coordinates, std zL/b each, plus the sampling variance of a batch of b
per-example gradients of norm ≤ L; 0 for full batches).  B, the norm of a
good model for features in the R-ball, is not known: it is a public
assumption, stated in the report: B = :data:`MODEL_NORM`·max(1, √(d/64))/R,
10 up to d = 64 features at R = 1.  Features of norm R spread over d coordinates
have coordinates of size ~R/√d, so a model whose scores are a few units has
a norm growing like √d/R — a heuristic, not a law, used only to grow B
above its value at d = 64 (a smaller B for a few features chose 10 epochs at
λ = 0.1 on the README's 5-feature example and lost 5–10 points): on
Fashion-MNIST the non-private optimum's norm is about 50 at λ = 1e-4 and
about 100 at λ = 1e-5 for both d = 784 pixels and d = 3,969 ScatterNet
features, where the assumption gives 35 and 79
(benchmarks/results/fashion_mnist/lambda_ceiling.json).  With B = 10 on
those, the proxy under-rated the optimisation still to do and chose 300
full-batch steps (ScatterNet at ε = 3: 0.782 test accuracy, against 0.858
over 3 seeds with the scaled B, which chose 100 epochs of cyclic batches of
1,024).  The other way, B = 5·max(1, √(d/16))/R (halved up to 16 features) gained on small
tables — +0.13 points over ten sets of real ones, +0.4 to +2.2 on synthetic ones with signal — and
lost 1.9 and 3.7 points on breast_cancer's 30 features, scaled and raw
(benchmarks/raw_tables/README.md §30): the norm of a good model seems to follow how separable the table
is, which d does not say; not adopted.  With λ = 0 (only when the user fixes ``alpha=0``) only the convex
bounds apply.  For η ≤ 1/(M + λ) the smooth convex bound (Bubeck 2015, Thm 6.3
proof: only the variance of the stochastic gradient costs, not its mean)

    B²/(2ηT) + ηV/(2(1 − η(M + λ)))

is a third candidate; the proxy takes the smallest that holds.

**The rows' scale**.  The proxy assumes nothing about the rows' units beyond their clip R: with
rows of norm ≤ R, M and V grow like R², L like R, and the assumed model norm B like 1/R, so every
term above is the same number for rows scaled by any c > 0 — provided λ scales like R² too, which
is why the grid of λ is ``GRID["alpha"]``·R² (λ in units of the rows' squared clip; at R = 1, the
default clip of rows that are not centered, the grid itself).  A grid fixed in absolute units made
the search depend on the rows' units: on a raw table whose one large column makes the centered
rows' clip R_c ≈ 0.006 (ISLR's ``Default``), λ = 1e-5 already cost λB²/2 ≈ 13, every candidate's
proxy was that bias, the chosen run could not move the intercept to the base rate (learning rate
2.5·10⁴, 24 % of the rows predicted positive against 3.3 %), and accuracy fell 7–9 points under
the majority class; with λ in units of R² the same fits reach the majority class or better
(benchmarks/raw_tables, README §8).  The scale invariance is exact for R a power of two
(``tests/test_config.py``).  What stays assumed is the *shape* of the rows within the ball: a good
model's scores are a few units when the rows fill it (B), and the step follows the data's
curvature (M·λ̂/R̄²) only where the private curvature query measured it.

**Two regimes**.  The grid above is the *hidden-state* regime:
η = 1/(2(M + λ)) (under the analyses' contraction limits), certified by the best
hidden-state bound, only the last iterate released.  The *amplified-composition*
regime is DP-SGD's: Poisson batches at rate b/n (:data:`COMPOSITION_GRID`), certified
by composition (every iterate covered: no contraction needed), ranked at the step size that
minimises the smooth bound, η* = 1/(M + λ + √(VT/2)/B) (Bubeck 2015, Thm 6.3), and trained at
:data:`STEP_FACTOR`·η* (at most 0.98/(M + λ)): the bound's noise term charges the privacy noise
on all p coordinates, while a generalised linear model's loss sees it only through its k scores
(E[(ξᵀx)²] = σ²‖x‖² whatever p), so η* is cautious; the factor is empirical, measured on the
data the search was designed on (:data:`STEP_FACTOR`).  Where a private curvature query
answered (``curvature``: λ̂/R̄², :mod:`noisysgd.curvature`), M in this regime's step and proxy is
the data's own smoothness M·λ̂/R̄² (an estimate of the empirical objective's, below the worst
case M; the step has no part in a composition certificate), never in the hidden-state rows,
whose analyses need the worst case.  Both
regimes are scored by the same proxy and the smaller wins; the report says which
(``chosen["regime"]``) and why.  On the data of docs/accuracy.md the composition regime
wins the proxy, as the limit line (``noisysgd.limits``) says it should at small λ and
large noise; hidden state still wins where the noise is small and T long.
With ``clip_norm="auto"`` (the classifier's default) :func:`configure` then clips the chosen
composition run's per-example gradients at :data:`CLIP_FACTOR` of L and scales its step by
:data:`CLIP_STEP`/:data:`CLIP_FACTOR` (``config["clip"]`` in the report): empirical factors,
not part of the proxy, which ranks every candidate unclipped (z does not depend on the clip).

**This is a proxy, not a guarantee of accuracy**: the analysis of cyclic
batches has correlated, not zero-mean, batch noise; the loss on real data is
far from its worst case; B is a guess.  It ranks configurations by the
quantity that dominates at small ε — the privacy noise after contraction,
against the bias of λ and the unfinished optimisation — and it is what
:class:`~noisysgd.NoisySGDClassifier` uses for its ``"auto"`` parameters.
The chosen configuration and every candidate's proxy terms go into
``privacy_report_["config"]``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

from .accountant import calibrate, epsilon as epsilon_report
from .analyses import ANALYSES, misses
from .noise_search import noise_reaching, noise_reaching_affine
from .params import is_auto
from .run import Run
from .quadrature import screen_quadrature

__all__ = ["AutoConfig", "auto_config", "configure", "composition_searched", "fixed_parameters",
           "CompositionFallbackWarning", "MODEL_NORM", "SEARCH_ANALYSES",
           "GRID", "LEGACY", "with_legacy_defaults"]


class CompositionFallbackWarning(UserWarning):
    """The noise was calibrated by composition (every iterate released) because a
    choice of the user made every hidden-state analysis refuse the run."""


#: Assumed norm of a good model for up to 64 features clipped to norm 1 (scaled by
#: max(1, √(d/64))/R: ``_model_norm``).
MODEL_NORM = 10.0
#: Analyses the search calibrates with: fast for cyclic and full batches.  The
#: estimator then calibrates the chosen run with all analyses (smaller or equal z).
SEARCH_ANALYSES = ("shifted-interpolation", "ye-shokri", "composition")
#: The grid searched for the parameters left to "auto".  ``alpha`` is in units of R² (the rows'
#: clip squared, after centering where the rows are centered): :func:`auto_config` searches
#: λ = a·R² for a in the grid (module docstring, "The rows' scale").
GRID = {
    "batching": ("cyclic", "full"),
    "batch_size": (64, 256, 1024),
    "epochs": {"cyclic": (10, 30, 100, 300), "full": (30, 100, 300, 1000)},
    "alpha": (1e-5, 1e-4, 1e-3, 1e-2, 1e-1),
}
#: What the estimators used before "auto" (and use when the grid is empty).
LEGACY = {"batching": "cyclic", "batch_size": 256, "epochs": 100, "alpha": 0.01}
#: The amplified-composition regime: DP-SGD's Poisson batches at rate b/n, the
#: step size chosen for optimisation (the smooth bound's η = 1/(M + λ + √(VT/2)/B), free of any
#: analysis' contraction limit: composition needs none), certified by composition (every iterate
#: covered).  Batch sizes above n/4 are left out (little amplification left); when none
#: fits, the largest power of two ≤ n/4.  Each (b, epochs) is calibrated with the RDP
#: composition (:data:`COMPOSITION_SEARCH`) at :data:`SCREEN_REL_TOL` on :data:`SCREEN_ORDERS`
#: (z independent of λ and η: one calibration per (b, epochs), ~0.1 s each where the PLD takes
#: 1 s).  100 epochs were added with the private curvature (:mod:`noisysgd.curvature`): measured
#: on digits and breast_cancer (3 seeds, ε ∈ {0.5, 1, 3}, both adjacencies) the proxy then chose
#: 100 epochs at a third of the step in 30 of 36 fits, with mean test accuracy from 0.3 below to 6.4 points above 30 epochs;
#: on Fashion-MNIST ScatterNet under add/remove at ε = 3, +1.3 points with the curvature.
COMPOSITION_GRID = {"batch_size": (256, 1024, 4096), "epochs": (10, 30, 100)}
#: The accountant of the composition regime's search: the RDP composition, whose z is at or
#: above the PLD's that certifies the chosen run (the comparison leans against the regime).
COMPOSITION_SEARCH = ("composition",)
#: Relative tolerance of the composition regime's calibrations (z found at or above the answer).
SCREEN_REL_TOL = 1e-1
#: The Rényi orders of the composition regime's calibrations: α − 1 = 0.25·1.25^k up to ~617, 36
#: orders where the accountant's default grid has 169 (of which it integrates ~55, bounding the
#: others by chords).  Every order gives a sound ε; the best of a sparser grid is at most
#: (√1.25 + 1/√1.25)/2 − 1 = 0.6 % above the best order's where that lies inside the grid, and
#: measured from 0.1 % below to 0.5 % above the default grid's (tests/test_config.py).  The
#: replace-one quadrature costs ~0.7 ms per order and noise level.
SCREEN_ORDERS = tuple(1.0 + 0.25 * 1.25 ** k for k in range(36))
#: The step size η* of the composition regime is kept within this factor of the smoothness
#: rule 1/(2(M + λ)) (a guard against a B or G far off the data's; the bound allows any η).
STEP_RANGE = 16.0
#: The composition regime trains at this multiple of the smooth bound's step η* (at most
#: 0.98/(M + λ), the bound's range), while the proxy ranks the candidates at η* itself.  The
#: bound charges the privacy noise on all p coordinates (V = p(zL/b)²), where a generalised
#: linear model's loss sees it only through its scores; measured on the data the search was
#: designed on (docs/accuracy.md §1a, 3 seeds), 2η* gained 0.4–3.8 points over η* on digits,
#: breast_cancer and Fashion-MNIST (pixels and ScatterNet) and cost at most 0.5 on
#: make_classification; 3η* gained more on Fashion-MNIST and lost more on the others.
STEP_FACTOR = 2.0
#: ``clip_norm="auto"`` (the classifier's default): a run the search chose for amplified
#: composition clips every per-example gradient at this fraction of the loss's natural Lipschitz
#: constant L, with noise z·CLIP_FACTOR·L (the sensitivity is the clip), and trains at
#: :data:`CLIP_STEP`/CLIP_FACTOR times the step it would take unclipped.  A gradient above the
#: clip then counts as much as any other (its direction, scaled to the clip), so rows the model
#: still gets wrong keep pulling while the noise stays as small, relative to the step, as the
#: unclipped run's at CLIP_STEP times its step (DP-SGD practice clips below the gradients' scale:
#: Tramèr & Boneh 2021 at ~1/600 of it).  Composition needs no convexity: the clipped softmax is
#: not the gradient of a convex loss, so such a run takes λ = 0 and is certified by composition
#: alone.  Empirical (docs/accuracy.md §1a: the run the defaults chose refitted clipped, 3 seeds,
#: both adjacencies): on the data the search was designed on, digits +1.6 to +16.6 points,
#: breast_cancer 0 to +2.6, make_classification +0.1 to +0.4, Fashion-MNIST ScatterNet +1.3 to +1.4
#: (seed 0); on ``fair``, where 0.1·L (the first choice) lost up to 3.6 points, −1.1 to +0.9.
CLIP_FACTOR = 0.3
#: The clipped composition run's step, in units of the unclipped step over CLIP_FACTOR (above).
CLIP_STEP = 1.5
#: The batchings searched under add/remove adjacency, where :class:`~noisysgd.run.Run`
#: refuses cyclic and full batches (an added row moves every later batch):
#: Poisson batches at the rate b/n of the declared public n, certified by composition with
#: sensitivity L (Run refuses ``sample`` there too: an added row changes every other row's
#: chance b/m).  The epochs are those of the cyclic grid.
ADD_REMOVE_BATCHING = "poisson"


def with_legacy_defaults(params: dict) -> dict:
    """A copy of estimator ``params`` (``get_params()``) with every "auto" among
    epochs, batch_size, batching and alpha replaced by its pre-auto default
    (:data:`LEGACY`): for callers that must know the exact run before fitting
    (:class:`noisysgd.NoisySGDClassifierCV` plans and accounts every candidate run).

    >>> with_legacy_defaults({"epochs": "auto", "alpha": 0.5, "batching": "auto", "batch_size": 32})
    {'epochs': 100, 'alpha': 0.5, 'batching': 'cyclic', 'batch_size': 32}
    """
    out = dict(params)
    for k, v in LEGACY.items():
        if is_auto(out.get(k)):
            out[k] = v
    return out


#: Whether the search skips the rows that cannot win (:func:`_candidate`); False calibrates every
#: row, for checking that the choice is the same.
PRUNE = True

#: Relative tolerance of the search's calibrations (the final one is the accountant's default).
SEARCH_REL_TOL = 1e-2


@dataclass(frozen=True)
class AutoConfig:
    """The chosen configuration, the proxy of every candidate, and why."""

    chosen: dict
    candidates: tuple
    fixed: dict
    assumptions: dict = field(default_factory=dict)

    @property
    def explanation(self) -> str:
        c = self.chosen
        auto = [k for k in ("batching", "batch_size", "epochs", "alpha") if k not in self.fixed]
        legacy = next((r for r in self.candidates if r.get("legacy")), None)
        text = (
            f"{_regime_why(c)}; "
            f"chose batching={c['batching']!r}, batch_size={c['batch_size']}, epochs={c['epochs']}, "
            f"alpha={c['alpha']:g}, learning_rate={c['learning_rate']:.4g} (z = {c['noise_multiplier']:.4g} "
            f"in the search) among {len(self.candidates)} candidates for {', '.join(auto) or 'nothing'}, "
            f"by the smallest excess-risk proxy {c['proxy']:.4g} ({c['bound']} bound: noise {c['noise_term']:.3g}, "
            f"optimisation {c['optimisation_term']:.3g}, regularization bias {c['bias_term']:.3g}); "
            f"public inputs{'' if self.assumptions.get('curvature_ratio') is not None else ' only'}: n, d, "
            f"outputs, epsilon, delta, feature clip, loss constants, and an "
            f"assumed model norm B = {self.assumptions['model_norm']:g}"
        )
        if self.assumptions.get("curvature_ratio") is not None:
            text += (f"; the composition regime's smoothness is the data's, {self.assumptions['curvature_ratio']:.3g} "
                     "of the worst case, from the private curvature query (charged to the certificate)")
        if legacy is not None:
            text += (f"; the pre-auto defaults score {legacy['proxy']:.4g}" if legacy.get("proxy") is not None
                     else "; the pre-auto defaults score more (their proxy cannot reach the chosen one's)")
        return text

    def to_dict(self) -> dict:
        return {"chosen": dict(self.chosen), "fixed": dict(self.fixed),
                "assumptions": dict(self.assumptions), "explanation": self.explanation,
                "candidates": [dict(r) for r in self.candidates]}


def _regime_why(c: dict) -> str:
    if c.get("regime") == "amplified composition":
        step = (f"its step size chosen for optimisation ({STEP_FACTOR:g}× the smooth bound's 1/(M + λ + √(VT/2)/B), "
                "below 1/(M + λ)), free of any contraction limit" if c.get("optimal_step")
                else "its step size the smoothness rule")
        return (f"regime: amplified composition (DP-SGD's: Poisson batches, {step}; every iterate covered, "
                f"calibrated in the search by {c.get('analysis') or 'composition'}, certified by the run's best "
                "bound), its proxy the smallest")
    if c.get("regime") == "hidden state":
        return (f"regime: hidden state (only the last iterate released; {c.get('analysis')} certifies it, "
                "the step size under its contraction limit), its proxy the smallest")
    if c.get("regime") == "composition fallback":
        return ("regime: composition (every hidden-state analysis refused the run the fixed parameters "
                "leave), its proxy the smallest")
    return "regime: the given noise multiplier"


def _variance(*, n: int, p: int, b: int, z: float, L: float) -> float:
    """V = p(zL/b)² + L²/b: the privacy noise on p coordinates of std zL/b each, plus the sampling
    variance of a batch of b per-example gradients of norm ≤ L (0 for a full batch)."""
    return p * (z * L / b) ** 2 + (L * L / b if b < n else 0.0)


def proxy_terms(*, n: int, p: int, b: int, steps: int, eta: float, lam: float, z: float, L: float,
                M: float, B: float) -> dict:
    """The terms of the utility proxy (module docstring) for one run: the smaller
    of the strongly convex and the convex bound on the regularized excess risk,
    plus the bias λB²/2 of the regularization."""
    V = _variance(n=n, p=p, b=b, z=z, L=L)
    # convex bound (any λ >= 0): B²/(2ηT) + η G²/2, G² = (L + λB)² + p(zL/b)²
    convex = (B * B / (2.0 * eta * steps), 0.5 * eta * ((L + lam * B) ** 2 + p * (z * L / b) ** 2))
    bounds = {"convex": convex}
    if M is not None and eta * (M + lam) < 1.0:
        # smooth convex SGD (Bubeck 2015, Thm 6.3 proof, for η = 1/(M + λ + 1/γ)): only the
        # variance V of the stochastic gradient costs, not its mean
        bounds["smooth"] = (B * B / (2.0 * eta * steps), 0.5 * eta * V / (1.0 - eta * (M + lam)))
    if lam > 0 and eta * (M + lam) <= 1.0:  # the one-step inequality needs η ≤ 1/(M + λ)
        c = 1.0 - eta * lam
        ct = math.exp(steps * math.log1p(-eta * lam)) if c > 0 else 0.0
        bounds["strongly-convex"] = (0.5 * (M + lam) * ct * B * B,
                                     0.5 * (M + lam) * eta * V * (1.0 - ct) / lam)
    which = min(bounds, key=lambda k: sum(bounds[k]))
    opt, noise = bounds[which]
    bias = 0.5 * lam * B * B
    return {"proxy": opt + noise + bias, "optimisation_term": opt, "noise_term": noise,
            "bias_term": bias, "bound": which,
            **{f"{k}_bound": sum(v) for k, v in bounds.items()}}


def _learning_rate(rule, smoothness: float, lam: float) -> float:
    if rule == "auto":
        return 0.5 / smoothness
    if rule == "max":
        return 0.98 * 2.0 / (lam + smoothness)
    return float(rule)


def _model_norm(d: int, feature_clip: float) -> float:
    """The assumed norm B of a good model: :data:`MODEL_NORM`·max(1, √(d/64))/R (module docstring).

    >>> _model_norm(64, 1.0), _model_norm(5, 1.0), _model_norm(256, 2.0)
    (10.0, 10.0, 10.0)
    """
    return MODEL_NORM * max(1.0, math.sqrt(d / 64.0)) / feature_clip


def auto_config(*, n: int, d: int, outputs: int, epsilon: float | None, delta: float, lipschitz: float,
                smoothness: float, convex: bool = True, feature_clip: float = 1.0,
                adjacency: str = "replace", noise_multiplier: float | None = None,
                learning_rate="auto", fixed: dict | None = None,
                model_norm: float | None = None, curvature: float | None = None) -> AutoConfig:
    """Choose (batching, batch_size, epochs, alpha) for the parameters not in
    ``fixed`` by the smallest utility proxy (module docstring), from public
    quantities only: ``n`` examples, ``d`` features, ``outputs`` scores per
    example (1, or the number of classes), the privacy target (``epsilon``,
    ``delta``) or a given ``noise_multiplier``, the loss constants
    ``lipschitz`` L and ``smoothness`` M (of the unregularized loss; + λ is
    added per candidate), the ``feature_clip`` R and the ``adjacency``.
    ``learning_rate`` is a number or the rule "auto"/"max" of
    :func:`noisysgd.fit_private`.  ``curvature``: λ̂/R̄² of a private curvature query
    (:mod:`noisysgd.curvature`), the share of the worst-case smoothness the data's own objective
    has; the amplified-composition regime's step size (and its proxy) then use M·``curvature``
    (its certificate does not depend on the step), every other row the worst case M.  Cached:
    the same inputs give the same answer without calibrating again.  With :data:`PRUNE` set to
    False it calibrates every row (the same choice, about ten times slower: for checking).

    >>> cfg = auto_config(n=20000, d=50, outputs=1, epsilon=3.0, delta=1e-5, lipschitz=1.0,
    ...                   smoothness=0.5)
    >>> c = cfg.chosen
    >>> c["batching"], c["batch_size"], c["epochs"], c["alpha"], c["analysis"]
    ('cyclic', 1024, 300, 1e-05, 'shifted-interpolation')
    >>> composition = [r for r in cfg.candidates if r["regime"] == "amplified composition"]
    >>> c["regime"], all(r.get("pruned") or r["proxy"] > c["proxy"] for r in composition)
    ('hidden state', True)
    >>> c["proxy"] == min(r["proxy"] for r in cfg.candidates if r["proxy"] is not None)
    True
    """
    fixed = {} if fixed is None else dict(fixed)
    for name in fixed:
        if name not in LEGACY:
            raise ValueError(f"fixed must name only {', '.join(LEGACY)}. Found {name!r}.")
    if (epsilon is None) == (noise_multiplier is None):
        raise ValueError("auto_config needs exactly one of epsilon and noise_multiplier. "
                         f"Found epsilon={epsilon!r}, noise_multiplier={noise_multiplier!r}.")
    B = _model_norm(d, feature_clip) if model_norm is None else float(model_norm)
    if curvature is not None and not (0.0 < curvature <= 1.0):
        raise ValueError(f"curvature must be in (0, 1]. Found {curvature!r}.")
    key = (int(n), int(d), int(outputs), epsilon, float(delta), float(lipschitz),
           None if smoothness is None else float(smoothness), bool(convex), float(feature_clip),
           adjacency, noise_multiplier, learning_rate, tuple(sorted(fixed.items())), B,
           None if curvature is None else float(curvature))
    return _auto_config(key, PRUNE)


@lru_cache(maxsize=256)
def _auto_config(key: tuple, prune: bool) -> AutoConfig:
    n, d, outputs, eps, delta, L, M0, convex, R, adjacency, z_given, lr_rule, fixed_items, B, curvature = key
    fixed = dict(fixed_items)
    p = (d + 1) * outputs
    batchings = (fixed["batching"],) if "batching" in fixed else (
        GRID["batching"] if adjacency == "replace" else (ADD_REMOVE_BATCHING,))
    # λ in units of R² (module docstring, "The rows' scale"): the proxy does not depend on the rows' units
    alphas = (fixed["alpha"],) if "alpha" in fixed else tuple(a * R * R for a in GRID["alpha"])
    if not convex:
        alphas = (0.0,)  # a non-convex (clipped softmax) loss: no strong convexity to claim
    search = tuple(a for a in SEARCH_ANALYSES if a in ANALYSES)
    ctx = _Search(n, p, L, M0, convex, adjacency, eps, delta, z_given, lr_rule, B, search,
                  1.0 if curvature is None else curvature)
    grid = []
    for batching in batchings:
        if batching == "full":
            sizes = (n,)
        elif "batch_size" in fixed and fixed["batch_size"] is not None:
            sizes = (min(fixed["batch_size"], n),)
        else:
            sizes = tuple(sorted({min(b, n) for b in GRID["batch_size"]}))
        epochs_grid = ((fixed["epochs"],) if "epochs" in fixed
                       else GRID["epochs"].get(batching, GRID["epochs"]["cyclic"]))
        grid += [(batching, b, epochs, lam) for b in sizes for epochs in epochs_grid for lam in alphas]
    legacy = {k: fixed.get(k, v) for k, v in LEGACY.items()}
    if adjacency != "replace" and "batching" not in fixed:
        legacy["batching"] = ADD_REMOVE_BATCHING
    if not convex:
        legacy["alpha"] = 0.0
    lb = n if legacy["batching"] == "full" else min(legacy["batch_size"], n)
    legacy_key = (legacy["batching"], lb, legacy["epochs"], legacy["alpha"])
    groups = []  # the amplified-composition regime's (b, epochs), each with its λ grid
    if lr_rule == "auto" and convex and M0 is not None and fixed.get("batching", "poisson") == "poisson":
        epochs_grid = (fixed["epochs"],) if "epochs" in fixed else COMPOSITION_GRID["epochs"]
        groups = [(b, e, alphas) for b in _composition_sizes(n, fixed) for e in epochs_grid]
    keys = grid + ([] if legacy_key in grid else [legacy_key])
    hidden, composition = _search_grid(ctx, keys, groups, prune)
    rows = hidden[:len(grid)] + composition + hidden[len(grid):]
    for r in rows:
        r["legacy"] = (not r.get("optimal_step") and r["batching"] == legacy["batching"] and r["batch_size"] == lb
                       and r["epochs"] == legacy["epochs"] and r["alpha"] == legacy["alpha"])
    ok = [r for r in rows if r["proxy"] is not None]
    if not ok:
        raise ValueError("no configuration of the grid can be calibrated to this target: "
                         + "; ".join(sorted({r["error"] for r in rows if r.get("error")})))
    chosen = min(ok, key=lambda r: (r["proxy"], r["steps"]))
    for r in rows:
        r.setdefault("regime", _regime(r))
    assumptions = {"model_norm": B, "search_analyses": list(search), "search_rel_tol": SEARCH_REL_TOL,
                   "parameters": p, "lipschitz": L, "smoothness": M0,
                   "composition_smoothness": (M0 if M0 is None or curvature is None else M0 * curvature),
                   "curvature_ratio": curvature,
                   "curvature": ("worst case (no curvature query)" if curvature is None else
                                 f"{curvature:.4g} of the worst case, from the private curvature query"),
                   "proxy": "min{(M+λ)/2·[c^T B² + ηV(1−c^T)/λ], B²/(2ηT) + ηG²/2, "
                            "B²/(2ηT) + ηV/(2(1−η(M+λ)))} + λB²/2, c = 1−ηλ, "
                            "V = p(zL/b)² + L²/b, G² = (L+λB)² + p(zL/b)²",
                   "composition_step": f"{STEP_FACTOR:g}/(M + λ + √(VT/2)/B), at most 0.98/(M + λ); ranked at "
                                       "1/(M + λ + √(VT/2)/B) (Bubeck 2015, Thm 6.3)"}
    return AutoConfig(dict(chosen), tuple(rows), fixed, assumptions)


@dataclass(frozen=True)
class _Search:
    """What every candidate of one search shares: n, the parameter count p = (d + 1)·outputs,
    the loss constants L and M₀ (without λ), convexity, the adjacency, the target (ε, δ) or the
    given z, the step-size rule, the model norm B and the analyses that calibrate."""

    n: int
    p: int
    L: float
    M0: float | None
    convex: bool
    adjacency: str
    eps: float | None
    delta: float
    z_given: float | None
    lr_rule: object
    B: float
    search: tuple
    curvature: float = 1.0


def _candidate(ctx: _Search, batching, b, epochs, lam, bound: float = math.inf) -> dict:
    """One row of the hidden-state grid, its z calibrated by ``ctx.search`` — unless it cannot
    beat ``bound`` (the smallest proxy found so far), which is decided without calibrating: the
    proxy is increasing in z for a fixed run (:func:`proxy_terms`: every noise term grows with V or
    G², the others do not move), so the row loses if its proxy at z = 0 is already ≥ ``bound``
    (no evaluation), or if the noise z* at which its proxy reaches ``bound`` misses the target
    (:func:`~noisysgd.analyses.misses`, what one report would say: ε is non-increasing in z for
    every analysis, so the calibrated z, which meets it, lies above z*, and so does its proxy).
    A pruned row records ``pruned`` and the bound it lost to; the chosen row is the one an
    exhaustive search would choose."""
    n, p, L, M0, convex, adjacency = ctx.n, ctx.p, ctx.L, ctx.M0, ctx.convex, ctx.adjacency
    eps, delta, z_given, lr_rule, B, search = ctx.eps, ctx.delta, ctx.z_given, ctx.lr_rule, ctx.B, ctx.search
    M = None if M0 is None else M0 + lam
    row = {"batching": batching, "batch_size": b, "epochs": epochs, "alpha": lam}
    if M is None:
        row.update(proxy=None, error="the loss has no smoothness constant")
        return row
    eta = _learning_rate(lr_rule, M, lam)
    run = Run.from_epochs(epochs=epochs, n=n, batch_size=b, batching=batching, learning_rate=eta,
                          noise_multiplier=1.0 if z_given is None else z_given, lipschitz=L, smoothness=M,
                          strong_convexity=lam, convex=convex, adjacency=adjacency)
    row.update(learning_rate=eta, steps=run.steps)

    def terms_at(z: float) -> dict:
        return proxy_terms(n=n, p=p, b=b, steps=run.steps, eta=eta, lam=lam, z=z, L=L, M=M, B=B)

    if z_given is None:
        if math.isfinite(bound):
            if terms_at(0.0)["proxy"] >= bound:
                row.update(proxy=None, pruned=f"its proxy without noise is already >= {bound:.6g}")
                return row
            z_star = noise_reaching_affine(terms_at, bound, MAX_NOISE, NOISE_AT_TOL)
            missed = False
            if z_star is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    missed = misses(run.replace(noise_multiplier=z_star), epsilon=eps, delta=delta,
                                    analyses=list(search))
            if missed:
                row.update(proxy=None, pruned=f"misses epsilon at z = {z_star:.6g}, where its proxy reaches "
                                              f"{bound:.6g}", noise_multiplier_above=z_star)
                return row
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cal = calibrate(run, epsilon=eps, delta=delta, analyses=list(search), rel_tol=SEARCH_REL_TOL)
        except ValueError as exc:
            row.update(proxy=None, error=str(exc)[:200])
            return row
        z, analysis = cal.noise_multiplier, cal.report.best.analysis
    else:
        z, analysis = z_given, None
    row.update(noise_multiplier=z, analysis=analysis)
    row.update(proxy_terms(n=n, p=p, b=b, steps=run.steps, eta=eta, lam=lam, z=z, L=L, M=M, B=B))
    return row


#: How closely :func:`~noisysgd.noise_search.noise_reaching` brackets the z where a proxy reaches
#: the bound (relative): a wider bracket prunes a little less, never wrongly (it returns the
#: bracket's upper end).
NOISE_AT_TOL = 1e-3


#: The largest noise multiplier a calibration tries (:func:`noisysgd.calibrate`'s default).
MAX_NOISE = 1e6


def _search_grid(ctx: _Search, keys: list, groups: list, prune: bool) -> tuple[list, list]:
    """(the hidden-state rows of ``keys`` (batching, b, epochs, λ), the amplified-composition rows of
    ``groups`` (b, epochs, λs)), each in its order.  With ``prune``, every item is visited from the
    smallest lower bound on its proxy up — the proxy without noise for a hidden-state row, the
    closed-form bound :func:`_composition_floor` for a composition group — and an item whose bound
    at the noise it would need to tie the best proxy so far misses the target is never calibrated
    (:func:`_candidate`, :func:`_composition_group`): the choice is the exhaustive search's."""
    best = math.inf
    hidden, composition = [None] * len(keys), [None] * len(groups)
    items = [("hidden", i) for i in range(len(keys))] + [("composition", j) for j in range(len(groups))]
    prune = prune and ctx.z_given is None and ctx.M0 is not None
    if prune:
        floors = {("hidden", i): _floor(ctx, *keys[i]) for i in range(len(keys))}
        floors.update({("composition", j): _composition_floor(ctx, *groups[j][:2], groups[j][2])(0.0)
                       for j in range(len(groups))})
        # the composition groups first (one calibration each, and the regime that wins at small ε and
        # large noise: its best row sets a low bound early), then the hidden-state rows
        items.sort(key=lambda item: (item[0] == "hidden", floors[item]))
    for kind, i in items:
        if kind == "hidden":
            hidden[i] = [_candidate(ctx, *keys[i], bound=best if prune else math.inf)]
            found = hidden[i]
        else:
            composition[i] = _composition_group(ctx, *groups[i], bound=best if prune else math.inf)
            found = composition[i]
        best = min([best] + [r["proxy"] for r in found if r.get("proxy") is not None])
    return [r for rows in hidden for r in rows], [r for rows in composition for r in rows]


def _composition_floor(ctx: _Search, b: int, epochs: int, alphas) -> Callable[[float], float]:
    """z ↦ a lower bound on the proxy of every row of the composition group (b, epochs) over
    ``alphas``, increasing in z.  A row ranks at a step η* in [base/STEP_RANGE, base·STEP_RANGE]
    (base = 1/(2M), :func:`_composition_row`), and its proxy is the smallest of the bounds that hold
    there plus λB²/2 (:func:`proxy_terms`); so it is at least the smallest, over that interval, of
    each bound — the convex one B²/(2ηT) + ηG²/2 and the smooth one B²/(2ηT) + ηV/(2(1 − ηK))
    (K = M + λ, η < 1/K) are convex in η, so their minimum over the interval is at their stationary
    point clamped into it (B/(G√T) and B/(√(VT) + BK)) — and the strongly convex one is at least
    K/2·min(B²/4, V/(Tλ²)) (with x = ηλ and u = (1 − x)^T: x ≤ 1/T gives u ≥ (1 − 1/T)^T ≥ 1/4,
    x > 1/T gives uB² + (x/λ²)V(1 − u) ≥ min(B², V/(Tλ²)); T ≥ 2).  For a fixed η each bound grows
    with V and G², which grow with z; so does their minimum over a fixed interval."""
    n, p, L, B = ctx.n, ctx.p, ctx.L, ctx.B
    steps = Run.from_epochs(epochs=epochs, n=n, batch_size=b, batching="poisson", learning_rate=1.0,
                            noise_multiplier=1.0, lipschitz=L, adjacency=ctx.adjacency).steps
    T = float(steps)

    def floor(z: float) -> float:
        V = _variance(n=n, p=p, b=b, z=z, L=L)
        out = math.inf
        for lam in alphas:
            M = ctx.M0 * ctx.curvature + lam  # (proxy_terms' M; its bounds use K = M + λ)
            K = M + lam
            lo, hi = 0.5 / M / STEP_RANGE, 0.5 / M * STEP_RANGE
            G2 = (L + lam * B) ** 2 + p * (z * L / b) ** 2
            eta = min(max(B / math.sqrt(G2 * T), lo), hi)
            bounds = [B * B / (2.0 * eta * T) + 0.5 * eta * G2]
            if lo * K < 1.0:
                top = min(hi, (1.0 - 1e-12) / K)
                eta = min(max(B / (math.sqrt(V * T) + B * K), lo), top)
                bounds.append(B * B / (2.0 * eta * T) + eta * V / (2.0 * (1.0 - eta * K)))
            if lam > 0 and steps >= 2:
                bounds.append(0.5 * K * min(B * B / 4.0, V / (T * lam * lam)))
            out = min(out, min(bounds) + 0.5 * lam * B * B)
        return out

    return floor


def _composition_group(ctx: _Search, b: int, epochs: int, alphas, bound: float = math.inf) -> list:
    """The rows of the composition group (b, epochs) over ``alphas`` (:func:`_composition_row`: one
    calibration of z, shared), or, where the group cannot beat ``bound``, its rows marked pruned:
    its floor (:func:`_composition_floor`) is already ≥ ``bound`` at z = 0, or the noise z* at which
    the floor reaches ``bound`` misses the target under the screen's accountant (one report: the
    calibrated z lies above z*, and every row's proxy above the floor there)."""
    def pruned(why: str, **extra) -> list:
        return [{"batching": "poisson", "batch_size": b, "epochs": epochs, "alpha": lam,
                 "regime": "amplified composition", "optimal_step": True, "proxy": None, "pruned": why, **extra}
                for lam in alphas]

    if math.isfinite(bound) and ctx.z_given is None:
        floor = _composition_floor(ctx, b, epochs, alphas)
        if floor(0.0) >= bound:
            return pruned(f"its proxy's lower bound without noise is already >= {bound:.6g}")
        z_star = noise_reaching(floor, bound, MAX_NOISE, NOISE_AT_TOL)
        at = None
        if z_star is not None:
            run = Run.from_epochs(epochs=epochs, n=ctx.n, batch_size=b, batching="poisson", learning_rate=1.0,
                                  noise_multiplier=z_star, lipschitz=ctx.L, adjacency=ctx.adjacency)
            with warnings.catch_warnings(), screen_quadrature():
                warnings.simplefilter("ignore")
                at = epsilon_report(run, delta=ctx.delta, analyses=list(COMPOSITION_SEARCH), orders=SCREEN_ORDERS)
        if at is not None and at.best is not None and at.epsilon > ctx.eps:
            return pruned(f"misses epsilon at z = {z_star:.6g}, where its proxy's lower bound reaches {bound:.6g}",
                          noise_multiplier_above=z_star)
    return [_composition_row(ctx, b, epochs, lam, COMPOSITION_SEARCH, SCREEN_REL_TOL) for lam in alphas]


def _floor(ctx: _Search, batching, b, epochs, lam) -> float:
    """The proxy of a hidden-state row without privacy noise (z = 0): a lower bound on its proxy."""
    M = ctx.M0 + lam
    eta = _learning_rate(ctx.lr_rule, M, lam)
    steps = Run.from_epochs(epochs=epochs, n=ctx.n, batch_size=b, batching=batching, learning_rate=eta,
                            noise_multiplier=1.0, lipschitz=ctx.L, smoothness=M, strong_convexity=lam,
                            convex=ctx.convex, adjacency=ctx.adjacency).steps
    return proxy_terms(n=ctx.n, p=ctx.p, b=b, steps=steps, eta=eta, lam=lam, z=0.0, L=ctx.L, M=M, B=ctx.B)["proxy"]


def _regime(row: dict) -> str | None:
    """The regime a searched row was certified in: "hidden state", "amplified composition"
    (Poisson batches certified by composition), or "composition fallback" (every hidden-state
    analysis refused a run of fixed batches, e.g. with alpha=0)."""
    analysis = row.get("analysis")
    if analysis is None:
        return None
    if not analysis.startswith("composition"):
        return "hidden state"
    return "amplified composition" if row["batching"] == "poisson" else "composition fallback"


def _composition_sizes(n: int, fixed: dict) -> tuple:
    if fixed.get("batch_size") is not None:
        return (min(int(fixed["batch_size"]), n),)
    sizes = tuple(b for b in COMPOSITION_GRID["batch_size"] if 4 * b <= n)
    return sizes or (max(1, 2 ** int(math.floor(math.log2(max(1, n // 4))))),)


#: The composition screen first calibrates on every SCREEN_COARSE-th order of :data:`SCREEN_ORDERS`,
#: then only on the orders within SCREEN_COARSE of the best one there (:func:`_composition_z`).
SCREEN_COARSE = 4


@lru_cache(maxsize=1024)
def _composition_z(n, b, epochs, adjacency, L, eps, delta, analyses, rel_tol):
    """z of a Poisson run of ``epochs`` epochs of rate b/n by ``analyses`` on
    :data:`SCREEN_ORDERS` (no λ, η dependence), coarse to fine: calibrated on every
    :data:`SCREEN_COARSE`-th order, then again on the orders around the best coarse one.  Each answer
    is a calibration on a subset of the orders, so it is at or above the full grid's (a subset's
    minimum ε is at least the full minimum); where the best order of every noise the bisection tries
    lies in that window, it is the full grid's answer (tests/test_config.py), for about a third of
    the quadrature (the replace-one orders cost ~0.7 ms each), on cells 4× wider
    (:func:`~noisysgd.quadrature.screen_quadrature`: still an upper bound, ~0.2 % looser, at half the cost)."""
    run = Run.from_epochs(epochs=epochs, n=n, batch_size=b, batching="poisson", learning_rate=1.0,
                          noise_multiplier=1.0, lipschitz=L, adjacency=adjacency)
    with warnings.catch_warnings(), screen_quadrature():
        warnings.simplefilter("ignore")
        cal = calibrate(run, epsilon=eps, delta=delta, analyses=list(analyses), rel_tol=rel_tol,
                        orders=SCREEN_ORDERS[::SCREEN_COARSE])
        order = cal.report.best.order
        if order in SCREEN_ORDERS:
            k = SCREEN_ORDERS.index(order)
            fine = SCREEN_ORDERS[max(0, k - SCREEN_COARSE + 1):k + SCREEN_COARSE]
            cal = calibrate(run, epsilon=eps, delta=delta, analyses=list(analyses), rel_tol=rel_tol, orders=fine)
    return cal.noise_multiplier, cal.report.best.analysis, run.steps


def _composition_row(ctx: _Search, b, epochs, lam, analyses, rel_tol) -> dict:
    """One candidate of the amplified-composition regime: Poisson batches of b, its step size the
    smooth bound's 1/(M + λ + √(VT/2)/B) (kept within STEP_RANGE of 1/(2(M+λ))), z by ``analyses``."""
    n, p, L, B = ctx.n, ctx.p, ctx.L, ctx.B
    M = ctx.M0 * ctx.curvature + lam  # the data's own smoothness where a private query measured it
    row = {"batching": "poisson", "batch_size": b, "epochs": epochs, "alpha": lam,
           "regime": "amplified composition", "optimal_step": True}
    if ctx.z_given is None:
        try:
            z, analysis, steps = _composition_z(n, b, epochs, ctx.adjacency, L, ctx.eps, ctx.delta, analyses,
                                                rel_tol)
        except ValueError as exc:
            row.update(proxy=None, error=str(exc)[:200])
            return row
    else:
        z, analysis = ctx.z_given, None
        steps = Run.from_epochs(epochs=epochs, n=n, batch_size=b, batching="poisson", learning_rate=1.0,
                                noise_multiplier=z, lipschitz=L, adjacency=ctx.adjacency).steps
    base = 0.5 / M
    V = _variance(n=n, p=p, b=b, z=z, L=L)
    # Bubeck 2015, Thm 6.3 (smooth convex SGD, variance V): η = 1/(M + λ + 1/γ), γ = (B/√V)·√(2/T)
    eta = 1.0 / (M + math.sqrt(V * steps / 2.0) / B)
    eta = min(max(eta, base / STEP_RANGE), base * STEP_RANGE)
    # ranked by the proxy at the bound's own step η*; trained at STEP_FACTOR·η*, within the smooth
    # bound's range η < 1/(M + λ) (module docstring: the bound over-charges the noise of a GLM)
    trained = min(STEP_FACTOR * eta, 0.98 / M)
    row.update(learning_rate=trained, bound_step=eta, steps=steps, noise_multiplier=z, analysis=analysis)
    row.update(proxy_terms(n=n, p=p, b=b, steps=steps, eta=eta, lam=lam, z=z, L=L, M=M, B=B))
    return row


def fixed_parameters(p: dict) -> dict:
    """The parameters among batching, batch_size, epochs and alpha that ``p`` (an estimator's
    checked parameters) does not leave to "auto", as :func:`configure` resolves them."""
    fixed = {k: p[k] for k in ("batching", "batch_size", "epochs", "alpha") if p[k] != "auto"}
    if "batch_size" in fixed and "batching" not in fixed:
        # an explicit batch size asks for minibatches; None for all the data at once
        # (add/remove: Poisson minibatches, the only ones it admits at sensitivity L)
        minibatch = "cyclic" if p["adjacency"] == "replace" else ADD_REMOVE_BATCHING
        fixed["batching"] = minibatch if fixed["batch_size"] is not None else "full"
    if fixed.get("batching") not in (None, "cyclic", "full") and "batch_size" not in fixed:
        fixed["batch_size"] = LEGACY["batch_size"]
    if fixed.get("batching") == "full":
        fixed.pop("batch_size", None)
    return fixed


def composition_searched(p: dict) -> bool:
    """Whether :func:`configure` searches the amplified-composition regime for ``p`` (a target ε,
    something left to "auto", ``learning_rate="auto"``, batching left to the search or Poisson;
    the loss must also be convex with a smoothness constant, which the caller checks)."""
    return (p["epsilon"] is not None and p["learning_rate"] == "auto"
            and any(p[k] == "auto" for k in ("batching", "batch_size", "epochs", "alpha"))
            and fixed_parameters(p).get("batching", "poisson") == "poisson")


def configure(p: dict, loss, n: int, d: int, target_bound, curvature: float | None = None,
              search_epsilon: float | None = None) -> dict:
    """Fill the "auto" epochs, batch_size, batching and alpha of ``p`` (an estimator's checked
    parameters: those keys plus epsilon, delta, noise_multiplier, learning_rate, feature_clip,
    clip_norm, diameter, adjacency) in place, from public quantities only (:func:`auto_config`),
    for ``n`` rows of ``d`` features; returns the certificate's "config" entry.  The estimators,
    ``noisysgd train`` and ``NoisySGDClassifierCV`` all choose through it.  ``curvature``: the
    ratio of a private curvature query (:func:`noisysgd.curvature.private_curvature_within`), or None.
    ``search_epsilon``: the ε the search calibrates its candidates to, where it differs from
    ``p["epsilon"]`` (the pipeline's estimate of the run's ε once queries asked after the search's
    choice are composed in, :func:`noisysgd.pipeline.fit_declared`); None: ``p["epsilon"]``."""
    from .private_fit import default_delta as _default_delta

    names = ("batching", "batch_size", "epochs", "alpha")
    clip_auto = p.get("clip_norm") in ("auto", "adaptive")
    adaptive = p.get("clip_norm") == "adaptive"
    p["clip_norm"] = declared_clip_norm(p.get("clip_norm"))  # clipped below only if the search picks composition
    auto = [k for k in names if p[k] == "auto"]
    if not auto:
        if adaptive:
            raise ValueError("clip_norm='adaptive' needs the automatic configuration (leave batching, batch_size, "
                             "epochs or alpha to 'auto'): it clips adaptively only a run the search shapes for "
                             "amplified composition.")
        return {"auto": []}
    fixed = fixed_parameters(p)
    delta = p["delta"] if p["delta"] is not None else _default_delta(n)
    c = loss.constants(feature_clip=p["feature_clip"], clip_norm=p["clip_norm"], diameter=p["diameter"],
                       target_bound=target_bound, intercept_scaling=p.get("intercept_scaling", 1.0))
    if c.smoothness is None:
        # no smoothness (a clipped softmax): no proxy to rank by, no strong convexity to
        # claim; the pre-auto defaults with alpha=0, and fit_private checks the step size
        for k in auto:
            p[k] = 0.0 if k == "alpha" else LEGACY[k]
            if k == "batching" and p["adjacency"] != "replace":
                p[k] = ADD_REMOVE_BATCHING
        if p["batching"] == "full":
            p["batch_size"] = None
        return {"auto": auto, "explanation": "the loss has no smoothness constant (not convex): "
                "the pre-auto defaults with alpha=0, no search"}
    outputs = 1 if loss.n_classes is None else loss.n_classes
    eps = p["epsilon"] if search_epsilon is None or p["epsilon"] is None else float(search_epsilon)
    cfg = auto_config(n=n, d=d, outputs=outputs, epsilon=eps, delta=delta, lipschitz=c.lipschitz,
                      smoothness=c.smoothness, convex=c.convex, feature_clip=p["feature_clip"],
                      adjacency=p["adjacency"], noise_multiplier=p["noise_multiplier"],
                      learning_rate=p["learning_rate"], fixed=fixed, curvature=curvature)
    for k in names:
        if p[k] == "auto":
            p[k] = cfg.chosen[k]
    if cfg.chosen.get("optimal_step"):  # the composition regime: its step size is part of the choice
        p["learning_rate"] = cfg.chosen["learning_rate"]
    if p["batching"] == "full":
        p["batch_size"] = None
    out = cfg.to_dict()
    out["auto"] = auto
    if clip_auto and cfg.chosen.get("optimal_step"):
        clip = _composition_clip(p, loss, c.lipschitz, target_bound, fixed)
        if clip is not None and adaptive:  # the clip starts there and follows the gradients' median
            from .run import AdaptiveClip

            p["adaptive_clip"] = AdaptiveClip()
            clip.update(adaptive=p["adaptive_clip"].to_dict(),
                        rule=clip["rule"] + "; then adaptive (clip_norm='adaptive'): the clip follows the median "
                             "gradient norm, privately counted (Andrew et al. 2021), from that start")
        elif clip is not None:
            clip["adaptive"] = {"chosen": False, "why": ADAPTIVE_NOT_CHOSEN}
        if clip is not None:
            out["clip"] = clip
            out["explanation"] += (f"; clipped at {clip['clip_norm']:.4g} ({CLIP_FACTOR:g} of the natural Lipschitz "
                                   f"constant {c.lipschitz:.4g}, clip_norm='auto'), trained at learning_rate "
                                   f"{clip['learning_rate']:.4g}" + (", alpha 0" if clip["alpha_zeroed"] else ""))
    return out


#: Why ``clip_norm="auto"`` keeps the clip fixed (``config["clip"]["adaptive"]``): the expected
#: utility of adaptive clipping, measured on the evidence tables (docs/accuracy.md §1b), is not
#: positive on any of them, whatever public quantity (n, b, z, ε) one conditions on there.
ADAPTIVE_NOT_CHOSEN = (
    "fixed clip: adaptive clipping (clip_norm='adaptive', Andrew et al. 2021) gained on none of the "
    "evidence tables (docs/accuracy.md §1b: -7 to +0.1 points; where z/b is small it matches the fixed "
    "clip, where it is large the noisy quantile loses up to 20 points), so the defaults do not choose it")


def declared_clip_norm(value):
    """The clip norm as far as it is known before the configuration is chosen: ``"auto"`` is the
    loss's natural constant (None) until :func:`configure` picks the amplified-composition regime."""
    return None if is_auto(value) or (isinstance(value, str) and value == "adaptive") else value


def _composition_clip(p: dict, loss, L: float, target_bound, fixed: dict) -> dict | None:
    """``clip_norm="auto"`` in the amplified-composition regime (:data:`CLIP_FACTOR`): sets ``p``'s
    clip_norm, learning_rate (and alpha, where the clipped loss is not convex: λ = 0 then) in place
    and returns what it did, or None where it does not apply: a regression loss (the factors were
    measured on classification only), or an alpha the caller fixed above 0 for a loss that clipping
    makes non-convex."""
    if loss.uses_target_bound:
        return None
    clip = CLIP_FACTOR * L
    clipped = loss.constants(feature_clip=p["feature_clip"], clip_norm=clip, diameter=p["diameter"],
                             target_bound=target_bound, intercept_scaling=p.get("intercept_scaling", 1.0))
    zeroed = not clipped.convex and p["alpha"] != 0
    if zeroed and "alpha" in fixed:
        return None  # a strong convexity the user asked for: keep the unclipped (convex) run
    unclipped = p["learning_rate"]
    p["clip_norm"] = clip
    p["learning_rate"] = CLIP_STEP * unclipped / CLIP_FACTOR
    if zeroed:
        p["alpha"] = 0.0
    return {"clip_norm": clip, "clip_factor": CLIP_FACTOR, "natural_lipschitz": L, "learning_rate": p["learning_rate"],
            "unclipped_learning_rate": unclipped, "alpha_zeroed": zeroed,
            "rule": f"clip at {CLIP_FACTOR:g}·L, step {CLIP_STEP:g}/{CLIP_FACTOR:g} times the unclipped one"
                    + ("; alpha 0 (the clipped softmax is not convex: composition certifies it)" if zeroed else "")}
