"""The contract every analysis in ``noisysgd.analyses.ANALYSES`` must keep.

Like dp_accounting's abstract ``privacy_accountant_test.py``, but parametrized
over the registry: an analysis registered tomorrow is checked by every test
here without a line of new test code.  The fixture runs below cover every
batching scheme, convex / strongly convex / non-convex losses, with and
without diameter and smoothness, both adjacencies, step-size schedules and
runs with several batches per epoch; ``test_fixture_runs_exercise_every_analysis``
fails when an analysis stops being applied to, or refused by, at least one of
them (so the rest of the suite cannot silently stop exercising it).

Known contract violations are kept as ``xfail(strict=True)`` with the reason
(see ``_known``): they turn into failures the day they are fixed, so the mark
gets removed with the fix.
"""

from __future__ import annotations

import functools
import json
import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noisysgd import Run
from noisysgd.analyses import ANALYSES, AnalysisResult, GDPAnalysis, RDPAnalysis, get_analysis
from noisysgd.gdp import gdp_epsilon, gdp_rdp
from noisysgd.rdp import DEFAULT_ORDERS, epsilon_from_rdp
from noisysgd.run import ADJACENCIES, BATCHING_SCHEMES, INITIALIZATIONS

# ---------------------------------------------------------------- fixture runs

#: Each run is chosen so that some analysis' *non-trivial* branch gives the
#: bound (noted per run); all evaluate in well under a second.
RUNS: dict[str, Run] = {
    # Non-convex, Poisson: only the composition baselines apply.
    "poisson-nonconvex": Run(
        n=1000, batch_size=10, batching="poisson", steps=200, learning_rate=0.5,
        noise_multiplier=3.0, lipschitz=1.0),
    # Convex, bounded, Poisson with η <= 2b/(nM): A&T's worst-case-batch shift-budget
    # bound beats composition; A&T-sampled's split (B.2).
    "poisson-convex": Run(
        n=100, batch_size=10, batching="poisson", steps=2000, learning_rate=0.1,
        noise_multiplier=3.0, lipschitz=1.0, smoothness=1.0, diameter=0.01, convex=True),
    # The same under add/remove (n the declared public size): A&T refuses (a batch can
    # hold every row the data have, which no public quantity bounds); composition at L.
    "poisson-convex-addremove": Run(
        n=100, batch_size=10, batching="poisson", steps=2000, learning_rate=0.1,
        noise_multiplier=3.0, lipschitz=1.0, smoothness=1.0, diameter=0.01, convex=True,
        adjacency="add-remove"),
    # Convex, bounded, fixed-size batches: as above under `sample`.
    "sample-convex": Run(
        n=100, batch_size=10, batching="sample", steps=1000, learning_rate=0.1,
        noise_multiplier=3.0, lipschitz=1.0, smoothness=1.0, diameter=0.02, convex=True),
    # Strongly convex, bounded, sample (add/remove refuses sample since issue 24): Ye–Shokri
    # Theorem 4.3 recursion, A&T-sampled (B.3), Ryffel.
    "sample-strongly": Run(
        n=1000, batch_size=20, batching="sample", steps=1000, learning_rate=0.05,
        noise_multiplier=3.0, lipschitz=1.0, smoothness=1.0, strong_convexity=0.05,
        diameter=0.02),
    # Convex, explicit decreasing step-size schedule, sample: A&T refuses (§5.3 shares
    # the gap of (B.2)), A&T-sampled computes the schedule bound.
    "sample-schedule": Run(
        n=200, batch_size=5, batching="sample", steps=600,
        learning_rate=tuple(0.5 / (1 + t) ** 0.3 for t in range(600)),
        noise_multiplier=3.0, lipschitz=1.0, smoothness=1.0, diameter=0.1, convex=True),
    # Strongly convex, no diameter, `sample` with b = n (q = 1), Gaussian start: Ryffel,
    # Ye–Shokri at q = 1.
    "sample-whole-dataset": Run(
        n=100, batch_size=100, batching="sample", steps=50, learning_rate=0.2,
        noise_multiplier=4.0, lipschitz=1.0, smoothness=1.0, strong_convexity=0.5,
        initialization="gaussian"),
    # Strongly convex, bounded, reshuffled each epoch (50 left-over examples): A&T
    # Theorem 5.8, ye-shokri-reshuffle (Theorem 4.2); ye-shokri refuses.
    "shuffle-strongly": Run.from_epochs(
        epochs=30, n=1050, batch_size=100, batching="shuffle", learning_rate=0.2,
        noise_multiplier=2.0, lipschitz=1.0, smoothness=1.0, strong_convexity=0.05, diameter=0.5),
    # Convex, shuffle (fresh permutation each epoch), bounded: A&T Theorem 5.8;
    # ye-shokri and shifted interpolation refuse (no strong convexity).  (Under
    # add/remove Run itself refuses shuffle: the partition changes, issue 24.)
    "shuffle-convex": Run.from_epochs(
        epochs=5, n=1000, batch_size=100, batching="shuffle", learning_rate=0.2,
        noise_multiplier=2.0, lipschitz=1.0, smoothness=1.0, diameter=1.0, convex=True),
    # Strongly convex, bounded, cyclic, 10 batches per epoch, stops inside an epoch:
    # A&T Theorem 5.8, Ye–Shokri Theorem 3.3, shifted interpolation (NoisyCGD).
    "cyclic-strongly-partial": Run(
        n=505, batch_size=50, batching="cyclic", steps=2005, learning_rate=0.1,
        noise_multiplier=2.0, lipschitz=1.0, smoothness=1.5, strong_convexity=0.1, diameter=0.5),
    # Strongly convex, bounded, one secret random partition reused every epoch (30
    # left-over examples), stops 4 steps into epoch 21: Ye–Shokri's Lemma 4.1 mixture
    # (Theorem 4.2 at whole epochs), A&T Theorem 5.8, shifted interpolation (worst
    # position); ye-shokri-reshuffle refuses.
    "shuffle-once-strongly-partial": Run(
        n=1030, batch_size=100, batching="shuffle-once", steps=204, learning_rate=0.2,
        noise_multiplier=2.0, lipschitz=1.0, smoothness=1.0, strong_convexity=0.05, diameter=0.5),
    # One batch per epoch (b > n/2): ye-shokri refuses (needs n/b >= 2); shifted
    # interpolation uses the full-batch formula on the one batch.
    "cyclic-one-batch": Run(
        n=100, batch_size=60, batching="cyclic", steps=30, learning_rate=0.3,
        noise_multiplier=3.0, lipschitz=1.0, smoothness=1.0, strong_convexity=0.2),
    # Strongly convex, bounded, full batches, η < 1/M, Gaussian start: every full-batch
    # analysis applies (A&T (B.3) with q = 1, Chourasia, Ye–Shokri Theorem 2.1, NoisyGD, Ryffel).
    "full-strongly": Run(
        n=200, batch_size=200, batching="full", steps=300, learning_rate=0.5,
        noise_multiplier=2.0, lipschitz=1.0, smoothness=1.5, strong_convexity=0.2, diameter=0.5,
        initialization="gaussian"),
    # Convex, polynomial step-size decay, full batches: A&T's schedule bound (§5.3).
    "full-convex-decay": Run(
        n=100, batch_size=None, batching="full", steps=2000, learning_rate=0.5, lr_decay=0.3,
        noise_multiplier=2.0, lipschitz=1.0, smoothness=2.0, diameter=0.05, convex=True),
    # Non-convex, Poisson batches holding every row in expectation (q = 1), add/remove.
    "poisson-whole-nonconvex-addremove": Run(
        n=50, batch_size=50, batching="poisson", steps=20, learning_rate=1.0,
        noise_multiplier=3.0, lipschitz=2.0, adjacency="add-remove"),
}

#: Analyses that hold for every run by construction (no assumptions beyond the
#: run description); every other analysis must be refused by some fixture run.
ALWAYS_APPLY = frozenset({"composition", "composition-pld"})

DELTA = 1e-5
#: A compact grid for the contract checks (A&T-sampled costs ~5 ms per order):
#: orders near 1, fractional and integer orders, up to the default grid's 1024.
ORDERS = np.array([1.01, 1.1, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 8.0, 10.0,
                   12.0, 16.0, 20.0, 24.0, 32.0, 48.0, 64.0, 96.0, 128.0, 256.0, 512.0, 1024.0])
#: Smaller still, for the checks that evaluate a pair many times (A&T-sampled's
#: split search costs about as much for 7 orders as the rest of the suite per run).
SMALL_ORDERS = np.array([1.5, 2.0, 3.0, 4.0, 8.0, 16.0, 64.0])
#: Relative floating-point slack for monotonicity checks.
REL_SLACK = 1e-9

PAIRS = [(name, run) for name in ANALYSES for run in RUNS]
APPLYING = [(name, run) for name, run in PAIRS if ANALYSES[name].why_not(RUNS[run]) is None]
REFUSED = [(name, run) for name, run in PAIRS if ANALYSES[name].why_not(RUNS[run]) is not None]


def _pair_id(pair) -> str:
    return f"{pair[0]}@{pair[1]}"


#: The sampled shifted-interpolation bound on its sampled runs takes seconds per evaluation:
#: those pairs are marked slow (``pytest -m "not slow"`` skips them).
SLOW_PAIRS = frozenset({("shifted-interpolation-sampled", "sample-whole-dataset"),
                        ("shifted-interpolation-sampled", "sample-strongly")})
#: The monotonicity-in-z check evaluates each pair at several noise levels: also the subsampled PLD and
#: Altschuler-Talwar pairs that take over half a second.
SLOW_IN_THE_NOISE = SLOW_PAIRS | {(name, run) for name in ("composition-pld", "altschuler-talwar-sampled")
                                  for run in ("sample-convex", "sample-strongly", "sample-schedule",
                                              "poisson-convex", "poisson-convex-addremove")}

#: The default order grid is long: also the Altschuler-Talwar pairs that take over half a second on it.
SLOW_DEFAULT_GRID = SLOW_PAIRS | {("altschuler-talwar", "full-convex-decay"),
                                  ("altschuler-talwar-sampled", "sample-convex")}


def _slow(pairs, slow=SLOW_PAIRS) -> list:
    """The pairs, those in ``slow`` marked slow (their ids are still given by ``ids=``)."""
    return [pytest.param(*p, marks=pytest.mark.slow) if p in slow else p for p in pairs]


def _sampled(run: Run) -> bool:
    """Whether composition-pld goes through dp_accounting's PLD (not the exact Gaussian)."""
    return run.batching in ("poisson", "sample") and run.batch_size < run.n


# ---------------------------------------------------------------- known violations

def _known(check: str, name: str, run_name: str | None) -> str | None:
    """The reason a (check, analysis, run) is a known contract violation, else None.

    None at present: the violations this suite found (arguments not validated
    when the analysis refuses the run; composition-pld passing δ and orders
    unchecked) were fixed in Analysis.evaluate.  composition-pld's PLD is not
    monotone in z at tiny δ: see test_pld_wobble_in_the_noise_is_bounded."""
    return None


def _params(check: str, pairs):
    out = []
    for name, run_name in pairs:
        reason = _known(check, name, run_name)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(name, run_name, marks=marks, id=_pair_id((name, run_name))))
    return out


# ---------------------------------------------------------------- helpers


@functools.cache
def _cached(name: str, run_name: str, delta: float = DELTA, orders: tuple | None = tuple(ORDERS),
            conversion: str = "improved") -> AnalysisResult:
    return _evaluate(name, RUNS[run_name], delta, orders, conversion)


def _evaluate(name, run, delta=DELTA, orders=tuple(ORDERS), conversion="improved") -> AnalysisResult:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # order-grid warnings are reported in the result
        return ANALYSES[name].evaluate(
            run, delta=delta, orders=None if orders is None else np.array(orders), conversion=conversion
        )


def _has_curve(analysis) -> bool:
    return isinstance(analysis, (RDPAnalysis, GDPAnalysis))


def _canonical(result: AnalysisResult) -> str:
    return json.dumps(result.to_dict(), sort_keys=True, allow_nan=False)


# ---------------------------------------------------------------- the fixture set itself


def test_registry_names_match():
    for name, analysis in ANALYSES.items():
        assert analysis.name == name
        assert get_analysis(name) is analysis


def test_fixture_runs_cover_the_run_space():
    runs = list(RUNS.values())
    assert {r.batching for r in runs} == set(BATCHING_SCHEMES)
    assert {r.adjacency for r in runs} == set(ADJACENCIES)
    assert {r.initialization for r in runs} == set(INITIALIZATIONS)
    assert any(not r.convex for r in runs)
    assert any(r.convex and r.strong_convexity == 0 for r in runs)
    assert any(r.strong_convexity > 0 for r in runs)
    assert any(r.diameter is None for r in runs) and any(r.diameter is not None for r in runs)
    assert any(r.smoothness is None for r in runs) and any(r.smoothness is not None for r in runs)
    assert any(isinstance(r.learning_rate, tuple) for r in runs)  # explicit schedule
    assert any(r.lr_decay > 0 for r in runs)  # polynomial decay
    assert any(r.batching in ("shuffle", "cyclic") and r.steps_per_epoch >= 2 for r in runs)
    assert any(r.batching == "cyclic" and r.steps % r.steps_per_epoch for r in runs)  # partial epoch
    assert any(r.batching == "shuffle-once" and r.steps % r.steps_per_epoch and r.n % r.batch_size
               for r in runs)  # partial epoch and left-over examples under Theorem 4.2's batching


@pytest.mark.parametrize("name", list(ANALYSES))
def test_fixture_runs_exercise_every_analysis(name):
    analysis = ANALYSES[name]
    applies = [r for r, run in RUNS.items() if analysis.why_not(run) is None]
    refused = [r for r, run in RUNS.items() if analysis.why_not(run) is not None]
    assert applies, f"{name} applies to no fixture run: add one it covers"
    if name in ALWAYS_APPLY:
        assert not refused, f"{name} is listed in ALWAYS_APPLY but refuses {refused}"
    else:
        assert refused, f"{name} is refused by no fixture run: add one that breaks an assumption"


# ---------------------------------------------------------------- every (analysis, run)


@pytest.mark.parametrize("name,run_name", _slow(PAIRS), ids=[_pair_id(p) for p in PAIRS])
def test_result_contract(name, run_name):
    analysis, run = ANALYSES[name], RUNS[run_name]
    why = analysis.why_not(run)
    assert why is None or (isinstance(why, str) and why.strip())
    res = _cached(name, run_name)
    assert isinstance(res, AnalysisResult)
    assert res.analysis == name
    assert res.applies is (why is None)
    assert res.reason == why
    assert res.delta == DELTA
    assert res.sound is type(analysis).sound and isinstance(res.sound, bool)
    if res.sound:
        assert res.not_sound_reason is None
    else:  # flagged: says why with every result, applies or not
        assert isinstance(res.not_sound_reason, str) and res.not_sound_reason.strip()
    assert res.citation == analysis.citation and res.citation.strip()
    assert all(isinstance(w, str) for w in res.warnings)
    if not res.applies:
        assert res.epsilon is None and res.mu is None and res.rdp is None and res.order is None
        return
    # ε: finite and positive on every fixture run (none is genuinely unbounded).
    assert isinstance(res.epsilon, float) and math.isfinite(res.epsilon) and res.epsilon > 0
    if _has_curve(analysis):
        np.testing.assert_array_equal(res.orders, ORDERS)
        curve = np.asarray(res.rdp, dtype=float)
        assert curve.shape == ORDERS.shape
        assert np.all(np.isfinite(curve)) and np.all(curve >= 0)
    else:
        assert res.rdp is None
    if isinstance(analysis, RDPAnalysis):
        assert res.conversion == "improved"
        assert res.order in set(ORDERS.tolist())
        # the reported ε is the conversion of the reported curve
        conv = epsilon_from_rdp(res.orders, res.rdp, DELTA, conversion="improved")
        assert res.epsilon == conv.epsilon and res.order == conv.order
    if isinstance(analysis, GDPAnalysis):
        assert isinstance(res.mu, float) and math.isfinite(res.mu) and res.mu > 0
        assert res.epsilon == gdp_epsilon(res.mu, DELTA)
        np.testing.assert_array_equal(res.rdp, gdp_rdp(res.mu, ORDERS))
        # the exact conversion is never above a conversion of the implied RDP curve
        assert res.epsilon <= epsilon_from_rdp(res.orders, res.rdp, DELTA).epsilon
    else:
        assert res.mu is None


@pytest.mark.parametrize("name,run_name", _slow(APPLYING), ids=[_pair_id(p) for p in APPLYING])
def test_rdp_is_non_decreasing_in_the_order(name, run_name):
    """D_α is non-decreasing in α, so a valid bound can always be made so; a curve
    that decreases somewhere is wasting tightness or computing something else."""
    res = _cached(name, run_name)
    if res.rdp is None:
        pytest.skip(f"{name} has no RDP curve")
    curve = np.asarray(res.rdp)
    drops = np.flatnonzero(curve[1:] < curve[:-1])
    assert drops.size == 0, [(ORDERS[i], curve[i], ORDERS[i + 1], curve[i + 1]) for i in drops]


@pytest.mark.parametrize("name,run_name", _slow(APPLYING, SLOW_DEFAULT_GRID), ids=[_pair_id(p) for p in APPLYING])
def test_default_order_grid(name, run_name):
    """With ``orders=None`` the curve is over DEFAULT_ORDERS and monotone there too
    (only the cheap analyses: A&T-sampled pays ~0.8 s per run on the full grid)."""
    if not _has_curve(ANALYSES[name]):
        pytest.skip(f"{name} does not use orders")
    if name == "altschuler-talwar-sampled" and run_name != "sample-convex":
        pytest.skip("one A&T-sampled run on the default grid is enough")
    res = _cached(name, run_name, orders=None)
    assert res.applies and math.isfinite(res.epsilon) and res.epsilon > 0
    np.testing.assert_array_equal(res.orders, DEFAULT_ORDERS)
    assert np.all(np.isfinite(res.rdp)) and np.all(res.rdp >= 0)
    drops = np.flatnonzero(np.diff(res.rdp) < 0)
    assert drops.size == 0, [(DEFAULT_ORDERS[i], res.rdp[i], res.rdp[i + 1]) for i in drops]
    if isinstance(ANALYSES[name], RDPAnalysis):
        assert res.order in set(DEFAULT_ORDERS.tolist())


@pytest.mark.parametrize("name,run_name", _slow(APPLYING), ids=[_pair_id(p) for p in APPLYING])
def test_rdp_method_matches_evaluate(name, run_name):
    analysis = ANALYSES[name]
    if not _has_curve(analysis):
        pytest.skip(f"{name} has no rdp()")
    np.testing.assert_array_equal(analysis.rdp(RUNS[run_name], SMALL_ORDERS),
                                  _cached(name, run_name, orders=tuple(SMALL_ORDERS)).rdp)


@pytest.mark.parametrize("name,run_name", REFUSED, ids=[_pair_id(p) for p in REFUSED])
def test_rdp_method_refuses_a_run_it_does_not_cover(name, run_name):
    analysis = ANALYSES[name]
    if not _has_curve(analysis):
        pytest.skip(f"{name} has no rdp()")
    why = analysis.why_not(RUNS[run_name])
    with pytest.raises(ValueError, match=re.escape(why)):  # says why, as evaluate() would
        analysis.rdp(RUNS[run_name], ORDERS)


@pytest.mark.parametrize("name,run_name", _slow(PAIRS), ids=[_pair_id(p) for p in PAIRS])
def test_evaluation_is_pure(name, run_name):
    orders = SMALL_ORDERS.copy()
    first = _cached(name, run_name, orders=tuple(SMALL_ORDERS))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an order-grid warning is kept in the result too
        second = ANALYSES[name].evaluate(RUNS[run_name], delta=DELTA, orders=orders)
    np.testing.assert_array_equal(orders, SMALL_ORDERS)  # the caller's orders are not modified
    assert _canonical(first) == _canonical(second)
    assert first.epsilon == second.epsilon and first.order == second.order and first.mu == second.mu
    if first.rdp is not None:
        np.testing.assert_array_equal(first.rdp, second.rdp)


# ---------------------------------------------------------------- JSON form

_KEYS = {"applies", "reason", "sound", "epsilon", "mu", "not_sound_reason", "order", "conversion",
         "citation", "details", "warnings", "rdp"}


@pytest.mark.parametrize("name,run_name", _slow(PAIRS), ids=[_pair_id(p) for p in PAIRS])
def test_json_form(name, run_name):
    res = _cached(name, run_name)
    data = res.to_dict()
    assert set(data) == _KEYS
    loaded = json.loads(json.dumps(data, allow_nan=False))
    assert loaded["applies"] is res.applies and loaded["sound"] is res.sound
    assert loaded["reason"] == res.reason and loaded["not_sound_reason"] == res.not_sound_reason
    assert isinstance(loaded["citation"], str) and loaded["citation"].strip()
    assert isinstance(loaded["details"], dict)
    assert isinstance(loaded["warnings"], list) and all(isinstance(w, str) for w in loaded["warnings"])
    assert loaded["conversion"] is None or isinstance(loaded["conversion"], str)
    for key in ("epsilon", "mu", "order"):
        assert loaded[key] is None or type(loaded[key]) is float, key
    if res.applies:
        assert loaded["epsilon"] == res.epsilon  # finite on every fixture run
        assert loaded["mu"] == res.mu
        assert loaded["order"] == res.order
    else:
        assert loaded["epsilon"] is None and loaded["rdp"] is None and loaded["mu"] is None
    if res.rdp is None:
        assert loaded["rdp"] is None
    else:
        rdp = loaded["rdp"]
        assert isinstance(rdp, dict) and len(rdp) == len(res.orders)
        keys = [float(k) for k in rdp]
        np.testing.assert_allclose(keys, res.orders, rtol=1e-11)
        assert [v for v in rdp.values()] == [float(v) for v in res.rdp]


@pytest.mark.parametrize("name", list(ANALYSES))
def test_assumptions_and_citation(name):
    analysis = ANALYSES[name]
    assumptions = analysis.assumptions()
    assert isinstance(assumptions, list) and assumptions
    assert all(isinstance(a, str) and a.strip() for a in assumptions)
    assert isinstance(analysis.citation, str) and analysis.citation.strip()
    if not type(analysis).sound:
        assert isinstance(analysis.unsound_reason, str) and analysis.unsound_reason.strip()


# ---------------------------------------------------------------- invalid arguments


_BAD_DELTAS = (0.0, 1.0, float("nan"), -1e-5)
_BAD_ORDERS = ((1.0, 2.0), (0.5,), (2.0, float("nan")))


def _first(name, *, applies: bool) -> list[tuple[str, str]]:
    for run_name, run in RUNS.items():
        if (ANALYSES[name].why_not(run) is None) == applies:
            return [(name, run_name)]
    return []


#: One applying run per analysis; composition-pld also on a run it converts as one Gaussian.
_APPLYING_ONE = [p for name in ANALYSES for p in _first(name, applies=True)]
_APPLYING_ONE.append(("composition-pld", "shuffle-strongly"))
_REFUSED_ONE = [p for name in ANALYSES for p in _first(name, applies=False)]


def _not_refused(name, run, *, deltas=(), orders=()) -> list:
    """The invalid values that ``evaluate`` accepted instead of raising a ValueError naming them."""
    accepted = []
    for d in deltas:
        try:  # one order: an RDP analysis computes its curve before it converts with δ
            _evaluate(name, run, delta=d, orders=(2.0,))
            accepted.append(("delta", d))
        except ValueError as e:
            assert re.search(r"\bdelta\b", str(e)), str(e)
    for o in orders:
        try:
            _evaluate(name, run, orders=o)
            accepted.append(("orders", o))
        except ValueError as e:
            assert re.search(r"\borders\b", str(e)), str(e)
    return accepted


@pytest.mark.parametrize("name,run_name", _params("bad-delta", _APPLYING_ONE))
def test_invalid_delta_is_refused(name, run_name):
    assert _not_refused(name, RUNS[run_name], deltas=_BAD_DELTAS) == []


@pytest.mark.parametrize("name,run_name", _params("bad-orders", _APPLYING_ONE))
def test_invalid_orders_are_refused(name, run_name):
    assert _not_refused(name, RUNS[run_name], orders=_BAD_ORDERS) == []


@pytest.mark.parametrize("name,run_name", _params("bad-arguments-refused-run", _REFUSED_ONE))
def test_invalid_arguments_are_refused_even_where_the_analysis_does_not_apply(name, run_name):
    """Input validation must not depend on the run: evaluate(delta=NaN) on a run an
    analysis refuses should raise, not return a result carrying delta=NaN."""
    run = RUNS[run_name]
    assert _not_refused(name, run, deltas=_BAD_DELTAS, orders=_BAD_ORDERS) == []


@pytest.mark.parametrize("name", list(ANALYSES))
def test_run_must_be_a_run(name):
    with pytest.raises(ValueError, match=r"\brun\b"):
        ANALYSES[name].evaluate({"n": 10}, delta=DELTA)


@pytest.mark.parametrize("name,run_name", [p for p in APPLYING if _has_curve(ANALYSES[p[0]])],
                         ids=[_pair_id(p) for p in APPLYING if _has_curve(ANALYSES[p[0]])])
def test_rdp_method_refuses_invalid_orders(name, run_name):
    for orders in _BAD_ORDERS:
        with pytest.raises(ValueError, match=r"\borders\b"):
            ANALYSES[name].rdp(RUNS[run_name], np.array(orders))


# ---------------------------------------------------------------- monotonicity

#: Pairs whose evaluation takes a noticeable fraction of a second (a numerical split
#: search, or dp_accounting's PLD): fewer examples there, more everywhere else.
def _expensive(name, run_name) -> bool:
    return name == "altschuler-talwar-sampled" or (name == "composition-pld" and _sampled(RUNS[run_name]))


def _z_range(name, run_name):
    # dp_accounting's PLD grows costly at small z (privacy-loss support ∝ 1/z²).
    if name == "composition-pld" and _sampled(RUNS[run_name]):
        return 4.0, 20.0
    return 0.5, 20.0


def _abs_slack(name) -> float:
    """composition-pld's ε wobbles by up to ~10 discretization intervals when z moves
    by 1e-7..1e-5 (seen at small δ on some machines; see
    test_pld_wobble_in_the_noise_is_bounded): allowed here so that this test catches gross violations only."""
    if name == "composition-pld":
        return 20 * ANALYSES[name].value_discretization_interval
    return 0.0


@pytest.mark.parametrize("name,run_name", _slow(APPLYING, SLOW_IN_THE_NOISE), ids=[_pair_id(p) for p in APPLYING])
def test_epsilon_is_non_increasing_in_the_noise(name, run_name):
    """Calibration bisects in z: more noise must never cost more privacy (nor more RDP).
    why_not never looks at z, so z varies freely on every applying pair."""
    lo, hi = _z_range(name, run_name)
    run = RUNS[run_name]

    @settings(max_examples=3 if _expensive(name, run_name) else 12, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(u=st.floats(0.0, 1.0),
           log_ratio=st.one_of(st.floats(1e-7, 1e-3), st.floats(1e-3, 1.5)))
    def check(u, log_ratio):
        z = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
        z2 = z * math.exp(log_ratio)
        a = _evaluate(name, run.replace(noise_multiplier=z), orders=tuple(SMALL_ORDERS))
        b = _evaluate(name, run.replace(noise_multiplier=z2), orders=tuple(SMALL_ORDERS))
        assert a.applies and b.applies
        assert b.epsilon <= a.epsilon * (1 + REL_SLACK) + _abs_slack(name), (z, z2, a.epsilon, b.epsilon)
        if a.rdp is not None:
            worse = np.flatnonzero(b.rdp > a.rdp * (1 + REL_SLACK))
            assert worse.size == 0, [(z, z2, SMALL_ORDERS[i], a.rdp[i], b.rdp[i]) for i in worse]

    check()


# dp_accounting's PLD (pessimistic discretisation, interval 1e-4) is not exactly
# monotone in the noise: at delta = 1e-10 raising z by a relative 1e-6 was seen to
# raise epsilon by 1.5e-4 (z = 3.75) and 1.1e-4 (z = 4.25) on one machine, and not
# at all on another (the wobble depends on the FFT's rounding, i.e. on the CPU and
# library build).  Violations up to 1.2e-3 (12 intervals) were seen at delta ~ 1e-12,
# none at delta = 1e-5 in ~500 random pairs.  Nothing may rest on monotonicity at
# that scale: the tests below hold whether or not the wobble occurs.
@pytest.mark.parametrize("z", [3.75, 4.25])
def test_pld_wobble_in_the_noise_is_bounded(z):
    """A relative 1e-6 more noise never costs more than a few discretisation intervals
    (the bound the monotonicity test above allows composition-pld), on any machine."""
    run = RUNS["poisson-convex-addremove"]
    a = _evaluate("composition-pld", run.replace(noise_multiplier=z), delta=1e-10).epsilon
    b = _evaluate("composition-pld", run.replace(noise_multiplier=z * (1 + 1e-6)), delta=1e-10).epsilon
    assert b <= a * (1 + REL_SLACK) + _abs_slack("composition-pld"), (z, a, b)


@pytest.mark.slow
@settings(max_examples=4, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(target=st.floats(1.0, 6.0), log_delta=st.floats(-12.0, -5.0))
def test_calibrate_never_overshoots_even_where_the_pld_is_not_monotone(target, log_delta):
    """calibrate's guarantee does not rest on monotonicity: the z it returns was
    evaluated and meets the target.  Checked by an independent evaluation at that z,
    at deltas down to 1e-12 where the PLD wobbles."""
    from noisysgd import calibrate, epsilon

    delta = 10.0 ** log_delta
    run = RUNS["poisson-convex-addremove"]
    cal = calibrate(run, epsilon=target, delta=delta, analyses="composition-pld", rel_tol=1e-3)
    assert cal.epsilon <= target
    again = epsilon(run.replace(noise_multiplier=cal.noise_multiplier), delta=delta,
                    analyses="composition-pld")
    assert again.epsilon <= target, (target, delta, cal.noise_multiplier, again.epsilon)


@pytest.mark.parametrize("name,run_name", _slow(APPLYING), ids=[_pair_id(p) for p in APPLYING])
def test_epsilon_is_non_increasing_in_delta(name, run_name):
    """Smaller δ ⇒ larger or equal ε (and δ matters: the extremes differ)."""
    deltas = (1e-10, DELTA, 0.2)
    eps = [_cached(name, run_name, delta=d, orders=tuple(SMALL_ORDERS)).epsilon for d in deltas]
    assert all(e is not None and e >= 0 for e in eps)
    for (d1, e1), (d2, e2) in zip(zip(deltas, eps), zip(deltas[1:], eps[1:])):
        assert e2 <= e1 * (1 + REL_SLACK), (d1, e1, d2, e2)
    assert eps[0] > eps[-1]


@pytest.mark.parametrize("name,run_name", _slow(APPLYING), ids=[_pair_id(p) for p in APPLYING])
def test_conversion_is_honoured(name, run_name):
    """RDP analyses convert as asked ('classic' is never below 'improved'); GDP analyses
    always convert exactly; the others report what they did."""
    analysis = ANALYSES[name]
    classic = _cached(name, run_name, orders=tuple(SMALL_ORDERS), conversion="classic")
    improved = _cached(name, run_name, orders=tuple(SMALL_ORDERS))
    if isinstance(analysis, RDPAnalysis):
        assert classic.conversion == "classic" and improved.conversion == "improved"
        assert classic.epsilon >= improved.epsilon
        np.testing.assert_array_equal(classic.rdp, improved.rdp)
    elif isinstance(analysis, GDPAnalysis):
        assert classic.conversion == improved.conversion == type(analysis).conversion
        assert classic.epsilon == improved.epsilon
    else:
        assert classic.epsilon == improved.epsilon


# ---------------------------------------------------------------- ε over step counts


@pytest.mark.parametrize("name,run_name", _slow(PAIRS), ids=[_pair_id(p) for p in PAIRS])
def test_curve_matches_evaluate(name, run_name):
    """Analysis.curve is documented as "the same numbers as evaluate at each step count"
    (an upper bound of them where ``exact`` is False), applying and refusing alike."""
    analysis, run = ANALYSES[name], RUNS[run_name]
    fixed = isinstance(run.learning_rate, tuple)  # an explicit schedule fixes the step count
    steps = [run.steps] if fixed else [max(1, run.steps // 2), run.steps]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        curve = analysis.curve(run, steps, delta=DELTA, orders=SMALL_ORDERS)
    assert curve.analysis == name and curve.sound is type(analysis).sound
    assert (curve.not_sound_reason is None) == type(analysis).sound
    np.testing.assert_array_equal(curve.steps, steps)
    for i, t in enumerate(steps):
        at = run if t == run.steps else run.replace(steps=t)
        why = analysis.why_not(at)
        assert bool(curve.applies[i]) is (why is None), t
        if why is not None:
            assert curve.epsilon[i] == math.inf
            continue
        res = _cached(name, run_name, orders=tuple(SMALL_ORDERS)) if t == run.steps else _evaluate(
            name, at, orders=tuple(SMALL_ORDERS))
        if curve.exact[i]:
            assert curve.epsilon[i] == pytest.approx(res.epsilon, rel=REL_SLACK, abs=0), t
        else:
            assert curve.epsilon[i] >= res.epsilon * (1 - REL_SLACK), t
        if curve.rdp is not None and res.rdp is not None and curve.exact[i]:
            np.testing.assert_allclose(curve.rdp[i], res.rdp, rtol=REL_SLACK, atol=0)
        if curve.mu is not None:
            assert curve.mu[i] == pytest.approx(res.mu, rel=REL_SLACK, abs=0)
