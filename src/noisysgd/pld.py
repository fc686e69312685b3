"""dp_accounting's privacy loss distribution of a (Poisson-sampled) Gaussian, built in numpy.

``dp_accounting.pld.privacy_loss_distribution.from_gaussian_mechanism`` builds the
pessimistic connect-the-dots PMF (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022,
"Connect the Dots", §2.2 and their Algorithm 1 with fixed gap): for each grid loss
ε_i = i·Δ it needs the hockey-stick divergence δ(ε_i), which its ``get_delta_for_epsilon``
computes after inverting the privacy loss *one grid point at a time in Python*
(``[self.inverse_privacy_loss(eps) for eps in ...]``): ~16,000 scalar calls at Δ = 1e-4,
0.1–0.3 s per noise level, most of a calibration's time.

:func:`sampled_gaussian_pld` builds the same object with that one step vectorised:

* the privacy loss object, its truncation and its connect-the-dots bounds are
  dp_accounting's own ``GaussianPrivacyLoss`` (same ``log_mass_truncation_bound``);
* the inverse privacy loss is the closed form dp_accounting evaluates (its
  ``_inverse_privacy_loss_{add,remove,replace}`` for the Gaussian: without sampling
  x = ∓s/2 − ε σ²/s; sampled, ε is first mapped through log(1 + (e^{±ε} − 1)/q); under
  REPLACE, x = σ²/s · (asinh(−sinh(ε/2)·α) − ε/2), α = e^{s²/(2σ²)}(1 − q)/q), written in
  numpy with the same log-domain steps;
* δ(ε_i) = μ_upper_cdf(x_i) − e^{ε_i}·μ_lower_cdf(x_i) with dp_accounting's own cdfs,
  clipped to [0, 1] as it does, and the PMF is dp_accounting's
  ``create_pmf_pessimistic_connect_dots_fixed_gap``.

tests/test_pld.py checks the PMFs against ``from_gaussian_mechanism`` (to 1e-12) and the
composed ε over a grid of (q, σ, neighbouring relation), so a change in the library shows up
there.  Two more of its steps are done here, each on its objects and checked against it; pairwise
composition stays its own (``compose``):

* :func:`self_compose` is ``PrivacyLossDistribution.self_compose`` for dense PMFs — the T-fold
  composition as a convolution power by FFT (Koskela, Jälkö & Honkela 2020, "Computing tight
  differential privacy guarantees using FFT", §3), with dp_accounting's truncation to the
  Chernoff bounds of the sum (its ``common.compute_self_convolve_bounds``, at its orders, the
  moments summed without 40 ``logsumexp`` calls), the same circular convolution of the same
  length and its infinity mass — the transform real (``rfft``: half the spectrum) and the power
  taken by repeated squaring instead of the complex ``**``: 3–4× faster, the same support, the
  same PMF to 3e-13 of its largest entry over 150 random runs (the test holds 1e-11);
* :func:`epsilon_for_delta` reads ε(δ) off a PLD as its ``get_epsilon_for_delta`` does (the
  smallest ε whose hockey-stick divergence is at most δ, walking the losses down from the largest,
  both of its exits), with that walk's running sums as numpy cumulative sums instead of a Python
  loop over up to 10⁵ grid points (2–5 ms a call, ~10 calls a calibration); dp_accounting's own
  method for anything but dense PMFs; equal to ~1e-11 (the tests hold 1e-9 and 1e-12).

:func:`pad_infinity` adds mass at +∞ (the tail budget its identity composition would truncate).
Where FFT rounding shows (δ ≈ 1e-9), ours and dp_accounting's ε move by the same amount from a
long-double computation, in either direction (tests/test_pld.py).
"""

from __future__ import annotations

import functools
import inspect
import math

import numpy as np

__all__ = ["epsilon_for_delta", "pad_infinity", "sampled_gaussian_pld", "self_compose"]


@functools.lru_cache(maxsize=1)
def _truncation() -> float:
    """``from_gaussian_mechanism``'s default ``log_mass_truncation_bound`` (−50 today)."""
    from dp_accounting.pld import privacy_loss_distribution

    sig = inspect.signature(privacy_loss_distribution.from_gaussian_mechanism)
    return float(sig.parameters["log_mass_truncation_bound"].default)


def _log_sub(a, b):
    """log(e^a − e^b), a > b (dp_accounting's ``common._log_sub``)."""
    return a + np.log1p(-np.exp(b - a))


def _inverse(kind: str, eps: np.ndarray, sigma: float, s: float, q: float) -> np.ndarray:
    """The largest x whose privacy loss is at least ε (``inverse_privacy_loss``), for the
    points where dp_accounting inverts (see :func:`_deltas`)."""
    var_over_s = sigma * sigma / s
    if kind == "REPLACE":
        if q == 1.0:
            return -eps * var_over_s / 2
        a = np.abs(eps) / 2
        sign = np.where(eps >= 0, 1.0, -1.0)
        log_alpha = 0.5 * (s / sigma) ** 2 + math.log1p(-q) - math.log(q)
        with np.errstate(divide="ignore"):
            log_sinh = a + np.log1p(-np.exp(-2 * a)) - math.log(2)   # log sinh(|ε|/2)
        big = log_alpha + log_sinh
        asinh = -sign * np.logaddexp(0.5 * np.logaddexp(0, 2 * big), big)   # asinh(−sign·e^big)
        return np.where(eps == 0, 0.0, var_over_s * (asinh - eps / 2))
    if q == 1.0:
        base = eps
    else:   # ε' = ±log((1/q)e^{±ε} + 1 − 1/q): dp_accounting's log_a_times_exp_b_plus_c, step by step
        a = 1 / q
        sign = -1.0 if kind == "ADD" else 1.0
        d = sign * eps + np.log(a)
        base = np.where(eps == 0, 0.0, sign * _log_sub(d, np.log(-(1 - a))))
    x = -0.5 * s - base * var_over_s
    return x + s if kind == "ADD" else x


def _deltas(loss, kind: str, eps: np.ndarray, sigma: float, s: float, q: float) -> np.ndarray:
    """``loss.get_delta_for_epsilon(eps)`` with the inversion vectorised."""
    deltas = np.zeros_like(eps, dtype=float)
    if q == 1.0 or kind == "REPLACE":
        inv = np.ones_like(eps, dtype=bool)
    elif kind == "ADD":
        inv = eps < -math.log1p(-q)
    else:
        inv = eps > math.log1p(-q)
        deltas[~inv] = -np.expm1(eps[~inv])
    e = eps[inv]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = _inverse(kind, e, sigma, s, q)
    if q < 1.0 and kind == "ADD":     # at ε = −log(1 − q): inverse without sampling at +∞
        x = np.where(np.isclose(e, -math.log(1 - q), rtol=1e-9, atol=0.0), -math.inf, x)
    elif q < 1.0 and kind == "REMOVE":  # at ε = log(1 − q): inverse without sampling at −∞
        x = np.where(np.isclose(e, math.log(1 - q), rtol=1e-9, atol=0.0), math.inf, x)
    deltas[inv] = loss.mu_upper_cdf(x) - np.exp(e + loss.mu_lower_log_cdf(x))
    return np.clip(deltas, 0, 1)


class _ScaledNormal:
    """What dp_accounting's ``GaussianPrivacyLoss`` asks of its ``scipy.stats.norm(scale=σ)``: its
    cdf, logcdf and ppf, by the scipy.special calls that object makes (x/σ into ``ndtr`` and
    ``log_ndtr``, ``ndtri(p)·σ``), without building it (~0.5 ms a PLD, most of it a docstring)."""

    def __init__(self, scale: float):
        self.scale = scale

    def cdf(self, x):
        from scipy import special

        return special.ndtr(np.asarray(x, dtype=float) / self.scale)

    def logcdf(self, x):
        from scipy import special

        return special.log_ndtr(np.asarray(x, dtype=float) / self.scale)

    def ppf(self, p):
        from scipy import special

        return special.ndtri(np.asarray(p, dtype=float)) * self.scale


def _gaussian_loss(sigma: float, s: float, q: float, kind: str):
    """dp_accounting's ``GaussianPrivacyLoss(sigma, sensitivity=s, pessimistic_estimate=True,
    log_mass_truncation_bound=…, sampling_prob=q, adjacency_type=kind)``, its noise distribution a
    :class:`_ScaledNormal`: its ``__init__`` (dp_accounting 0.6.0) spelled out, for validated
    arguments, where that agrees with the installed dp_accounting's (:func:`_spelled_out_loss_agrees`),
    else its own class.  tests/test_pld.py holds both to ``from_gaussian_mechanism``'s."""
    from dp_accounting.pld import privacy_loss_mechanism as plm

    if not _spelled_out_loss_agrees():  # another dp_accounting whose __init__ differs: its own class
        return plm.GaussianPrivacyLoss(sigma, sensitivity=s, pessimistic_estimate=True,
                                       log_mass_truncation_bound=_truncation(), sampling_prob=q,
                                       adjacency_type=getattr(plm.AdjacencyType, kind))
    return _spelled_out_loss(sigma, s, q, kind)


def _spelled_out_loss(sigma: float, s: float, q: float, kind: str):
    from dp_accounting.pld import privacy_loss_mechanism as plm

    loss = plm.GaussianPrivacyLoss.__new__(plm.GaussianPrivacyLoss)
    loss._standard_deviation = sigma
    loss._gaussian_random_variable = _ScaledNormal(sigma)
    loss._pessimistic_estimate = True
    loss._log_mass_truncation_bound = _truncation()
    plm.AdditiveNoisePrivacyLoss.__init__(loss, s, False, q, getattr(plm.AdjacencyType, kind))
    return loss


@functools.lru_cache(maxsize=1)
def _spelled_out_loss_agrees() -> bool:
    """Whether :func:`_spelled_out_loss` builds what the installed dp_accounting's own
    ``GaussianPrivacyLoss`` does, on a probe of each adjacency (truncation bounds and cdfs, bit
    for bit): checked once a process, so that a dp_accounting whose ``__init__`` changed falls back
    to its own class rather than to a spelling of an older one."""
    from dp_accounting.pld import privacy_loss_mechanism as plm

    x = np.linspace(-30.0, 30.0, 13)
    try:
        for kind in ("ADD", "REMOVE", "REPLACE"):
            ours = _spelled_out_loss(1.7, 1.0, 0.3, kind)
            ref = plm.GaussianPrivacyLoss(1.7, sensitivity=1.0, pessimistic_estimate=True,
                                          log_mass_truncation_bound=_truncation(), sampling_prob=0.3,
                                          adjacency_type=getattr(plm.AdjacencyType, kind))
            a, b = ours.connect_dots_bounds(), ref.connect_dots_bounds()
            if ((a.epsilon_lower, a.epsilon_upper) != (b.epsilon_lower, b.epsilon_upper)
                    or not np.array_equal(ours.mu_upper_cdf(x), ref.mu_upper_cdf(x))
                    or not np.array_equal(ours.mu_lower_log_cdf(x), ref.mu_lower_log_cdf(x))):
                return False
    except Exception:  # noqa: BLE001 - any difference at all: dp_accounting's own class
        return False
    return True


def _pmf(sigma: float, s: float, q: float, interval: float, kind: str):
    loss = _gaussian_loss(sigma, s, q, kind)
    bounds = loss.connect_dots_bounds()
    lower = math.floor(bounds.epsilon_lower / interval)
    upper = math.ceil(bounds.epsilon_upper / interval)
    eps = np.arange(lower, upper + 1) * interval
    return _connect_dots(interval, lower, upper, _deltas(loss, kind, eps, sigma, s, q))


def _connect_dots(interval: float, lower: int, upper: int, deltas: np.ndarray):
    """``pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(interval, lower, upper, deltas)``:
    its probabilities by its own arithmetic (the masses of Doroshenko et al.'s Algorithm 1 from
    the δ's second differences, after its checks), handed to its ``DensePLDPmf`` as the array they
    are — where it passes them through a dict keyed by grid index and back to a list (~3 ms a PMF
    at 10⁴–10⁵ points).  Short PMFs (its sparse ones) are left to it."""
    from dp_accounting.pld import pld_pmf

    deltas = np.asarray(deltas, dtype=np.float64)
    if upper - lower + 1 <= pld_pmf._MAX_PMF_SPARSE_SIZE or deltas.size != upper - lower + 1:
        return pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(interval, lower, upper, deltas)
    if np.any(deltas < 0) or np.any(deltas > 1) or np.any(np.diff(deltas) > pld_pmf._DELTA_DIFF_TOLERANCE):
        return pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(interval, lower, upper, deltas)  # its error
    deltas = np.minimum.accumulate(deltas)
    diffs = np.diff(deltas)
    probs = np.zeros_like(deltas)
    probs[0] = 1 - deltas[0] + diffs[0] / math.expm1(interval)
    probs[1:-1] = (diffs[1:] - diffs[:-1] * math.exp(interval)) / math.expm1(interval)
    probs[-1] = diffs[-1] / math.expm1(-interval)
    probs = np.maximum(0.0, probs)
    return pld_pmf.DensePLDPmf(interval, lower, probs, deltas[-1], True)


def sampled_gaussian_pld(standard_deviation: float, sensitivity: float = 1.0, sampling_prob: float = 1.0,
                         interval: float = 1e-4, replace_one: bool = False):
    """The PLD ``from_gaussian_mechanism(standard_deviation, sensitivity,
    value_discretization_interval=interval, sampling_prob=sampling_prob,
    neighboring_relation=REPLACE_ONE if replace_one else ADD_OR_REMOVE_ONE)`` returns
    (pessimistic connect-the-dots), built with the inverse privacy loss in numpy."""
    from dp_accounting.pld import privacy_loss_distribution

    sigma, s, q, interval = (float(standard_deviation), float(sensitivity), float(sampling_prob),
                             float(interval))
    for name, value in (("standard_deviation", sigma), ("sensitivity", s), ("interval", interval)):
        if not 0.0 < value < math.inf:
            raise ValueError(f"{name} must be positive and finite. Found {value!r}.")
    if not 0.0 < q <= 1.0:
        raise ValueError(f"sampling_prob must be in (0, 1]. Found {q!r}.")
    if replace_one:
        return privacy_loss_distribution.PrivacyLossDistribution(_pmf(sigma, s, q, interval, "REPLACE"))
    remove = _pmf(sigma, s, q, interval, "REMOVE")
    if q == 1.0:
        return privacy_loss_distribution.PrivacyLossDistribution(remove)
    return privacy_loss_distribution.PrivacyLossDistribution(remove, _pmf(sigma, s, q, interval, "ADD"))


#: Losses above this give e^{−loss} = 0 in float64, where dp_accounting's walk takes another branch:
#: such PMFs are left to its own method.
_UNDERFLOW_LOSS = 700.0
#: How many grid points of the walk are summed at once (most answers lie in the first block).
_BLOCK = 8192


def _pmf_epsilon(pmf, delta: float) -> float:
    """``DensePLDPmf.get_epsilon_for_delta(delta)`` with its walk vectorised: over the losses ℓ_k
    in decreasing order, with U_k = (infinity mass) + Σ_{i<k} p_i and W_k = Σ_{i<k} e^{−ℓ_i} p_i
    (the same sequential sums: a cumulative sum adds in the same order), the answer is
    read at the first k where U_k > δ, W_k > 0 and log((U_k − δ)/W_k) ≥ ℓ_k, else after the last
    loss: 0 if U ≤ W + δ there, and log((U − δ)/W) otherwise.  Its one other exit is kept too:
    where, after adding ℓ_k, U_{k+1} ≥ δ while W_{k+1} = 0 (every loss so far carried no mass, or
    its e^{−ℓ} underflowed), it answers max(0, ℓ_k) — above the PMF's exact ε where those top
    losses are empty (δ = the infinity mass), so never below dp_accounting's answer."""
    inf_mass = float(pmf._infinity_mass)
    if inf_mass > delta:
        return math.inf
    probs, step, lower = pmf._probs, float(pmf._discretization), int(pmf._lower_loss)
    top = lower + len(probs) - 1
    upper, lower_mass = inf_mass, 0.0
    for end in range(len(probs), 0, -_BLOCK):
        start = max(0, end - _BLOCK)
        p = probs[start:end][::-1]
        losses = (top - (len(probs) - end) - np.arange(len(p))) * step
        u = np.cumsum(np.concatenate(([upper], p)))       # U_k before element k, then U after the block
        w = np.cumsum(np.concatenate(([lower_mass], np.exp(-losses) * p)))
        with np.errstate(divide="ignore", invalid="ignore"):
            stop = (u[:-1] > delta) & (w[:-1] > 0) & (np.log((u[:-1] - delta) / w[:-1]) >= losses)
        empty = (u[1:] >= delta) & (w[1:] == 0)   # the exit after adding ℓ_k
        k = int(np.argmax(stop)) if stop.any() else len(p)
        j = int(np.argmax(empty)) if empty.any() else len(p)
        if j < k:  # (at one k the break is tested first)
            return max(0.0, float(losses[j]))
        if k < len(p):
            upper, lower_mass = float(u[k]), float(w[k])
            break
        upper, lower_mass = float(u[-1]), float(w[-1])
    if upper <= lower_mass + delta:
        return 0.0
    return math.log((upper - delta) / lower_mass)


def epsilon_for_delta(pld, delta: float) -> float:
    """``pld.get_epsilon_for_delta(delta)`` (a dp_accounting ``PrivacyLossDistribution``): the
    larger of its two PMFs' answers (one where it is symmetric), each by :func:`_pmf_epsilon`
    where the PMF is dense and its losses stay below :data:`_UNDERFLOW_LOSS`, else by
    dp_accounting's own method."""
    from dp_accounting.pld import pld_pmf

    def one(pmf) -> float:
        dense = isinstance(pmf, pld_pmf.DensePLDPmf)
        if not dense or (pmf._lower_loss + len(pmf._probs)) * pmf._discretization > _UNDERFLOW_LOSS:
            return float(pmf.get_epsilon_for_delta(delta))
        return _pmf_epsilon(pmf, float(delta))

    eps = one(pld._pmf_remove)
    return eps if pld._symmetric else max(eps, one(pld._pmf_add))


def _power(x: np.ndarray, times: int) -> np.ndarray:
    """``x ** times`` (complex, ``times`` ≥ 1) by repeated squaring: ~2·log2(times) products."""
    out, base = None, x
    while times:
        if times & 1:
            out = base if out is None else out * base
        times >>= 1
        if times:
            base = base * base
    return out


#: The orders of dp_accounting's Chernoff bounds, in units of 1/len(list): ±1, …, ±20
#: (``common.compute_self_convolve_bounds``'s default orders).
_CHERNOFF_STEPS = 20


def _self_convolve_bounds(probs: np.ndarray, times: int, tail_mass_truncation: float) -> tuple[int, int]:
    """dp_accounting's ``common.compute_self_convolve_bounds(probs, times, tail_mass_truncation)``:
    the Chernoff bounds at its orders t = k/len (k = ±1 … ±20) of the ``times``-fold sum, each
    index outside carrying at most half the truncated mass.  Its log-moments log Σ p_i e^{t·i} are
    40 calls of ``logsumexp`` there; here Σ p_i w_i^k with w_i = e^{±i/len} ∈ [e^{−1}, e], one
    product and one sum per k (no exponential, no overflow: w^k ≤ e^{20}), the same numbers to
    float rounding."""
    n = len(probs)
    upper, lower = (n - 1) * times, 0
    if tail_mass_truncation == 0:
        return lower, upper
    log_tail = math.log(2 / tail_mass_truncation)
    index = np.arange(n)
    with np.errstate(divide="ignore"):
        for sign in (1.0, -1.0):
            w = np.exp(sign * index / n)
            term = np.array(probs, dtype=float)
            for k in range(1, _CHERNOFF_STEPS + 1):
                term = term * w
                order = sign * k / n
                bound = (times * math.log(float(term.sum())) + log_tail) / order
                if not math.isfinite(bound):
                    continue
                if order > 0:
                    upper = min(upper, math.ceil(bound))
                else:
                    lower = max(lower, math.floor(bound))
    return lower, upper


def _self_compose_pmf(pmf, times: int, tail_mass_truncation: float):
    """``DensePLDPmf.self_compose(times, tail_mass_truncation)`` (see :func:`self_compose`)."""
    from dp_accounting.pld import pld_pmf
    from scipy import fft

    probs = pmf._probs
    lower, upper = _self_convolve_bounds(probs, times, tail_mass_truncation)
    size = upper - lower + 1
    length = fft.next_fast_len(max(size, len(probs)), real=True)
    out = fft.irfft(_power(fft.rfft(probs, length), times), length)
    out = np.roll(out, -lower)[:size]
    infinity = tail_mass_truncation - math.expm1(times * math.log1p(-pmf._infinity_mass))
    return pld_pmf.DensePLDPmf(pmf._discretization, pmf._lower_loss * times + lower, out, infinity,
                               pmf._pessimistic_estimate)


def _dense_for(pmf, times: int):
    """``pmf`` as dp_accounting's ``SparsePLDPmf.self_compose`` composes it: a sparse PMF whose
    ``times``-fold result could hold more than ``_MAX_PMF_SPARSE_SIZE`` losses (``size**times``,
    its rough bound) is converted to dense (``to_dense_pmf``) first; a smaller one is left sparse
    (dp_accounting then composes it pairwise)."""
    from dp_accounting.pld import pld_pmf

    # size**min(times, 11) exceeds the bound exactly where size**times does (2**10 > 1000)
    if isinstance(pmf, pld_pmf.SparsePLDPmf) and times > 1 and \
            pmf.size ** min(times, 11) > pld_pmf._MAX_PMF_SPARSE_SIZE:
        return pmf.to_dense_pmf()
    return pmf


def self_compose(pld, times: int, tail_mass_truncation: float = 1e-15):
    """``pld.self_compose(times, tail_mass_truncation)`` for a dp_accounting
    ``PrivacyLossDistribution`` whose PMFs are dense, or sparse ones it would make dense: each PMF's
    ``times``-fold convolution power, computed as dp_accounting computes it — the support cut
    to its Chernoff bounds, a circular convolution of the length it takes, the truncated tail
    mass and the infinity mass's composition added to the infinity mass — with a real FFT and
    powers by squaring."""
    from dp_accounting.pld import pld_pmf, privacy_loss_distribution

    times = int(times)
    if times < 1:
        raise ValueError(f"times must be at least 1. Found {times!r}.")
    pmfs = [_dense_for(pmf, times) for pmf in [pld._pmf_remove] + ([] if pld._symmetric else [pld._pmf_add])]
    if times == 1 or not all(isinstance(pmf, pld_pmf.DensePLDPmf) for pmf in pmfs):
        return pld.self_compose(times, tail_mass_truncation)
    return privacy_loss_distribution.PrivacyLossDistribution(
        *[_self_compose_pmf(pmf, times, tail_mass_truncation) for pmf in pmfs])


def pad_infinity(pld, mass: float):
    """``pld`` with ``mass`` more probability at +∞ in each of its PMFs (the probabilities left as
    they are: the same arrays).  Moving any mass m of a PMF to +∞ raises δ(ε) by at most m at every
    ε, so padding by m is at least as pessimistic as any re-truncation of tails totalling m — e.g.
    composing onto dp_accounting's identity PLD with its 1e-15 tail truncation, as its
    PLDAccountant does — at no cost."""
    from dp_accounting.pld import pld_pmf, privacy_loss_distribution

    if not mass >= 0.0:
        raise ValueError(f"mass must be a non-negative number. Found {mass!r}.")

    def padded(pmf):
        if isinstance(pmf, pld_pmf.DensePLDPmf):
            return pld_pmf.DensePLDPmf(pmf._discretization, pmf._lower_loss, pmf._probs,
                                       pmf._infinity_mass + mass, pmf._pessimistic_estimate)
        return pld_pmf.SparsePLDPmf(pmf._loss_probs, pmf._discretization, pmf._infinity_mass + mass,
                                    pmf._pessimistic_estimate)

    if pld._symmetric:
        return privacy_loss_distribution.PrivacyLossDistribution(padded(pld._pmf_remove))
    return privacy_loss_distribution.PrivacyLossDistribution(padded(pld._pmf_remove), padded(pld._pmf_add))


#: Spectra of the second operands :func:`compose_exact` has transformed, most recent last:
#: [(PMF, its probabilities, length, rfft)], the PMF kept so that an entry is never matched by a
#: recycled id.
_SPECTRA: list = []
#: How many :data:`_SPECTRA` are kept (a calibration composes onto one query's PLD, and the
#: certificate onto the same).
_SPECTRA_KEPT = 4
#: :func:`compose_exact`'s transform length is a fast length at or above the linear convolution's,
#: rounded up to a multiple of this first, so that runs of slightly different support share it.
_LENGTH_STEP = 4096


def _spectrum(pmf, length: int) -> np.ndarray:
    """The rfft of ``pmf``'s probabilities at ``length``, kept (:data:`_SPECTRA`).  PMFs are treated as
    immutable, as dp_accounting's operations treat them (each returns a new one): an entry matches
    the same PMF object holding the same probability array."""
    from scipy import fft

    for kept, probs, n, spectrum in _SPECTRA:
        if kept is pmf and probs is pmf._probs and n == length:
            return spectrum
    spectrum = fft.rfft(pmf._probs, length)
    _SPECTRA.append((pmf, pmf._probs, length, spectrum))
    del _SPECTRA[:-_SPECTRA_KEPT]
    return spectrum


def _compose_pmf_exact(pmf, other):
    """``pmf.compose(other, tail_mass_truncation=0)`` of two ``DensePLDPmf``: the linear convolution
    by a real FFT (``other``'s spectrum reused across calls), nothing truncated."""
    from dp_accounting.pld import pld_pmf
    from scipy import fft

    pmf.validate_composable(other)
    size = len(pmf._probs) + len(other._probs) - 1
    length = fft.next_fast_len(-(-size // _LENGTH_STEP) * _LENGTH_STEP, real=True)
    probs = fft.irfft(fft.rfft(pmf._probs, length) * _spectrum(other, length), length)[:size]
    infinity = pmf._infinity_mass + other._infinity_mass - pmf._infinity_mass * other._infinity_mass
    return pld_pmf.DensePLDPmf(pmf._discretization, pmf._lower_loss + other._lower_loss, probs, infinity,
                               pmf._pessimistic_estimate)


def compose_exact(pld, other):
    """``pld.compose(other, tail_mass_truncation=0)`` — an exact composition: no tail is truncated,
    so nothing is rounded up — where every PMF of both is dense (else dp_accounting's own method):
    the same support and infinity mass, and the convolution by a real FFT, as dp_accounting's
    ``DensePLDPmf.compose`` computes it (``scipy.signal.fftconvolve``, a float FFT too), with
    ``other``'s spectrum kept for the next call (a calibration composes each run it tries onto the
    same query: one transform of three saved)."""
    from dp_accounting.pld import pld_pmf, privacy_loss_distribution

    sides = [("_pmf_remove", "_pmf_remove")]
    if not (pld._symmetric and other._symmetric):
        sides.append(("_pmf_add", "_pmf_add"))
    pairs = [(getattr(pld, a), getattr(other, b)) for a, b in sides]
    if not all(isinstance(p, pld_pmf.DensePLDPmf) and isinstance(o, pld_pmf.DensePLDPmf) for p, o in pairs):
        return pld.compose(other, tail_mass_truncation=0.0)
    return privacy_loss_distribution.PrivacyLossDistribution(*[_compose_pmf_exact(p, o) for p, o in pairs])
