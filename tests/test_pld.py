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
