"""The run description: validation of every field, derived quantities, noise conventions."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noisysgd.run import Run, noise_multiplier_from_sigma, sigma_from_noise_multiplier

BASE = dict(
    n=1000,
    batch_size=100,
    batching="sample",
    steps=50,
    learning_rate=0.1,
    noise_multiplier=1.0,
    lipschitz=1.0,
)


def make(**changes):
    return Run(**{**BASE, **changes})


@pytest.mark.parametrize(
    "changes,match",
    [
        (dict(n=0), r"n must be an integer >= 1. Found 0\."),
        (dict(n=-5), r"n must be an integer >= 1. Found -5\."),
        (dict(n=10.5), r"n must be an integer >= 1. Found 10.5\."),
        (dict(n=1000.0), r"n must be an integer >= 1. Found 1000.0\."),
        (dict(n=True), r"n must be an integer >= 1. Found True\."),
        (dict(n="1000"), r"n must be an integer >= 1. Found '1000'\."),
        (dict(batch_size=0), r"batch_size must be an integer >= 1. Found 0\."),
        (dict(batch_size=None), r"batch_size must be an integer >= 1. Found None\."),
        (dict(batch_size=1001), r"batch_size must be at most n \(1000\). Found 1001\."),
        (dict(batching="full", batch_size=10), r"batch_size must equal n \(1000\) for batching='full'"),
        (dict(batching="random"), r"batching must be one of poisson, sample, shuffle, shuffle-once, cyclic, full. Found 'random'"),
        (dict(batching=None), r"batching must be one of .* Found None"),
        (dict(steps=0), r"steps must be an integer >= 1. Found 0\."),
        (dict(steps=2.5), r"steps must be an integer >= 1. Found 2.5\."),
        (dict(learning_rate=0.0), r"learning_rate must be a positive finite number. Found 0.0\."),
        (dict(learning_rate=-0.1), r"learning_rate must be a positive finite number. Found -0.1\."),
        (dict(learning_rate=float("nan")), r"learning_rate must be a positive finite number. Found nan\."),
        (dict(learning_rate=float("inf")), r"learning_rate must be a positive finite number. Found inf\."),
        (dict(noise_multiplier=0), r"noise_multiplier must be a positive finite number. Found 0\."),
        (dict(noise_multiplier=float("nan")), r"noise_multiplier must be a positive finite number. Found nan"),
        (dict(noise_multiplier="big"), r"noise_multiplier must be a positive finite number. Found 'big'"),
        (dict(lipschitz=-1.0), r"lipschitz must be a positive finite number. Found -1.0\."),
        (dict(lipschitz=float("inf")), r"lipschitz must be a positive finite number. Found inf\."),
        (dict(smoothness=0.0), r"smoothness must be a positive finite number. Found 0.0\."),
        (dict(smoothness=float("nan")), r"smoothness must be a positive finite number. Found nan\."),
        (dict(strong_convexity=-0.1), r"strong_convexity must be a non-negative finite number. Found -0.1\."),
        (dict(strong_convexity=float("inf")), r"strong_convexity must be a non-negative finite number"),
        (dict(smoothness=1.0, strong_convexity=2.0), r"strong_convexity must be at most smoothness \(1.0\). Found 2.0"),
        (dict(diameter=0.0), r"diameter must be a positive finite number. Found 0.0\."),
        (dict(diameter=float("inf")), r"diameter must be a positive finite number. Found inf\."),
        (dict(adjacency="neighbour"), r"adjacency must be one of replace, add-remove. Found 'neighbour'"),
    ],
)
def test_every_invalid_field_is_named_with_its_value(changes, match):
    with pytest.raises(ValueError, match=match):
        make(**changes)


def test_valid_run_is_frozen_and_normalised():
    run = make(adjacency="add_remove", batching="Poisson")
    assert run.adjacency == "add-remove" and run.batching == "poisson"
    assert make(batching="Shuffle-Once").batching == "shuffle-once"
    with pytest.raises(AttributeError):
        run.steps = 3  # type: ignore[misc]
    assert make(batching="full", batch_size=None).batch_size == 1000


@pytest.mark.parametrize(
    "batching,n,b,per_epoch",
    [
        ("poisson", 1000, 300, 4),  # ⌈n/b⌉ steps per epoch, as Opacus
        ("sample", 1000, 100, 10),
        ("shuffle", 1000, 300, 3),  # ⌊n/b⌋ batches; 100 examples dropped each epoch
        ("cyclic", 1000, 300, 3),
        ("full", 1000, 1000, 1),
    ],
)
def test_epochs_to_steps(batching, n, b, per_epoch):
    kwargs = {k: v for k, v in BASE.items() if k != "steps"}
    run = Run.from_epochs(epochs=7, **{**kwargs, "batching": batching, "n": n, "batch_size": b})
    assert run.steps_per_epoch == per_epoch
    assert run.steps == 7 * per_epoch
    assert run.epochs == 7.0
    assert run.epochs_touched == 7


def test_partial_epoch_counts_as_a_touch():
    run = make(batching="cyclic", steps=25)  # 10 batches per epoch
    assert run.epochs_touched == 3


def test_epochs_must_be_positive_integer():
    with pytest.raises(ValueError, match=r"epochs must be an integer >= 1. Found 0\."):
        Run.from_epochs(epochs=0, **{k: v for k, v in BASE.items() if k != "steps"})


def test_steps_and_epochs_are_exclusive():
    with pytest.raises(ValueError, match=r"steps must not be given with epochs. Found steps=50"):
        Run.from_epochs(epochs=2, **BASE)


def test_sensitivity_follows_adjacency():
    assert make().sensitivity == 2.0 and make().noise_to_sensitivity == 0.5
    run = make(adjacency="add-remove", lipschitz=3.0, noise_multiplier=2.0, batching="poisson")
    assert run.sensitivity == 3.0 and run.noise_to_sensitivity == 2.0
    # fixed-size batches are refused under add-remove (issue 24)
    with pytest.raises(ValueError, match="needs batching='poisson'"):
        make(adjacency="add-remove", lipschitz=3.0, noise_multiplier=2.0, batching="sample")


def test_conventions_match_the_architecture_table():
    # Altschuler & Talwar: σ = z·L/b.  Ye & Shokri / Ryffel: σ = z·L·√(η/2)/b.
    run = make(noise_multiplier=3.0, lipschitz=2.0, batch_size=50, learning_rate=0.08)
    assert run.sigma("altschuler-talwar") == pytest.approx(3.0 * 2.0 / 50, rel=1e-15)
    assert run.sigma("ye-shokri") == pytest.approx(3.0 * 2.0 * math.sqrt(0.04) / 50, rel=1e-15)
    assert run.sigma("ryffel") == run.sigma("ye-shokri")


def test_ye_shokri_convention_reproduces_the_parameter_noise():
    # Their update adds √(2ησ²)·N(0, I); ours adds η·z·L/b·N(0, I): the stds must agree.
    eta, z, L, b = 0.3, 1.7, 0.9, 64
    sigma = sigma_from_noise_multiplier(z, convention="ye-shokri", lipschitz=L, batch_size=b, learning_rate=eta)
    assert math.sqrt(2 * eta * sigma**2) == pytest.approx(eta * z * L / b, rel=1e-14)


@given(
    z=st.floats(min_value=1e-3, max_value=1e4),
    L=st.floats(min_value=1e-3, max_value=1e3),
    b=st.integers(min_value=1, max_value=100_000),
    eta=st.floats(min_value=1e-6, max_value=10.0),
    convention=st.sampled_from(["altschuler-talwar", "ye-shokri"]),
)
def test_conversions_round_trip(z, L, b, eta, convention):
    kw = dict(convention=convention, lipschitz=L, batch_size=b, learning_rate=eta)
    sigma = sigma_from_noise_multiplier(z, **kw)
    assert noise_multiplier_from_sigma(sigma, **kw) == pytest.approx(z, rel=1e-12)
    assert sigma_from_noise_multiplier(noise_multiplier_from_sigma(sigma, **kw), **kw) == pytest.approx(sigma, rel=1e-12)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(convention="opacus"), r"convention must be one of altschuler-talwar, ye-shokri. Found 'opacus'"),
        (dict(convention="ye-shokri", learning_rate=None), r"learning_rate is required for convention 'ye-shokri'"),
        (dict(convention="ye-shokri", learning_rate=-1.0), r"learning_rate must be a positive finite number"),
        (dict(convention="altschuler-talwar", batch_size=0), r"batch_size must be an integer >= 1. Found 0"),
    ],
)
def test_conversion_errors(kwargs, match):
    kw = dict(lipschitz=1.0, batch_size=10, learning_rate=0.1) | kwargs
    with pytest.raises(ValueError, match=match):
        sigma_from_noise_multiplier(1.0, **kw)
    with pytest.raises(ValueError, match=r"sigma must be a positive finite number. Found -2"):
        noise_multiplier_from_sigma(-2, convention="altschuler-talwar", lipschitz=1.0, batch_size=10)


def test_initialization_is_validated_and_recorded():
    run = Run(n=10, batch_size=5, batching="sample", steps=3, learning_rate=0.1,
              noise_multiplier=1.0, lipschitz=1.0)
    assert run.initialization == "fixed" and run.to_dict()["initialization"] == "fixed"
    assert run.replace(initialization="Gaussian").initialization == "gaussian"
    with pytest.raises(ValueError, match="initialization must be one of fixed, gaussian. Found 'random'"):
        run.replace(initialization="random")


@given(z=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none(), st.integers(-3, 3), st.just("2")),
       batching=st.sampled_from(["poisson", "cyclic", "shuffle", "full"]))
def test_replacing_the_noise_multiplier_is_a_fresh_construction(z, batching):
    """Run.replace(noise_multiplier=z), the calibrations' change (which checks that field alone), gives
    the run a fresh construction gives, and refuses what it refuses with the same error."""
    base = dict(n=64, batch_size=64 if batching == "full" else 8, steps=10, batching=batching, learning_rate=0.1,
                lipschitz=1.0, smoothness=2.0, strong_convexity=0.5, noise_multiplier=1.0)
    run = Run(**base)
    try:
        fresh = Run(**{**base, "noise_multiplier": z})
    except ValueError as exc:
        with pytest.raises(ValueError) as caught:
            run.replace(noise_multiplier=z)
        assert str(caught.value) == str(exc)
        return
    replaced = run.replace(noise_multiplier=z)
    assert replaced == fresh and hash(replaced) == hash(fresh) and replaced is not run
    assert run.noise_multiplier == 1.0  # the original is untouched
    assert replaced.to_dict() == fresh.to_dict()
