"""The one private pipeline (noisysgd.pipeline.fit_declared): every decision the defaults take from the
data is a function of the charged queries' answers and of public quantities.  Given the same answers
(replayed through ``recorded``, the mechanism a resumed checkpoint uses), two different data sets of the
same public shape get the same configuration, the same noise and the same certificate — only the trained
coefficients differ."""

from __future__ import annotations

import json

import numpy as np
import pytest

from noisysgd.pipeline import Declared, classification_loss, fit_declared
from noisysgd.private_fit import Execution


def _data(seed: int, scale):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(6000, 6)) * scale
    y = (X @ rng.normal(size=6) > 0).astype(int)
    return X, y


@pytest.mark.parametrize("feature_range, prior", [(None, False), ("private", False), (None, True), ("auto", True)])
def test_given_the_queries_answers_nothing_else_of_the_data_moves_a_decision(feature_range, prior):
    decl = Declared(task="classification", epsilon=1.0, delta=None, noise_multiplier=None, feature_clip=1.0,
                    intercept_scaling=0.25, intercept_auto=True, clip_norm="auto", release="auto",
                    feature_range=feature_range, center="private", prior=prior)
    loss = classification_loss(2)
    X1, y1 = _data(0, np.array([1.0, 3.0, 0.5, 10.0, 1.0, 2.0]))
    X2, y2 = _data(1, np.array([50.0, 0.1, 7.0, 1.0, 0.01, 300.0]))  # other rows, other scales, same shape
    first = fit_declared(X1, y1, loss, decl, Execution(random_state=0))
    answers = json.loads(json.dumps(first.fit.certificate["preprocessing"]))  # as a checkpoint records them
    kinds = {e.kind for e in first.queries}
    assert {"center", "curvature"} <= kinds and (feature_range is None) == ("feature_range" not in kinds)
    assert prior == ({"class_prior", "release_check"} <= kinds)
    second = fit_declared(X2, y2, loss, decl, Execution(random_state=0), recorded=answers)
    a, b = first.fit.certificate, second.fit.certificate
    assert second.config == first.config  # the configuration: public quantities and charged answers only
    assert second.fit.noise_multiplier == first.fit.noise_multiplier
    assert second.fit.run == first.fit.run
    assert (b["epsilon_total"], b["delta_total"]) == (a["epsilon_total"], a["delta_total"])
    assert second.feature_clip == first.feature_clip and second.intercept_scaling == first.intercept_scaling
    if prior:  # the start: the prior's log-odds, from the replayed counts (the check is asked afresh: it reads the model)
        assert np.array_equal(second.schedule.start, first.schedule.start) and first.schedule.start[-1] != 0
    else:
        assert first.schedule.start is None
    assert not np.allclose(second.fit.result.coef, first.fit.result.coef)  # (it did train on other rows)
    # and the answers were needed: asked afresh on the other rows, the queries answer differently
    fresh = fit_declared(X2, y2, loss, decl, Execution(random_state=0))
    assert fresh.fit.certificate["preprocessing"] != a["preprocessing"]


@pytest.mark.parametrize("recorded_scaled", [True, False])
def test_a_replayed_range_answer_keeps_the_decision_its_run_took(recorded_scaled):
    """feature_range="auto" on a resumed checkpoint: the rows are scaled or kept as the recorded run
    decided (its iterate was trained on those rows), even where this version's rule reads the same
    answer otherwise; answers recorded before the "scaled" flag existed are read off their reason."""
    decl = Declared(task="classification", epsilon=1.0, delta=None, noise_multiplier=None, feature_clip=1.0,
                    intercept_scaling=0.25, intercept_auto=True, clip_norm="auto", release="auto",
                    feature_range="auto", center="private", prior=True)
    loss = classification_loss(2)
    X, y = _data(0, np.array([1.0, 3.0, 0.5, 10.0, 1.0, 2.0]))
    first = fit_declared(X, y, loss, decl, Execution(random_state=0))
    assert first.feature_map.ranges is not None  # the rule scales this table
    for old_format in (False, True):
        answers = json.loads(json.dumps(first.fit.certificate["preprocessing"]))
        part = next(p for p in answers["parts"] if "feature_range" in p)
        part["decision"] = ("an older rule: the rows were scaled by the private ranges" if recorded_scaled
                            else "an older rule: the rows were kept as given")
        if old_format:
            del part["scaled"]
        else:
            part["scaled"] = recorded_scaled
        again = fit_declared(X, y, loss, decl, Execution(random_state=0), recorded=answers)
        assert (again.feature_map.ranges is not None) == recorded_scaled
        replayed = next(p for p in again.fit.certificate["preprocessing"]["parts"] if "feature_range" in p)
        assert replayed == part  # reused as recorded: nothing added (a resume compares it with the record)
