"""average="auto" and a preprocessing query: the released output and the certificate's total rest
on the same analyses by construction (issue 42 §6).  A near-tie between two training bounds can
flip once the query is composed in: the training's best is composition (every iterate covered),
while the query composes more tightly into a hidden-state GDP bound.  The release must then be the
last iterate, and an averaged release is certified by the analyses that cover it alone."""

from __future__ import annotations

import math

import numpy as np
import pytest

import noisysgd
from noisysgd.accountant import EpsilonReport, compose_with_query
from noisysgd.analyses.base import AnalysisResult
from noisysgd.gdp import gdp_epsilon, gdp_mu
from noisysgd.private_fit import release_basis
from noisysgd.rdp import DEFAULT_ORDERS, epsilon_from_rdp
from noisysgd.train.release import EVERY_ITERATE, AutoRelease

DELTA = 1e-5


def _near_tie(gap: float) -> EpsilonReport:
    """Composition: a Gaussian's RDP curve α·μ_c²/2 (μ_c = 1), converted with the RDP conversion;
    shifted interpolation: μ_s-GDP, its exact ε ``gap`` above composition's (a near-tie)."""
    run = noisysgd.Run(n=1000, batch_size=100, batching="poisson", steps=100, learning_rate=0.1,
                       noise_multiplier=1.0, lipschitz=1.0)
    alpha = np.asarray(DEFAULT_ORDERS, dtype=float)
    curve = alpha * 1.0 / 2
    eps_c = epsilon_from_rdp(alpha, curve, DELTA).epsilon
    mu_s = gdp_mu(eps_c * (1 + gap), DELTA)
    results = {
        "composition": AnalysisResult("composition", True, None, True, DELTA, epsilon=eps_c, orders=alpha, rdp=curve,
                                      conversion="improved"),
        "shifted-interpolation": AnalysisResult("shifted-interpolation", True, None, True, DELTA,
                                                epsilon=gdp_epsilon(mu_s, DELTA), mu=mu_s),
    }
    return EpsilonReport(run, DELTA, results)


@pytest.mark.parametrize("gap", [1e-6, 1e-3, 2e-2])
def test_an_average_is_released_only_where_the_composed_total_covers_every_iterate(gap):
    report = _near_tie(gap)
    assert report.best.analysis == "composition"  # the training alone rests on composition...
    query = {"mu": 1.0, "epsilon": gdp_epsilon(1.0, 1e-7), "delta": 1e-7, "query": "mean"}
    total = compose_with_query(report, query)
    assert total.rests_on == ("shifted-interpolation",)  # ...its total with the query on a hidden-state bound
    # the exact GDP composition √(μ_s² + μ_q²), independently
    mu_s = report.results["shifted-interpolation"].mu
    assert total.epsilon == pytest.approx(gdp_epsilon(math.hypot(mu_s, 1.0), DELTA + 1e-7), rel=1e-12)
    basis = release_basis(report, query)
    assert basis == ["shifted-interpolation"]
    assert AutoRelease.cannot_average(basis, 1000) is not None  # so "auto" keeps the last iterate
    assert AutoRelease.cannot_average(report.certificate()["certificate"]["rests_on"], 1000) is None  # (the flaw)
    # an averaged release is certified by composition alone: a larger total, which the calibration
    # never promised, so an average may not be released here
    covered = compose_with_query(report, query, covering=EVERY_ITERATE)
    assert set(covered.rests_on) <= set(EVERY_ITERATE) and covered.epsilon > total.epsilon


def test_without_a_query_the_basis_is_the_training_certificate():
    report = _near_tie(1e-3)
    assert release_basis(report, None) == ["composition"]


def test_a_fit_that_averages_under_a_query_certifies_its_total_by_composition_alone():
    """End to end: digits-like rows, the defaults (private mean and curvature queries, average="auto"):
    where the tail average is released, the total rests on composition analyses only and meets the target."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 8))
    y = (X @ rng.normal(size=8) + 0.5 * rng.normal(size=3000) > 0).astype(int)
    clf = noisysgd.NoisySGDClassifier(epsilon=1.0, classes=[0, 1], random_state=0).fit(X, y)
    cert = clf.privacy_report_
    assert "preprocessing" in cert and cert["epsilon_total"] <= 1.0 + 1e-9
    released = cert["certificate"]["trainer_enforced"]["release"]["released"]
    rests = cert["certificate"]["total_rests_on"]
    assert rests == release_basis(clf.fit_.report, cert["preprocessing"])
    assert released == "tail-average" and set(rests) <= set(EVERY_ITERATE)  # (this fit's iterates settle)
