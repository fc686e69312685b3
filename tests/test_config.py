"""noisysgd.config: the utility proxy and the automatic configuration (issue 15)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import noisysgd
from noisysgd.config import (COMPOSITION_GRID, COMPOSITION_SEARCH, GRID, LEGACY, SCREEN_ORDERS, SCREEN_REL_TOL,
                             SEARCH_ANALYSES, STEP_FACTOR,
                             auto_config, proxy_terms, with_legacy_defaults)

PUBLIC = dict(n=500, d=5, outputs=1, delta=1e-5, lipschitz=math.sqrt(2.0), smoothness=0.5)


@pytest.mark.parametrize("lam, b, steps", [(0.01, 50, 300), (0.1, 500, 40), (1e-3, 64, 5000)])
def test_proxy_is_the_recursion_it_bounds(lam, b, steps):
    # iterate e_{t+1} = (1 - ηλ) e_t + η²V from e_0 = B² (independent of the closed form)
    n, p, z, L, M, B = 500, 12, 7.5, 1.3, 0.8, 4.0
    eta = 0.5 / (M + lam)
    V = p * (z * L / b) ** 2 + (L * L / b if b < n else 0.0)
    e = B * B
    for _ in range(steps):
        e = (1 - eta * lam) * e + eta * eta * V
    t = proxy_terms(n=n, p=p, b=b, steps=steps, eta=eta, lam=lam, z=z, L=L, M=M, B=B)
    assert t["strongly-convex_bound"] == pytest.approx(0.5 * (M + lam) * e, rel=1e-10)
    # the convex SGD bound B²/(2ηT) + ηG²/2, G² = (L + λB)² + p(zL/b)², by hand
    convex = B * B / (2 * eta * steps) + eta * ((L + lam * B) ** 2 + p * (z * L / b) ** 2) / 2
    assert t["convex_bound"] == pytest.approx(convex, rel=1e-12)
    # smooth convex SGD (η ≤ 1/(M + λ)): B²/(2ηT) + ηV/(2(1 − η(M + λ))), only the variance V
    smooth = B * B / (2 * eta * steps) + eta * V / (2 * (1 - eta * (M + lam)))
    assert t["smooth_bound"] == pytest.approx(smooth, rel=1e-12)
    bounds = {"convex": convex, "strongly-convex": 0.5 * (M + lam) * e, "smooth": smooth}
    assert t["bound"] == min(bounds, key=bounds.get)
    assert t["optimisation_term"] + t["noise_term"] == pytest.approx(min(bounds.values()), rel=1e-10)
    assert t["bias_term"] == pytest.approx(lam * B * B / 2, rel=1e-15)
    assert t["proxy"] == pytest.approx(t["optimisation_term"] + t["noise_term"] + t["bias_term"], rel=1e-15)


def test_proxy_without_strong_convexity_is_the_smaller_convex_sgd_bound():
    t = proxy_terms(n=100, p=3, b=10, steps=200, eta=0.1, lam=0.0, z=2.0, L=1.0, M=1.0, B=5.0)
    assert t["optimisation_term"] == pytest.approx(25.0 / (2 * 0.1 * 200))
    assert t["convex_bound"] == pytest.approx(25.0 / 40 + 0.1 * (1.0 + 3 * 0.2**2) / 2)
    # V = p(zL/b)² + L²/b = 0.12 + 0.1; smooth: ηV/(2(1 − ηM)) beats ηG²/2
    assert t["noise_term"] == pytest.approx(0.1 * 0.22 / (2 * 0.9))
    assert t["bias_term"] == 0.0 and t["bound"] == "smooth" and "strongly-convex_bound" not in t
    # a step beyond 1/M: only the (non-smooth) convex bound holds
    big = proxy_terms(n=100, p=3, b=10, steps=200, eta=1.5, lam=0.0, z=2.0, L=1.0, M=1.0, B=5.0)
    assert big["bound"] == "convex" and "smooth_bound" not in big


@pytest.mark.slow
def test_the_choice_minimises_the_proxy_and_its_noise_meets_the_target():
    cfg = auto_config(epsilon=1.0, **PUBLIC)
    ok = [r for r in cfg.candidates if r["proxy"] is not None]
    sizes = {min(b, 500) for b in GRID["batch_size"]}
    grid_size = len(GRID["alpha"]) * (len(sizes) * len(GRID["epochs"]["cyclic"]) + len(GRID["epochs"]["full"]))
    # the composition regime: n = 500 admits no b of COMPOSITION_GRID below n/4, so b = 64 (the
    # largest power of two <= 125), each epoch count and alpha
    composition = len(GRID["alpha"]) * len(COMPOSITION_GRID["epochs"])
    assert len(cfg.candidates) == grid_size + composition  # the pre-auto defaults are in the grid
    assert {r["batch_size"] for r in cfg.candidates if r.get("optimal_step")} == {64}
    assert sum(r["legacy"] for r in cfg.candidates) == 1
    assert cfg.chosen["proxy"] == min(r["proxy"] for r in ok)
    c = cfg.chosen
    run = noisysgd.Run.from_epochs(
        epochs=c["epochs"], n=500, batch_size=c["batch_size"], batching=c["batching"],
        learning_rate=c["learning_rate"], noise_multiplier=c["noise_multiplier"], lipschitz=math.sqrt(2.0),
        smoothness=0.5 + c["alpha"], strong_convexity=c["alpha"], convex=True)
    if c["regime"] == "amplified composition":
        # ranked at Bubeck's step 1/(M + λ + √(VT/2)/B) (within STEP_RANGE of the smoothness rule),
        # trained at STEP_FACTOR times it, below the smooth bound's 1/(M + λ)
        V = 6 * (c["noise_multiplier"] * math.sqrt(2.0) / c["batch_size"]) ** 2 + 2.0 / c["batch_size"]
        eta = 1.0 / (0.5 + c["alpha"] + math.sqrt(V * c["steps"] / 2) / cfg.assumptions["model_norm"])
        assert c["bound_step"] == pytest.approx(eta, rel=1e-12)
        assert c["learning_rate"] == pytest.approx(min(STEP_FACTOR * eta, 0.98 / (0.5 + c["alpha"])), rel=1e-12)
        assert c["learning_rate"] * (0.5 + c["alpha"]) < 1.0
        analyses = list(COMPOSITION_SEARCH)
    else:
        assert c["learning_rate"] == pytest.approx(0.5 / (0.5 + c["alpha"]))
        analyses = list(SEARCH_ANALYSES)
    assert noisysgd.epsilon(run, delta=1e-5, analyses=analyses).epsilon <= 1.0
    B = 10.0 * max(1.0, math.sqrt(PUBLIC["d"] / 64.0))  # MODEL_NORM·max(1, √(d/64))/R, R = 1
    assert cfg.assumptions["model_norm"] == pytest.approx(B, rel=1e-15)
    assert f"B = {B:g}" in cfg.explanation and cfg.to_dict()["chosen"] == c


def test_more_privacy_budget_never_raises_a_fixed_configuration_s_proxy():
    fixed = dict(batching="cyclic", batch_size=50, epochs=30, alpha=0.01)
    p = [auto_config(epsilon=e, fixed=fixed, **PUBLIC).chosen for e in (0.5, 1.0, 3.0)]
    assert [r["epochs"] for r in p] == [30, 30, 30]
    assert p[0]["noise_multiplier"] > p[1]["noise_multiplier"] > p[2]["noise_multiplier"]
    assert p[0]["proxy"] > p[1]["proxy"] > p[2]["proxy"]


def test_fixed_parameters_are_kept_and_a_given_noise_is_not_calibrated():
    cfg = auto_config(epsilon=None, noise_multiplier=5.0, fixed={"batching": "full"}, **PUBLIC)
    assert {r["batching"] for r in cfg.candidates} == {"full"}
    assert {r["noise_multiplier"] for r in cfg.candidates} == {5.0}
    assert {r["batch_size"] for r in cfg.candidates} == {500}
    assert auto_config(epsilon=None, noise_multiplier=5.0, fixed={"batching": "full"}, **PUBLIC) is cfg  # cached


@pytest.mark.parametrize("kw, match", [
    (dict(epsilon=1.0, fixed={"learning_rate": 0.1}), "fixed must name only batching, batch_size, epochs, alpha"),
    (dict(epsilon=1.0, noise_multiplier=2.0), "exactly one of epsilon and noise_multiplier"),
    (dict(epsilon=None), "exactly one of epsilon and noise_multiplier"),
])
def test_bad_arguments_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        auto_config(**kw, **PUBLIC)


def test_with_legacy_defaults_replaces_only_auto():
    params = {"epochs": "auto", "batch_size": 32, "batching": "auto", "alpha": "auto", "epsilon": 1.0}
    assert with_legacy_defaults(params) == {**params, "epochs": LEGACY["epochs"], "batching": "cyclic",
                                            "alpha": LEGACY["alpha"]}
    assert params["epochs"] == "auto"  # a copy


@pytest.mark.parametrize("n, b, epochs, adjacency, eps", [
    pytest.param(60000, 256, 100, "replace", 1.0, marks=pytest.mark.slow),
    pytest.param(60000, 4096, 10, "replace", 3.0, marks=pytest.mark.slow), (1347, 256, 30, "replace", 0.5),
    pytest.param(426, 64, 10, "add-remove", 3.0, marks=pytest.mark.slow), (16000, 1024, 100, "add-remove", 1.0)])
def test_the_composition_screen_leans_against_its_regime(n, b, epochs, adjacency, eps):
    """The composition regime's z (:func:`noisysgd.config._composition_z`, the RDP composition on
    the sparse SCREEN_ORDERS, started from the central-limit estimate): it meets the target, z/(1 +
    SCREEN_REL_TOL) misses it on those orders, and it is at or above the z of the PLD that certifies
    the chosen run (the search never favours this regime) and, to 0.2 %, of the RDP on the
    accountant's own order grid."""
    from noisysgd.config import _composition_z

    z, analysis, steps = _composition_z(n, b, epochs, adjacency, 1.0, eps, 1.0 / (10 * n), COMPOSITION_SEARCH,
                                        SCREEN_REL_TOL)
    run = noisysgd.Run.from_epochs(epochs=epochs, n=n, batch_size=b, batching="poisson", learning_rate=1.0,
                                   noise_multiplier=z, lipschitz=1.0, adjacency=adjacency)
    assert analysis == "composition" and steps == run.steps
    at = noisysgd.epsilon(run, delta=1.0 / (10 * n), analyses=["composition"], orders=SCREEN_ORDERS)
    assert at.epsilon <= eps
    below = run.replace(noise_multiplier=z / (1 + SCREEN_REL_TOL))
    assert noisysgd.epsilon(below, delta=1.0 / (10 * n), analyses=["composition"], orders=SCREEN_ORDERS).epsilon > eps
    full = noisysgd.calibrate(run, epsilon=eps, delta=1.0 / (10 * n), analyses=["composition"], rel_tol=1e-3)
    pld = noisysgd.calibrate(run, epsilon=eps, delta=1.0 / (10 * n), analyses=["composition-pld"], rel_tol=1e-3)
    assert z >= pld.noise_multiplier and z >= full.noise_multiplier / (1 + 1e-3) ** 2
    # every order is a sound bound: the sparse grid's best is close to the default grid's (whose
    # orders between integrated ones are chords), and so are the two z
    dense = noisysgd.epsilon(run, delta=1.0 / (10 * n), analyses=["composition"]).epsilon
    assert dense * (1 - 2e-3) <= at.epsilon <= dense * (1 + 7e-3)


@pytest.mark.parametrize("n, d, outputs, epsilon, adjacency, fixed", [
    (1000, 20, 1, 0.71, "replace", None),
    pytest.param(621, 17, 1, 3.0, "replace", None, marks=pytest.mark.slow),
    pytest.param(1797, 64, 10, 1.0, "replace", None, marks=pytest.mark.slow),
    pytest.param(20000, 50, 1, 3.0, "replace", None, marks=pytest.mark.slow),
    pytest.param(60000, 784, 10, 0.5, "replace", None, marks=pytest.mark.slow),
    pytest.param(569, 30, 1, 0.5, "add-remove", None, marks=pytest.mark.slow),
    (5000, 10, 1, 1.0, "replace", {"batching": "cyclic"}),
    (3000, 5, 1, 8.0, "replace", {"alpha": 0.01}),
])
def test_the_pruned_search_chooses_what_the_exhaustive_one_chooses(n, d, outputs, epsilon, adjacency, fixed,
                                                                   monkeypatch):
    """The search calibrates only the rows that can still win (config._candidate): the same choice as
    calibrating every row, and every pruned row's proxy, calibrated, is above the chosen one's."""
    kw = dict(n=n, d=d, outputs=outputs, epsilon=epsilon, delta=1e-5, lipschitz=1.0, smoothness=0.25,
              adjacency=adjacency, fixed=fixed)
    import noisysgd.config as config

    fast = auto_config(**kw)
    monkeypatch.setattr(config, "PRUNE", False)
    full = auto_config(**kw)
    assert fast.chosen == full.chosen
    assert len(fast.candidates) == len(full.candidates)
    pruned = [(a, b) for a, b in zip(fast.candidates, full.candidates) if a.get("pruned")]
    for a, b in pruned:
        assert (a["batching"], a["batch_size"], a["epochs"], a["alpha"]) == (
            b["batching"], b["batch_size"], b["epochs"], b["alpha"])
        assert b["proxy"] is None or b["proxy"] > fast.chosen["proxy"]
        if "noise_multiplier_above" in a and b["proxy"] is not None:
            assert b["noise_multiplier"] > a["noise_multiplier_above"]  # the calibrated z lies above z*
    calibrated = [(a, b) for a, b in zip(fast.candidates, full.candidates) if not a.get("pruned")]
    assert all(a == b for a, b in calibrated)
    if fixed is None and adjacency == "replace":
        assert len(pruned) >= len(full.candidates) // 2  # the point: most rows are never calibrated


@pytest.mark.parametrize("k", [-10, -3, 2])
def test_the_choice_does_not_depend_on_the_rows_units(k):
    """Rows scaled by c = 2^k (clip cR, Lipschitz cL, smoothness c²M, as a loss on those rows has):
    the same run — batching, batch size, epochs, noise — at λ·c² and learning rate/c², the same
    proxy.  Powers of two scale every product exactly, so the equality is exact, not a rounding
    accident; λ in absolute units (before issue 43 §2) chose 1e-5 at every scale, and at c = 2^-10
    a proxy dominated by the regularization bias λB²/2."""
    c = 2.0 ** k
    base = auto_config(epsilon=1.0, **PUBLIC).chosen
    scaled = auto_config(epsilon=1.0, **{**PUBLIC, "lipschitz": PUBLIC["lipschitz"] * c,
                                         "smoothness": PUBLIC["smoothness"] * c * c}, feature_clip=c).chosen
    for key in ("batching", "batch_size", "epochs", "regime", "steps", "noise_multiplier", "proxy"):
        assert scaled[key] == base[key], key
    assert scaled["alpha"] == base["alpha"] * c * c
    assert scaled["learning_rate"] == base["learning_rate"] / (c * c)


@pytest.mark.parametrize("n, b, epochs, eps, adjacency", [
    (600, 64, 10, 1.0, "add-remove"), (600, 128, 100, 0.5, "replace"), (1500, 256, 30, 3.0, "replace"),
    (1500, 64, 10, 3.0, "add-remove"), (20000, 1024, 100, 1.0, "replace"), (20000, 4096, 10, 0.3, "add-remove"),
])
def test_the_coarse_to_fine_screen_is_the_full_grids_answer(n, b, epochs, eps, adjacency):
    """config._composition_z calibrates on every SCREEN_COARSE-th order, then on the orders around the
    best: the same z as one calibration on every SCREEN_ORDERS (108 settings checked when it was
    written; a subset here), at about half the cost."""
    from noisysgd.accountant import calibrate
    from noisysgd.config import _composition_z
    from noisysgd.run import Run

    z, _, _ = _composition_z(n, b, epochs, adjacency, 1.0, eps, 1e-5, COMPOSITION_SEARCH, SCREEN_REL_TOL)
    run = Run.from_epochs(epochs=epochs, n=n, batch_size=b, batching="poisson", learning_rate=1.0,
                          noise_multiplier=1.0, lipschitz=1.0, adjacency=adjacency)
    full = calibrate(run, epsilon=eps, delta=1e-5, analyses=list(COMPOSITION_SEARCH), rel_tol=SCREEN_REL_TOL,
                     orders=SCREEN_ORDERS)
    assert z == full.noise_multiplier


@settings(max_examples=300, deadline=None)
@given(n=st.integers(300, 100_000), b_log=st.floats(0.0, 4.0), p=st.integers(3, 3000), steps=st.integers(3, 100_000),
       lam=st.sampled_from([0.0, 1e-5, 1e-3, 0.1]), m_log=st.floats(-3.0, 1.0), eta_factor=st.sampled_from([0.1, 0.5, 1.9]),
       l_log=st.floats(-2.0, 1.0), b_norm_log=st.floats(-1.0, 3.0), above=st.floats(0.001, 3.0))
def test_the_closed_form_noise_at_is_the_bisections_or_just_below(n, b_log, p, steps, lam, m_log, eta_factor, l_log,
                                                                    b_norm_log, above):
    """noise_search.noise_reaching_affine reads where the proxy (the smallest of bounds affine in z², plus a
    bias) reaches the bound off two evaluations: the proxy there is at the bound or above it (the
    prune stays exact), the z is at or below the bisection's bracket end and within its 0.1 %
    (prunes at least as much), and None exactly where the bisection gives None."""
    from noisysgd.config import MAX_NOISE, NOISE_AT_TOL, proxy_terms
    from noisysgd.noise_search import noise_reaching, noise_reaching_affine

    b = int(min(n, 10 ** b_log))
    M = 10 ** m_log + lam
    eta, L, B = eta_factor / M, 10 ** l_log, 10 ** b_norm_log

    def terms(z):
        return proxy_terms(n=n, p=p, b=b, steps=steps, eta=eta, lam=lam, z=z, L=L, M=M, B=B)

    bound = terms(0.0)["proxy"] * 10 ** above
    old = noise_reaching(lambda z: terms(z)["proxy"], bound, MAX_NOISE, NOISE_AT_TOL)
    new = noise_reaching_affine(terms, bound, MAX_NOISE, NOISE_AT_TOL)
    assert (old is None) == (new is None)
    if new is not None:
        assert terms(new)["proxy"] >= bound
        assert old * (1 - 1.01e-3) <= new <= old * (1 + 1e-9)  # (old: a bracket's end, new: nudged by ulps)
