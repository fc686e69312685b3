"""The accountant's choice of the best bound: sound analyses only, unless asked."""

import json

import pytest

import noisysgd
from noisysgd.cli import main

# Convex, bounded domain, fixed-size batches: the published (unsound) A&T bound is far
# below every sound one here, so it would win if it were allowed to.
RUN = noisysgd.Run(n=1000, batch_size=10, batching="sample", steps=200000, learning_rate=0.05,
                   noise_multiplier=1.0, lipschitz=1.0, smoothness=1.0, diameter=0.1, convex=True)
NAMES = ["composition", "altschuler-talwar", "altschuler-talwar-sampled"]


def test_unsound_analysis_never_supplies_the_best_bound_by_default():
    report = noisysgd.epsilon(RUN, delta=1e-5, analyses=NAMES)
    unsound = report.results["altschuler-talwar-sampled"]
    assert unsound.applies and not unsound.sound
    sound = [r.epsilon for r in report.results.values() if r.sound and r.applies]
    assert unsound.epsilon < min(sound)  # it would win ...
    assert report.best.sound and report.epsilon == min(sound)  # ... but it is excluded
    data = report.to_dict()
    assert data["best_is_sound"] is True and data["include_unsound"] is False


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
    assert "NOT SOUND, not a guarantee" in out and "altschuler-talwar-sampled" in out.splitlines()[-1]
    assert main([*flags, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["best_analysis"] == "altschuler-talwar" or data["best_analysis"] == "composition"
    assert data["epsilon"] == pytest.approx(noisysgd.epsilon(RUN, delta=1e-5, analyses=NAMES).epsilon)


def test_include_unsound_must_be_a_bool():
    with pytest.raises(ValueError, match="include_unsound must be True or False. Found 'yes'"):
        noisysgd.epsilon(RUN, delta=1e-5, include_unsound="yes")


@pytest.mark.parametrize("batching", ["sample", "shuffle"])
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
