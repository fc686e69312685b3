"""The accountant's choice of the best bound: sound analyses only, unless asked."""

import json
import math
import warnings

import pytest

import noisysgd
from noisysgd.cli import main

# Convex, bounded domain, fixed-size batches: the published (unsound) A&T bound is far
# below every sound one here, so it would win if it were allowed to.
RUN = noisysgd.Run(n=1000, batch_size=10, batching="sample", steps=200000, learning_rate=0.05,
                   noise_multiplier=1.0, lipschitz=1.0, smoothness=1.0, diameter=0.1, convex=True)
NAMES = ["composition", "altschuler-talwar", "altschuler-talwar-sampled"]


@pytest.mark.slow
def test_unsound_analysis_never_supplies_the_best_bound_by_default():
    report = noisysgd.epsilon(RUN, delta=1e-5, analyses=NAMES)
    unsound = report.results["altschuler-talwar-sampled"]
    assert unsound.applies and not unsound.sound
    sound = [r.epsilon for r in report.results.values() if r.sound and r.applies]
    assert unsound.epsilon < min(sound)  # it would win ...
    assert report.best.sound and report.epsilon == min(sound)  # ... but it is excluded
    data = report.to_dict()
    assert data["best_is_sound"] is True and data["include_unsound"] is False


@pytest.mark.slow
def test_include_unsound_lets_it_win_and_says_so(capsys):
    report = noisysgd.epsilon(RUN, delta=1e-5, analyses=NAMES, include_unsound=True)
    assert report.best.analysis == "altschuler-talwar-sampled"
    assert report.to_dict()["best_is_sound"] is False
    flags = ["epsilon", "--n", "1000", "--batch-size", "10", "--steps", "200000", "--lr", "0.05",
             "--noise-multiplier", "1", "--lipschitz", "1", "--smoothness", "1", "--diameter", "0.1",
             "--convex", "--batching", "sample", "--delta", "1e-5"]
    for name in NAMES:
        flags += ["--analysis", name]
    assert main([*flags, "--include-unsound"]) == 0
    out = capsys.readouterr().out
    best = next(line for line in out.splitlines() if line.startswith("best epsilon:"))
    assert "NOT SOUND, not a guarantee" in best and "altschuler-talwar-sampled" in best
    assert main([*flags, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["best_analysis"] == "altschuler-talwar" or data["best_analysis"] == "composition"
    assert data["epsilon"] == pytest.approx(noisysgd.epsilon(RUN, delta=1e-5, analyses=NAMES).epsilon)


def test_include_unsound_must_be_a_bool():
    with pytest.raises(ValueError, match="include_unsound must be True or False. Found 'yes'"):
        noisysgd.epsilon(RUN, delta=1e-5, include_unsound="yes")


@pytest.mark.parametrize("batching", [pytest.param("sample", marks=pytest.mark.slow), "shuffle"])
def test_every_result_of_a_flagged_analysis_says_why(batching):
    from noisysgd.analyses import ANALYSES

    run = RUN.replace(batching=batching, strong_convexity=0.5, smoothness=1.0, learning_rate=0.05)
    report = noisysgd.epsilon(run, delta=1e-5, analyses=list(ANALYSES))
    flagged = [name for name, a in ANALYSES.items() if not a.sound]
    assert {"ryffel", "altschuler-talwar-sampled"} <= set(flagged)
    for name, res in report.to_dict()["analyses"].items():
        if name in flagged:
            assert res["sound"] is False and len(res["not_sound_reason"]) > 40  # applies or not
        else:
            assert res["sound"] is True and res["not_sound_reason"] is None


# ---------------------------------------------------------------- best, calibrate, max_epochs

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from noisysgd.accountant import calibrate, max_epochs  # noqa: E402

STRONG = noisysgd.Run.from_epochs(epochs=20, n=1000, batch_size=50, batching="cyclic", learning_rate=0.05,
                                  noise_multiplier=1.0, lipschitz=1.0, smoothness=2.0,
                                  strong_convexity=0.1, diameter=5.0)


@settings(max_examples=8, deadline=None)
@given(batching=st.sampled_from(["shuffle", "cyclic", "sample", "poisson"]), z=st.floats(0.6, 20.0),
       epochs=st.integers(1, 60), m=st.sampled_from([0.0, 0.05, 0.5]))
def test_best_never_exceeds_any_sound_analysis(batching, z, epochs, m):
    run = STRONG.replace(batching=batching, noise_multiplier=z, steps=epochs * 20, strong_convexity=m,
                         convex=True, learning_rate=0.02)
    report = noisysgd.epsilon(run, delta=1e-5)
    sound = {k: r.epsilon for k, r in report.results.items() if r.applies and r.sound}
    assert sound and report.epsilon <= min(sound.values())
    # the order-wise minimum is at most every RDP analysis' ε (its curve is pointwise smaller)
    rdp_based = [r.epsilon for r in report.results.values()
                 if r.applies and r.sound and r.rdp is not None and r.conversion != "gdp-exact"]
    assert report.combined.epsilon <= min(rdp_based) * (1 + 1e-12)
    assert report.best.sound


def test_certificate_names_the_assumptions_the_bound_rests_on():
    cert = noisysgd.epsilon(STRONG, delta=1e-5).certificate()
    c = cert["certificate"]
    assert c["rests_on"] == [cert["best_analysis"]] == ["shifted-interpolation"]
    assert c["assumptions"]["shifted-interpolation"] == \
        noisysgd.get_analysis("shifted-interpolation").assumptions()
    assert c["trainer_must_run"]["batching"] == "cyclic"
    assert "final model only" in c["guarantee"] and json.dumps(cert, allow_nan=False)


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(target=st.floats(0.3, 8.0), delta=st.sampled_from([1e-5, 1e-8]),
       steps=st.integers(10, 5000), q=st.floats(0.001, 0.2))
def test_calibrated_noise_meets_the_target_and_a_little_less_does_not(target, delta, steps, q):
    run = noisysgd.Run(n=10000, batch_size=max(1, int(10000 * q)), batching="poisson", steps=steps,
                       learning_rate=0.1, noise_multiplier=1.0, lipschitz=1.0)
    cal = calibrate(run, epsilon=target, delta=delta, analyses="composition")
    z = cal.noise_multiplier
    eps = lambda z_: noisysgd.epsilon(run.replace(noise_multiplier=z_), delta=delta,  # noqa: E731
                                      analyses="composition").epsilon
    assert cal.epsilon <= target and eps(z) <= target
    assert eps(z / (1 + cal.rel_tol)) > target
    assert eps(z * (1 - 1e-3)) > target


def test_calibrate_best_uses_the_hidden_state_bound():
    cal = calibrate(STRONG, epsilon=1.0, delta=1e-5)
    comp = calibrate(STRONG, epsilon=1.0, delta=1e-5, analyses=["composition", "composition-pld"])
    assert cal.report.best.analysis in ("shifted-interpolation", "ye-shokri", "order-wise-minimum",
                                        "altschuler-talwar")
    assert cal.noise_multiplier < comp.noise_multiplier
    assert cal.epsilon <= 1.0


def test_calibrate_errors():
    with pytest.raises(ValueError, match="epsilon must be a positive finite number. Found -1"):
        calibrate(STRONG, epsilon=-1, delta=1e-5)
    with pytest.raises(ValueError, match="not met even with noise_multiplier"):
        calibrate(STRONG.replace(steps=10**6), epsilon=1e-3, delta=1e-5, analyses="composition",
                  max_noise_multiplier=10.0)


def test_max_epochs_limited_and_unlimited():
    budget = max_epochs(STRONG.replace(noise_multiplier=9.4), epsilon=1.0, delta=1e-5)
    E = budget.epochs
    assert E is not None and E >= 1
    at = lambda e: noisysgd.epsilon(STRONG.replace(noise_multiplier=9.4, steps=e * 20),  # noqa: E731
                                    delta=1e-5).epsilon
    assert at(E) <= 1.0 < at(E + 1)
    unlimited = max_epochs(STRONG.replace(noise_multiplier=30.0), epsilon=1.0, delta=1e-5)
    assert unlimited.epochs is None and unlimited.to_dict()["epochs"] == "unlimited"
    assert unlimited.limit_epsilon < 1.0
    p = unlimited.plateau_epochs
    run30 = STRONG.replace(noise_multiplier=30.0)
    after = noisysgd.epsilon(run30.replace(steps=p * 20), delta=1e-5).epsilon
    before = noisysgd.epsilon(run30.replace(steps=(p - 1) * 20), delta=1e-5).epsilon
    assert before < unlimited.limit_epsilon * (1 - 1e-3) <= after <= unlimited.limit_epsilon * (1 + 1e-9)


@pytest.mark.slow
def test_cli_calibrate_matches_the_api(capsys):
    flags = ["calibrate", "--n", "10000", "--batch-size", "100", "--steps", "2000", "--lr", "0.1",
             "--lipschitz", "1", "--batching", "poisson", "--epsilon", "2", "--delta", "1e-5",
             "--analysis", "composition"]
    assert main([*flags, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    run = noisysgd.Run(n=10000, batch_size=100, batching="poisson", steps=2000, learning_rate=0.1,
                       noise_multiplier=1.0, lipschitz=1.0)
    assert data["noise_multiplier"] == calibrate(run, epsilon=2, delta=1e-5,
                                                 analyses="composition").noise_multiplier
    assert main([*flags]) == 0
    assert "noise multiplier z = " in capsys.readouterr().out
    assert main([*flags[:-4], "--epsilon", "0", "--delta", "1e-5"]) == 2
    assert "--epsilon: epsilon must be a positive" in capsys.readouterr().err


@pytest.mark.parametrize("adjacency, batching, alone", [("add-remove", "poisson", True), ("replace", "poisson", True),
                                                         ("replace", "cyclic", False)])
def test_a_calibration_starts_where_the_rdp_composition_alone_would_only_where_it_is_alone(adjacency, batching,
                                                                                          alone):
    """Where every other analysis asked refuses the run (the hidden-state ones on Poisson batches),
    the search starts at the RDP's central-limit start, and finds what the RDP composition alone
    finds: the start moves the search, never the answer beyond its tolerance."""
    from noisysgd.accountant import _rdp_alone
    from noisysgd.config import SEARCH_ANALYSES

    run = noisysgd.Run.from_epochs(epochs=30, n=60000, batch_size=256, batching=batching, learning_rate=0.5,
                                   noise_multiplier=None, lipschitz=1.4, smoothness=0.5, strong_convexity=1e-3,
                                   convex=True, adjacency=adjacency)
    assert _rdp_alone(run, list(SEARCH_ANALYSES)) is alone
    assert _rdp_alone(run, ["composition"]) and not _rdp_alone(run, ["composition-pld"])
    if alone:
        every = calibrate(run, epsilon=1.0, delta=1e-6, analyses=list(SEARCH_ANALYSES), rel_tol=1e-3)
        rdp = calibrate(run, epsilon=1.0, delta=1e-6, analyses=["composition"], rel_tol=1e-3)
        assert every.report.best.analysis == "composition"
        assert every.noise_multiplier == pytest.approx(rdp.noise_multiplier, rel=1e-3)
        assert every.epsilon <= 1.0


@settings(max_examples=80, deadline=None)
@given(batching=st.sampled_from(["full", "cyclic", "shuffle-once", "poisson"]), z=st.floats(0.3, 200.0),
       epochs=st.sampled_from([1, 10, 100]), lam=st.sampled_from([0.0, 1e-3, 0.1]),
       where=st.floats(-0.02, 0.02), exact=st.booleans(), adjacency=st.sampled_from(["replace", "add-remove"]))
def test_misses_says_what_the_report_says(batching, z, epochs, lam, where, exact, adjacency):
    """The configuration search's prune asks misses() where it asked for a report: the same
    answer — some sound analysis applies and none meets the target — on runs the search builds,
    for targets around the best bound (and exactly at it), whatever the analyses decide by
    (a μ-GDP one by its μ against the least μ known to miss)."""
    from noisysgd.analyses import misses
    from noisysgd.config import SEARCH_ANALYSES

    if adjacency == "add-remove" and batching != "poisson":
        return  # (Run refuses fixed batches under add/remove)
    run = noisysgd.Run.from_epochs(epochs=epochs, n=1000, batch_size=1000 if batching == "full" else 100,
                                   batching=batching, learning_rate=0.5, noise_multiplier=z, lipschitz=1.0,
                                   smoothness=0.25 + lam, strong_convexity=lam, adjacency=adjacency)
    analyses = list(SEARCH_ANALYSES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = noisysgd.epsilon(run, delta=1e-6, analyses=analyses)
        if report.best is None:
            assert not misses(run, epsilon=1.0, delta=1e-6, analyses=analyses)
            return
        target = report.epsilon if exact else report.epsilon * math.exp(where)
        assert misses(run, epsilon=target, delta=1e-6, analyses=analyses) == (report.epsilon > target)


def test_misses_near_delta_one_and_on_a_bad_target():
    """Near δ = 1 gdp_epsilon's answer is its error padding, not monotone in μ to the last digit:
    misses() takes no μ shortcut there and says what the report says (a case a review found where
    the shortcut disagreed); a target that is not a number is refused by name."""
    from noisysgd.analyses import misses

    run = noisysgd.Run.from_epochs(epochs=1, n=1000, batch_size=1000, batching="full", learning_rate=0.5,
                                   noise_multiplier=0.14236318199435943, lipschitz=1.0, smoothness=0.35,
                                   strong_convexity=0.1, adjacency="replace")
    delta = 0.9999999999984128
    report = noisysgd.epsilon(run, delta=delta, analyses=["shifted-interpolation"])
    for target in (report.epsilon * 0.999, report.epsilon, report.epsilon * 1.001, 6.844328325319403e-05):
        assert misses(run, epsilon=target, delta=delta, analyses=["shifted-interpolation"]) == (report.epsilon > target)
    with pytest.raises(ValueError, match="epsilon must be a non-negative finite number. Found nan"):
        misses(run, epsilon=float("nan"), delta=1e-6, analyses=["composition"])
