"""Private hyperparameter selection (noisysgd.tuning, noisysgd tune).

The random-stopping bounds are checked against independent mpmath
transcriptions of the papers' statements (Papernot & Steinke, ICLR 2022,
Definition 1 and Theorems 2 and 6; Liu & Talwar, STOC 2019, Theorem 3.4) and
against dp_accounting's ``RepeatAndSelectDpEvent`` implementation; the tuned
estimator is checked end to end: its certificate is recomputed from the runs
it records and meets the target, and it costs more noise than one run.
"""

from __future__ import annotations

import json
import math
import warnings

import mpmath as mp
import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

import noisysgd
from noisysgd.rdp import DEFAULT_ORDERS, epsilon_from_rdp
from noisysgd.tuning import (
    NoisySGDClassifierCV,
    NoRunsDrawn,
    delta_from_rdp,
    draw_runs,
    liu_talwar,
    liu_talwar_horizon,
    rdp_poisson,
    rdp_truncated_negative_binomial,
    truncated_negative_binomial_gamma,
    truncated_negative_binomial_mean,
    truncated_negative_binomial_pmf,
    tuning_epsilon,
)

ORDERS = np.array([1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0, 64.0])


# ----------------------------------------------------------------- independent mpmath transcriptions


def tnb_pmf_mp(k, eta, gamma):
    """Papernot & Steinke, Definition 1, term by term (the product written out)."""
    eta, gamma = mp.mpf(eta), mp.mpf(gamma)
    if eta == 0:
        return (1 - gamma) ** k / (k * mp.log(1 / gamma))
    prod = mp.mpf(1)
    for ell in range(k):
        prod *= (ell + eta) / (ell + 1)
    return (1 - gamma) ** k / (gamma ** (-eta) - 1) * prod


def tnb_pmfs_mp(eta, gamma, terms):
    """[P[K = 1], ..., P[K = terms]] from Definition 1, the product accumulated term by term."""
    eta, gamma = mp.mpf(eta), mp.mpf(gamma)
    out, prod = [], mp.mpf(1)
    for k in range(1, terms + 1):
        prod *= (k - 1 + eta) / k  # the factor ℓ = k − 1 of ∏_{ℓ<k} (ℓ+η)/(ℓ+1)
        if eta == 0:
            out.append((1 - gamma) ** k / (k * mp.log(1 / gamma)))
        else:
            out.append((1 - gamma) ** k / (gamma ** (-eta) - 1) * prod)
    return out


def tnb_mean_mp(eta, gamma, terms=3000):
    """E[K] summed from the pmf (no closed form)."""
    return mp.fsum(k * p for k, p in enumerate(tnb_pmfs_mp(eta, gamma, terms), start=1))


def monotone_mp(values):
    """min over the orders at or above each order (D_α non-decreasing in α)."""
    return [min(values[j:]) for j in range(len(values))]


def theorem2_mp(orders, rdp, eta, gamma):
    """Theorem 2: ε' = ε + (1+η)(1−1/λ̂)ε̂ + (1+η)log(1/γ)/λ̂ + log E[K]/(λ−1), best λ̂ on the grid."""
    with mp.workdps(40):
        eta, gamma = mp.mpf(eta), mp.mpf(gamma)
        mean = tnb_mean_mp(eta, gamma)
        best_hat = min((1 + eta) * (1 - 1 / mp.mpf(lh)) * mp.mpf(eh) + (1 + eta) * mp.log(1 / gamma) / lh
                       for lh, eh in zip(orders, rdp))
        vals = [mp.mpf(e) + best_hat + mp.log(mean) / (mp.mpf(lam) - 1) for lam, e in zip(orders, rdp)]
        return [float(v) for v in monotone_mp(vals)]


def delta_mp(orders, rdp, eps):
    """δ(ε) from RDP: min over α of exp((α−1)(ρ−ε))/(α−1)·(1−1/α)^α (Canonne, Kamath &
    Steinke 2020 Prop. 12 in this form) and √(1−e^{−ρ}) (Bretagnolle–Huber)."""
    with mp.workdps(40):
        eps = mp.mpf(eps)
        c = [mp.mpf(1)]
        for a, r in zip(orders, rdp):
            a, r = mp.mpf(a), mp.mpf(r)
            c.append(mp.e ** ((a - 1) * (r - eps)) / (a - 1) * (1 - 1 / a) ** a)
            c.append(mp.sqrt(1 - mp.e ** (-r)))
        return min(c)


def theorem6_mp(orders, rdp, mu):
    """Theorem 6: ε' = ε + μδ̂ + log μ/(λ−1) with e^ε̂ = 1 + 1/(λ−1)."""
    with mp.workdps(40):
        mu = mp.mpf(mu)
        vals = []
        for lam, e in zip(orders, rdp):
            lam = mp.mpf(lam)
            eps_hat = mp.log(1 + 1 / (lam - 1))
            vals.append(mp.mpf(e) + mu * delta_mp(orders, rdp, eps_hat) + mp.log(mu) / (lam - 1))
        return [float(v) for v in monotone_mp(vals)]


def gaussian_curve(orders, sigma):
    return np.asarray(orders) / (2.0 * sigma**2)


# ----------------------------------------------------------------- the distribution


@pytest.mark.parametrize("eta,gamma", [(1.0, 0.2), (0.0, 0.1), (0.5, 0.05), (-0.5, 0.1), (2.0, 0.3)])
def test_truncated_negative_binomial_pmf_and_mean_match_definition_1(eta, gamma):
    ks = np.arange(1, 60)
    ours = truncated_negative_binomial_pmf(ks, eta, gamma)
    ref = [float(tnb_pmf_mp(int(k), eta, gamma)) for k in ks]
    np.testing.assert_allclose(ours, ref, rtol=1e-12)
    with mp.workdps(30):
        assert float(mp.fsum(tnb_pmfs_mp(eta, gamma, 3000))) == pytest.approx(1, rel=1e-9)
        ref_mean = float(tnb_mean_mp(eta, gamma))
    assert truncated_negative_binomial_mean(eta, gamma) == pytest.approx(ref_mean, rel=1e-10)


@pytest.mark.parametrize("eta,mean", [(1.0, 5.0), (0.0, 10.0), (0.5, 3.0), (-0.5, 8.0)])
def test_gamma_from_expected_runs_inverts_the_mean(eta, mean):
    gamma = truncated_negative_binomial_gamma(eta, mean)
    assert 0 < gamma < 1
    assert truncated_negative_binomial_mean(eta, gamma) == pytest.approx(mean, rel=1e-9)


@pytest.mark.parametrize("selection,eta", [("poisson", 1.0), ("negative-binomial", 1.0),
                                           ("negative-binomial", 0.0), ("negative-binomial", 0.5)])
def test_expected_number_of_runs(selection, eta):
    # 4000 draws: the standard error of the mean is sd/63; the bound is 5 standard errors
    # with sd computed from the distribution itself (mpmath), so this fails only if the law is wrong.
    mean = 6.0
    rng = np.random.default_rng(12345)
    draws = np.array([draw_runs(selection, mean, rng, eta=eta) for _ in range(4000)])
    if selection == "poisson":
        sd = math.sqrt(mean)
    else:
        gamma = truncated_negative_binomial_gamma(eta, mean)
        with mp.workdps(30):
            m2 = float(mp.fsum(k * k * p for k, p in enumerate(tnb_pmfs_mp(eta, gamma, 3000), start=1)))
        sd = math.sqrt(m2 - mean**2)
        assert draws.min() >= 1
    assert abs(draws.mean() - mean) < 5 * sd / math.sqrt(draws.size)


def test_liu_talwar_draws_are_capped_geometric():
    rng = np.random.default_rng(3)
    T = liu_talwar_horizon(0.5, 1e-3 / 2)
    draws = [draw_runs("liu-talwar", 2.0, rng, delta=1e-3) for _ in range(5000)]
    assert min(draws) >= 1 and max(draws) <= T
    assert np.mean(draws) == pytest.approx(2.0, abs=5 * math.sqrt(2.0) / math.sqrt(5000))


# ----------------------------------------------------------------- Theorem 2 and Theorem 6


@pytest.mark.parametrize("eta,gamma,sigma", [(1.0, 0.2, 2.0), (0.0, 0.05, 5.0), (0.5, 0.1, 1.0),
                                             (-0.5, 0.1, 3.0)])
def test_theorem_2_against_mpmath(eta, gamma, sigma):
    rdp = gaussian_curve(ORDERS, sigma)
    ours = rdp_truncated_negative_binomial(ORDERS, rdp, eta=eta, gamma=gamma)
    ref = theorem2_mp(ORDERS.tolist(), rdp.tolist(), eta, gamma)
    np.testing.assert_allclose(ours, ref, rtol=1e-10)


@pytest.mark.parametrize("mu,sigma", [(5.0, 3.0), (10.0, 8.0), (2.0, 1.5)])
def test_theorem_6_against_mpmath(mu, sigma):
    rdp = gaussian_curve(ORDERS, sigma)
    ours = rdp_poisson(ORDERS, rdp, mean=mu)
    ref = theorem6_mp(ORDERS.tolist(), rdp.tolist(), mu)
    np.testing.assert_allclose(ours, ref, rtol=1e-10)


def test_delta_from_rdp_against_mpmath_and_epsilon_conversion():
    rdp = gaussian_curve(ORDERS, 2.0)
    for eps in (0.1, 0.5, 1.0, 3.0):
        assert delta_from_rdp(ORDERS, rdp, eps) == pytest.approx(float(delta_mp(ORDERS, rdp, eps)), rel=1e-10)
    # round trip with the library's improved conversion: ε(δ(ε)) ≤ ε
    eps = 2.0
    d = delta_from_rdp(ORDERS, rdp, eps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert epsilon_from_rdp(ORDERS, rdp, d).epsilon <= eps * (1 + 1e-9)


def _dp_accounting_repeat(orders, sigma, mean, shape):
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant as rdpa

    acc = rdpa.RdpAccountant(list(orders))
    acc.compose(dp_event.RepeatAndSelectDpEvent(dp_event.GaussianDpEvent(sigma), mean, shape))
    return np.asarray(acc._rdp)  # the composed RDP curve (no public getter)


@pytest.mark.parametrize("eta,mean,sigma", [(1.0, 5.0, 3.0), (0.0, 10.0, 4.0), (0.5, 3.0, 2.0)])
def test_theorem_2_against_dp_accounting(eta, mean, sigma):
    gamma = truncated_negative_binomial_gamma(eta, mean)
    ours = rdp_truncated_negative_binomial(DEFAULT_ORDERS, gaussian_curve(DEFAULT_ORDERS, sigma),
                                           eta=eta, gamma=gamma)
    peer = _dp_accounting_repeat(DEFAULT_ORDERS, sigma, mean, eta)
    # dp_accounting maps the mean to γ by its own bisection (relative tolerance 1e-9, rounded down):
    # log(1/γ) then differs by ~1e-9, far below the 1e-7 allowed here.
    np.testing.assert_allclose(ours, peer, rtol=1e-7)


@pytest.mark.parametrize("mean,sigma", [(5.0, 3.0), (10.0, 6.0)])
def test_theorem_6_against_dp_accounting(mean, sigma):
    ours = rdp_poisson(DEFAULT_ORDERS, gaussian_curve(DEFAULT_ORDERS, sigma), mean=mean)
    peer = _dp_accounting_repeat(DEFAULT_ORDERS, sigma, mean, np.inf)
    # dp_accounting does not use that D_α is non-decreasing in α for the Poisson rule (it does
    # for the negative binomial): compare with its curve made non-decreasing (min over higher orders).
    envelope = np.minimum.accumulate(peer[::-1])[::-1]
    np.testing.assert_allclose(ours, envelope, rtol=1e-9)
    assert (ours <= peer * (1 + 1e-12)).all()


def test_tuning_costs_privacy_and_more_runs_cost_more():
    rdp = gaussian_curve(DEFAULT_ORDERS, 4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = epsilon_from_rdp(DEFAULT_ORDERS, rdp, 1e-5).epsilon
    for sel in ("poisson", "negative-binomial"):
        e5 = tuning_epsilon(DEFAULT_ORDERS, rdp, 1e-5, selection=sel, expected_runs=5)[0]
        e20 = tuning_epsilon(DEFAULT_ORDERS, rdp, 1e-5, selection=sel, expected_runs=20)[0]
        assert one < e5 < e20


# ----------------------------------------------------------------- Liu & Talwar


def test_liu_talwar_theorem_3_4_values():
    # Pure DP: 3ε₁ (and δ is δ₂ alone).
    eps, d = liu_talwar(0.5, 0.0, gamma=0.1, delta2=1e-6)
    assert eps == 1.5 and d == 1e-6
    # Approximate: (3ε₁ + 3√(2δ₁), √(2δ₁)T + δ₂), T = ⌈log(1/δ₂)/γ⌉ = ⌈10 log 1e6⌉ = 139.
    T = liu_talwar_horizon(0.1, 1e-6)
    assert T == 139 and (1 - 0.1) ** T <= 1e-6
    eps, d = liu_talwar(1.0, 1e-10, gamma=0.1, delta2=1e-6)
    r = math.sqrt(2e-10)
    assert eps == pytest.approx(3 + 3 * r, rel=1e-15)
    assert d == pytest.approx(r * 139 + 1e-6, rel=1e-15)


# ----------------------------------------------------------------- the estimator


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X = X / 2500.0  # a fixed, data-independent scale (the test only needs a working pipeline)
    return X, y


def _base():
    return noisysgd.NoisySGDClassifier(epochs=20, batch_size=64, feature_clip=1.0)


GRID = {"alpha": [0.01, 0.001], "learning_rate": ["auto", "max"]}


def _recompute_tuning_epsilon(report, selection):
    """The tuning ε recomputed from what the certificate records: each candidate's run
    (through noisysgd.epsilon's order-wise minimum), the score's Gaussian curve, and the
    mpmath transcription of the theorem, converted with the library's conversion."""
    from noisysgd.run import Run

    curves = []
    for cand in report["candidates"]:
        run = Run(**{k: v for k, v in cand["run"].items() if k not in ("epochs",)
                     and k in Run.__dataclass_fields__})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rep = noisysgd.epsilon(run, delta=report["delta"])
        curves.append(rep.combined.rdp)
    sigma = report["score"]["sigma"]
    curves.append(DEFAULT_ORDERS / (2 * sigma**2))
    per_run = np.max(np.vstack(curves), axis=0)
    np.testing.assert_allclose(per_run, report["per_run_rdp"], rtol=1e-12)
    # mpmath on a coarser sub-grid is slow-free and still an upper bound check
    if selection == "poisson":
        tuned = rdp_poisson(DEFAULT_ORDERS, per_run, mean=report["distribution"]["mean"])
    else:
        tuned = rdp_truncated_negative_binomial(DEFAULT_ORDERS, per_run, eta=report["distribution"]["eta"],
                                                gamma=report["distribution"]["gamma"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return epsilon_from_rdp(DEFAULT_ORDERS, tuned, report["delta"]).epsilon, per_run


@pytest.mark.parametrize("selection", ["poisson", "negative-binomial"])
def test_tuned_fit_certificate_covers_the_tuning(cancer, selection):
    X, y = cancer
    cv = NoisySGDClassifierCV(GRID, estimator=_base(), epsilon=2.0, delta=1e-5, selection=selection,
                              expected_runs=4, random_state=0).fit(X, y)
    rep = cv.privacy_report_
    assert cv.epsilon_ <= 2.0 and rep["epsilon"] == cv.epsilon_
    assert cv.epsilon_ > 2.0 * 0.99  # calibrated to the target (bisection to 1e-3 in the noise)
    assert rep["runs_drawn"] == cv.n_runs_ >= 1
    eps, per_run = _recompute_tuning_epsilon(rep, selection)
    assert eps == pytest.approx(cv.epsilon_, rel=1e-9)
    # The tuning cost is included: one run alone at this noise is far more private than the tuning.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one_run = epsilon_from_rdp(DEFAULT_ORDERS, per_run, 1e-5).epsilon
    assert one_run < 0.8 * cv.epsilon_
    # Every candidate gets more noise than if it were run once without tuning.
    n_train = rep["n"] - rep["n_validation"]
    for cand, z in zip(rep["candidates"], cv.noise_multipliers_):
        from noisysgd.run import Run

        run = Run(**{k: v for k, v in cand["run"].items() if k in Run.__dataclass_fields__})
        assert run.n == n_train
        alone = noisysgd.calibrate(run, epsilon=2.0, delta=1e-5).noise_multiplier
        assert z > alone
    assert rep["selected"]["params"] == cv.best_params_
    assert cv.predict(X[:5]).shape == (5,)
    assert cv.score(X, y) > 0.6  # the selected model predicts (weak bound: ε = 2 on 455 examples)


def test_liu_talwar_fit(cancer):
    X, y = cancer
    cv = NoisySGDClassifierCV(GRID, estimator=_base(), epsilon=3.0, delta=1e-5, selection="liu-talwar",
                              expected_runs=3, random_state=1)
    with pytest.warns(UserWarning, match="transcribed without the paper's text at hand"):
        cv.fit(X, y)
    rep = cv.privacy_report_
    assert cv.epsilon_ <= 3.0
    eps, d = liu_talwar(rep["per_run_epsilon1"], rep["delta1"], gamma=1 / 3, delta2=rep["delta2"])
    assert eps == pytest.approx(cv.epsilon_, rel=1e-12) and d <= 1e-5 * (1 + 1e-12)
    assert 1 <= cv.n_runs_ <= rep["T"]


def test_digits_end_to_end_multiclass():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    base = noisysgd.NoisySGDClassifier(epochs=10, batch_size=128, feature_clip=8.0)
    cv = NoisySGDClassifierCV({"learning_rate": ["auto", "max"]}, estimator=base, epsilon=3.0,
                              expected_runs=3, random_state=0).fit(X, y)
    assert cv.epsilon_ <= 3.0
    assert set(cv.predict(X[:50])) <= set(range(10))
    assert cv.predict_proba(X[:3]).shape == (3, 10)
    assert cv.coef_.shape == (10, 64)


def test_no_runs_drawn(cancer):
    X, y = cancer
    seed = next(s for s in range(1000) if draw_runs("poisson", 1.0, np.random.default_rng(s)) == 0)
    cv = NoisySGDClassifierCV(GRID, estimator=_base(), epsilon=2.0, expected_runs=1.0, random_state=seed)
    with pytest.raises(NoRunsDrawn, match="K = 0"):
        cv.fit(X, y)
    assert cv.privacy_report_["runs_drawn"] == 0
    with pytest.raises(NoRunsDrawn):
        cv.predict(X[:2])


@pytest.mark.parametrize("kwargs,match", [
    (dict(param_grid={"epsilon": [1, 2]}), "may not set 'epsilon'"),
    (dict(param_grid={"nonsense": [1]}), "unknown NoisySGDClassifier parameters"),
    (dict(param_grid=GRID, param_distributions=GRID), "exactly one of"),
    (dict(param_grid=None), "exactly one of"),
    (dict(param_distributions={"alpha": object()}), "list of values"),
    (dict(param_grid=GRID, selection="best-of-3"), "selection must be one of"),
    (dict(param_grid=GRID, expected_runs=0.5), "expected_runs"),
    (dict(param_grid=GRID, epsilon=-1.0), "epsilon"),
    (dict(param_grid=GRID, validation_fraction=1.5), "validation_fraction"),
    (dict(param_grid=GRID, score_noise="lots"), "score_noise"),
    (dict(param_grid=GRID, eta=-2.0), "eta"),
    (dict(param_grid=GRID, estimator=noisysgd.NoisySGDClassifier(adjacency="add-remove")), "replace"),
])
def test_bad_input_is_refused_naming_it(cancer, kwargs, match):
    X, y = cancer
    with pytest.raises(ValueError, match=match):
        NoisySGDClassifierCV(**kwargs).fit(X, y)


def test_large_delta_warns(cancer):
    from noisysgd.private_fit import DeltaWarning

    X, y = cancer
    with pytest.warns(DeltaWarning, match="not below 1/n"):
        NoisySGDClassifierCV({"alpha": [0.01]}, estimator=_base(), epsilon=2.0, delta=0.01,
                             expected_runs=2, random_state=0).fit(X, y)


def test_bad_formula_input():
    with pytest.raises(ValueError, match="gamma"):
        rdp_truncated_negative_binomial(ORDERS, gaussian_curve(ORDERS, 1), eta=1.0, gamma=1.5)
    with pytest.raises(ValueError, match="eta"):
        truncated_negative_binomial_mean(-1.0, 0.5)
    with pytest.raises(ValueError, match="one value per order"):
        rdp_poisson(ORDERS, [1.0, 2.0], mean=3.0)


# ----------------------------------------------------------------- the CLI


def _cli(argv):
    """`noisysgd tune ARGV` through the console script's entry point."""
    from noisysgd.cli import main

    return main(["tune", *argv])


def test_cli_user_mistakes_are_one_line(tmp_path, capsys):
    data = tmp_path / "d.npz"
    np.savez(data, X=np.zeros((10, 2)), y=np.arange(10) % 2)
    assert _cli([str(data), "--target", "y", "--out", str(tmp_path / "o"), "--grid", "epsilon=1,2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("noisysgd tune: error:") and "grid" in err[0]
    assert not (tmp_path / "o").exists()


def test_cli_writes_all_outputs(cancer, tmp_path):
    X, y = cancer
    data = tmp_path / "bc.npz"
    np.savez(data, X=X, y=y)
    out = tmp_path / "out"
    assert _cli([str(data), "--target", "y", "--out", str(out), "--grid", "learning_rate=auto,max",
                 "--epochs", "10", "--batch-size", "64", "--epsilon", "2", "--seed", "0"]) == 0
    cert = json.loads((out / "certificate.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    model = json.loads((out / "model.json").read_text())
    assert cert["epsilon"] <= 2.0 and cert["theorem"].startswith("Papernot & Steinke")
    assert metrics["runs_drawn"] == cert["runs_drawn"] and model["classes"] == [0, 1]


@pytest.mark.slow
def test_cli_candidates_are_configured_as_the_estimators_tuner_configures_them(cancer, tmp_path):
    """noisysgd tune without schedule flags plans every candidate as NoisySGDClassifierCV with the
    default NoisySGDClassifier does (the regime search, the clip of clip_norm="auto"): the same runs."""
    X, y = cancer
    data = tmp_path / "bc.npz"
    np.savez(data, X=X, y=y)
    out = tmp_path / "out"
    assert _cli([str(data), "--target", "y", "--out", str(out), "--grid", "learning_rate=auto,max",
                 "--classes", "0,1", "--epsilon", "2", "--seed", "0"]) == 0
    cli_runs = [c["run"] for c in json.loads((out / "certificate.json").read_text())["candidates"]]
    cv = noisysgd.NoisySGDClassifierCV({"learning_rate": ["auto", "max"]},
                                       estimator=noisysgd.NoisySGDClassifier(classes=[0, 1]), epsilon=2.0,
                                       random_state=0).fit(X, y)
    assert cli_runs == [c["run"] for c in cv.privacy_report_["candidates"]]
    # not the fixed legacy schedule (100 cyclic epochs of 256 at alpha 0.01) the command had before
    assert not any(r["batching"] == "cyclic" and r["batch_size"] == 256 and r["strong_convexity"] == 0.01
                   for r in cli_runs)


def test_cli_bad_grid_is_one_value_error(tmp_path):
    from noisysgd.cli.tune import parse_grid

    with pytest.raises(ValueError, match="grid parameter must be one of"):
        parse_grid(["epsilon=1,2"])
    with pytest.raises(ValueError, match="not a valid int"):
        parse_grid(["epochs=ten"])
    with pytest.raises(ValueError, match="at least one parameter"):
        parse_grid([])
    assert parse_grid(["learning_rate=auto,0.1", "alpha=0.01"]) == {"learning_rate": ["auto", 0.1],
                                                                    "alpha": [0.01]}


@pytest.mark.slow
def test_auto_parameters_of_candidates_are_the_estimators_choice():
    """A base estimator left at its "auto" defaults: every candidate's run uses the configuration
    NoisySGDClassifier(epsilon=target) chooses for the training part's size (public quantities only),
    not the pre-auto defaults; the accounting is checked against the executed runs by fit itself."""
    from noisysgd import NoisySGDClassifier, NoisySGDClassifierCV

    X, y = load_breast_cancer(return_X_y=True)
    X = X[:300] / np.linalg.norm(X[:300], axis=1, keepdims=True)
    y = y[:300]
    cv = NoisySGDClassifierCV({"learning_rate": ["auto", "max"]}, epsilon=2.0, delta=1e-5,
                              expected_runs=2, validation_fraction=0.2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cv.fit(X, y)
        n_train = 300 - 60
        chosen_by = {lr: NoisySGDClassifier(epsilon=2.0, delta=1e-5, learning_rate=lr, center=None,
                                            random_state=0).fit(
            X[:n_train], y[:n_train]).privacy_report_["config"]["chosen"] for lr in ("auto", "max")}
    for cand in cv.privacy_report_["candidates"]:
        run, chosen = cand["run"], chosen_by[cand["params"]["learning_rate"]]
        assert run["n"] == n_train and run["batching"] == chosen["batching"]
        assert run["epochs"] == chosen["epochs"] and run["strong_convexity"] == chosen["alpha"]
        if chosen["batching"] != "full":
            assert run["batch_size"] == chosen["batch_size"]
    assert cv.privacy_report_["epsilon"] <= 2.0


@pytest.mark.parametrize("feature_range", [(0.0, 16.0), "private"])
def test_tuning_refuses_a_feature_range_it_would_not_apply(feature_range):
    from noisysgd import NoisySGDClassifier, NoisySGDClassifierCV

    X, y = load_breast_cancer(return_X_y=True)
    cv = NoisySGDClassifierCV({"alpha": [0.01, 0.1]}, estimator=NoisySGDClassifier(feature_range=feature_range),
                              epsilon=2.0)
    with pytest.raises(ValueError, match="estimator.feature_range must be None for tuning"):
        cv.fit(X[:200], y[:200])
