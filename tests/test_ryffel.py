"""Ryffel, Bach & Pointcheval's Theorem 3.2 (flagged not sound): references, properties, refusals.

Independent references used here (written from the paper, sharing no code with
``noisysgd.analyses.ryffel``):
* Theorem 3.1's form 2αL²/(c n² σ⁴)·(1 − e^{−σ²cΣη}) with Lemma 3.4's
  c = λ/(2σ²), in mpmath at 50 digits, with σ converted from the run's z by
  hand (√(2η)·σ = η·z·L/b);
* the per-step recursion of the proof of Theorem 3.1 (appendix A), iterated
  step by step in mpmath for an arbitrary schedule at γ = 1/2;
* Corollary 3.3's closed form checked against mpmath quadrature of its integral;
* Theorems 4.1/4.3's choice of σ² and K, which by construction makes the bound
  ε·(1 − √(αd/(εn²))) resp. ε·λK/(4β + λK).
"""

import json
import math
import re

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataclasses import dataclass

import noisysgd
from noisysgd.analyses import ryffel as ry
from noisysgd.analyses.ryffel import Ryffel, RyffelEpochs



@dataclass(frozen=True, kw_only=True)
class Run(noisysgd.Run):
    """Runs that start where Ryffel et al.'s Lemma 3.4 needs (their Algorithm 1 does)."""

    initialization: str = "gaussian"


R = Ryffel()
RE = RyffelEpochs()
ORDERS = [1.5, 2.0, 4.5, 16.0, 64.0]


def run_(**kw):
    base = dict(n=1000, batch_size=10, batching="sample", steps=2000, learning_rate=0.5,
                noise_multiplier=2.0, lipschitz=1.0, smoothness=1.5, strong_convexity=0.2)
    return Run(**(base | kw))


def sigma_mp(z, L, eta, b):
    """Algorithm 1 adds √(2η)·σ·N(0, I); the run adds η·z·L/b: σ = η·z·L/(b·√(2η))."""
    z, L, eta, b = (mp.mpf(v) for v in (z, L, eta, b))
    return eta * z * L / (b * mp.sqrt(2 * eta))


def theorem_3_1_mp(alpha, *, L, lam, sigma, n, time):
    """Theorem 3.1 with Lemma 3.4's LSI constant c = λ/(2σ²)."""
    with mp.workdps(50):
        a, L, lam, s, n, t = (mp.mpf(v) for v in (alpha, L, lam, sigma, n, time))
        c = lam / (2 * s**2)
        return 2 * a * L**2 / (c * n**2 * s**4) * (1 - mp.e ** (-(s**2) * c * t))


def recursion_mp(alpha, *, L, lam, sigma, n, etas, gamma=0.5):
    """The proof of Theorem 3.1, one step at a time: with a₁ = 2(1−γ)σ²c and
    a₂ = L²/(γσ²n²) (the α-free part), R − αa₂/a₁ shrinks by e^{−a₁η} per step,
    starting from R = 0 (same initialisation); c = λ/(2σ²) (Lemma 3.4)."""
    with mp.workdps(50):
        a, L, lam, s, n, g = (mp.mpf(v) for v in (alpha, L, lam, sigma, n, gamma))
        c = lam / (2 * s**2)
        a1 = 2 * (1 - g) * s**2 * c
        a2 = L**2 / (g * s**2 * n**2)
        steady = a * a2 / a1
        r = mp.mpf(0)
        for eta in etas:
            r = steady + (r - steady) * mp.e ** (-a1 * mp.mpf(eta))
        return r


# ------------------------------------------------------------------ Theorem 3.2 vs mpmath


SETTINGS = [
    # (run, what it is)
    (run_(), "sample, n=1000, b=10"),
    # CIFAR10-like (§5, Table 4): n = 50000, β = 55, β/λ = 5.5e4, η = 1/(2β), 30 epochs
    (Run.from_epochs(epochs=30, n=50000, batch_size=256, batching="sample", learning_rate=1 / 110,
                     noise_multiplier=1.1, lipschitz=3.0, smoothness=55.0, strong_convexity=1e-3),
     "CIFAR10-like"),
    (Run(n=500, batch_size=None, batching="full", steps=50, learning_rate=0.4, noise_multiplier=5.0,
         lipschitz=2.0, smoothness=2.0, strong_convexity=0.5, diameter=3.0), "full batch, bounded C"),
    (run_(steps=10**9), "converged"),
]


@pytest.mark.parametrize("run,label", SETTINGS, ids=[s[1] for s in SETTINGS])
def test_matches_theorem_3_1_with_lemma_3_4_in_mpmath(run, label):
    eta = run.learning_rate
    s = sigma_mp(run.noise_multiplier, run.lipschitz, eta, run.batch_size)
    expected = [theorem_3_1_mp(a, L=run.lipschitz, lam=run.strong_convexity, sigma=s, n=run.n,
                               time=mp.mpf(eta) * run.steps) for a in ORDERS]
    got = R.rdp(run, ORDERS)
    assert np.allclose(got, [float(e) for e in expected], rtol=1e-12, atol=0)
    # and the canonical form 8αb²/(λn²z²η)·(1 − e^{−ληK/2}) (L cancels)
    b, n, z, lam = run.batch_size, run.n, run.noise_multiplier, run.strong_convexity
    canonical = [8 * a * b * b / (lam * n * n * z * z * eta) * -math.expm1(-lam * eta * run.steps / 2)
                 for a in ORDERS]
    assert np.allclose(got, canonical, rtol=1e-12)


def test_pinned_values():
    """Hand-checked values: run_() has σ = 2·√0.25/10 = 0.1, so 4L²/(λn²σ²) = 2e-3 and
    λΣη/2 = 100: ε(α) = 2e-3·α·(1 − e^{−100})."""
    assert R.details(run_())["sigma_ye_shokri"] == pytest.approx(0.1, rel=1e-15)
    assert R.rdp(run_(), [2.0])[0] == pytest.approx(4e-3, rel=1e-12)
    assert R.rdp(run_(steps=10), [2.0])[0] == pytest.approx(4e-3 * -math.expm1(-0.5), rel=1e-12)


def test_schedule_matches_the_proofs_recursion():
    """Theorem 3.2 with constant σ and a varying schedule equals the step-by-step
    recursion of the proof of Theorem 3.1 (at γ = 1/2, as the theorem sets it)."""
    rng = np.random.default_rng(3)
    for L, lam, sigma, n, K in ((1.0, 0.3, 0.05, 200, 40), (2.5, 1e-3, 0.8, 60000, 300)):
        etas = rng.uniform(0.01, 0.9, size=K).tolist()
        got = ry.theorem_3_2_rdp(ORDERS, lipschitz=L, strong_convexity=lam, sigma=sigma, n=n,
                                 learning_rate=etas)
        ref = [float(recursion_mp(a, L=L, lam=lam, sigma=sigma, n=n, etas=etas)) for a in ORDERS]
        assert np.allclose(got, ref, rtol=1e-11)


def test_other_gammas_are_valid_but_the_theorem_uses_one_half():
    """The proof holds for any γ ∈ (0, 1); γ = 1/2 gives the smallest limit (K → ∞)."""
    etas = [0.5] * 10**5
    half = recursion_mp(4.0, L=1, lam=0.2, sigma=0.1, n=1000, etas=etas[:2000])
    assert float(half) == pytest.approx(R.rdp(run_(), [4.0])[0], rel=1e-12)
    for g in (0.3, 0.7):
        assert recursion_mp(4.0, L=1, lam=0.2, sigma=0.1, n=1000, etas=etas[:2000], gamma=g) > half


# ------------------------------------------------------------------ Corollaries 3.2 and 3.3


def test_corollary_3_2_is_theorem_3_2_with_constant_steps():
    for K in (1, 7, 2000, 10**7):
        kw = dict(lipschitz=1.7, strong_convexity=0.01, sigma=0.3, n=5000)
        cor = ry.corollary_3_2_rdp(ORDERS, learning_rate=0.05, iterations=K, **kw)
        thm = ry.theorem_3_2_rdp(ORDERS, learning_rate=0.05, iterations=K, **kw)
        assert np.allclose(cor, thm, rtol=1e-13)
        if K <= 2000:
            listed = ry.theorem_3_2_rdp(ORDERS, learning_rate=[0.05] * K, **kw)
            assert np.allclose(listed, thm, rtol=1e-12)


@pytest.mark.parametrize("beta,lam,K", [(1.0, 0.5, 5), (55.0, 1e-3, 5880), (4.0, 1.0, 10**4)])
def test_corollary_3_3_against_theorem_3_2(beta, lam, K):
    kw = dict(lipschitz=1.0, strong_convexity=lam, sigma=0.2, n=1000)
    # the printed closed form and its integral: (λ/2)∫₀^K dt/(2β + λt/2) = log(1 + λK/4β)
    with mp.workdps(30):
        integral = mp.quad(lambda t: 1 / (2 * beta + lam * t / 2), [0, K])
        assert float(lam / 2 * integral) == pytest.approx(math.log1p(lam * K / (4 * beta)), rel=1e-12)
        assert float(1 - mp.e ** (-mp.log(1 + mp.mpf(lam) * K / (4 * beta)))) == pytest.approx(
            lam * K / (4 * beta + lam * K), rel=1e-12)
    cor = ry.corollary_3_3_rdp(ORDERS, smoothness=beta, iterations=K, **kw)
    alg = [1 / (2 * beta + lam * k / 2) for k in range(K)]  # η_0 … η_{K−1} (Algorithm 1)
    thm = [1 / (2 * beta + lam * k / 2) for k in range(1, K + 1)]  # η_1 … η_K (theorem's indices)
    assert np.allclose(ry.decreasing_step_sizes(K, smoothness=beta, strong_convexity=lam), alg, rtol=1e-15)
    upper = ry.theorem_3_2_rdp(ORDERS, learning_rate=alg, smoothness=beta, **kw)
    lower = ry.theorem_3_2_rdp(ORDERS, learning_rate=thm, smoothness=beta, **kw)
    assert np.all(lower <= cor * (1 + 1e-12)) and np.all(cor <= upper * (1 + 1e-12))
    limit = np.array(ORDERS) * 4.0 / (lam * 1000**2 * 0.04)
    assert np.all(upper - lower <= limit * lam / (4 * beta) * (1 + 1e-9))


def test_utility_theorems_parameter_choices():
    """Theorem 4.1 sets σ² = 4αL²/(ελn²), K = (2β/λ)·log(εn²/(αd)), η = 1/(2β): Corollary 3.2
    then gives ε·(1 − √(αd/(εn²))).  Theorem 4.3 (same σ², decreasing η_k) gives
    ε·λK/(4β + λK) by Corollary 3.3.  Both stay at most ε, as those theorems claim."""
    alpha, eps, L, lam, beta, n, d = 8.0, 1.0, 1.0, 1e-3, 55.0, 50000, 5120
    sigma = math.sqrt(4 * alpha * L * L / (eps * lam * n * n))
    K = math.ceil(2 * beta / lam * math.log(eps * n * n / (alpha * d)))
    got = ry.corollary_3_2_rdp([alpha], lipschitz=L, strong_convexity=lam, sigma=sigma, n=n,
                               learning_rate=1 / (2 * beta), iterations=K)[0]
    exact = eps * -math.expm1(-lam * K / (4 * beta))
    assert got == pytest.approx(exact, rel=1e-12)
    assert eps * (1 - math.sqrt(alpha * d / (eps * n * n))) <= got <= eps
    K3 = math.ceil(max(beta * eps * n * n / (lam * alpha * d), lam / beta * (eps * n * n / (alpha * d)) ** 2))
    got3 = ry.corollary_3_3_rdp([alpha], lipschitz=L, strong_convexity=lam, smoothness=beta, sigma=sigma,
                                n=n, iterations=K3)[0]
    assert got3 == pytest.approx(eps * lam * K3 / (4 * beta + lam * K3), rel=1e-12) and got3 <= eps


# ------------------------------------------------------------------ properties


@st.composite
def runs(draw):
    n = draw(st.integers(2, 10**6))
    b = draw(st.integers(1, min(n, 4096)))
    M = draw(st.floats(1e-3, 1e3))
    m = M * draw(st.floats(1e-6, 1.0))
    eta = (1.0 / M) * draw(st.floats(1e-4, 0.999))
    return dict(n=n, batch_size=b, batching="sample", learning_rate=eta, smoothness=M, strong_convexity=m,
                noise_multiplier=draw(st.floats(0.05, 50.0)), lipschitz=draw(st.floats(1e-2, 1e2)))


@settings(max_examples=200, deadline=None)
@given(kw=runs(), k1=st.integers(1, 10**9), k2=st.integers(1, 10**9), alpha=st.floats(1.01, 1e4))
def test_nondecreasing_in_K_and_below_its_limit(kw, k1, k2, alpha):
    lo, hi = sorted((k1, k2))
    a = R.rdp(Run(steps=lo, **kw), [alpha])[0]
    b_ = R.rdp(Run(steps=hi, **kw), [alpha])[0]
    assert 0 < a <= b_
    # K → ∞ limit 4αL²/(λn²σ²) = 8αb²/(λn²z²η), and the small-K line 2αL²ηK/(n²σ²) = 4αb²K/(n²z²)
    n, b, z = kw["n"], kw["batch_size"], kw["noise_multiplier"]
    eta, lam = kw["learning_rate"], kw["strong_convexity"]
    limit = 8 * alpha * b * b / (lam * n * n * z * z * eta)
    assert b_ <= limit * (1 + 1e-12)
    assert a <= 4 * alpha * b * b * lo / (n * n * z * z) * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(kw=runs(), steps=st.integers(1, 10**9), u=st.floats(0.0, 1.0), alpha=st.floats(1.01, 1e4))
def test_larger_strong_convexity_never_increases_it(kw, steps, u, alpha):
    """ε ∝ (1 − e^{−λt/2})/λ, and (1 − e^{−x})/x is decreasing (e^x > 1 + x)."""
    lam = kw["strong_convexity"]
    bigger = lam + u * (kw["smoothness"] - lam)
    small = R.rdp(Run(steps=steps, **kw), [alpha])[0]
    large = R.rdp(Run(steps=steps, **(kw | dict(strong_convexity=bigger))), [alpha])[0]
    assert large <= small * (1 + 1e-12)


@settings(max_examples=100, deadline=None)
@given(kw=runs(), steps=st.integers(1, 10**6))
def test_linear_in_the_order(kw, steps):
    values = R.rdp(Run(steps=steps, **kw), ORDERS)
    assert np.allclose(values / np.array(ORDERS), values[0] / ORDERS[0], rtol=1e-12)


def test_classic_conversion_of_a_linear_curve():
    """ε(α) = Aα converts (Proposition 2.1) to min_α Aα + log(1/δ)/(α−1) = A + 2√(A·log(1/δ))."""
    run = run_(steps=300)
    A = R.rdp(run, [2.0])[0] / 2.0
    orders = np.linspace(1.01, 400.0, 40000)
    res = R.evaluate(run, delta=1e-5, orders=orders, conversion="classic")
    closed = A + 2 * math.sqrt(A * math.log(1e5))
    assert closed <= res.epsilon <= closed * (1 + 1e-6)
    assert res.order == pytest.approx(1 + math.sqrt(math.log(1e5) / A), abs=0.02)
    assert R.evaluate(run, delta=1e-5, orders=orders).epsilon <= res.epsilon


# ------------------------------------------------------------------ conversions and variants


def test_full_batch_equals_ye_shokri_theorem_2_1_at_b_equal_n():
    """Ye & Shokri's Theorem 2.1: αS_g²/(λσ²b²)·(1 − e^{−ληK/2}), S_g = 2L; at b = n the two agree.
    For b < n Ryffel et al. are smaller by (b/n)² (Lemma 3.3's averaging over batches)."""
    for batching, b in (("full", None), ("sample", 20)):
        run = Run(n=400, batch_size=b, batching=batching, steps=333, learning_rate=0.3,
                  noise_multiplier=3.0, lipschitz=1.5, smoothness=3.0, strong_convexity=0.7)
        bb, L, eta, lam = run.batch_size, 1.5, 0.3, 0.7
        sigma = 3.0 * L * math.sqrt(eta / 2) / bb
        ys = [a * (2 * L) ** 2 / (lam * sigma**2 * bb**2) * -math.expm1(-lam * eta * 333 / 2) for a in ORDERS]
        assert np.allclose(R.rdp(run, ORDERS), np.array(ys) * (bb / 400) ** 2, rtol=1e-12)
    assert "full_batch_note" in R.details(run.replace(batching="full", batch_size=None))


def test_constant_schedule_tuple_is_the_constant_step():
    run = run_(steps=50)
    assert np.array_equal(R.rdp(run.replace(learning_rate=(0.5,) * 50), ORDERS), R.rdp(run, ORDERS))
    assert R.why_not(run_(steps=1, lr_decay=0.5)) is None  # one step: nothing varies


def test_epochs_variant_counts_K_in_epochs():
    run = Run.from_epochs(epochs=30, n=1000, batch_size=10, batching="sample", learning_rate=0.5,
                          noise_multiplier=2.0, lipschitz=1.0, smoothness=1.5, strong_convexity=0.2)
    assert run.steps == 3000
    kw = dict(lipschitz=1.0, strong_convexity=0.2, sigma=0.1, n=1000, learning_rate=0.5)
    assert np.allclose(RE.rdp(run, ORDERS), ry.theorem_3_2_rdp(ORDERS, iterations=30, **kw), rtol=1e-13)
    assert np.allclose(R.rdp(run, ORDERS), ry.theorem_3_2_rdp(ORDERS, iterations=3000, **kw), rtol=1e-13)
    assert np.all(RE.rdp(run, ORDERS) < R.rdp(run, ORDERS))
    d = RE.details(run)
    assert d["K_counts"] == "epochs" and d["iterations_K"] == 30 and "count_note" in d
    assert R.details(run)["K_counts"] == "steps" and R.details(run)["iterations_K"] == 3000
    assert RE.name == "ryffel-epochs" and not RE.sound and RE.why_not(run_(batching="poisson"))


def test_details():
    run = run_(diameter=5.0)
    d = R.details(run)
    sigma = 0.1
    assert d["sigma_ye_shokri"] == pytest.approx(run.sigma("ye-shokri"), rel=1e-15)
    assert d["lsi_constant"] == pytest.approx(0.2 / (2 * sigma**2), rel=1e-12)
    assert d["initialization_std"] == pytest.approx(sigma * math.sqrt(2 / 0.2), rel=1e-12)
    assert d["diffusion_time"] == pytest.approx(0.5 * 2000)
    assert d["gradient_sensitivity"] == pytest.approx(2.0 / 1000)
    assert d["rdp_limit_per_order"] == pytest.approx(4 / (0.2 * 1000**2 * sigma**2), rel=1e-12)
    assert any("Π_C(N(0, (2σ²/λ)·I))" in a for a in R.assumptions())
    assert R.why_not(run) is None and R.why_not(run_(diameter=None)) is None  # D does not enter


# ------------------------------------------------------------------ soundness flag and refusals


def test_flagged_not_sound_in_every_output():
    assert R.sound is False and RE.sound is False
    assert "log-Sobolev" in R.unsound_reason and "Ye & Shokri" in R.unsound_reason
    out = R.evaluate(run_(), delta=1e-5).to_dict()
    assert out["applies"] and out["sound"] is False
    assert out["details"]["not_sound"] == R.unsound_reason
    assert "footnote 2 and Appendix C" in out["details"]["not_sound"]
    assert "Theorem 3.2" in out["citation"] and "Corollaries 3.2 and 3.3" in out["citation"]
    assert out["epsilon"] > 0
    json.dumps(out, allow_nan=False)
    refused = R.evaluate(run_(strong_convexity=0.0, convex=True), delta=1e-5).to_dict()
    assert refused["sound"] is False and not refused["applies"] and refused["epsilon"] is None


@pytest.mark.parametrize(
    "changes,match",
    [
        (dict(strong_convexity=0.0, convex=True), r"needs strong convexity m > 0 .*found m = 0"),
        (dict(smoothness=None), r"needs the smoothness M \(their β\)"),
        (dict(learning_rate=1 / 1.5), r"needs learning rate < 1/β = 1/M = 0.666667 .*found 0.666667"),
        (dict(learning_rate=1.0), r"needs learning rate < 1/β = 1/M = 0.666667 .*found 1"),
        (dict(batching="poisson"), r"poisson batching is not covered"),
        (dict(batching="shuffle"), r"shuffle batching is not covered"),
        (dict(batching="cyclic"), r"cyclic batching is not covered"),
        (dict(adjacency="add-remove", batching="poisson"), r"add/remove adjacency is not covered"),
        (dict(lr_decay=0.5), r"one noise level σ for all steps .*from 0.0149535 to 0.1\b"),
        (dict(steps=3, learning_rate=(0.5, 0.1, 0.5)), r"σ_k = z·L·√\(η_k/2\)/b ranging from 0.0447214 to 0.1"),
    ],
)
def test_why_not(changes, match):
    run = run_(**changes)
    for analysis in (R, RE):
        result = analysis.evaluate(run, delta=1e-5)
        assert not result.applies and result.epsilon is None
        assert re.search(match, result.reason), result.reason
        with pytest.raises(ValueError, match=r"run does not satisfy the assumptions of ryffel"):
            analysis.rdp(run, ORDERS)


def test_function_validation():
    kw = dict(lipschitz=1.0, strong_convexity=0.1, sigma=1.0, n=10)
    with pytest.raises(ValueError, match=r"iterations \(K\) is required with a constant learning_rate"):
        ry.theorem_3_2_rdp(ORDERS, learning_rate=0.1, **kw)
    with pytest.raises(ValueError, match=r"iterations must equal the schedule's length \(2\)"):
        ry.theorem_3_2_rdp(ORDERS, learning_rate=[0.1, 0.2], iterations=3, **kw)
    with pytest.raises(ValueError, match=r"learning_rate must be below 1/β = 0.5 at every step \(Lemma 3.4\). Found 0.5"):
        ry.theorem_3_2_rdp(ORDERS, learning_rate=[0.1, 0.5], smoothness=2.0, **kw)
    with pytest.raises(ValueError, match=r"sigma must be a positive finite number. Found -1"):
        ry.theorem_3_2_rdp(ORDERS, learning_rate=0.1, iterations=1, **(kw | dict(sigma=-1)))
    with pytest.raises(ValueError, match=r"strong_convexity must be a positive finite number. Found 0"):
        ry.theorem_3_2_rdp(ORDERS, learning_rate=0.1, iterations=1, **(kw | dict(strong_convexity=0)))
    with pytest.raises(ValueError, match=r"learning_rate entries must be positive finite numbers"):
        ry.theorem_3_2_rdp(ORDERS, learning_rate=[0.1, float("nan")], **kw)
    with pytest.raises(ValueError, match=r"strong_convexity must be at most smoothness \(1.0\). Found 2.0"):
        ry.decreasing_step_sizes(3, smoothness=1.0, strong_convexity=2.0)
    with pytest.raises(ValueError, match=r"orders must be finite and greater than 1"):
        ry.theorem_3_2_rdp([1.0], learning_rate=0.1, iterations=1, **kw)


def test_refused_without_the_gaussian_start():
    fixed = noisysgd.Run(n=1000, batch_size=10, batching="sample", steps=2000, learning_rate=0.5,
                         noise_multiplier=2.0, lipschitz=1.0, smoothness=1.5, strong_convexity=0.2)
    for analysis in (R, RE):
        assert "Lemma 3.4 needs the start" in analysis.why_not(fixed)
        assert analysis.why_not(fixed.replace(initialization="gaussian")) is None
