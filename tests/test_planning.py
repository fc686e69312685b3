"""Planning curves: every point is the accountant's own number, cross-overs and
plateaus are where the curves say, and the CLI prints the API's numbers."""

import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import noisysgd
from noisysgd.analyses import ANALYSES, get_analysis
from noisysgd.cli import main
from noisysgd.planning import parse_epochs

ORDERS = [1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0, 64.0]
DELTA = 1e-5

STRONG = dict(n=1000, batch_size=50, steps=1, learning_rate=0.05, noise_multiplier=4.0,
              lipschitz=1.0, smoothness=1.25, strong_convexity=0.05)
RUNS = {
    "cyclic-strong": noisysgd.Run(batching="cyclic", **STRONG),
    "sample-strong": noisysgd.Run(batching="sample", **STRONG),
    "full-strong": noisysgd.Run(**{**STRONG, "batch_size": None, "noise_multiplier": 40.0},
                                batching="full"),
    "sample-convex": noisysgd.Run(n=1000, batch_size=10, batching="sample", steps=1, learning_rate=0.5,
                                  noise_multiplier=3.0, lipschitz=1.0, smoothness=1.0, diameter=1.0,
                                  convex=True),
    "poisson-plain": noisysgd.Run(n=1000, batch_size=20, batching="poisson", steps=1,
                                  learning_rate=0.1, noise_multiplier=1.5, lipschitz=1.0),
}


def eps_at(run, steps, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = get_analysis(name).evaluate(run.replace(steps=int(steps)), delta=DELTA, orders=ORDERS)
    return r.epsilon if r.applies else math.inf


@pytest.mark.parametrize("key", list(RUNS))
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "shifted-interpolation-sampled" else n
                                  for n in ANALYSES])  # (its sampled bound takes seconds)
def test_curve_is_evaluate_at_every_step_count(key, name):
    run = RUNS[key]
    steps = np.array([1, 7, run.steps_per_epoch, 3 * run.steps_per_epoch, 40 * run.steps_per_epoch])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = get_analysis(name).curve(run, steps, delta=DELTA, orders=ORDERS)
    ref = np.array([eps_at(run, t, name) for t in steps])
    computed = c.exact
    assert c.applies.tolist() == np.isfinite(ref).tolist() or not c.applies.any()
    np.testing.assert_allclose(c.epsilon[computed], ref[computed], rtol=1e-9)
    # values read off a larger computed step count are upper bounds
    assert (c.epsilon[~computed] >= ref[~computed]).all()


@pytest.mark.slow
def test_pld_curve_points_between_computed_ones_are_upper_bounds():
    run = RUNS["poisson-plain"]
    pld = get_analysis("composition-pld")
    steps = np.arange(1, 41) * run.steps_per_epoch
    c = pld.curve(run, steps, delta=DELTA)
    assert not c.exact.all() and c.exact[-1]  # thinned, the largest always computed
    for i in (1, 5, 17, 30):
        exact = pld.evaluate(run.replace(steps=int(steps[i])), delta=DELTA).epsilon
        assert c.epsilon[i] >= exact
        assert c.exact[i] or c.epsilon[i] > exact  # computed or strictly above
    assert (np.diff(c.epsilon) >= 0).all()


@pytest.fixture(scope="module")
def cyclic_plan():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return noisysgd.plan(RUNS["cyclic-strong"], delta=DELTA, epochs="1:300", orders=ORDERS,
                             epsilon=2.5)


def test_plan_curves_match_the_accountant_per_epoch(cyclic_plan):
    p = cyclic_plan
    run = p.run
    for e in (1, 2, 17, 300):
        i = int(np.searchsorted(p.epochs, e))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = noisysgd.epsilon(run.replace(steps=e * run.steps_per_epoch), delta=DELTA,
                                      orders=ORDERS)
        for name, res in report.results.items():
            assert p.curves[name].applies == res.applies
            if res.applies:
                assert p.curves[name].epsilon[i] == pytest.approx(res.epsilon, rel=1e-9)
        assert p.curves["order-wise-minimum"].epsilon[i] == pytest.approx(report.combined.epsilon,
                                                                          rel=1e-9)
        assert p.best_epsilon[i] == pytest.approx(report.epsilon, rel=1e-9)


def test_best_is_the_smallest_sound_curve(cyclic_plan):
    p = cyclic_plan
    sound = [c.epsilon for c in p.curves.values() if c.applies and c.sound]
    np.testing.assert_array_equal(p.best_epsilon, np.minimum.reduce(sound))
    for j, name in enumerate(p.best_analysis):
        assert p.curves[name].sound and p.curves[name].epsilon[j] == p.best_epsilon[j]


def test_crossover_is_where_the_hidden_state_bound_drops_below_composition(cyclic_plan):
    p = cyclic_plan
    run = p.run
    hidden = [n for n, c in p.curves.items()
              if c.applies and n not in ("composition", "composition-pld") and c.crossover_epoch]
    assert "ye-shokri" in hidden
    for name in hidden:
        if name == "order-wise-minimum":
            continue
        e = p.curves[name].crossover_epoch

        def gap(epochs):
            steps = epochs * run.steps_per_epoch
            base = min(eps_at(run, steps, "composition"), eps_at(run, steps, "composition-pld"))
            return eps_at(run, steps, name) - base

        assert gap(e) < 0
        if e > 1:
            assert gap(e - 1) >= 0
        assert gap(300) < 0


def test_plateau_is_the_limit_and_where_it_is_reached(cyclic_plan):
    p = cyclic_plan
    run = p.run
    c = p.curves["ye-shokri"]
    assert c.limit is not None and c.plateau_epoch is not None
    far = eps_at(run, 10**7 * run.steps_per_epoch, "ye-shokri")
    assert c.limit == pytest.approx(far, rel=1e-12)
    at = eps_at(run, c.plateau_epoch * run.steps_per_epoch, "ye-shokri")
    before = eps_at(run, (c.plateau_epoch - 1) * run.steps_per_epoch, "ye-shokri")
    assert at >= c.limit * (1 - 1e-3) > before
    # composition grows without bound: no plateau, no cross-over with itself
    assert p.curves["composition"].limit is None and p.curves["composition"].crossover_epoch is None


def test_plan_budget_is_max_epochs(cyclic_plan):
    p = cyclic_plan
    ref = noisysgd.max_epochs(p.run, epsilon=2.5, delta=DELTA, orders=ORDERS)
    assert p.budget.to_dict() == ref.to_dict()


@pytest.mark.filterwarnings("ignore::noisysgd.OrderGridWarning")
@settings(max_examples=25, deadline=None)
@given(z=st.floats(0.3, 20.0), epochs=st.lists(st.integers(1, 5000), min_size=2, max_size=6),
       batching=st.sampled_from(["poisson", "sample", "shuffle", "cyclic"]))
def test_more_epochs_never_lower_the_composition_epsilon(z, epochs, batching):
    run = noisysgd.Run(n=500, batch_size=25, batching=batching, steps=1, learning_rate=0.1,
                       noise_multiplier=z, lipschitz=1.0)
    ks = np.unique(epochs)
    c = get_analysis("composition").curve(run, ks * run.steps_per_epoch, delta=DELTA, orders=ORDERS)
    assert (np.diff(c.epsilon) >= 0).all()


def test_plan_refuses_an_explicit_schedule():
    run = RUNS["cyclic-strong"].replace(steps=3, learning_rate=[0.05, 0.04, 0.03])
    with pytest.raises(ValueError, match="learning_rate must be a constant or a polynomial decay"):
        noisysgd.plan(run, delta=DELTA, epochs="1:3")


@pytest.mark.parametrize("text, expected", [
    ("1:5", [1, 2, 3, 4, 5]), ("10:50:20", [10, 30, 50]), ("10:55:20", [10, 30, 50, 55]),
    ("3,1,2,3", [1, 2, 3]), ("1:1000:log4", [1, 10, 100, 1000]), ("7", [7]),
])
def test_parse_epochs(text, expected):
    assert parse_epochs(text).tolist() == expected


@pytest.mark.parametrize("text", ["0:5", "5:1", "1:5:0", "a:b", "", "1:2:3:4", "1,-2", "1:9:log0"])
def test_parse_epochs_rejects(text):
    with pytest.raises(ValueError, match="epochs must be A:B"):
        parse_epochs(text)


FLAGS = ["plan", "--n", "1000", "--batch-size", "50", "--lr", "0.05", "--noise-multiplier", "4",
         "--lipschitz", "1", "--smoothness", "1.25", "--strong-convexity", "0.05",
         "--batching", "cyclic", "--delta", "1e-5", "--orders", ",".join(map(str, ORDERS))]


def test_cli_plan_json_is_the_api(capsys, cyclic_plan):
    assert main([*FLAGS, "--epochs", "1:300", "--epsilon", "2.5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    p = cyclic_plan
    assert data["epochs"] == p.epochs.tolist()
    assert data["best"]["epsilon"] == pytest.approx(p.best_epsilon.tolist(), rel=1e-12)
    assert data["analyses"]["ye-shokri"]["crossover_epoch"] == p.curves["ye-shokri"].crossover_epoch
    assert data["analyses"]["ye-shokri"]["limit"] == pytest.approx(p.curves["ye-shokri"].limit)
    assert data["budget"] == p.budget.to_dict()
    assert data["analyses"]["altschuler-talwar"]["applies"] is False


@pytest.mark.slow
def test_cli_plan_table_and_plot(capsys, tmp_path, cyclic_plan):
    from noisysgd.figures import plan_figure_data

    png = tmp_path / "curve.png"
    assert main([*FLAGS, "--epochs", "1:300", "--epsilon", "2.5", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "ye-shokri" in out and "crosses composition at" in out
    assert f"epoch {cyclic_plan.curves['ye-shokri'].crossover_epoch}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the figure's data are the plan's curves
    fig = plan_figure_data(cyclic_plan)
    np.testing.assert_array_equal(fig.curves["ye-shokri"].epsilon, cyclic_plan.curves["ye-shokri"].epsilon)
    np.testing.assert_array_equal(fig.curves["best"].epsilon, cyclic_plan.best_epsilon)
    assert "chourasia" not in fig.curves  # does not apply to cyclic batches
    assert list(fig.hlines.values()) == [2.5]


@pytest.mark.parametrize("extra, message", [
    (["--epochs", "0:5"], "argument --epochs: expected A:B, A:B:STEP"),
    (["--epochs", "1:5", "--plot", "/nonexistent-dir/x.png"], "--plot: plot must be in an existing directory"),
    (["--epochs", "1:5", "--epsilon", "-1"], "--epsilon: epsilon must be a positive finite number"),
    (["--epochs", "1:5", "--delta", "2"], "--delta: delta must be in (0, 1)"),
])
def test_cli_plan_bad_input_is_one_line_and_status_2(capsys, extra, message):
    argv = [*FLAGS, *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::noisysgd.OrderGridWarning")
@settings(max_examples=20, deadline=None)
@given(n=st.integers(20, 5000), b_frac=st.floats(0.01, 0.5), epochs=st.integers(1, 50),
       z=st.floats(0.5, 20.0), lam=st.sampled_from([0.0, 0.01, 0.1]),
       batching=st.sampled_from(["poisson", "sample", "shuffle", "cyclic", "full"]),
       adjacency=st.sampled_from(["replace", "add-remove"]))
def test_cli_flags_round_trip_to_the_api(n, b_frac, epochs, z, lam, batching, adjacency):
    """The same flags give the same numbers through `noisysgd epsilon --json` and the API."""
    import contextlib
    import io

    b = n if batching == "full" else max(1, int(n * b_frac))
    if adjacency == "add-remove" and batching not in noisysgd.run.ADD_REMOVE_BATCHINGS:
        # both refuse it, with the same message (issue 24)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert main(["epsilon", "--n", str(n), "--batch-size", str(b), "--epochs", str(epochs),
                         "--noise-multiplier", repr(z), "--lipschitz", "1", "--batching", batching,
                         "--adjacency", adjacency, "--delta", "1e-5"]) == 2
        with pytest.raises(ValueError) as exc:
            noisysgd.Run(n=n, batch_size=b, batching=batching, steps=1, noise_multiplier=z, lipschitz=1.0,
                         adjacency=adjacency)
        assert str(exc.value) in err.getvalue()
        return
    flags = ["epsilon", "--n", str(n), "--batch-size", str(b), "--epochs", str(epochs), "--lr", "0.05",
             "--noise-multiplier", repr(z), "--lipschitz", "1", "--smoothness", "1.25",
             "--strong-convexity", repr(lam), "--batching", batching, "--adjacency", adjacency,
             "--delta", "1e-5", "--orders", ",".join(map(str, ORDERS)), "--json",
             "--analysis", "composition", "--analysis", "ye-shokri", "--analysis", "ye-shokri-naive",
             "--analysis", "shifted-interpolation"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        assert main(flags) == 0
    data = json.loads(buf.getvalue())
    run = noisysgd.Run.from_epochs(epochs=epochs, n=n, batch_size=b, batching=batching, learning_rate=0.05,
                                   noise_multiplier=z, lipschitz=1.0, smoothness=1.25,
                                   strong_convexity=lam, adjacency=adjacency)
    report = noisysgd.epsilon(run, delta=1e-5, orders=ORDERS,
                              analyses=["composition", "ye-shokri", "ye-shokri-naive", "shifted-interpolation"])
    assert data["run"] == json.loads(json.dumps(run.to_dict()))
    assert data["epsilon"] == report.epsilon
    for name, res in report.results.items():
        assert data["analyses"][name]["applies"] == res.applies
        assert data["analyses"][name]["epsilon"] == (res.epsilon if res.applies else None)
