"""The standard composition baseline: every intermediate iterate is released.

This is the bound every hidden-state paper compares against (Altschuler &
Talwar eq. (1.1); Ye & Shokri §2; Ryffel et al. §5 via Opacus).  Each step is a
Gaussian mechanism on the gradient sum (noise std z·L, sensitivity 2L under
``replace`` and L under ``add-remove``), composed over the steps that can touch
the differing example:

* ``poisson`` and ``sample``: every step is a sampled Gaussian mechanism with
  q = b/n, composed over all T steps (Abadi et al. 2016; Mironov, Talwar &
  Zhang 2019).  Under ``replace`` with ``poisson`` batches a step is the
  tight replace-one pair (1−q)N(0,σ²)+qN(+L,σ²) vs (1−q)N(0,σ²)+qN(−L,σ²)
  (Zhu, Dong & Wang 2022; Lebeda et al. 2024; see
  :func:`~noisysgd.rdp.replace_one_sampled_gaussian_rdp`, and dp_accounting's
  ``REPLACE_ONE`` PLD for ``composition-pld``), never looser than the
  add/remove-style sampled Gaussian with sensitivity 2L that Altschuler &
  Talwar's baseline (1.1) and their Appendix B use (Remark B.2: 2L → L for
  add/remove).  For ``sample`` (fixed-size batches) we keep that 2L pair,
  following Altschuler & Talwar, who account their uniformly sampled batches
  with the same S_α(b/n, ·).  Under ``add-remove`` only ``poisson`` is
  admitted, at the fixed rate b/n of the declared public n, with
  sensitivity L.  (``sample``, ``shuffle``, ``shuffle-once``, ``cyclic``
  and ``full`` under ``add-remove`` are refused by :class:`~noisysgd.run.Run`
  — ``sample`` because every other row's chance b/m moves with the number
  of rows m; the others because
  an added row moves every later batch, so every step's sum moves by up to
  2L — a linear instance attains μ = 2√T/z, √(steps per epoch) times the
  replace-one composition; before 0.2.0 they were certified with L on the
  touched epochs only.)  ``composition-pld`` composes dp_accounting's
  add and remove directions separately and takes the larger; for fixed-size
  batches an adversary could mix directions across steps (Lebeda et al. 2024,
  "pitfall 1").  Checked on small instances with dp_accounting (q ∈ {0.1,
  0.05, 0.2, 0.5}, T ≤ 100, k remove-like and T − k add-like steps), and at
  the Fashion-MNIST scale (q = 0.04, noise/sensitivity 8.15, T = 3000; test
  ``test_mixing_directions_across_steps_does_not_beat_the_pure_composition``):
  the mixed compositions stayed below the larger pure one (by 0.4–7 %); this
  is a numerical check of the add/remove family only, not a proof.
* ``shuffle`` and ``cyclic``: an example is used at most once per epoch and
  *not* at a random step independent of the others, so there is no
  amplification by sampling: one Gaussian mechanism per (possibly partial)
  epoch.  Libraries that account shuffled batches as Poisson-sampled
  under-report ε; this one does not.
* ``full``: one Gaussian mechanism per step.

Two variants: ``composition`` composes RDP (what the papers compute) and
``composition-pld`` composes privacy loss distributions with dp_accounting's
PLD accountant (pessimistic discretisation, so still an upper bound; the
tightest composition available, typically 5–15% below RDP).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..gdp import gdp_epsilon
from ..pld import compose_exact, epsilon_for_delta, pad_infinity, sampled_gaussian_pld, self_compose
from ..rdp import gaussian_rdp, replace_one_sampled_gaussian_rdp, sampled_gaussian_rdp
from ..run import Run
from .base import Analysis, RDPAnalysis, check_steps

__all__ = ["Composition", "CompositionPLD", "clt_noise_multiplier"]

_ASSUMPTIONS = [
    "every per-example gradient has L2 norm at most L (Lipschitz loss or per-example clipping to L)",
    "each step adds Gaussian noise of standard deviation z·L to the gradient sum (z·L/b to the mean)",
    "batches are formed exactly as the batching scheme says",
    "no convexity, smoothness or bounded domain is needed: every iterate may be public",
]


#: The kinds of composed mechanism that are sampled Gaussians.
_SAMPLED = ("sampled-gaussian", "sampled-gaussian-replace-one")


def _mechanism(run: Run) -> tuple[str, int, float, float]:
    """(kind, count, sampling rate, noise/sensitivity) of the composed mechanism.

    ``sampled-gaussian-replace-one`` (Poisson batches under ``replace``): σ is
    still noise / sensitivity (2L), so the replace-one pair's shift ±L is ±1/2
    in these units (:func:`replace_one_sampled_gaussian_rdp` takes 2σ)."""
    sigma = run.noise_to_sensitivity
    if run.batching in ("poisson", "sample"):
        if run.batch_size == run.n:
            return "gaussian", run.steps, 1.0, sigma
        if run.batching == "poisson" and run.adjacency == "replace":
            return "sampled-gaussian-replace-one", run.steps, run.sampling_rate, sigma
        return "sampled-gaussian", run.steps, run.sampling_rate, sigma
    # shuffle/cyclic: once per (possibly partial) epoch; full: every step (1 step per epoch).
    return "gaussian", run.epochs_touched, 1.0, sigma


def clt_noise_multiplier(run: Run, mu: float) -> float | None:
    """The noise multiplier at which the central limit theorem of Poisson-subsampled Gaussians
    makes ``run`` μ-GDP — a *starting point* for a calibration, never a bound: μ ≈
    q·√(T·κ(σ)) with κ = e^{1/σ²} − 1 for the add/remove pair (Bu, Dong, Long & Su 2020,
    Theorem 5; Dong, Roth & Su 2022, Theorem 3.7), and for the replace-one pair (shifts ±1 under
    noise 2σ) its χ² analogue κ = 2·(e^{1/(2σ)²} − e^{−1/(2σ)²}) (≈ 4× the add/remove one for
    large σ).  Within 0.2 % of the PLD's answer for replace-one and 4 % below it for add/remove
    on runs of 10³–10⁴ steps (measured); None for unsampled runs (one exact Gaussian) or when
    μ is not positive."""
    if not (mu > 0.0) or run.steps is None:
        return None
    kind, count, q, sigma1 = _mechanism(run.replace(noise_multiplier=1.0))   # σ(z) = z·σ(1)
    if kind not in _SAMPLED:
        return None

    def kappa(z: float) -> float:
        s = z * sigma1
        if kind == "sampled-gaussian-replace-one":
            a = 1.0 / (2.0 * s) ** 2
            return 2.0 * (math.exp(min(a, 700.0)) - math.exp(-a))
        return math.expm1(min(1.0 / (s * s), 700.0))

    lo, hi = 1e-3, 1e6      # q·√(T·κ(z)) decreases in z: bisect in log z to 1e-6
    if q * math.sqrt(count * kappa(hi)) > mu or q * math.sqrt(count * kappa(lo)) < mu:
        return None
    while hi / lo > 1.0 + 1e-6:
        mid = math.sqrt(lo * hi)
        if q * math.sqrt(count * kappa(mid)) > mu:
            lo = mid
        else:
            hi = mid
    return hi


def _per_mechanism_rdp(kind: str, q: float, sigma: float, orders) -> np.ndarray:
    if kind == "sampled-gaussian":
        return sampled_gaussian_rdp(orders, q, sigma)
    if kind == "sampled-gaussian-replace-one":
        return replace_one_sampled_gaussian_rdp(orders, q, 2.0 * sigma)
    return gaussian_rdp(orders, sigma)


def _details(run: Run) -> dict:
    kind, count, q, sigma = _mechanism(run)
    return {
        "mechanism": kind,
        "compositions": count,
        "sampling_rate": q,
        "noise_to_sensitivity": sigma,
        "sensitivity": run.sensitivity,
    }


class Composition(RDPAnalysis):
    """RDP composition over every step that can touch the differing example."""

    name = "composition"
    adaptive_clip_ok = True  # every iterate accounted: the clip may move (Run.adaptive_clip)
    uses_learning_rate = False
    citation = (
        "Abadi et al. 2016; Mironov, Talwar & Zhang 2019 (sampled Gaussian RDP); "
        "Altschuler & Talwar eq. (1.1) and Appendix B"
    )

    def assumptions(self) -> list[str]:
        return list(_ASSUMPTIONS)

    def why_not(self, run: Run) -> str | None:
        return None

    def rdp(self, run: Run, orders) -> np.ndarray:
        kind, count, q, sigma = _mechanism(run)
        return count * _per_mechanism_rdp(kind, q, sigma, orders)

    def rdp_over_steps(self, run: Run, steps, orders) -> np.ndarray:
        """Closed form: the count of composed mechanisms times one mechanism's RDP."""
        ts = check_steps(steps)
        kind, _, q, sigma = _mechanism(run)
        counts = np.array([_mechanism(run.replace(steps=int(t)))[1] for t in ts], dtype=float) \
            if kind not in _SAMPLED else ts.astype(float)
        return counts[:, None] * _per_mechanism_rdp(kind, q, sigma, orders)[None, :]

    def details(self, run: Run) -> dict:
        return _details(run)


class CompositionPLD(Analysis):
    """Privacy-loss-distribution composition through dp_accounting's PLD accountant."""

    name = "composition-pld"
    adaptive_clip_ok = True
    uses_learning_rate = False
    citation = (
        "Koskela et al. 2020; Doroshenko et al. 2022 (connect-the-dots PLD), "
        "as implemented by Google's dp_accounting PLDAccountant"
    )
    #: dp_accounting's discretisation of the privacy loss (pessimistic rounding).
    value_discretization_interval = 1e-4

    def assumptions(self) -> list[str]:
        return list(_ASSUMPTIONS)

    def why_not(self, run: Run) -> str | None:
        return None

    def dp_event(self, run: Run):
        """The dp_accounting event this run composes to: add/remove with the
        sensitivity folded in, except Poisson batches under ``replace``, whose
        event (Gaussian of standard deviation z, sensitivity 1) is to be
        accounted with ``NeighboringRelation.REPLACE_ONE``."""
        import dp_accounting

        kind, count, q, sigma = _mechanism(run)
        if kind not in _SAMPLED:
            # k Gaussian mechanisms of the same sensitivity compose *exactly* to one
            # with σ/√k (their privacy-loss distributions are Gaussian): one event,
            # instead of a PLD self-composed k times (minutes for k in the thousands).
            return dp_accounting.GaussianDpEvent(sigma / math.sqrt(count))
        return _sampled_event(q, sigma, count, replace_one=kind == "sampled-gaussian-replace-one")

    def interval(self, run: Run) -> float:
        """The PLD's value discretisation: 1e-4, widened in proportion once the
        RDP composition bound exceeds 20 (interval·ε_RDP/20).  The PLD's cost
        grows with ε/interval — minutes for ε in the hundreds at 1e-4 — while
        its pessimistic rounding stays an upper bound at any interval (the
        relative effect stays ~1e-5)."""
        kind, count, q, sigma = _mechanism(run)
        # one integer order alone (exact series, no fractional one): where it already puts ε under 20,
        # so does the minimum over the orders (each order's bound only falls in the envelope)
        probe = count * float(sampled_gaussian_rdp(_PROBE_ORDER, q, sigma)[0]) + math.log(1e5) / (_PROBE_ORDER[0] - 1)
        if probe <= 20.0 * (1 - 1e-9):
            return self.value_discretization_interval
        rdp = count * sampled_gaussian_rdp(_INTERVAL_ORDERS, q, sigma)
        coarse = float(np.min(rdp + np.log(1e5) / (_INTERVAL_ORDERS - 1)))  # ε at δ = 1e-5
        return self.value_discretization_interval * max(1.0, coarse / 20.0)

    def _epsilon(self, run: Run, delta: float) -> float:
        """ε(δ) of the composed mechanism (see :meth:`_evaluate`)."""
        kind, count, _, sigma = _mechanism(run)
        if kind not in _SAMPLED:
            return gdp_epsilon(math.sqrt(count) / sigma, float(delta))
        return _pld_epsilon(run.sampling_rate, sigma, count, float(delta), self.interval(run),
                            kind == "sampled-gaussian-replace-one")

    #: How much coarser than :meth:`interval` the grid of :meth:`search_epsilon` is.
    search_coarsening = 10

    def search_epsilon(self, run: Run, delta: float) -> float:
        """ε(δ) on a grid :attr:`search_coarsening` times coarser than the certificate's (2–4×
        cheaper: the PMFs are 10× shorter, and the self-composition's FFT dominates), for a
        calibration to find where to evaluate :meth:`_epsilon`.  Pessimistic rounding to a coarser
        nested grid rounds every loss up at least as far, so this is typically a little above the
        certificate's ε (~1e-3 relative at 10×) — never a certificate itself: the calibration then
        decides on the certificate's grid (the same three evaluations there at 3× and at 10×, on the
        24 fits of benchmarks/fit_speed.py, and the same z to 3.5e-5)."""
        kind, count, _, sigma = _mechanism(run)
        if kind not in _SAMPLED:
            return self._epsilon(run, delta)
        return _pld_epsilon(run.sampling_rate, sigma, count, float(delta),
                            self.interval(run) * self.search_coarsening, kind == "sampled-gaussian-replace-one")

    def _evaluate(self, run, *, delta, orders, conversion):
        # The sensitivity (2L under `replace`) is folded into noise_to_sensitivity;
        # Poisson batches under `replace` use the replace-one pair (±L shifts).
        details = _details(run)
        kind, count, _, sigma = _mechanism(run)
        eps = self._epsilon(run, delta)
        if kind not in _SAMPLED:
            # Composed Gaussians are one Gaussian mechanism, μ = √k/σ: its (ε, δ)
            # curve is known exactly (Dong, Roth & Su 2022, Corollary 2.13), which
            # is what the PLD approximates from above — and the PLD's grid of
            # width ε/1e-4 makes it take minutes once ε is in the thousands.
            details["method"] = "exact Gaussian-mechanism conversion (mu-GDP), no discretization"
            details["mu"] = math.sqrt(count) / sigma
        else:
            details["method"] = "dp_accounting PLD (pessimistic discretization)"
            details["value_discretization_interval"] = self.interval(run)
        return self.applied(delta, epsilon=eps if math.isfinite(eps) else math.inf, details=details)

    #: How many step counts of a curve get their own PLD composition (log-spaced,
    #: always including the largest); see :meth:`_curve`.
    curve_points = 8

    def _curve(self, run, steps, *, delta, orders, conversion):
        """Exact at every step count for unsampled batchings (one Gaussian).  For
        sampled batches a PLD composition costs ~0.5 s, so it is computed at
        :attr:`curve_points` log-spaced step counts and every other count gets
        the value of the next larger computed one: composition never lowers ε
        in the number of steps, so that is an upper bound (``exact`` False)."""
        kind = _mechanism(run)[0]
        if kind not in _SAMPLED:
            eps = np.array([self._epsilon(run.replace(steps=int(t)), delta) for t in steps])
            return {"epsilon": eps}
        order = np.argsort(steps, kind="stable")
        sorted_steps = steps[order]
        picks = np.unique(np.round(np.geomspace(1, sorted_steps.size, self.curve_points)).astype(int) - 1)
        computed = {int(sorted_steps[i]): self._epsilon(run.replace(steps=int(sorted_steps[i])), delta)
                    for i in picks}
        keys = np.array(sorted(computed), dtype=np.int64)
        vals = np.array([computed[int(k)] for k in keys])
        nxt = np.searchsorted(keys, sorted_steps, side="left")  # the next computed count >= T
        eps_sorted = vals[nxt]
        out = np.empty(steps.size)
        out[order] = eps_sorted
        exact = np.empty(steps.size, dtype=bool)
        exact[order] = keys[nxt] == sorted_steps
        return {"epsilon": out, "exact": exact}


#: A few orders for the rough RDP estimate that sets the PLD's discretisation.
_INTERVAL_ORDERS = np.array([1.5, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0])
#: The order of :meth:`CompositionPLD.interval`'s first look (one of :data:`_INTERVAL_ORDERS`).
_PROBE_ORDER = np.array([8.0])


def _sampled_event(q: float, sigma: float, count: int, replace_one: bool = False):
    """The dp_accounting event; ``replace_one``: the event is to be accounted with
    ``NeighboringRelation.REPLACE_ONE``, where dp_accounting's Gaussian of
    standard deviation 2σ and sensitivity 1 is the pair (1−q)N(0)+qN(∓1)
    (shifts ±L with noise z·L = 2σ·L), not the add/remove one with sensitivity 2L."""
    import dp_accounting

    event = dp_accounting.PoissonSampledDpEvent(
        q, dp_accounting.GaussianDpEvent(2.0 * sigma if replace_one else sigma))
    return dp_accounting.SelfComposedDpEvent(event, count)


@functools.lru_cache(maxsize=8)
def _one_step_pld(q: float, sigma: float, interval: float, replace_one: bool = False):
    """dp_accounting's PLD of one Poisson-sampled Gaussian, built once per (q, σ):
    add/remove with σ = noise / sensitivity, or (``replace_one``) the replace-one pair:
    standard deviation 2σ (noise / L), sensitivity 1 (shifts ±L), REPLACE_ONE.  The very
    PMF ``from_gaussian_mechanism`` returns, with its inverse privacy loss vectorised
    (:func:`noisysgd.pld.sampled_gaussian_pld`, checked against it in tests/test_pld.py):
    7–10× faster, and the construction is most of a calibration's time."""
    if replace_one:
        return sampled_gaussian_pld(2.0 * sigma, 1.0, q, interval, replace_one=True)
    return sampled_gaussian_pld(sigma, 1.0, q, interval)


@functools.lru_cache(maxsize=256)
def _pld_epsilon(q: float, sigma: float, count: int, delta: float, interval: float,
                 replace_one: bool = False) -> float:
    """ε(δ) of ``count`` Poisson-sampled Gaussians composed by dp_accounting's PLD
    (pessimistic discretisation) — what its ``PLDAccountant`` does for
    ``_sampled_event(q, σ, count, replace_one)`` (with the matching neighboring
    relation), with the one-step PLD shared.  Cached: calibration and planning
    ask for the same points again."""
    eps = epsilon_for_delta(_self_composed(q, sigma, count, interval, replace_one), delta)
    return eps if math.isfinite(eps) else math.inf


@functools.lru_cache(maxsize=8)
def _self_composed(q: float, sigma: float, count: int, interval: float, replace_one: bool = False):
    """dp_accounting's PLD of ``count`` composed steps (its ``self_compose``, computed by
    :func:`noisysgd.pld.self_compose`), kept for the few noise levels a calibration is at: ε at
    another δ (:func:`_pld_epsilon`), or composed with a preprocessing query
    (:func:`epsilon_with_gaussian_query`), reuses it.  PLDAccountant composes it onto the identity
    PLD first, which truncates its tails again (≤ :data:`IDENTITY_TAIL` of mass, rounded up): here
    that mass is put at +∞ instead (:func:`noisysgd.pld.pad_infinity`: at least as pessimistic, at
    no cost).  ε agrees with PLDAccountant's to ~1e-9 at δ ≥ 1e-5; deeper (δ = 1e-9) the two FFTs'
    rounding moves either by up to ~2e-5 relative from a long-double computation of the same PMF, in
    either direction and by the same amount (2.8e-6 apart at most on 40 runs) — rounding shared with
    dp_accounting, inside the pessimism of the 1e-4 grid where it was checked."""
    return pad_infinity(self_compose(_one_step_pld(q, sigma, interval, replace_one), count), IDENTITY_TAIL)


#: The tail mass dp_accounting's ``compose`` truncates (its default ``tail_mass_truncation``): what
#: composing onto its identity PLD may add to the pessimism of a self-composed PLD.
IDENTITY_TAIL = 1e-15


@functools.lru_cache(maxsize=16)
def _gaussian_query_pld(mu_query: float, interval: float):
    """The PLD of a μ_q-GDP Gaussian query: the pair N(0, 1) vs N(μ_q, 1), pessimistic rounding."""
    return sampled_gaussian_pld(1.0 / mu_query, 1.0, 1.0, interval)


def epsilon_with_gaussian_query(run: Run, delta: float, mu_query: float, coarsening: float = 1) -> float:
    """ε(δ) of ``run``'s composition (:class:`CompositionPLD`) composed with a μ_q-GDP Gaussian
    query answered on the same data (a private preprocessing query), by dp_accounting's PLD:
    the query's pair N(0, 1) vs N(μ_q, 1) composed onto the run's, each with pessimistic
    rounding.  Composing dominating pairs gives a dominating pair of the adaptive composition
    (Zhu, Dong & Wang 2022, Theorem 10), so this holds when the run depends on the query's
    answer.  Unsampled runs are one Gaussian, √(μ² + μ_q²)-GDP (Dong, Roth & Su 2022, Cor. 3.3).
    ``coarsening``: the grid that many times coarser (a calibration's search grid,
    :meth:`CompositionPLD.search_epsilon`), never a certificate."""
    kind, count, q, sigma = _mechanism(run)
    if kind not in _SAMPLED:
        return gdp_epsilon(math.hypot(math.sqrt(count) / sigma, mu_query), float(delta))
    interval = CompositionPLD().interval(run) * coarsening
    return _query_epsilon(run.sampling_rate, sigma, count, interval, kind == "sampled-gaussian-replace-one",
                          float(delta), float(mu_query))


@functools.lru_cache(maxsize=32)
def _query_epsilon(q: float, sigma: float, count: int, interval: float, replace_one: bool, delta: float,
                   mu_query: float) -> float:
    """:func:`epsilon_with_gaussian_query` for sampled batches (cached: the certificate asks again at
    the calibrated noise)."""
    pld = _self_composed(q, sigma, count, interval, replace_one)
    # no tail truncation here (an exact convolution: nothing is moved, so nothing is rounded up), and
    # not onto the identity PLD first: both only add pessimism at the 1e-15 level, and cost ~2/3 of a call
    pld = compose_exact(pld, _gaussian_query_pld(mu_query, interval))
    eps = epsilon_for_delta(pld, delta)
    return eps if math.isfinite(eps) else math.inf
