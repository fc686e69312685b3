"""Bok, Su & Altschuler's shifted-interpolation μ-GDP: formulas, limits, numerics, refusals.

Independent references used here:
* mpmath at 50 digits for both closed forms (c within 1e-12 of 1, T up to 1e12);
* the shift allocation behind the shifted-interpolation argument, minimised
  directly: at each step the gap between the interpolated and the real
  process is u_t = c·d_t + s_t (s_t the sensitivity of that step, 0 when the
  differing example is not used); the step can absorb a shift p_t ≤ u_t at a
  cost (p_t/noise)² in μ² (composition of Gaussian tradeoffs) and carries
  d_{t+1} = u_t − p_t, which must be 0 at the end.  Its minimum over all
  allocations (a greatest convex minorant in the time change τ = Σ c^{−2t})
  reproduces the full-batch formula exactly and the cyclic one at the worst
  position of the example;
* an exactly solvable instance: losses (m/2)‖w‖² + ⟨g_i, w⟩ with ‖g_i‖ ≤ L,
  whose final iterates are Gaussians with the same covariance, so their GDP
  is the mean difference over the standard deviation.
"""

import json
import math
import re
import warnings

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noisysgd import Run
from noisysgd.analyses.base import GDPAnalysis
from noisysgd.analyses import get_analysis
from noisysgd.analyses import shifted_interpolation as si
from noisysgd.analyses.altschuler_talwar import _minorant_cost
from noisysgd.gdp import gdp_epsilon
from noisysgd.rdp import OrderGridWarning, epsilon_from_rdp

SI = si.ShiftedInterpolation()


def run_(**kw):
    base = dict(n=1000, batch_size=1000, batching="full", steps=200, learning_rate=0.1,
                noise_multiplier=4.0, lipschitz=1.0, smoothness=1.0, strong_convexity=0.05)
    return Run(**(base | kw))


# ------------------------------------------------------------------ references


def full_mp(gap, T):
    with mp.workdps(50):
        c = 1 - mp.mpf(gap)
        return mp.sqrt((1 + c) / (1 - c) * (1 - c**T) / (1 + c**T))


def cyclic_mp(gap, l, E):  # noqa: E741
    with mp.workdps(50):
        c = 1 - mp.mpf(gap)
        x = c ** (l * (E - 1))
        return mp.sqrt(1 + c ** (2 * l - 2) * (1 - c**2) / (1 - c**l) ** 2 * (1 - x) / (1 + x))


def best_allocation(uses, c):
    """min Σ p_t² over shift allocations (see the module docstring), unit sensitivity.

    With q_t = c^{−t} p_t the constraint d ≥ 0 reads Σ_{i≤t} q_i ≤ B_t =
    Σ_{i≤t} c^{−i} s_i, with equality at the end, and the cost is
    Σ q_t²/w_t, w_t = c^{−2t}: the least cost path under a barrier in the
    time τ_t = Σ_{i≤t} w_i is the greatest convex minorant of (τ_t, B_t)."""
    T = len(uses)
    tau = np.cumsum([c ** (-2 * t) for t in range(T)])
    barrier = np.cumsum([c ** (-t) * s for t, s in enumerate(uses)])
    # the minorant's cost: the library's helper, itself checked against brute force
    # in test_altschuler_talwar (the derivation above is what this reference adds)
    return _minorant_cost(list(zip(tau, barrier)))


def cyclic_uses(l, steps, position):  # noqa: E741
    return [1.0 if t % l == position else 0.0 for t in range(steps)]


def quadratic_instance_mu(c, uses):
    """Exact GDP of w ← c·w − η(g + Z) with gradients differing by 2L/b at the used steps:
    (Σ_t c^{T−1−t}·[used]) / √(Σ_t c^{2(T−1−t)}), in units of μ₁."""
    T = len(uses)
    mean = sum(c ** (T - 1 - t) * s for t, s in enumerate(uses))
    var = sum(c ** (2 * (T - 1 - t)) for t in range(T))
    return mean / math.sqrt(var)


# ------------------------------------------------------------------ the full-batch formula


@pytest.mark.parametrize("gap", [0.9, 0.5, 0.1, 1e-3, 1e-7, 1e-12])
@pytest.mark.parametrize("T", [1, 2, 7, 100, 10**6, 10**12])
def test_full_batch_formula_matches_mpmath(gap, T):
    assert si.full_batch_mu_ratio(T, gap=gap) == pytest.approx(float(full_mp(gap, T)), rel=1e-13)


def test_full_batch_limits():
    for gap in (0.7, 0.2, 1e-4):
        assert si.full_batch_mu_ratio(1, gap=gap) == pytest.approx(1.0, rel=1e-15)
        limit = math.sqrt((2 - gap) / gap)  # (1+c)/(1−c), written in the gap (1 − (1 − gap) loses digits)
        assert si.full_batch_mu_ratio(math.inf, gap=gap) == pytest.approx(limit, rel=1e-14)
        assert si.full_batch_mu_ratio(10**9 / gap, gap=gap) == pytest.approx(limit, rel=1e-14)
    for T in (1, 5, 300, 10**6):  # c → 1: plain composition, μ₁√T
        assert si.full_batch_mu_ratio(T, gap=1e-15) == pytest.approx(math.sqrt(T), rel=1e-8)
    # c = 0: only the last step counts
    assert si.full_batch_mu_ratio(50, gap=1.0) == 1.0


@pytest.mark.parametrize("c", [0.0, 0.3, 0.8, 0.95, 0.999])
@pytest.mark.parametrize("T", [1, 2, 3, 10, 60])
def test_full_batch_is_the_best_allocation_and_exact_on_quadratics(c, T):
    ours = si.full_batch_mu_ratio(T, gap=1 - c) ** 2
    if c > 0:
        assert ours == pytest.approx(best_allocation([1.0] * T, c), rel=1e-10)
    exact = quadratic_instance_mu(c, [1.0] * T) ** 2
    assert ours == pytest.approx(exact, rel=1e-10)  # tight, as the paper shows


# ------------------------------------------------------------------ the cyclic formula


@pytest.mark.parametrize("gap", [0.9, 0.3, 1e-2, 1e-6, 1e-12])
@pytest.mark.parametrize("l", [1, 2, 10, 1000])
@pytest.mark.parametrize("E", [1, 2, 5, 10**4, 10**9])
def test_cyclic_formula_matches_mpmath(gap, l, E):  # noqa: E741
    ours = si.cyclic_mu_ratio(E, gap=gap, batches_per_epoch=l)
    assert ours == pytest.approx(float(cyclic_mp(gap, l, E)), rel=1e-13)


def test_cyclic_limits():
    for gap in (0.5, 1e-3):
        for l in (1, 3, 50):  # noqa: E741
            assert si.cyclic_mu_ratio(1, gap=gap, batches_per_epoch=l) == 1.0
    for l, E in [(1, 2), (3, 7), (50, 1000), (10, 10**5)]:  # noqa: E741
        assert si.cyclic_mu_ratio(E, gap=1e-15, batches_per_epoch=l) == pytest.approx(
            math.sqrt(1 + (E - 1) / l), rel=1e-7
        )
    # E → ∞
    gap, l = 0.01, 20  # noqa: E741
    limit = float(cyclic_mp(gap, l, 10**30))
    assert si.cyclic_mu_ratio(math.inf, gap=gap, batches_per_epoch=l) == pytest.approx(limit, rel=1e-13)
    assert si.cyclic_mu_ratio(10**7, gap=gap, batches_per_epoch=l) == pytest.approx(limit, rel=1e-13)


@pytest.mark.parametrize("c", [0.3, 0.8, 0.97])
@pytest.mark.parametrize("l", [2, 3, 5])
@pytest.mark.parametrize("E", [1, 2, 4])
def test_cyclic_is_the_best_allocation_at_the_worst_position(c, l, E):  # noqa: E741
    ours = si.cyclic_mu_ratio(E, gap=1 - c, batches_per_epoch=l) ** 2
    per_position = [best_allocation(cyclic_uses(l, l * E, j), c) for j in range(l)]
    assert ours == pytest.approx(max(per_position), rel=1e-10)
    assert ours == pytest.approx(per_position[-1], rel=1e-10)  # the last batch of the epoch
    # and it bounds the exactly solvable quadratic instance at every position
    for j in range(l):
        assert quadratic_instance_mu(c, cyclic_uses(l, l * E, j)) ** 2 <= ours * (1 + 1e-12)


@pytest.mark.parametrize("c", [0.2, 0.9, 0.99])
@pytest.mark.parametrize("l", [2, 3, 7])
def test_partial_last_epoch_is_covered_by_ceil_epochs(c, l):  # noqa: E741
    """Every position, every T (full epochs or not): the allocation optimum is
    at most the formula at E = ⌈T/l⌉."""
    for T in range(1, 4 * l + 1):
        E = -(-T // l)
        bound = si.cyclic_mu_ratio(E, gap=1 - c, batches_per_epoch=l) ** 2
        worst = max(best_allocation(cyclic_uses(l, T, j), c) if any(cyclic_uses(l, T, j)) else 0.0
                    for j in range(l))
        assert worst <= bound * (1 + 1e-10), (T, E)


@pytest.mark.parametrize("c", [0.0, 0.5, 0.9, 0.999])
@pytest.mark.parametrize("E", [1, 2, 5, 40])
def test_one_batch_per_epoch_full_formula_is_tighter(c, E):
    """l = 1 is NoisyGD on one batch: the full formula is the allocation optimum and
    never above the cyclic formula at l = 1."""
    full = si.full_batch_mu_ratio(E, gap=1 - c)
    assert full <= si.cyclic_mu_ratio(E, gap=1 - c, batches_per_epoch=1) * (1 + 1e-15)


@settings(max_examples=200, deadline=None)
@given(
    gap=st.floats(1e-12, 1.0),
    l=st.integers(1, 10**4),
    E=st.tuples(st.integers(1, 10**9), st.integers(1, 10**9)),
)
def test_monotone_in_epochs_and_steps(gap, l, E):  # noqa: E741
    lo, hi = sorted(E)
    tol = 1 + 1e-13
    assert si.cyclic_mu_ratio(lo, gap=gap, batches_per_epoch=l) <= si.cyclic_mu_ratio(
        hi, gap=gap, batches_per_epoch=l) * tol
    assert si.full_batch_mu_ratio(lo, gap=gap) <= si.full_batch_mu_ratio(hi, gap=gap) * tol
    # and never above plain composition over the uses
    assert si.full_batch_mu_ratio(hi, gap=gap) <= math.sqrt(hi) * tol
    assert si.cyclic_mu_ratio(hi, gap=gap, batches_per_epoch=l) <= math.sqrt(hi) * tol


# ------------------------------------------------------------------ the analysis


def test_mu_full_batch():
    run = run_()
    c = max(abs(1 - 0.1 * 0.05), abs(1 - 0.1 * 1.0))
    mu1 = (2.0 / 1000) / (4.0 / 1000)  # (2L/n)/σ with σ = zL/b
    expected = mu1 * math.sqrt((1 + c) / (1 - c) * (1 - c**200) / (1 + c**200))
    assert SI.mu(run) == pytest.approx(expected, rel=1e-13)
    assert SI.mu(run.replace(steps=1)) == pytest.approx(mu1, rel=1e-15)


def test_mu_cyclic_and_partial_epochs():
    run = run_(batching="cyclic", n=1005, batch_size=100, steps=30)  # l = 10, 3 epochs, 5 dropped
    c = 1 - 0.1 * 0.05
    mu1 = 2.0 / 4.0
    x = c ** (10 * 2)
    expected = mu1 * math.sqrt(1 + c**18 * (1 - c * c) / (1 - c**10) ** 2 * (1 - x) / (1 + x))
    assert SI.mu(run) == pytest.approx(expected, rel=1e-12)
    assert SI.mu(run.replace(steps=21)) == SI.mu(run)  # ⌈21/10⌉ = 3 epochs
    assert SI.mu(run.replace(steps=20)) < SI.mu(run)
    d = SI.details(run.replace(steps=21))
    assert d["epochs_used"] == 3 and d["batches_per_epoch"] == 10 and "partial_epoch_note" in d
    assert d["examples_dropped_per_epoch"] == 5


def test_mu_cyclic_single_batch_uses_the_full_formula():
    run = run_(batching="cyclic", n=100, batch_size=60, steps=25)  # l = 1
    gap = si.contraction_gap(0.1, 0.05, 1.0)
    assert SI.mu(run) == pytest.approx(2.0 / 4.0 * si.full_batch_mu_ratio(25, gap=gap), rel=1e-14)
    assert "single_batch_note" in SI.details(run)


@settings(max_examples=100, deadline=None)
@given(
    m=st.tuples(st.floats(1e-6, 1.0), st.floats(1e-6, 1.0)),
    eta=st.floats(0.01, 1.99),
    steps=st.integers(1, 10**6),
    batching=st.sampled_from(["full", "cyclic"]),
)
def test_larger_strong_convexity_never_hurts(m, eta, steps, batching):
    lo, hi = sorted(m)
    kw = dict(batching=batching, learning_rate=eta, steps=steps)
    if batching == "cyclic":
        kw.update(batch_size=50)
    a = SI.mu(run_(strong_convexity=lo, **kw))
    b = SI.mu(run_(strong_convexity=hi, **kw))
    assert b <= a * (1 + 1e-13)


@settings(max_examples=100, deadline=None)
@given(steps=st.tuples(st.integers(1, 10**7), st.integers(1, 10**7)), b=st.integers(1, 1000))
def test_mu_non_decreasing_in_steps(steps, b):
    lo, hi = sorted(steps)
    base = dict(batching="cyclic", batch_size=b)
    assert SI.mu(run_(steps=lo, **base)) <= SI.mu(run_(steps=hi, **base)) * (1 + 1e-13)


def test_huge_runs_are_instant_and_accurate():
    gap = 1e-12
    run = run_(learning_rate=1e-3, strong_convexity=1e-9, smoothness=1.0, steps=10**12)
    assert si.contraction_gap(1e-3, 1e-9, 1.0) == pytest.approx(gap, rel=1e-15)
    mu1 = 2.0 / 4.0
    ref = mu1 * float(full_mp(si.contraction_gap(1e-3, 1e-9, 1.0), 10**12))
    assert SI.mu(run) == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("batching", ["full", "cyclic"])
@pytest.mark.parametrize("delta", [1e-5, 1e-9])
def test_evaluate_reports_mu_and_the_exact_epsilon(batching, delta):
    run = run_(batching=batching, batch_size=100 if batching == "cyclic" else 1000, steps=500)
    result = SI.evaluate(run, delta=delta, orders=[2.0, 8.0, 32.0])
    mu = SI.mu(run)
    assert result.applies and result.sound and result.mu == mu
    assert result.epsilon == gdp_epsilon(mu, delta)
    assert result.conversion == "gdp-exact" and result.order is None
    np.testing.assert_allclose(result.rdp, np.array([2.0, 8.0, 32.0]) * mu * mu / 2, rtol=1e-15)
    d = result.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["mu"] == mu and d["epsilon"] == result.epsilon and d["conversion"] == "gdp-exact"
    assert set(d["rdp"]) == {"2", "8", "32"}
    details = d["details"]
    assert details["mu"] == mu
    assert details["mu_step"] == pytest.approx(0.5, rel=1e-15)
    assert details["contraction"] == pytest.approx(1 - 0.1 * 0.05, rel=1e-15)
    assert mu <= details["mu_limit"] * (1 + 1e-15)
    # the exact conversion is never above the RDP route on the same curve
    orders = 1 + np.geomspace(1e-2, 1e4, 300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrderGridWarning)
        for conversion in ("classic", "improved"):
            via_rdp = epsilon_from_rdp(orders, SI.rdp(run, orders), delta, conversion=conversion).epsilon
            assert result.epsilon <= via_rdp


def test_default_orders_and_interface():
    assert isinstance(SI, GDPAnalysis)
    result = SI.evaluate(run_(), delta=1e-5)
    assert result.orders is not None and result.rdp.shape == result.orders.shape
    assert SI.name == "shifted-interpolation" and "2403.00278" in SI.citation
    assert any("projection" in a for a in SI.assumptions())


def test_beats_composition_and_pld_for_long_runs():
    run = run_(steps=2000)
    ours = SI.evaluate(run, delta=1e-5).epsilon
    for name in ("composition", "composition-pld"):
        assert ours < get_analysis(name).evaluate(run, delta=1e-5).epsilon


# ------------------------------------------------------------------ refusals


def test_add_remove_is_refused_for_every_batching_this_analysis_covers():
    """full, cyclic, shuffle-once under add/remove: Run refuses them (issue 24), before this
    analysis could."""
    for kwargs in (dict(), dict(batching="cyclic", batch_size=100), dict(batching="shuffle-once", batch_size=100)):
        with pytest.raises(ValueError, match=r"adjacency='add-remove' needs batching='poisson'\."):
            run_(adjacency="add-remove", **kwargs)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(batching="shuffle", batch_size=100), r"full and cyclic batches only.*found batching='shuffle'"),
        (dict(batching="sample", batch_size=100), r"found batching='sample'"),
        (dict(batching="poisson", batch_size=100), r"found batching='poisson'"),
        (dict(strong_convexity=0.0, convex=True), r"needs strongly convex losses, m > 0.*found strong_convexity=0"),
        (dict(smoothness=None), r"needs the smoothness M"),
        (dict(lr_decay=0.5), r"needs a constant step size"),
        (dict(steps=3, learning_rate=(0.1, 0.1, 0.1)), r"needs a constant step size"),
        (dict(learning_rate=2.0), r"needs learning rate < 2/M = 2 \(strictly, so that c < 1\); found 2"),
        (dict(learning_rate=3.0, smoothness=1.0), r"found 3"),
        (dict(learning_rate=1e-10, strong_convexity=1e-320), r"needs a contraction factor .* < 1"),
    ],
)
def test_refusals(kwargs, match):
    run = run_(**kwargs)
    reason = SI.why_not(run)
    assert reason is not None
    assert re.search(match, reason), reason
    result = SI.evaluate(run, delta=1e-5)
    assert not result.applies and result.reason == reason and result.mu is None
    with pytest.raises(ValueError, match="does not satisfy the assumptions of shifted-interpolation"):
        SI.mu(run)


def test_projection_is_allowed():
    assert SI.why_not(run_(diameter=5.0)) is None
    assert "diameter_note" in SI.details(run_(diameter=5.0))


def test_pure_function_errors():
    with pytest.raises(ValueError, match=r"gap \(1 − c\) must be in \(0, 1\]"):
        si.full_batch_mu_ratio(3, gap=0.0)
    with pytest.raises(ValueError, match=r"steps must be at least 1. Found 0"):
        si.full_batch_mu_ratio(0, gap=0.5)
    with pytest.raises(ValueError, match=r"epochs must be at least 1. Found 0"):
        si.cyclic_mu_ratio(0, gap=0.5, batches_per_epoch=2)
    with pytest.raises(ValueError, match=r"batches_per_epoch must be at least 1. Found 0"):
        si.cyclic_mu_ratio(2, gap=0.5, batches_per_epoch=0)
