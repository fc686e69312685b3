"""Rényi numerics against dp_accounting, Opacus and mpmath, plus properties that must hold."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mp_reference import sgm_rdp_mp
from noisysgd.rdp import (
    DEFAULT_ORDERS,
    OrderGridWarning,
    RDPNumericsWarning,
    epsilon_from_rdp,
    gaussian_rdp,
    sampled_gaussian_rdp,
    validate_orders,
)

QS = [1e-8, 1e-5, 1e-3, 0.004, 0.01, 0.1, 0.5, 0.9, 0.999]
SIGMAS = [0.1, 0.5, 1.0, 2.0, 10.0, 100.0, 1e4]
INT_ORDERS = np.array([2, 3, 4, 5, 8, 12, 16, 32, 64, 128, 256, 1000], dtype=float)


@pytest.mark.parametrize("q", QS)
@pytest.mark.parametrize("sigma", SIGMAS)
def test_integer_orders_match_dp_accounting(q, sigma):
    """dp_accounting 0.6.0 evaluates integer orders exactly (its binomial sum)."""
    from dp_accounting.rdp.rdp_privacy_accountant import (
        _compute_rdp_poisson_subsampled_gaussian as dpa_rdp,
    )

    ours = sampled_gaussian_rdp(INT_ORDERS, q, sigma)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = np.asarray(dpa_rdp(q, sigma, INT_ORDERS), dtype=float)
    # dp_accounting sums log(A) in float64 with an absolute error of ~1e-13, so it
    # keeps 1e-9 relative precision only while (α−1)·RDP = log A > 1e-3; smaller
    # values are checked against mpmath instead (e.g. (256, 1e-3, 100) in MP_POINTS,
    # where dp_accounting is off by 2e-8 relative and we agree with mpmath to 5e-12).
    ok = np.isfinite(ref) & np.isfinite(ours) & ((INT_ORDERS - 1) * ref > 1e-3)
    assert ok.sum() > 0 or (INT_ORDERS - 1) @ np.nan_to_num(ref) < 1e-3
    np.testing.assert_allclose(ours[ok], ref[ok], rtol=1e-9)


MP_POINTS = [
    # (order, q, sigma): typical, near-1 orders, extreme q and sigma, huge orders
    (2, 0.004, 1.1),
    (4.5, 0.004, 1.1),
    (1.01, 0.004, 1.1),
    (1.5, 0.01, 10.0),
    (4.5, 0.01, 0.55),
    (1.5, 0.5, 1.0),
    pytest.param(1.01, 0.1, 0.1, marks=pytest.mark.slow),
    (1.01, 1e-8, 0.1),
    (4.5, 0.5, 1e4),
    (64.5, 0.5, 1e4),
    (10, 1e-8, 1e4),
    pytest.param(10000, 1e-8, 1e4, marks=pytest.mark.slow),  # (mpmath: a second each)
    pytest.param(10000, 0.5, 0.1, marks=pytest.mark.slow),
    pytest.param(1000.5, 0.1, 0.1, marks=pytest.mark.slow),
    pytest.param(300.25, 0.001, 3.0, marks=pytest.mark.slow),
    (7.25, 0.999, 0.7),
    (2.5, 1e-5, 0.3),
    (256, 0.001, 100.0),
    (1000, 0.001, 100.0),
    # large fractional order, small q: once 2e-9 low when the float error of
    # log C(α,k) was under-estimated (found by review against the mpmath series)
    (159.52204906002208, 0.0030801114922630324, 72.34022060371446),
    (166.49489997274804, 0.0016471010887990805, 20.92928718234974),
]


@pytest.mark.parametrize("order,q,sigma", MP_POINTS)
def test_matches_mpmath_and_never_underestimates(order, q, sigma):
    ref = float(sgm_rdp_mp(order, q, sigma))
    ours = float(sampled_gaussian_rdp([order], q, sigma)[0])
    assert ours >= ref * (1 - 1e-14), "a finite underestimate of the divergence"
    assert ours <= ref * (1 + 1e-6)


@pytest.mark.parametrize(
    "q,sigma",
    [(q, s) for q in (0.01, 0.1, 0.5) for s in (0.5, 1.0, 2.0, 5.0)] + [(0.001, 0.5), (0.001, 1.0)],
)
def test_fractional_orders_match_opacus(q, sigma):
    """Opacus evaluates fractional orders with the exact MTZ series (float64)."""
    from opacus.accountants.analysis.rdp import compute_rdp

    orders = np.array([1.25, 1.5, 2.5, 3.7, 5.5, 10.3, 20.5, 40.75])
    ours = sampled_gaussian_rdp(orders, q, sigma)
    ref = compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=orders)
    # Opacus, like dp_accounting, sums log A in float64: compare where log A > 1e-4
    # (tinier values are checked against mpmath in MP_POINTS).
    ok = (orders - 1) * ref > 1e-4
    assert ok.any()
    np.testing.assert_allclose(ours[ok], ref[ok], rtol=1e-8)


@pytest.mark.slow
def test_chord_fallback_is_conservative_and_warns():
    # q = 0.5, σ = 1e4: the alternating series decays like k^(−α−2); at α = 1.5
    # it would need ~10^6 terms, so the convexity (chord) bound is returned.
    with pytest.warns(RDPNumericsWarning, match="did not converge"):
        value = float(sampled_gaussian_rdp([1.5], 0.5, 1e4)[0])
    ref = float(sgm_rdp_mp(1.5, 0.5, 1e4))
    upper = float(sampled_gaussian_rdp([2.0], 0.5, 1e4)[0])  # D_1.5 ≤ D_2, and chord = D_2 here
    assert ref <= value <= upper * (1 + 1e-12)


def test_stable_over_the_whole_range():
    orders = np.array([1.01, 1.5, 2, 3.5, 10, 64, 255.5, 1024, 10000])
    for q in [1e-8, 1e-4, 0.3, 1.0]:
        for sigma in [0.1, 1.0, 1e2, 1e4]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RDPNumericsWarning)
                values = sampled_gaussian_rdp(orders, q, sigma)
            assert np.isfinite(values).all() and (values > 0).all(), (q, sigma, values)
            assert (np.diff(values) >= -1e-12 * values[1:]).all(), (q, sigma, values)


def test_q_one_is_the_gaussian_mechanism_and_q_zero_is_free():
    orders = [1.5, 2.0, 33.3]
    np.testing.assert_array_equal(sampled_gaussian_rdp(orders, 1.0, 0.7), gaussian_rdp(orders, 0.7))
    np.testing.assert_array_equal(sampled_gaussian_rdp(orders, 0.0, 0.7), np.zeros(3))
    # Gaussian mechanism: α Δ² / (2σ²) (Mironov 2017, Prop. 7)
    assert gaussian_rdp([3.0], 2.0)[0] == pytest.approx(3.0 / 8.0, rel=1e-15)


orders_st = st.floats(min_value=1.01, max_value=200.0, allow_nan=False)
q_st = st.floats(min_value=1e-6, max_value=1.0, allow_nan=False)
sigma_st = st.floats(min_value=0.3, max_value=50.0, allow_nan=False)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(a1=orders_st, a2=orders_st, q1=q_st, q2=q_st, s1=sigma_st, s2=sigma_st)
def test_monotone_in_order_q_and_sigma(a1, a2, q1, q2, s1, s2):
    (a_lo, a_hi), (q_lo, q_hi), (s_lo, s_hi) = sorted((a1, a2)), sorted((q1, q2)), sorted((s1, s2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RDPNumericsWarning)
        f = lambda a, q, s: float(sampled_gaussian_rdp([a], q, s)[0])  # noqa: E731
        # Documented accuracy: 1e-9 relative, or an absolute 1e-13 on log A = (α−1)·RDP
        # where A − 1 is below float64 resolution; the error is always upward.
        tol = lambda x: 1e-9 * abs(x) + 1e-13 / (a_lo - 1)  # noqa: E731
        base = f(a_lo, q_lo, s_lo)
        assert f(a_hi, q_lo, s_lo) >= base - tol(base)
        assert f(a_lo, q_hi, s_lo) >= base - tol(base)
        assert f(a_lo, q_lo, s_hi) <= base + tol(base)


def test_default_grid_is_at_least_as_rich_as_opacus():
    from opacus.accountants.rdp import RDPAccountant

    opacus_grid = set(RDPAccountant.DEFAULT_ALPHAS)
    ours = set(np.round(DEFAULT_ORDERS, 10).tolist())
    assert {round(a, 10) for a in opacus_grid} <= ours
    assert DEFAULT_ORDERS.min() < 1.1 and DEFAULT_ORDERS.max() >= 256


# ----------------------------------------------------------------- conversions


def test_classic_conversion_is_lemma_2_5():
    # Altschuler & Talwar Lemma 2.5: ε = ε_α + log(1/δ)/(α−1)
    conv = epsilon_from_rdp([3.0], [0.5], 1e-6, conversion="classic")
    assert conv.epsilon == pytest.approx(0.5 + math.log(1e6) / 2, rel=1e-15)


def test_improved_conversion_matches_dp_accounting():
    from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

    orders = np.arange(2, 65, dtype=float)
    rdp = 1000 * sampled_gaussian_rdp(orders, 0.01, 1.0)
    for delta in [1e-3, 1e-5, 1e-9]:
        ours = epsilon_from_rdp(orders, rdp, delta)
        ref_eps, ref_order = compute_epsilon(orders, rdp, delta)
        assert ours.epsilon == pytest.approx(ref_eps, rel=1e-12)
        assert ours.order == ref_order


@settings(max_examples=100, deadline=None)
@given(
    rdp=st.lists(st.floats(min_value=0, max_value=1e3), min_size=3, max_size=3),
    delta=st.floats(min_value=1e-12, max_value=0.5),
)
def test_conversions_respect_their_formulas(rdp, delta):
    orders = np.array([1.5, 4.0, 32.0])
    values = np.sort(np.array(rdp))  # RDP curves are non-decreasing in α
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrderGridWarning)
        classic = epsilon_from_rdp(orders, values, delta, conversion="classic")
        improved = epsilon_from_rdp(orders, values, delta, conversion="improved")
    assert improved.epsilon <= classic.epsilon + 1e-12
    i = list(orders).index(classic.order)
    assert classic.epsilon == pytest.approx(values[i] + math.log(1 / delta) / (orders[i] - 1), rel=1e-12)
    # improved: never below what Balle et al. (2020) Prop. 12 allows at any order,
    # unless the Bretagnolle–Huber test certifies ε = 0 there.
    formula = values + np.log1p(-1 / orders) - (math.log(delta) + np.log(orders)) / (orders - 1)
    zero_ok = delta**2 + np.expm1(-values) > 0
    assert improved.epsilon >= min(np.min(np.where(zero_ok, 0.0, np.maximum(formula, 0.0))), np.inf) - 1e-12


def test_edge_of_grid_warns():
    with pytest.warns(OrderGridWarning, match="edge of the order grid"):
        conv = epsilon_from_rdp([2.0, 3.0], [1e-4, 2e-4], 1e-5)
    assert conv.at_edge and conv.order == 3.0


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: validate_orders([2, 1.0]), "greater than 1. Found 1.0"),
        (lambda: validate_orders([2, float("nan")]), "finite and greater than 1"),
        (lambda: validate_orders([]), "non-empty"),
        (lambda: validate_orders([2, 1e7]), r"orders must be at most 1e\+06. Found 10000000.0"),
        (lambda: sampled_gaussian_rdp([2], 1.5, 1.0), r"q must be in \[0, 1\]. Found 1.5"),
        (lambda: sampled_gaussian_rdp([2], float("nan"), 1.0), "q must be in"),
        (lambda: sampled_gaussian_rdp([2], 0.1, 0.0), "sigma must be a positive finite number. Found 0.0"),
        (lambda: gaussian_rdp([2], -1), "sigma must be a positive finite number. Found -1"),
        (lambda: sampled_gaussian_rdp([2.5], 0.1, 1e200), r"sigma must be at most 1e100. Found 1e\+200"),
        (lambda: epsilon_from_rdp([2], [1.0], 1.0), r"delta must be in \(0, 1\). Found 1.0"),
        (lambda: epsilon_from_rdp([2], [1.0], 0.0), r"delta must be in \(0, 1\)"),
        (lambda: epsilon_from_rdp([2], [-1.0], 0.1), "non-negative"),
        (lambda: epsilon_from_rdp([2, 3], [1.0], 0.1), "one value per order"),
        (lambda: epsilon_from_rdp([2], [1.0], 0.1, conversion="fancy"), "conversion must be one of"),
    ],
)
def test_errors_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
