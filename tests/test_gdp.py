"""Exact μ-GDP → (ε, δ) conversion and the RDP mapping.

Independent references:
* mpmath at 50 digits: δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth &
  Su 2022, Corollary 2.13) evaluated directly, and its root in ε by bisection;
* dp_accounting 0.6.0: the Gaussian privacy loss's hockey-stick divergence
  (``GaussianPrivacyLoss.get_delta_for_epsilon``) and the PLD accountant's ε
  for one Gaussian mechanism with noise multiplier 1/μ (pessimistic
  discretisation, so never below the exact ε).
"""

import math
import warnings

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noisysgd import gdp
from noisysgd.rdp import OrderGridWarning, epsilon_from_rdp, gaussian_rdp

DPS = 50


def delta_mp(mu, eps):
    with mp.workdps(DPS):
        mu, eps = mp.mpf(mu), mp.mpf(eps)
        return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def epsilon_mp(mu, delta):
    """The smallest ε ≥ 0 with δ(ε) ≤ delta, by bisection at 50 digits."""
    with mp.workdps(DPS):
        target = mp.mpf(delta)
        if delta_mp(mu, 0) <= target:
            return mp.mpf(0)
        lo, hi = mp.mpf(0), mp.mpf(1)
        while delta_mp(mu, hi) > target:
            hi *= 2
        for _ in range(200):
            mid = (lo + hi) / 2
            if delta_mp(mu, mid) > target:
                lo = mid
            else:
                hi = mid
        return hi


MUS = [1e-6, 1e-3, 0.05, 0.3, 1.0, 2.5, 8.0, 30.0]


# ------------------------------------------------------------------ δ(ε)


@pytest.mark.parametrize("mu", MUS)
@pytest.mark.parametrize("t", [-2.0, 0.0, 1.0, 4.0, 10.0, 25.0, 37.0])
def test_delta_matches_mpmath(mu, t):
    """δ over 1e-300 … 1: ε = μ²/2 + tμ puts the first Φ at Φ(−t)."""
    eps = max(0.0, mu * mu / 2 + t * mu)
    ref = delta_mp(mu, eps)
    ours = gdp.gdp_delta(mu, eps)
    # ill-conditioned only through μ itself (the two Φ terms differ by ~μ)
    rel = 1e-12 if mu >= 0.05 else 1e-6
    assert float(abs(mp.mpf(ours) / ref - 1)) <= rel, (mu, eps, ours, ref)


@pytest.mark.parametrize("mu,eps", [(1.0, 40.0), (0.5, 200.0), (3.0, 1e4), (1e-3, 0.5), (20.0, 5e5)])
def test_log_delta_far_below_underflow(mu, eps):
    ref = mp.log(delta_mp(mu, eps))
    ours = gdp.gdp_log_delta(mu, eps)
    assert float(abs((mp.mpf(ours) - ref) / ref)) <= 1e-13
    if ours < -750:
        assert gdp.gdp_delta(mu, eps) == 0.0


def test_error_bound_covers_the_actual_error():
    """The error each evaluation reports (used to pad gdp_epsilon) bounds its true error."""
    rng = np.random.default_rng(7)
    for _ in range(400):
        mu = float(np.exp(rng.uniform(math.log(1e-7), math.log(60.0))))
        eps = max(0.0, mu * mu / 2 + mu * rng.uniform(-3.0, 37.0))
        ref = delta_mp(mu, eps)
        if ref < mp.mpf("1e-300"):
            continue
        log_d, err = gdp._log_delta(mu, eps)
        assert abs(mp.exp(mp.mpf(log_d)) / ref - 1) <= err, (mu, eps)


@pytest.mark.parametrize("mu", [0.1, 0.5, 1.0, 2.0, 5.0])
@pytest.mark.parametrize("eps", [0.0, 0.3, 1.0, 3.0, 8.0])
def test_delta_matches_dp_accounting_gaussian_privacy_loss(mu, eps):
    from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss

    ref = GaussianPrivacyLoss(standard_deviation=1.0 / mu).get_delta_for_epsilon(eps)
    if ref > 1e-250:
        assert gdp.gdp_delta(mu, eps) == pytest.approx(ref, rel=1e-9)


def test_delta_edges():
    assert gdp.gdp_delta(0.0, 0.0) == 0.0
    assert gdp.gdp_delta(2.0, math.inf) == 0.0
    assert gdp.gdp_log_delta(0.0, 1.0) == -math.inf
    # δ(0) = 2Φ(μ/2) − 1 without cancellation for tiny μ
    assert gdp.gdp_delta(1e-12, 0.0) == pytest.approx(1e-12 / math.sqrt(2 * math.pi), rel=1e-9)
    assert gdp.gdp_delta(1e3, 0.0) == 1.0


# ------------------------------------------------------------------ ε(δ)


@pytest.mark.parametrize("mu", MUS)
@pytest.mark.parametrize("delta", [0.3, 1e-3, 1e-5, 1e-10, 1e-30, 1e-100, 1e-300])
def test_epsilon_matches_mpmath_root_and_is_never_below_it(mu, delta):
    ref = epsilon_mp(mu, delta)
    ours = gdp.gdp_epsilon(mu, delta)
    assert mp.mpf(ours) >= ref  # never under-reported
    rel = 1e-12 if mu >= 0.05 else 1e-9
    assert mp.mpf(ours) <= ref * (1 + rel) + mp.mpf("1e-300"), (mu, delta, ours, ref)
    assert gdp.gdp_delta(mu, ours) <= delta


@pytest.mark.parametrize("mu", [0.1, 0.5, 1.0, pytest.param(2.0, marks=pytest.mark.slow),
                                pytest.param(4.0, marks=pytest.mark.slow)])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-8])
def test_epsilon_is_below_dp_accounting_pld(mu, delta):
    """dp_accounting's PLD rounds pessimistically, so it is an upper bound on the exact ε."""
    import dp_accounting

    acc = dp_accounting.pld.PLDAccountant(
        dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-4
    )
    acc.compose(dp_accounting.GaussianDpEvent(1.0 / mu))
    theirs = acc.get_epsilon(delta)
    ours = gdp.gdp_epsilon(mu, delta)
    assert ours <= theirs + 1e-12
    assert theirs - ours <= 2e-3


def test_epsilon_edges():
    assert gdp.gdp_epsilon(0.0, 1e-5) == 0.0
    # δ(0) ≈ μ/√(2π) ≤ δ: no ε needed
    assert gdp.gdp_epsilon(1e-8, 1e-5) == 0.0
    assert gdp.gdp_epsilon(1.0, 0.99) == 0.0
    big = gdp.gdp_epsilon(500.0, 1e-10)
    assert math.isfinite(big) and gdp.gdp_delta(500.0, big) <= 1e-10
    tiny = gdp.gdp_epsilon(1.0, 5e-324)  # the smallest float
    assert math.isfinite(tiny) and gdp.gdp_log_delta(1.0, tiny) <= math.log(5e-324)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    mu=st.floats(1e-9, 200.0),
    log_delta=st.floats(-700.0, math.log(0.999)),
)
def test_returned_epsilon_always_meets_delta(mu, log_delta):
    delta = math.exp(log_delta)
    eps = gdp.gdp_epsilon(mu, delta)
    assert eps >= 0.0 and math.isfinite(eps)
    assert gdp.gdp_log_delta(mu, eps) <= log_delta
    if eps > 0:  # and it is (nearly) the smallest such ε
        assert gdp.gdp_log_delta(mu, eps * (1 - 1e-6)) > log_delta


@settings(max_examples=200, deadline=None)
@given(
    mus=st.tuples(st.floats(1e-6, 50.0), st.floats(1e-6, 50.0)),
    deltas=st.tuples(st.floats(1e-200, 0.9), st.floats(1e-200, 0.9)),
)
def test_epsilon_monotone_in_delta_and_mu(mus, deltas):
    (mu_lo, mu_hi), (d_lo, d_hi) = sorted(mus), sorted(deltas)
    base = gdp.gdp_epsilon(mu_lo, d_lo)
    tol = 1e-12 * base + 1e-300
    assert gdp.gdp_epsilon(mu_lo, d_hi) <= base + tol  # non-increasing in δ
    assert gdp.gdp_epsilon(mu_hi, d_lo) >= base - tol  # non-decreasing in μ


@settings(max_examples=200, deadline=None)
@given(mu=st.floats(0.01, 20.0), eps=st.floats(0.0, 60.0))
def test_epsilon_inverts_delta(mu, eps):
    delta = gdp.gdp_delta(mu, eps)
    if not 1e-300 < delta < 0.999:
        return
    back = gdp.gdp_epsilon(mu, delta)
    # ε is padded for δ's own rounding error (~1e-11 relative), hence the absolute slack at ε = 0
    assert back >= eps * (1 - 1e-12)
    assert back == pytest.approx(eps, rel=1e-9, abs=1e-9)


# ------------------------------------------------------------------ RDP


def test_rdp_is_the_gaussian_mechanism_curve():
    orders = [1.5, 2.0, 10.0, 256.0]
    np.testing.assert_allclose(gdp.gdp_rdp(0.8, orders), np.array(orders) * 0.32, rtol=1e-15)
    np.testing.assert_allclose(gdp.gdp_rdp(0.8, orders), gaussian_rdp(orders, 1 / 0.8), rtol=1e-15)
    assert gdp.gdp_rdp(0.0, [2.0]).tolist() == [0.0]


@pytest.mark.parametrize("mu", [0.05, 0.5, 1.0, 3.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-12])
@pytest.mark.parametrize("conversion", ["classic", "improved"])
def test_exact_conversion_beats_the_rdp_route(mu, delta, conversion):
    orders = np.concatenate([1 + np.geomspace(1e-3, 1e4, 400)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrderGridWarning)
        via_rdp = epsilon_from_rdp(orders, gdp.gdp_rdp(mu, orders), delta, conversion=conversion).epsilon
    assert gdp.gdp_epsilon(mu, delta) <= via_rdp


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: gdp.gdp_delta(-1.0, 1.0), r"mu must be a non-negative finite number. Found -1.0"),
        (lambda: gdp.gdp_delta(float("nan"), 1.0), r"mu must be a non-negative finite number. Found nan"),
        (lambda: gdp.gdp_delta(float("inf"), 1.0), r"mu must be a non-negative finite number. Found inf"),
        (lambda: gdp.gdp_delta(True, 1.0), r"mu must be a non-negative finite number. Found True"),
        (lambda: gdp.gdp_delta("one", 1.0), r"mu must be a non-negative finite number. Found 'one'"),
        (lambda: gdp.gdp_delta(1.0, -0.5), r"epsilon must be a non-negative number. Found -0.5"),
        (lambda: gdp.gdp_delta(1.0, float("nan")), r"epsilon must be a non-negative number. Found nan"),
        (lambda: gdp.gdp_epsilon(-0.1, 1e-5), r"mu must be a non-negative finite number. Found -0.1"),
        (lambda: gdp.gdp_epsilon(1.0, 0.0), r"delta must be in \(0, 1\). Found 0.0"),
        (lambda: gdp.gdp_epsilon(1.0, 1.0), r"delta must be in \(0, 1\). Found 1.0"),
        (lambda: gdp.gdp_epsilon(1.0, float("nan")), r"delta must be in \(0, 1\). Found nan"),
        (lambda: gdp.gdp_rdp(1.0, [0.5]), r"orders must be finite and greater than 1. Found 0.5"),
        (lambda: gdp.gdp_rdp(-2.0, [2.0]), r"mu must be a non-negative finite number. Found -2.0"),
    ],
)
def test_errors_name_the_argument_and_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@settings(max_examples=200, deadline=None)
@given(root=st.floats(1e-6, 1e3), power=st.sampled_from([0.5, 1.0, 3.0]), scale=st.floats(1e-3, 1e3),
       width=st.floats(1.5, 1e4))
def test_bisect_decreasing_closes_to_adjacent_floats_where_the_sign_changes(root, power, scale, width):
    """The false-position search ends as bisection would: at ``hi`` with g(hi) ≤ 0, whose float
    below has g > 0 (g strictly decreasing, smooth or with a kink), in far fewer evaluations
    for a smooth g."""
    calls = []

    def g(x):
        calls.append(x)
        return scale * (root ** power - x ** power)

    hi = gdp.bisect_decreasing(g, 0.0, root * width)
    assert g(hi) <= 0.0 < g(math.nextafter(hi, 0.0))
    assert len(calls) <= 1100


def test_bisect_decreasing_is_quick_on_the_gdp_conversion():
    """The conversion gdp_epsilon runs (log δ(ε) against log δ): ~20 evaluations of δ(ε) per
    conversion where plain bisection takes ~64 (measured 23 on 500 random (μ, δ))."""
    calls = []
    log_target = math.log(1e-6)

    def g(e):
        calls.append(e)
        return gdp.gdp_log_delta(2.0, e) - log_target

    hi = gdp.bisect_decreasing(g, 0.0, 50.0)
    assert g(hi) <= 0.0 < g(math.nextafter(hi, 0.0))
    assert len(calls) <= 30


@settings(max_examples=200, deadline=None)
@given(mu=st.floats(1e-6, 100.0), log_delta=st.floats(-300.0, math.log(0.5)))
def test_epsilon_takes_few_evaluations_and_meets_with_its_padding(mu, log_delta):
    """gdp_epsilon's Newton steps (exact slope, kept in the bracket) and its one padding step
    from the slope, for δ ≤ 1/2: at most 16 evaluations of log δ per conversion (7.6 on average
    over 6,000 random (μ, δ); the false position to adjacent floats and the doubling nudge took
    28), and the returned ε meets δ with the evaluation's error bound added.  (Above δ = 1/2 the
    false position is kept: log δ is flat near its root there, which rounding decides.)"""
    calls = []
    original = gdp._log_delta

    def counted(m, e):
        calls.append(e)
        return original(m, e)

    gdp._log_delta = counted
    try:
        eps = gdp.gdp_epsilon(mu, math.exp(log_delta))
    finally:
        gdp._log_delta = original
    assert len(calls) <= 16
    if eps > 0.0:
        log_d, err = original(mu, eps)
        assert log_d + math.log1p(err) <= log_delta


@pytest.mark.parametrize("mu, delta", [(50.0, 1 - 1e-14), (1e3, 1 - 1e-9), (1e6, 0.5), (1e8, 0.9), (1e-300, 5e-324)])
def test_epsilon_at_the_edges_is_never_looser_than_the_false_position(mu, delta):
    """Where the padding of log δ's error is large against its slope (δ near 1, μ in the
    thousands and more), the linear padding step would overshoot (μ = 50, δ = 1 − 1e-14 gave 9,461
    against the false position's 920); there the growing steps find it, and the answer is the
    false position's or tighter — and never below the root (mpmath at μ = 1e-300: the small-μ form
    δ = μ(φ(t) − tΦ(−t)), t = ε/μ, exact to O(μ²))."""
    from noisysgd.gdp import _log_delta, bisect_decreasing

    eps = gdp.gdp_epsilon(mu, delta)
    log_d, err = _log_delta(mu, eps)
    assert log_d + math.log1p(err) <= math.log(delta)
    # the false position's answer, padded by growing steps (the method before Newton's)
    g = lambda e: _log_delta(mu, e)[0] - math.log(delta)  # noqa: E731
    hi = max(0.5 * mu * mu - mu * float(__import__("scipy.special", fromlist=["ndtri"]).ndtri(delta)), mu * 2.2e-16)
    while g(hi) >= 0.0:
        hi *= 2.0
    ref, step = bisect_decreasing(g, 0.0, hi), None
    step = max(abs(ref) * 2 * 2.220446049250313e-16, 1e-300)
    while not (lambda ld_err: ld_err[0] + math.log1p(ld_err[1]) <= math.log(delta))(_log_delta(mu, ref)):
        ref, step = ref + step, 2.0 * step
    assert eps <= ref * (1 + 1e-12)
    if mu == 1e-300:
        with mp.workdps(60):
            m, d = mp.mpf(mu), mp.mpf(delta)
            lo, up = mp.mpf(0), mp.mpf(80)
            for _ in range(300):
                mid = (lo + up) / 2
                lo, up = (mid, up) if m * (mp.npdf(mid) - mid * mp.ncdf(-mid)) > d else (lo, mid)
            assert mp.mpf(eps) >= up * m * (1 - mp.mpf("1e-20"))


@settings(max_examples=60, deadline=None)
@given(eps=st.floats(0.0, 60.0), log_delta=st.floats(-14.0, -0.3))
def test_gdp_mu_estimate_is_gdp_mu_without_the_verification(eps, log_delta):
    """gdp_mu_estimate (where a search starts or aims: no certificate) is the root gdp_mu verifies,
    to 1e-12 (6e-14 where measured), at a tenth of the cost; at ε = 0 both are gdp_mu's answer.
    (For δ near 1, where δ(μ) is ill-conditioned, gdp_mu's padding steps further below the root:
    1.7e-12 at δ = 0.977, ε = 2.)"""
    from noisysgd.gdp import gdp_mu, gdp_mu_estimate

    delta = 10.0 ** log_delta
    try:
        exact = gdp_mu(eps, delta)
    except ValueError:  # no μ > 0 meets it in floating point
        return
    assert gdp_mu_estimate(eps, delta) == pytest.approx(exact, rel=1e-12, abs=1e-300)
