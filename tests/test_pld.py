"""noisysgd.pld builds dp_accounting's PLD of a (Poisson-sampled) Gaussian with the inverse
privacy loss in numpy (issue 28 §3).  It must be the PLD ``from_gaussian_mechanism`` returns:
the same grid, the same probabilities and infinity mass, the same composed ε, over the
relations, sampling rates and noise levels the accountant uses."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from noisysgd.pld import sampled_gaussian_pld

dp_accounting = pytest.importorskip("dp_accounting")


def _theirs(sigma, q, interval, replace_one):
    from dp_accounting.pld import privacy_loss_distribution

    relation = (dp_accounting.NeighboringRelation.REPLACE_ONE if replace_one
                else dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    return privacy_loss_distribution.from_gaussian_mechanism(
        sigma, sensitivity=1.0, value_discretization_interval=interval, sampling_prob=q,
        neighboring_relation=relation)


def _same_power(a, b):
    """Two self-composed dense PMFs agree: the same support (a Chernoff bound one apart is allowed,
    two sums rounding differently: see the bounds test), compared where both hold it, the same
    infinity mass, every probability to 1e-11 of the largest."""
    assert abs(b._lower_loss - a._lower_loss) <= 1 and abs(len(b._probs) - len(a._probs)) <= 2
    assert b._infinity_mass == a._infinity_mass
    first, last = max(a._lower_loss, b._lower_loss), min(a._lower_loss + len(a._probs), b._lower_loss + len(b._probs))
    np.testing.assert_allclose(b._probs[first - b._lower_loss:last - b._lower_loss],
                               a._probs[first - a._lower_loss:last - a._lower_loss],
                               rtol=0, atol=1e-11 * a._probs.max())


def _same_pmf(a, b, rtol):
    """Two PLDPmfs agree: δ(ε) on a grid across their support, and the infinity mass."""
    assert b._infinity_mass == pytest.approx(a._infinity_mass, rel=1e-9, abs=1e-15)
    grid = np.linspace(-2.0, 30.0, 161)
    da, db = np.array(a.get_delta_for_epsilon(grid)), np.array(b.get_delta_for_epsilon(grid))
    np.testing.assert_allclose(db, da, rtol=rtol, atol=1e-15)


@pytest.mark.parametrize("replace_one", [False, True])
@pytest.mark.parametrize("q", [1.0, 0.5, 0.02, 0.0043, 1e-4])
@pytest.mark.parametrize("sigma", [pytest.param(0.6, marks=pytest.mark.slow),  # small σ: wide PLDs, seconds each
                                   pytest.param(1.0, marks=pytest.mark.slow), 4.0, 17.0])
def test_the_pmf_is_dp_accounting_s(q, sigma, replace_one):
    interval = 3e-4
    ours, theirs = sampled_gaussian_pld(sigma, 1.0, q, interval, replace_one), _theirs(sigma, q, interval,
                                                                                       replace_one)
    for side in ("_pmf_remove", "_pmf_add"):
        a, b = getattr(theirs, side), getattr(ours, side)
        assert type(a) is type(b)
        if hasattr(a, "_probs"):   # dense: the very grid, probability by probability
            assert a._lower_loss == b._lower_loss and len(a._probs) == len(b._probs)
            np.testing.assert_allclose(b._probs, a._probs, rtol=0, atol=1e-10)  # 1.9e-12 seen: second differences of δ
        _same_pmf(a, b, rtol=1e-9)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(q=st.floats(1e-4, 1.0), sigma=st.floats(0.5, 30.0), replace_one=st.booleans(),
       steps=st.integers(1, 2000), delta=st.sampled_from([1e-3, 1e-5, 1e-8]))
def test_the_composed_epsilon_is_dp_accounting_s(q, sigma, replace_one, steps, delta):
    interval = 1e-3
    ours = sampled_gaussian_pld(sigma, 1.0, q, interval, replace_one).self_compose(steps)
    theirs = _theirs(sigma, q, interval, replace_one).self_compose(steps)
    ea, eb = theirs.get_epsilon_for_delta(delta), ours.get_epsilon_for_delta(delta)
    # numpy's exp/log1p against libm's: at q = 1e-4, σ = 0.5 (replace-one) both inverses agree with an
    # mpmath evaluation to 1.5e-15 and δ(ε) to 6e-15, but the PMF takes second differences of δ and
    # hundreds of compositions amplify the last ulp to ~1e-6 in ε: far below the discretisation of
    # the loss itself (the interval, 1e-3 here)
    assert eb == pytest.approx(ea, rel=1e-5, abs=1e-10)


@pytest.mark.parametrize("kwargs, name", [
    (dict(standard_deviation=0.0), "standard_deviation"), (dict(standard_deviation=math.inf), "standard_deviation"),
    (dict(standard_deviation=1.0, sensitivity=-1.0), "sensitivity"),
    (dict(standard_deviation=1.0, sampling_prob=0.0), "sampling_prob"),
    (dict(standard_deviation=1.0, sampling_prob=1.5), "sampling_prob"),
    (dict(standard_deviation=1.0, interval=0.0), "interval")])
def test_bad_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError, match=name):
        sampled_gaussian_pld(**kwargs)


# ε(δ) read off a PLD: noisysgd.pld.epsilon_for_delta must be dp_accounting's get_epsilon_for_delta.

@settings(max_examples=30, deadline=None)
@given(q=st.floats(1e-3, 1.0), sigma=st.floats(0.5, 20.0), replace_one=st.booleans(),
       steps=st.integers(1, 400), delta=st.sampled_from([0.5, 0.1, 1e-3, 1e-5, 1e-9, 1e-14]))
def test_epsilon_for_delta_is_dp_accounting_s(q, sigma, replace_one, steps, delta):
    from noisysgd.pld import epsilon_for_delta

    pld = _theirs(sigma, q, 1e-3, replace_one).self_compose(steps)
    theirs = pld.get_epsilon_for_delta(delta)
    ours = epsilon_for_delta(pld, delta)
    # the losses are i·Δ here, a running sum of −Δ there: ~1e-11 apart after 10⁵ grid points (at
    # most n·ulp(loss) ~ 1e-9 where every rounding went the same way)
    assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-8)


def _dense(probs, lower, infinity_mass=0.0, step=0.5):
    from dp_accounting.pld import pld_pmf, privacy_loss_distribution

    pmf = pld_pmf.DensePLDPmf(step, lower, np.asarray(probs, dtype=float), infinity_mass, True)
    return privacy_loss_distribution.PrivacyLossDistribution(pmf)


@pytest.mark.parametrize("probs, lower, inf_mass", [
    ([0.2, 0.3, 0.5], -1, 0.0),          # losses −0.5, 0, 0.5
    ([0.1, 0.2, 0.3, 0.39], 0, 0.01),    # an infinity mass below some δ, above others
    ([0.6, 0.4], -6, 0.0),               # every loss negative: ε = 0
    ([1e-300, 0.5, 0.5 - 1e-300], 2, 1e-12),
    (np.full(20_000, 1 / 20_000), -9_000, 0.0)])  # longer than one block of the walk
@pytest.mark.parametrize("delta", [0.5, 0.2, 0.05, 0.011, 0.01, 1e-3, 1e-6, 1e-13])
def test_epsilon_for_delta_on_hand_made_pmfs(probs, lower, inf_mass, delta):
    from noisysgd.pld import epsilon_for_delta

    step = 1e-3 if len(probs) > 100 else 0.5
    pld = _dense(probs, lower, inf_mass, step)
    assert epsilon_for_delta(pld, delta) == pytest.approx(pld.get_epsilon_for_delta(delta), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("empty_top", [0, 1, 100])
def test_epsilon_for_delta_exits_as_dp_accounting_does_where_the_top_losses_are_empty(empty_top):
    """δ equal to the infinity mass, the largest losses carrying no mass: dp_accounting's walk answers
    the largest loss of the grid (above the PMF's exact ε, the largest loss with mass); so does ours."""
    p = np.full(2000, 1.0)
    p[2000 - empty_top:] = 0.0
    p *= 0.95 / p.sum()
    pld = _dense(p, -1000, 0.05, 1e-3)
    from noisysgd.pld import epsilon_for_delta

    for delta in (0.05, 0.05 + 1e-12, 0.0500001):
        assert epsilon_for_delta(pld, delta) == pytest.approx(pld.get_epsilon_for_delta(delta), rel=1e-12, abs=1e-15)


def test_epsilon_for_delta_takes_the_larger_side_and_defers_where_it_must():
    """An asymmetric PLD (add/remove, sampled): the larger of its two PMFs' answers; a sparse PMF
    and losses past exp's underflow are left to dp_accounting's own walk."""
    from dp_accounting.pld import pld_pmf, privacy_loss_distribution

    from noisysgd.pld import epsilon_for_delta

    pld = _theirs(2.0, 0.3, 1e-3, False).self_compose(5)
    assert not pld._symmetric
    for delta in (1e-2, 1e-5):
        assert epsilon_for_delta(pld, delta) == pytest.approx(pld.get_epsilon_for_delta(delta), rel=1e-12)
    sparse = privacy_loss_distribution.PrivacyLossDistribution(
        pld_pmf.SparsePLDPmf({-2: 0.5, 3: 0.4999, 800: 1e-4}, 1.0, 0.0, True))
    far = _dense([0.5, 0.4999, 1e-4], 798, 0.0, 1.0)   # losses 798, 799, 800: e^{−loss} underflows
    for p in (sparse, far):
        for delta in (1e-3, 1e-5):
            assert epsilon_for_delta(p, delta) == p.get_epsilon_for_delta(delta)


def test_a_gaussian_query_composed_into_a_run_is_dp_accounting_s():
    """epsilon_with_gaussian_query composes the run's self-composed PLD with the query's without
    the identity PLD and without tail truncation (exact convolution): dp_accounting's PLDAccountant
    on the same two events agrees to its own rounding."""
    import noisysgd
    from noisysgd.analyses.composition import epsilon_with_gaussian_query

    run = noisysgd.Run(n=1000, batch_size=128, batching="poisson", steps=200, learning_rate=0.1,
                       noise_multiplier=6.0, lipschitz=1.0, adjacency="add-remove")
    mu_q, delta = 0.3, 1e-5
    acc = dp_accounting.pld.PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
                                          value_discretization_interval=1e-4)
    acc.compose(dp_accounting.PoissonSampledDpEvent(0.128, dp_accounting.GaussianDpEvent(6.0)), 200)
    acc.compose(dp_accounting.GaussianDpEvent(1.0 / mu_q))
    assert epsilon_with_gaussian_query(run, delta, mu_q) == pytest.approx(acc.get_epsilon(delta), rel=1e-8)


@settings(max_examples=20, deadline=None)
@given(q=st.floats(1e-3, 1.0), sigma=st.floats(0.5, 20.0), replace_one=st.booleans(),
       steps=st.integers(1, 3000), delta=st.sampled_from([1e-3, 1e-5]))
def test_self_compose_is_dp_accounting_s(q, sigma, replace_one, steps, delta):
    """noisysgd.pld.self_compose (a real FFT, powers by squaring) gives dp_accounting's composed
    PMF: the same support and infinity mass, every probability to 1e-11 of the largest (both are a
    float FFT's convolution power; 3.4e-13 at most over 150 random runs), and the same ε (7e-10 at
    most there at δ ≥ 1e-5; deeper in the tails, where the FFTs' rounding shows, see below)."""
    from noisysgd.pld import self_compose

    one = _theirs(sigma, q, 1e-3, replace_one)
    theirs, ours = one.self_compose(steps), self_compose(one, steps)
    assert ours._symmetric == theirs._symmetric
    for side in ("_pmf_remove", "_pmf_add"):
        a, b = getattr(theirs, side), getattr(ours, side)
        if not hasattr(a, "_probs"):  # a sparse PMF (a tiny one-step PLD): dp_accounting's own method ran
            continue
        _same_power(a, b)
    assert ours.get_epsilon_for_delta(delta) == pytest.approx(theirs.get_epsilon_for_delta(delta), rel=1e-7, abs=1e-12)


def test_self_compose_rounds_as_dp_accounting_does_against_a_long_double_fft():
    """Deep in the tails (ε at δ = 1e-9) the two FFTs' rounding shows: 1.6e-8 apart on four composed
    Gaussians, up to 3.8e-6 over 150 random runs (at q = 1/32, σ = 0.5, replace-one, T = 206: theirs
    6.9e-7 under a long-double FFT's ε, ours 6.3e-7 over it).  Here each lies within 2e-8 of the same
    convolution power computed in long double (scipy's FFT in extended precision)."""
    from dp_accounting.pld import common, pld_pmf, privacy_loss_distribution
    from scipy import fft

    from noisysgd.pld import _power, self_compose

    one, times = _theirs(1.0, 1.0, 1e-3, False), 4
    pmf = one._pmf_remove
    lower, upper = common.compute_self_convolve_bounds(pmf._probs, times, 1e-15)
    size = upper - lower + 1
    length = fft.next_fast_len(size, real=True)
    exact = fft.irfft(_power(fft.rfft(pmf._probs.astype(np.longdouble), length), times), length)
    exact = np.roll(exact, -lower)[:size].astype(float)
    inf = one.self_compose(times)._pmf_remove._infinity_mass
    ref = privacy_loss_distribution.PrivacyLossDistribution(
        pld_pmf.DensePLDPmf(pmf._discretization, pmf._lower_loss * times + lower, exact, inf, True))
    want = ref.get_epsilon_for_delta(1e-9)
    for pld in (one.self_compose(times), self_compose(one, times)):
        assert pld.get_epsilon_for_delta(1e-9) == pytest.approx(want, rel=2e-8)


def test_self_compose_checks_its_count_and_defers_on_sparse_pmfs():
    """A sparse PMF whose power stays under dp_accounting's sparse size (2 losses, 3 times: 8 ≤
    1000) is left to dp_accounting's pairwise composition, and ``times`` = 1 to its own method."""
    from dp_accounting.pld import pld_pmf, privacy_loss_distribution

    from noisysgd.pld import self_compose

    with pytest.raises(ValueError, match="times"):
        self_compose(_theirs(2.0, 0.1, 1e-3, False), 0)
    sparse = privacy_loss_distribution.PrivacyLossDistribution(
        pld_pmf.SparsePLDPmf({-2: 0.5, 3: 0.4999}, 0.5, 1e-4, True))
    for times in (1, 3):
        theirs, ours = sparse.self_compose(times), self_compose(sparse, times)
        assert type(ours._pmf_remove) is type(theirs._pmf_remove)
        assert ours.get_epsilon_for_delta(1e-3) == theirs.get_epsilon_for_delta(1e-3)


@pytest.mark.parametrize("replace_one", [False, True])
@pytest.mark.parametrize("times", [11, 700])
def test_a_sparse_pmf_is_made_dense_where_dp_accounting_makes_it_dense(replace_one, times):
    """A coarse one-step PLD is sparse (≤ 1,000 losses); dp_accounting converts it to dense before
    its power and so does self_compose (then its own FFT): the same support (to a bound one apart),
    infinity mass and probabilities to 1e-11 of the largest."""
    from dp_accounting.pld import pld_pmf

    from noisysgd.pld import self_compose

    one = _theirs(1.5, 0.05, 0.05, replace_one)
    assert isinstance(one._pmf_remove, pld_pmf.SparsePLDPmf)
    theirs, ours = one.self_compose(times), self_compose(one, times)
    for side in ("_pmf_remove",) if one._symmetric else ("_pmf_remove", "_pmf_add"):
        a, b = getattr(theirs, side), getattr(ours, side)
        assert isinstance(a, pld_pmf.DensePLDPmf) and isinstance(b, pld_pmf.DensePLDPmf)
        _same_power(a, b)


@settings(max_examples=40, deadline=None)
@given(q=st.floats(1e-3, 1.0), sigma=st.floats(0.5, 40.0), replace_one=st.booleans(),
       times=st.integers(1, 100_000), tail=st.sampled_from([0.0, 1e-15, 1e-10]))
def test_self_convolve_bounds_are_dp_accounting_s(q, sigma, replace_one, times, tail):
    """The Chernoff truncation of a self-composition, moments summed as products (no logsumexp):
    the integers dp_accounting computes (identical on 418 one-step PMFs and 2,840 comparisons where
    checked; one apart is allowed, where a bound within rounding of an integer is ceiled or floored
    after two sums that round differently)."""
    from dp_accounting.pld import common

    from noisysgd.pld import _self_convolve_bounds

    one = _theirs(sigma, q, 1e-3, replace_one)
    for pmf in (one._pmf_remove, one._pmf_add):
        if hasattr(pmf, "_probs"):
            ours = _self_convolve_bounds(pmf._probs, times, tail)
            theirs = common.compute_self_convolve_bounds(pmf._probs, times, tail)
            assert abs(ours[0] - theirs[0]) <= 1 and abs(ours[1] - theirs[1]) <= 1, (ours, theirs)


@settings(max_examples=30, deadline=None)
@given(size=st.integers(1, 5000), lower=st.integers(-3000, 3000), interval=st.sampled_from([1e-4, 1e-3, 0.05]),
       seed=st.integers(0, 2**32 - 1))
def test_connect_dots_is_dp_accounting_s_to_the_bit(size, lower, interval, seed):
    """noisysgd.pld._connect_dots hands dp_accounting's own connect-the-dots probabilities to its
    DensePLDPmf as an array (no dict round trip): the very PMF, bit for bit, and its sparse PMFs
    (≤ 1,000 points) and its errors are its own."""
    from dp_accounting.pld import pld_pmf

    from noisysgd.pld import _connect_dots

    rng = np.random.default_rng(seed)
    deltas = np.sort(rng.uniform(0, 1, size) ** rng.uniform(1, 20))[::-1]  # non-increasing, in [0, 1]
    deltas[rng.integers(0, size)] = deltas[max(0, rng.integers(0, size) - 1)]  # ties
    deltas = np.minimum.accumulate(deltas)
    ours = _connect_dots(interval, lower, lower + size - 1, deltas)
    theirs = pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(interval, lower, lower + size - 1, deltas)
    assert type(ours) is type(theirs)
    assert ours._infinity_mass == theirs._infinity_mass
    if hasattr(theirs, "_probs"):
        assert ours._lower_loss == theirs._lower_loss and np.array_equal(ours._probs, theirs._probs)
    else:
        assert ours._loss_probs == theirs._loss_probs
    increasing = deltas.copy()
    increasing[-1] = min(1.0, increasing[0] + 0.1)
    if size > 1:
        with pytest.raises(ValueError, match="non-increasing"):
            _connect_dots(interval, lower, lower + size - 1, increasing)


def test_pad_infinity_moves_mass_to_infinity_and_nothing_else():
    """pad_infinity adds the mass at +∞ in each PMF (dense and sparse, symmetric or not), the
    probabilities untouched: δ(ε) rises by exactly that mass at every ε, and ε(δ) never falls."""
    from dp_accounting.pld import pld_pmf, privacy_loss_distribution

    from noisysgd.pld import pad_infinity

    dense = _theirs(2.0, 0.3, 1e-3, False).self_compose(20)
    sparse = privacy_loss_distribution.PrivacyLossDistribution(pld_pmf.SparsePLDPmf({-2: 0.5, 3: 0.4999}, 0.5, 1e-4, True))
    for pld in (dense, sparse):
        padded = pad_infinity(pld, 1e-6)
        for eps in (0.0, 0.5, 2.0):
            assert padded.get_delta_for_epsilon(eps) == pytest.approx(pld.get_delta_for_epsilon(eps) + 1e-6, rel=1e-12)
        for delta in (1e-3, 1e-5):
            assert padded.get_epsilon_for_delta(delta) >= pld.get_epsilon_for_delta(delta)
    with pytest.raises(ValueError, match="mass"):
        pad_infinity(dense, -1.0)


@settings(max_examples=25, deadline=None)
@given(q=st.floats(1e-3, 1.0), sigma=st.floats(0.5, 20.0), replace_one=st.booleans(),
       steps=st.integers(1, 2000), mu_q=st.floats(0.05, 2.0), delta=st.sampled_from([1e-3, 1e-5, 1e-7]))
def test_compose_exact_is_dp_accounting_s_compose_without_truncation(q, sigma, replace_one, steps, mu_q, delta):
    """compose_exact (a real FFT, the second operand's spectrum reused) gives dp_accounting's
    ``compose(other, tail_mass_truncation=0)``: the same support and infinity mass, every probability
    to 1e-11 of the largest (both a float FFT's convolution), the same ε; asked twice (the spectrum
    kept), the same PLD bit for bit."""
    from noisysgd.pld import compose_exact, sampled_gaussian_pld, self_compose

    run_pld = self_compose(_theirs(sigma, q, 1e-3, replace_one), steps)
    query = sampled_gaussian_pld(1.0 / mu_q, 1.0, 1.0, 1e-3)
    theirs, ours = run_pld.compose(query, tail_mass_truncation=0.0), compose_exact(run_pld, query)
    again = compose_exact(run_pld, query)
    assert ours._symmetric == theirs._symmetric
    for side in ("_pmf_remove", "_pmf_add"):
        a, b, c = getattr(theirs, side), getattr(ours, side), getattr(again, side)
        if not hasattr(a, "_probs"):  # sparse: dp_accounting's own method ran
            continue
        assert (b._lower_loss, len(b._probs), b._infinity_mass) == (a._lower_loss, len(a._probs), a._infinity_mass)
        np.testing.assert_allclose(b._probs, a._probs, rtol=0, atol=1e-11 * a._probs.max())
        assert np.array_equal(b._probs, c._probs)
    assert ours.get_epsilon_for_delta(delta) == pytest.approx(theirs.get_epsilon_for_delta(delta), rel=1e-7, abs=1e-12)


@settings(max_examples=120, deadline=None)
@given(log_sigma=st.floats(-1.0, 3.0), log_q=st.floats(-4.0, 0.0), kind=st.sampled_from(["ADD", "REMOVE", "REPLACE"]),
       sensitivity=st.sampled_from([1.0, 2.0]))
def test_the_gaussian_loss_is_dp_accountings_without_its_scipy_object(log_sigma, log_q, kind, sensitivity):
    """pld._spelled_out_loss spells out GaussianPrivacyLoss.__init__ with its noise a _ScaledNormal
    (scipy.special's ndtr, log_ndtr and ndtri where scipy.stats.norm(scale=σ) calls them): the same
    truncation bounds and the same cdfs, bit for bit, as dp_accounting's own class."""
    from dp_accounting.pld import privacy_loss_mechanism as plm

    from noisysgd import pld

    sigma, q = 10.0 ** log_sigma, min(1.0, 10.0 ** log_q)
    ref = plm.GaussianPrivacyLoss(sigma, sensitivity=sensitivity, pessimistic_estimate=True,
                                  log_mass_truncation_bound=pld._truncation(), sampling_prob=q,
                                  adjacency_type=getattr(plm.AdjacencyType, kind))
    ours = pld._spelled_out_loss(sigma, sensitivity, q, kind)
    a, b = ref.connect_dots_bounds(), ours.connect_dots_bounds()
    assert (a.epsilon_lower, a.epsilon_upper) == (b.epsilon_lower, b.epsilon_upper)
    x = np.linspace(-40.0, 40.0, 81) * sigma
    np.testing.assert_array_equal(ref.mu_upper_cdf(x), ours.mu_upper_cdf(x))
    np.testing.assert_array_equal(ref.mu_lower_log_cdf(x), ours.mu_lower_log_cdf(x))


def test_the_spelled_out_loss_is_used_only_where_it_agrees(monkeypatch):
    """With the dp_accounting this project pins, the spelled-out loss agrees with its class on the
    probe and is used; where the probe disagrees (another dp_accounting), its own class is built."""
    from dp_accounting.pld import privacy_loss_mechanism as plm

    from noisysgd import pld

    assert pld._spelled_out_loss_agrees()
    assert isinstance(pld._gaussian_loss(2.0, 1.0, 0.1, "REPLACE")._gaussian_random_variable, pld._ScaledNormal)
    monkeypatch.setattr(pld, "_spelled_out_loss_agrees", lambda: False)
    loss = pld._gaussian_loss(2.0, 1.0, 0.1, "REPLACE")
    assert isinstance(loss, plm.GaussianPrivacyLoss) and not isinstance(loss._gaussian_random_variable, pld._ScaledNormal)
