"""Ye & Shokri (NeurIPS 2022) and Chourasia et al. (NeurIPS 2021) accountants.

References: the values of Theorem 4.2 at the Figure 2 setting come from the
authors' public code for the same formula (quoted in issue 4); everything
else is checked against independent mpmath evaluations written here from the
theorem statements in the paper's own convention (σ, S_g, b, η, λ), so the
conversion from the canonical noise multiplier is checked too.
"""

from __future__ import annotations

import json
import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import noisysgd.analyses.ye_shokri as ys
from noisysgd import Run
from noisysgd.cli import main
from noisysgd.analyses import get_analysis
from noisysgd.run import noise_multiplier_from_sigma

# ---------------------------------------------------------------- mpmath references
# Straight from the theorem statements, paper convention, 50 digits.


def _mp_eps0(j, alpha, eta, S, sigma, b, lam):
    c2 = (1 - eta * lam) ** 2
    base = alpha * eta * S**2 / (4 * sigma**2 * b**2)
    return base * c2 ** (j - 1) / mp.fsum(c2**s for s in range(j))


def _mp_first_term(a, e, S, s, b, lam, n, K):
    """The geometric first term shared by Theorems 3.3 and 4.2 (h = ⌊n/2b⌋)."""
    l, h = n // b, n // (2 * b)
    c2 = (1 - e * lam) ** 2
    return _mp_eps0(h, a, e, S, s, b, lam) * (1 - c2 ** ((K - 1) * (l - h))) / (1 - c2 ** (l - h))


def mp_theorem_3_3(alpha, eta, S, sigma, b, lam, n, K, j0):
    with mp.workdps(50):
        a, e, S, s, lam = (mp.mpf(x) for x in (alpha, eta, S, sigma, lam))
        first = _mp_first_term(a, e, S, s, b, lam, n, K)
        return first + _mp_eps0(n // b - j0, a, e, S, s, b, lam)


def mp_theorem_4_2(alpha, eta, S, sigma, b, lam, n, K):
    with mp.workdps(50):
        a, e, S, s, lam = (mp.mpf(x) for x in (alpha, eta, S, sigma, lam))
        l = n // b
        first = _mp_first_term(a, e, S, s, b, lam, n, K)
        avg = mp.fsum(mp.e ** ((a - 1) * _mp_eps0(l - j0, a, e, S, s, b, lam)) for j0 in range(l)) / l
        return first + mp.log(avg) / (a - 1)


def mp_theorem_4_3(alpha, eta, S, sigma, b, lam, n, steps):
    with mp.workdps(50):
        a, e, S, s, lam = (mp.mpf(x) for x in (alpha, eta, S, sigma, lam))
        q = mp.mpf(b) / n
        c2 = (1 - e * lam) ** 2
        grow = mp.e ** ((a - 1) * a * e * S**2 / (4 * s**2 * b**2))
        value = mp.mpf(1)
        for _ in range(steps):
            value = q * grow * value + (1 - q) * value**c2
        return mp.log(value) / (a - 1)


def mp_theorem_2_1(alpha, eta, S, sigma, b, lam, K):
    with mp.workdps(50):
        a, e, S, s, lam = (mp.mpf(x) for x in (alpha, eta, S, sigma, lam))
        return a * S**2 / (lam * s**2 * b**2) * (1 - mp.e ** (-lam * e * K / 2))


def paper_run(*, n, b, eta, lam, beta, S, sigma, batching, epochs=None, steps=None, **kw):
    """A Run for the paper's parameters: S_g = 2L (replace-one), σ via the convention."""
    L = S / 2.0
    z = noise_multiplier_from_sigma(sigma, convention="ye-shokri", lipschitz=L, batch_size=b,
                                    learning_rate=eta)
    common = dict(n=n, batch_size=b, batching=batching, learning_rate=eta, noise_multiplier=z,
                  lipschitz=L, smoothness=beta, strong_convexity=lam, **kw)
    if epochs is not None:
        return Run.from_epochs(epochs=epochs, **common)
    return Run(steps=steps, **common)


FIG2 = dict(n=50, b=2, eta=0.02, lam=1.0, beta=4.0, S=4.0, sigma=2.0)  # Figure 2, σ² = 4
OTHER = [
    dict(n=1000, b=10, eta=0.05, lam=0.5, beta=2.0, S=2.0, sigma=0.3),
    dict(n=37, b=5, eta=0.1, lam=2.0, beta=6.0, S=1.0, sigma=0.05),  # b does not divide n
]


def rdp_at(analysis, run, alpha):
    return float(get_analysis(_name(analysis, run)).rdp(run, np.array([float(alpha)]))[0])


def _name(analysis, run):
    """Theorem 4.2 on per-epoch reshuffling is the flagged ye-shokri-reshuffle."""
    if analysis == "ye-shokri" and run.batching == "shuffle":
        return "ye-shokri-reshuffle"
    return analysis


# ---------------------------------------------------------------- published values


@pytest.mark.parametrize("epochs, expected", [(1, 0.007373), (5, 0.014470), (10**6, 0.015459)])
def test_theorem_4_2_matches_published_values_at_figure_2_setting(epochs, expected):
    # Issue 4: the authors' public code gives 0.007373 (1 epoch), 0.014470 (5) and
    # 0.015459 (converged) at α = 10 for the Figure 2 setting.
    run = paper_run(**FIG2, batching="shuffle", epochs=epochs)
    assert rdp_at("ye-shokri", run, 10) == pytest.approx(expected, abs=5e-7)


# ---------------------------------------------------------------- mpmath agreement


@pytest.mark.parametrize("p", [FIG2, *OTHER])
@pytest.mark.parametrize("alpha", [2.0, 15.0, 64.5])
@pytest.mark.parametrize("epochs", [1, 3, 40])
def test_theorem_4_2_and_3_3_match_mpmath(p, alpha, epochs):
    shuffle = paper_run(**p, batching="shuffle", epochs=epochs)
    ref = mp_theorem_4_2(alpha, p["eta"], p["S"], p["sigma"], p["b"], p["lam"], p["n"], epochs)
    assert rdp_at("ye-shokri", shuffle, alpha) == pytest.approx(float(ref), rel=1e-11)
    cyclic = shuffle.replace(batching="cyclic")
    l = p["n"] // p["b"]
    worst = mp_theorem_3_3(alpha, p["eta"], p["S"], p["sigma"], p["b"], p["lam"], p["n"], epochs, l - 1)
    assert rdp_at("ye-shokri", cyclic, alpha) == pytest.approx(float(worst), rel=1e-11)
    rows = get_analysis("ye-shokri").rdp_per_position(cyclic, np.array([alpha]))[:, 0]
    for j0 in (0, l // 2, l - 1):
        ref = mp_theorem_3_3(alpha, p["eta"], p["S"], p["sigma"], p["b"], p["lam"], p["n"], epochs, j0)
        assert rows[j0] == pytest.approx(float(ref), rel=1e-11)


@pytest.mark.parametrize("p", [FIG2, *OTHER])
@pytest.mark.parametrize("alpha", [1.5, 10.0, 200.0])
@pytest.mark.parametrize("steps", [1, 7, 300])
def test_theorem_4_3_matches_mpmath_recursion(p, alpha, steps):
    run = paper_run(**p, batching="sample", steps=steps)
    ref = mp_theorem_4_3(alpha, p["eta"], p["S"], p["sigma"], p["b"], p["lam"], p["n"], steps)
    got = rdp_at("ye-shokri", run, alpha)
    assert got >= float(ref)  # never below the exact recursion
    assert got == pytest.approx(float(ref), rel=2e-9)  # rounded up by 1e-9


@pytest.mark.parametrize("p", [FIG2, *OTHER])
def test_theorem_2_1_and_chourasia_match_mpmath(p):
    run = paper_run(**p, batching="cyclic", epochs=12)
    ref = mp_theorem_2_1(10, p["eta"], p["S"], p["sigma"], p["b"], p["lam"], 12)  # K = uses = epochs
    assert rdp_at("ye-shokri-naive", run, 10) == pytest.approx(float(ref), rel=1e-12)
    sample = run.replace(batching="sample")  # every step may use it
    ref = mp_theorem_2_1(10, p["eta"], p["S"], p["sigma"], p["b"], p["lam"], sample.steps)
    assert rdp_at("ye-shokri-naive", sample, 10) == pytest.approx(float(ref), rel=1e-12)
    # Chourasia et al.: full batches, b = n, η < 1/β.
    full = paper_run(**{**p, "b": p["n"]}, batching="full", steps=50, initialization="gaussian")
    ref = mp_theorem_2_1(10, p["eta"], p["S"], p["sigma"], p["n"], p["lam"], 50)
    assert rdp_at("chourasia", full, 10) == pytest.approx(float(ref), rel=1e-12)
    assert rdp_at("ye-shokri", full, 10) == pytest.approx(float(ref), rel=1e-12)
    # ... and only from the start it assumes (any data-independent start suits ye-shokri)
    fixed = full.replace(initialization="fixed")
    assert "initialization='gaussian'" in get_analysis("chourasia").why_not(fixed)
    assert rdp_at("ye-shokri", fixed, 10) == rdp_at("ye-shokri", full, 10)


def test_log_average_does_not_overflow():
    # Footnote 4: e^{(α−1)ε₀} overflows float64 for large α and little noise;
    # the logsumexp form stays exact.
    p = dict(FIG2, sigma=0.05)
    run = paper_run(**p, batching="shuffle", epochs=3)
    alpha = 1024.0
    ref = mp_theorem_4_2(alpha, p["eta"], p["S"], p["sigma"], p["b"], p["lam"], p["n"], 3)
    assert (alpha - 1) * float(_mp_eps0(1, alpha, p["eta"], p["S"], p["sigma"], p["b"], p["lam"])) > 710
    assert rdp_at("ye-shokri", run, alpha) == pytest.approx(float(ref), rel=1e-11)


# ---------------------------------------------------------------- the recursion's fixed point


def test_sampling_recursion_cost_does_not_grow_with_epochs(monkeypatch):
    calls = {"n": 0}
    original = ys._sampling_map

    def counting(*args):
        calls["n"] += 1
        return original(*args)

    monkeypatch.setattr(ys, "_sampling_map", counting)
    analysis = get_analysis("ye-shokri")
    orders = np.array([2.0, 10.0, 15.0])  # orders with a fixed point (α = 32 has none here)
    costs, values = [], []
    for epochs in (100, 10**6):
        calls["n"] = 0
        ys._RECURSIONS.clear()  # a fresh recursion each time (the second would be served from the first)
        values.append(analysis.rdp(paper_run(**FIG2, batching="sample", epochs=epochs), orders))
        costs.append(calls["n"])
    assert costs[1] == costs[0]
    np.testing.assert_allclose(values[1], values[0], rtol=2e-9)
    # And the plateau is the recursion's fixed point: 20 000 exact steps agree.
    ref = mp_theorem_4_3(10, 0.02, 4.0, 2.0, 2, 1.0, 50, 3000)
    assert values[1][1] >= float(ref)
    assert values[1][1] == pytest.approx(float(ref), rel=3e-9)


def test_sampling_without_fixed_point_grows_linearly_and_stays_above_recursion():
    # q·e^{(α−1)ρ} >= 1: no fixed point; the linear tail must bound the recursion.
    p = dict(FIG2, sigma=0.2)
    alpha = 20.0
    rho = alpha * p["eta"] * p["S"] ** 2 / (4 * p["sigma"] ** 2 * p["b"] ** 2)
    assert p["b"] / p["n"] * math.exp((alpha - 1) * rho) > 1
    values = ys.sampling_rdp(np.array([alpha]), np.array([rho]), 2 * math.log1p(-0.02),
                             q=0.04, steps=[10, 2500, 10**9])
    for steps, v in zip((10, 2500), values[:2, 0]):
        ref = float(mp_theorem_4_3(alpha, p["eta"], p["S"], p["sigma"], p["b"], p["lam"], p["n"], steps))
        assert v >= ref and v == pytest.approx(ref, rel=3e-9)
    assert values[2, 0] > values[1, 0] * 1e5  # keeps growing, no false plateau


# ---------------------------------------------------------------- properties


settings_ = settings(max_examples=40, deadline=None)
params = st.fixed_dictionaries(
    dict(
        n=st.integers(4, 400),
        frac=st.floats(0.01, 0.5),
        lam=st.floats(0.01, 2.0),
        beta_extra=st.floats(0.0, 10.0),
        eta_frac=st.floats(0.05, 0.99),
        z=st.floats(0.5, 50.0),
        alpha=st.floats(1.1, 200.0),
    )
)


def _run_from(d, batching, epochs):
    b = max(1, min(d["n"] // 2, int(d["n"] * d["frac"])))
    M = d["lam"] + d["beta_extra"]
    eta = d["eta_frac"] * 2.0 / (d["lam"] + M)
    return Run.from_epochs(epochs=epochs, n=d["n"], batch_size=b, batching=batching, learning_rate=eta,
                           noise_multiplier=d["z"], lipschitz=1.0, smoothness=M,
                           strong_convexity=d["lam"])


@settings_
@given(params, st.integers(1, 60), st.sampled_from(["shuffle", "cyclic", "sample"]))
def test_bounds_non_decreasing_in_epochs_and_below_their_limit(d, epochs, batching):
    run = _run_from(d, batching, epochs)
    analysis = get_analysis(_name("ye-shokri", run))
    alpha = np.array([d["alpha"]])
    now = analysis.rdp(run, alpha)[0]
    later = analysis.rdp(_run_from(d, batching, epochs + 1), alpha)[0]
    limit = analysis.rdp(_run_from(d, batching, 10**7), alpha)[0]
    assert 0 <= now <= later * (1 + 1e-12)
    assert later <= limit * (1 + 1e-9) or not math.isfinite(limit)
    naive = get_analysis("ye-shokri-naive")
    assert naive.rdp(run, alpha)[0] <= naive.rdp(_run_from(d, batching, epochs + 1), alpha)[0] * (1 + 1e-12)


@settings_
@given(params, st.integers(1, 60))
def test_shuffle_never_exceeds_fixed_order_worst_position(d, epochs):
    analysis = get_analysis("ye-shokri")
    alpha = np.array([d["alpha"]])
    shuffle = get_analysis("ye-shokri-reshuffle").rdp(_run_from(d, "shuffle", epochs), alpha)[0]
    cyclic = analysis.rdp(_run_from(d, "cyclic", epochs), alpha)[0]
    assert shuffle <= cyclic * (1 + 1e-12)


@pytest.mark.slow
@settings_
@given(params, st.integers(1, 40), st.sampled_from(["shuffle", "cyclic", "sample"]), st.floats(1.0, 3.0))
def test_larger_strong_convexity_never_increases_the_bound(d, epochs, batching, factor):
    run = _run_from(d, batching, epochs)
    m2 = run.strong_convexity * factor
    if not run.learning_rate < 2.0 / (m2 + max(run.smoothness, m2)) or m2 * run.learning_rate >= 1:
        return
    stronger = run.replace(strong_convexity=m2, smoothness=max(run.smoothness, m2))
    alpha = np.array([d["alpha"]])
    for name in ("ye-shokri", "ye-shokri-naive"):
        a = get_analysis(_name(name, run))
        assert a.rdp(stronger, alpha)[0] <= a.rdp(run, alpha)[0] * (1 + 1e-12)


@settings_
@given(params, st.integers(1, 30))
def test_rdp_curves_non_decreasing_in_order(d, epochs):
    orders = np.array([1.5, 2.0, 4.0, 16.0, 64.0])
    for batching in ("shuffle", "cyclic", "sample"):
        run = _run_from(d, batching, epochs)
        curve = get_analysis(_name("ye-shokri", run)).rdp(run, orders)
        assert np.all(np.diff(curve) >= -1e-12 * curve[1:])


# ---------------------------------------------------------------- positions and partial epochs


def test_positions_first_batch_is_safest_and_last_is_worst():
    run = paper_run(**FIG2, batching="cyclic", epochs=4)
    analysis = get_analysis("ye-shokri")
    rows = analysis.rdp_per_position(run, np.array([10.0]))[:, 0]
    assert np.all(np.diff(rows) > 0)
    assert rows[-1] == pytest.approx(analysis.rdp(run, np.array([10.0]))[0], rel=1e-14)
    # Figure 1: the first batch pays mostly the slowly growing first term.
    assert rows[-1] > 5 * rows[0]


def test_partial_epoch_positions_map_to_whole_epoch_runs():
    analysis = get_analysis("ye-shokri")
    alpha = np.array([10.0])
    whole = analysis.rdp_per_position(paper_run(**FIG2, batching="cyclic", epochs=3), alpha)[:, 0]
    before = analysis.rdp_per_position(paper_run(**FIG2, batching="cyclic", epochs=2), alpha)[:, 0]
    partial_run = paper_run(**FIG2, batching="cyclic", steps=2 * 25 + 10)
    partial = analysis.rdp_per_position(partial_run, alpha)[:, 0]
    # batch j0 < 10 was used three times and is followed by 9 − j0 steps: position 15 + j0.
    np.testing.assert_allclose(partial[:10], whole[15:25], rtol=1e-13)
    np.testing.assert_allclose(partial[10:], before[10:], rtol=1e-13)
    assert analysis.rdp(partial_run, alpha)[0] == pytest.approx(whole.max(), rel=1e-13)
    # shuffle stopping inside an epoch falls back to the fixed-order worst case, and says so
    res = get_analysis("ye-shokri-reshuffle").evaluate(partial_run.replace(batching="shuffle"),
                                                       delta=1e-5, orders=alpha)
    assert res.rdp[0] == pytest.approx(whole.max(), rel=1e-13)
    assert "partial_epoch_note" in res.details


def test_b_not_dividing_n_uses_floor_and_reports_dropped_examples():
    run = paper_run(**OTHER[1], batching="shuffle", epochs=2)  # n = 37, b = 5
    res = get_analysis("ye-shokri").evaluate(run.replace(batching="cyclic"), delta=1e-5)
    assert run.steps_per_epoch == 7 and res.details["examples_dropped_per_epoch"] == 2


def test_rdp_over_epochs_matches_single_evaluations():
    analysis = get_analysis("ye-shokri")
    orders = np.array([2.0, 10.0, 50.0])
    epochs = np.array([1, 2, 7, 30])
    for batching in ("shuffle", "cyclic", "sample"):
        run = paper_run(**FIG2, batching=batching, epochs=1)
        analysis = get_analysis(_name("ye-shokri", run))
        table = analysis.rdp_over_epochs(run, epochs, orders)
        for row, k in zip(table, epochs):
            single = analysis.rdp(paper_run(**FIG2, batching=batching, epochs=int(k)), orders)
            np.testing.assert_allclose(row, single, rtol=1e-11)


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "name, change, needle",
    [
        ("ye-shokri", dict(strong_convexity=0.0, convex=True), "strongly convex"),
        ("ye-shokri", dict(learning_rate=0.4), "learning rate < 2/(m+M)"),
        ("ye-shokri", dict(batching="poisson"), "not poisson"),
        ("ye-shokri", dict(smoothness=None), "smoothness"),
        ("ye-shokri", dict(lr_decay=0.5), "constant step size"),
        ("ye-shokri", dict(batch_size=30), "at least 2 batches"),
        ("ye-shokri", dict(batching="shuffle"), "fresh permutation each epoch"),
        ("ye-shokri-reshuffle", dict(), "covers shuffle batching; not cyclic"),
        ("ye-shokri-naive", dict(strong_convexity=0.0, convex=True), "strongly convex"),
        ("chourasia", dict(), "not cyclic"),
    ],
)
def test_refusals_name_the_reason(name, change, needle):
    run = paper_run(**FIG2, batching="cyclic", epochs=2).replace(**change)
    res = get_analysis(name).evaluate(run, delta=1e-5)
    assert not res.applies and needle in res.reason
    with pytest.raises(ValueError, match=name):
        get_analysis(name).rdp(run, np.array([2.0]))


def test_add_remove_with_cyclic_batches_is_refused_before_any_analysis():
    """(ye-shokri's why_not refused it; since issue 24 Run refuses it for every analysis.)"""
    with pytest.raises(ValueError, match=r"adjacency='add-remove' needs batching='poisson'\."):
        paper_run(**FIG2, batching="cyclic", epochs=2).replace(adjacency="add-remove")


def test_chourasia_needs_eta_below_one_over_beta():
    # 1/β = 0.25 < 2/(λ+β) = 0.4: Chourasia et al.'s condition is the stricter one.
    run = paper_run(**{**FIG2, "b": 50, "eta": 0.3}, batching="full", steps=10,
                    initialization="gaussian")
    assert get_analysis("ye-shokri").evaluate(run, delta=1e-5).applies
    res = get_analysis("chourasia").evaluate(run, delta=1e-5)
    assert not res.applies and "1/M" in res.reason


def test_sample_is_refused_under_add_remove():
    """(It was accepted at the replace-one sensitivity; since issue 24 Run refuses it: an added
    row also changes every other row's chance b/m of being drawn.)"""
    run = paper_run(**FIG2, batching="sample", epochs=3)
    with pytest.raises(ValueError, match="changes every other row's chance"):
        run.replace(adjacency="add-remove")


# ---------------------------------------------------------------- CLI


def test_cli_json_exposes_ye_shokri_and_chourasia(capsys):
    args = ["epsilon", "--n", "50", "--batch-size", "2", "--epochs", "5",
            "--lr", "0.02", "--noise-multiplier", "20", "--lipschitz", "2", "--smoothness", "4",
            "--strong-convexity", "1", "--batching", "shuffle", "--delta", "1e-5", "--json",
            "--analysis", "ye-shokri", "--analysis", "ye-shokri-reshuffle", "--analysis",
            "ye-shokri-naive", "--analysis", "chourasia"]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["analyses"]["ye-shokri"]["applies"] is False  # per-epoch reshuffling: refused
    ysr = data["analyses"]["ye-shokri-reshuffle"]
    assert ysr["applies"] and not ysr["sound"] and "one random partition" in ysr["not_sound_reason"]
    assert ysr["rdp"]["10"] == pytest.approx(0.014470, abs=5e-7)
    assert ysr["details"]["at_optimal_order"]["bound"] == "Theorem 4.2"
    assert data["analyses"]["chourasia"]["applies"] is False
    assert data["best_analysis"] == "ye-shokri-naive"


def test_recursion_cut_short_bounds_the_rest_in_closed_form(monkeypatch):
    # Past _MAX_ITERATIONS the remaining steps get a certified fixed point (root-finding) or
    # the linear tail; both must stay above the exact recursion (this path once crashed).
    monkeypatch.setattr(ys, "_MAX_ITERATIONS", 20)
    alpha = np.array([2.0, 10.0, 40.0])
    rho = alpha * 0.05 / 10
    lc2 = 2 * math.log1p(-0.02)
    got = ys.sampling_rdp(alpha, rho, lc2, q=0.04, steps=[5, 60, 10**9])
    for i, a in enumerate(alpha):
        for k, steps in enumerate((5, 60)):
            ref = float(mp_theorem_4_3(a, 0.02, 4.0, 2.0, 2, 1.0, 50, steps))
            assert got[k, i] >= ref
        assert got[0, i] == pytest.approx(float(mp_theorem_4_3(a, 0.02, 4.0, 2.0, 2, 1.0, 50, 5)), rel=2e-9)
    # orders with a fixed point: the far value is that fixed point (from the uncut run)
    monkeypatch.setattr(ys, "_MAX_ITERATIONS", 200_000)
    far = ys.sampling_rdp(alpha[:2], rho[:2], lc2, q=0.04, steps=10**9)
    np.testing.assert_allclose(got[2, :2], far, rtol=1e-8)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 4000), min_size=1, max_size=6), st.lists(st.integers(1, 10**7), min_size=1, max_size=6),
       st.floats(0.005, 0.3), st.floats(0.001, 0.1))
def test_recursion_asked_again_gives_what_a_fresh_one_gives(first, second, q, rate):
    # sampling_rdp keeps the last recursions so a plan's plateau search does not run them again;
    # whatever was asked before, the answer is bit for bit what a fresh recursion computes
    alpha = np.array([1.5, 2.0, 8.0, 32.0, 256.0])
    rho = alpha * rate
    lc2 = 2 * math.log1p(-0.01)
    ys._RECURSIONS.clear()
    ys.sampling_rdp(alpha, rho, lc2, q=q, steps=sorted(first))
    again, fixed_again = ys.sampling_rdp(alpha, rho, lc2, q=q, steps=sorted(second), return_info=True)
    ys._RECURSIONS.clear()
    fresh, fixed_fresh = ys.sampling_rdp(alpha, rho, lc2, q=q, steps=sorted(second), return_info=True)
    np.testing.assert_array_equal(again, fresh)
    np.testing.assert_array_equal(fixed_again, fixed_fresh)
