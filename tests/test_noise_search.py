"""noise_search: every search returns a z that was evaluated and met the target, with z/(1 + tol)
missed, for any non-increasing ε(z); the PLD's two grids decide in about three fine evaluations."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from noisysgd.noise_search import Eps, bisect_noise, place_then_decide, predicted


def _curve(scale: float, power: float, offset: float):
    """ε(z) = scale / z^power on the fine grid; the coarse grid rounds up by a relative
    ``offset`` (never below the fine one), as a coarser pessimistic PLD does."""
    def fine(z: float) -> float:
        return scale / z ** power

    def coarse(z: float) -> float:
        return fine(z) * (1.0 + offset)

    return fine, coarse


@settings(max_examples=200, deadline=None)
@given(scale=st.floats(0.05, 50.0), power=st.floats(0.5, 3.0), offset=st.floats(0.0, 5e-4),
       target=st.floats(0.1, 10.0), start=st.floats(0.05, 20.0), tol=st.sampled_from([1e-4, 1e-3, 1e-2]))
def test_place_then_decide_returns_an_evaluated_answer_to_the_tolerance(scale, power, offset, target, start, tol):
    fine_eps, coarse_eps = _curve(scale, power, offset)
    fine_seen = []

    def fine(z):
        fine_seen.append(z)
        return Eps(fine_eps(z))

    def meets(r):
        return r.epsilon <= target

    z = place_then_decide(lambda x: Eps(coarse_eps(x)), fine, meets, start, None, tol, 1e9, target, 1e-5)
    assert z in fine_seen and fine_eps(z) <= target  # evaluated on the fine grid, and met
    exact = (scale / target) ** (1.0 / power)  # the smallest z meeting the target
    assert exact <= z <= exact * (1.0 + tol) * (1.0 + 1e-9)
    assert fine_eps(z / (1.0 + tol)) > target or math.isclose(z / (1.0 + tol), exact, rel_tol=1e-9)
    # a smooth offset between the grids is predicted: three fine evaluations (four at the grid's own tolerance)
    assert len(fine_seen) <= 4


@settings(max_examples=200, deadline=None)
@given(scale=st.floats(0.05, 50.0), power=st.floats(0.5, 3.0), target=st.floats(0.1, 10.0),
       start=st.floats(0.05, 20.0), jump=st.floats(0.0, 0.5))
def test_bisect_noise_meets_for_a_curve_with_a_step(scale, power, target, start, jump):
    """A non-increasing ε(z) need not be smooth: a step down at z = 1 (ε jumps by ``jump``)."""
    def eps(z: float) -> float:
        return scale / z ** power + (jump if z < 1.0 else 0.0)

    seen = []

    def at(z):
        seen.append(z)
        return Eps(eps(z))

    z, report, lo = bisect_noise(at, lambda r: r.epsilon <= target, start, None, 1e-4, 1e9, target, 1e-5)
    assert z in seen and eps(z) <= target and report.epsilon == eps(z)
    assert lo is None or (eps(lo) > target and z / lo <= 1.0 + 1e-4 + 1e-12)


def test_predicted_follows_the_coarse_slope():
    # ε = 1/z on the coarse points (1, 1), (2, 0.5): slope −1 in log–log; from (1.5, 0.6) the
    # target 0.5 is reached at 1.5·0.6/0.5 = 1.8
    assert math.isclose(predicted([(1.0, 1.0), (2.0, 0.5)], 1.5, 0.6, 0.5), 1.8)
    assert predicted([(1.0, 1.0)], 1.5, 0.6, 0.5) is None  # no pair straddling the target
    assert predicted([(1.0, 1.0), (2.0, 1.2)], 1.5, 0.6, 1.1) is None  # ε rising in z: no prediction


def test_predicted_reads_no_slope_between_points_whose_logs_round_equal():
    """Two coarse points a float apart near 1e300 have the same log in float64: there is no slope
    to read (a division by zero a hypothesis run found), so no prediction."""
    x0 = 1e300
    x1 = math.nextafter(x0, math.inf)
    assert math.log(x1) == math.log(x0)
    assert predicted([(x1, 0.5), (x0, 2.0)], x1, 0.5, 1.0) is None
