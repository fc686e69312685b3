"""The limit line (noisysgd.limits): exact last-iterate privacy of the linear+ridge instance."""

import itertools
import math

import mpmath as mp
import numpy as np
import pytest

import noisysgd
from noisysgd import Run
from noisysgd.gdp import gdp_delta, gdp_epsilon
from noisysgd.limits import limit_bracket, limit_delta, limit_epsilon, limit_noise_multiplier


def _exact_delta_mp(weights, q, kappa, adjacency, eps, dps=30):
    """δ(ε) of the pair by enumerating the 2^T membership patterns (mpmath):
    sup over the half-line tests, the supremum found by bisection of the
    density-ratio equation (ratio monotone in t)."""
    mp.mp.dps = dps
    atoms = {}
    for bits in itertools.product((0, 1), repeat=len(weights)):
        w = sum(mp.mpf(x) * b for x, b in zip(weights, bits))
        pr = mp.fprod(mp.mpf(q) if b else 1 - mp.mpf(q) for b in bits)
        atoms[w] = atoms.get(w, 0) + pr
    k = mp.mpf(kappa)
    items = [(k * w, p) for w, p in atoms.items()]
    phi = lambda x: mp.exp(-x * x / 2)  # noqa: E731
    Phi = lambda x: mp.ncdf(x)  # noqa: E731

    def sup(num, den):
        # num/den: functions t -> (density, cdf) ; ratio decreasing in t
        f = lambda t: mp.log(num(t)[0]) - mp.log(den(t)[0]) - eps  # noqa: E731
        lo, hi = mp.mpf(-1), mp.mpf(1)
        for _ in range(60):
            if f(lo) > 0:
                break
            lo *= 2
        else:
            return mp.mpf(0)   # the density ratio never reaches e^eps: delta = 0 in this direction
        for _ in range(60):
            if f(hi) < 0:
                break
            hi *= 2
        for _ in range(120):
            m = (lo + hi) / 2
            if f(m) > 0:
                lo = m
            else:
                hi = m
        t = (lo + hi) / 2
        return num(t)[1] - mp.e ** eps * den(t)[1]

    mix = lambda s: (lambda t: (sum(p * phi(t - s * a) for a, p in items),  # noqa: E731
                                sum(p * Phi(t - s * a) for a, p in items)))
    std = lambda t: (phi(t), Phi(t))  # noqa: E731
    if adjacency == "replace":
        return float(sup(mix(-1), mix(+1)))
    return float(max(sup(mix(-1), std), sup(std, mix(+1))))


@pytest.mark.parametrize("adjacency", ["replace", "add-remove"])
@pytest.mark.parametrize("T,q,lam,z,eps", [(4, 0.3, 0.2, 0.8, 0.5), (5, 0.5, 0.0, 1.2, 1.0),
                                           pytest.param(6, 0.1, 0.5, 0.5, 2.0, marks=pytest.mark.slow)])
def test_poisson_matches_enumeration(T, q, lam, z, eps, adjacency):
    n = 10
    b = int(round(q * n))
    run = Run(n=n, batch_size=b, batching="poisson", steps=T, learning_rate=1.0, noise_multiplier=z,
              lipschitz=1.0, strong_convexity=lam, adjacency=adjacency)
    c = 1.0 - lam
    weights = [c ** (T - 1 - t) for t in range(T)]
    kappa = 1.0 / (z * math.sqrt(sum(c ** (2 * j) for j in range(T))))
    exact = _exact_delta_mp(weights, b / n, kappa, adjacency, eps)
    got = limit_delta(run, eps)
    assert got <= exact + 1e-15                      # a lower bound, never above
    assert got >= exact - 2e-3 * exact - 1e-10       # and tight: lattice rounding only (2^16 cells)


def test_sample_add_remove_is_refused_so_the_limit_need_not_cover_it():
    """`sample` under add/remove (the added row displaces another, 2L, and moves every other
    row's chance b/m) is refused by Run since issue 24: the limit has no such case to cover."""
    with pytest.raises(ValueError, match="changes every other row's chance"):
        Run(n=10, batch_size=3, batching="sample", steps=5, learning_rate=1.0, noise_multiplier=1.0,
            lipschitz=1.0, strong_convexity=0.2, adjacency="add-remove")


def test_full_is_exact_gdp():
    for adjacency, factor in (("replace", 2.0),):
        run = Run(n=50, batch_size=50, batching="full", steps=40, learning_rate=0.5, noise_multiplier=3.0,
                  lipschitz=1.0, strong_convexity=0.05, smoothness=1.0, adjacency=adjacency)
        c = 1 - 0.5 * 0.05
        W = sum(c ** j for j in range(40))
        mu = factor * W / (3.0 * math.sqrt(sum(c ** (2 * j) for j in range(40))))
        assert limit_delta(run, 1.0) == pytest.approx(gdp_delta(mu, 1.0), rel=1e-9)
        e = limit_epsilon(run, 1e-5)
        assert e <= gdp_epsilon(mu, 1e-5) and e == pytest.approx(gdp_epsilon(mu, 1e-5), rel=1e-8)


def test_cyclic_is_worst_position_gdp():
    run = Run(n=40, batch_size=10, batching="cyclic", steps=10, learning_rate=0.5, noise_multiplier=2.0,
              lipschitz=1.0, strong_convexity=0.1, smoothness=1.0)
    c = 0.95
    w = [c ** (9 - t) for t in range(10)]
    W = max(sum(w[p::4]) for p in range(4))
    assert W == pytest.approx(1 + c ** 4 + c ** 8)   # the position used at the last step
    mu = 2 * W / (2.0 * math.sqrt(sum(c ** (2 * j) for j in range(10))))
    assert limit_epsilon(run, 1e-5) == pytest.approx(gdp_epsilon(mu, 1e-5), rel=1e-8)


def test_gaussian_start_adds_variance():
    kw = dict(n=20, batch_size=20, batching="full", steps=5, learning_rate=0.5, noise_multiplier=1.0,
              lipschitz=1.0, strong_convexity=0.2, smoothness=1.0)
    c = 0.9
    s2 = sum(c ** (2 * j) for j in range(5))
    W = sum(c ** j for j in range(5))
    mu = 2 * W / math.sqrt(s2 + c ** 10 / 0.1)
    got = limit_epsilon(Run(**kw, initialization="gaussian"), 1e-5)
    assert got == pytest.approx(gdp_epsilon(mu, 1e-5), rel=1e-8)
    assert got < limit_epsilon(Run(**kw), 1e-5)


_CASES = ((3, 2.0, 0.01, "replace"), (10, 4.0, 0.2, "add-remove"), (20, 1.0, 0.5, "replace"))
GRID = [
    dict(n=1000, batch_size=100, batching=bat, epochs=ep, learning_rate=0.5, noise_multiplier=z,
         lipschitz=1.0, strong_convexity=lam, smoothness=1.0, adjacency=adj)
    # add-remove only where Run admits it (poisson: issue 24)
    for bat, cases in (("poisson", _CASES[:2]), ("sample", _CASES[2:]), ("shuffle", _CASES[::2]),
                       ("shuffle-once", _CASES[:1]), ("cyclic", _CASES[::2]), ("full", _CASES[2:]))
    for ep, z, lam, adj in cases
]
# Coarse lattices keep this fast; the limit is a lower bound for any lattice size.
_CELLS = 1 << 12


@pytest.mark.parametrize("kw", GRID, ids=lambda kw: f"{kw['batching']}-{kw['adjacency']}-E{kw['epochs']}")
def test_every_sound_bound_is_above_the_limit(kw):
    kw = dict(kw)
    if kw["batching"] == "full":
        kw["batch_size"] = kw["n"]
    run = Run.from_epochs(**kw)
    lim = limit_epsilon(run, 1e-5, cells=_CELLS)
    report = noisysgd.epsilon(run, delta=1e-5)
    assert lim > 0
    for name, res in report.results.items():
        if res.applies and res.sound and res.epsilon is not None and name != "altschuler-talwar":
            assert res.epsilon >= lim * (1 - 1e-9), (name, res.epsilon, lim)
    assert report.epsilon >= lim


@pytest.mark.slow
def test_monotone_in_noise_and_noise_lower_bound():
    base = Run.from_epochs(epochs=3, n=200, batch_size=50, batching="poisson", learning_rate=0.5,
                           noise_multiplier=1.0, lipschitz=1.0, strong_convexity=0.05)
    eps = [limit_epsilon(base.replace(noise_multiplier=z), 1e-5, cells=_CELLS) for z in (0.7, 1.0, 1.5, 3.0)]
    assert all(a > b for a, b in zip(eps, eps[1:]))
    z = limit_noise_multiplier(base, 1.0, 1e-5, cells=_CELLS)
    assert limit_epsilon(base.replace(noise_multiplier=z), 1e-5, cells=_CELLS) > 1.0
    assert limit_epsilon(base.replace(noise_multiplier=z * 1.01), 1e-5, cells=_CELLS) < 1.0
    cal = noisysgd.calibrate(base, epsilon=1.0, delta=1e-5, analyses=["composition"])
    assert cal.noise_multiplier >= z


@pytest.mark.slow
def test_bracket_orders():
    run = Run.from_epochs(epochs=5, n=500, batch_size=50, batching="shuffle", learning_rate=0.5,
                          noise_multiplier=1.0, lipschitz=1.0, strong_convexity=0.05)
    for r in (run, run.replace(batching="poisson")):
        lo, hi = limit_bracket(r, 1e-5, cells=1 << 14)
        assert lo <= hi <= lo * 1.01   # the lattice loses at most 1 % here


def test_refusals():
    ok = dict(n=100, batch_size=10, batching="poisson", steps=20, learning_rate=0.5, noise_multiplier=1.0,
              lipschitz=1.0, strong_convexity=0.1)
    with pytest.raises(ValueError, match="diameter"):
        limit_epsilon(Run(**ok, diameter=2.0), 1e-5)
    with pytest.raises(ValueError, match="learning_rate"):
        limit_epsilon(Run(**{**ok, "learning_rate": [0.5] * 20}), 1e-5)
    with pytest.raises(ValueError, match="learning_rate"):
        limit_epsilon(Run(**ok, lr_decay=0.5), 1e-5)
    with pytest.raises(ValueError, match="below 1"):
        limit_epsilon(Run(**{**ok, "learning_rate": 20.0}), 1e-5)
    with pytest.raises(ValueError, match="delta"):
        limit_epsilon(Run(**ok), 1.5)
    with pytest.raises(ValueError, match="epsilon"):
        limit_delta(Run(**ok), -1.0)
    with pytest.raises(ValueError, match="cells"):
        limit_epsilon(Run(**ok), 1e-5, cells=3)
    with pytest.raises(ValueError, match="tol"):
        limit_noise_multiplier(Run(**ok), 1.0, 1e-5, tol=0.0)
    with pytest.raises(ValueError, match="run"):
        limit_epsilon("run", 1e-5)
    with pytest.raises(ValueError, match="noise_multiplier"):
        limit_epsilon(Run(**{**ok, "noise_multiplier": None}), 1e-5)


# ----------------------------------------------------------------- the limit line in plan and calibrate


def _plan_run():
    return Run(n=5000, batch_size=250, batching="poisson", steps=1, learning_rate=0.5, noise_multiplier=3.0,
               lipschitz=1.0, smoothness=1.0, strong_convexity=1e-2)


@pytest.mark.slow
def test_plan_carries_the_limit_line():
    import noisysgd
    from noisysgd.limits import limit_bracket, limit_epsilon
    from noisysgd.planning import LIMIT_CELLS

    run = _plan_run()
    p = noisysgd.plan(run, delta=1e-5, epochs="1:60", analyses=["composition", "ye-shokri"])
    line = p.limit_line
    assert line["epochs"][0] == 1 and line["epochs"][-1] == 60 and len(line["epochs"]) <= 8
    for e, v in zip(line["epochs"], line["epsilon"]):
        # the epochs' laws share the last one's lattice of LIMIT_CELLS (one pass): the last is
        # limit_epsilon's on that lattice; the others a lower bound on a grid not their own, close
        # to it; all within 1 % of limit_epsilon's finer default lattice, and below its upper estimate
        at = run.replace(steps=e * run.steps_per_epoch)
        own = limit_epsilon(at, 1e-5, cells=LIMIT_CELLS)
        assert v == pytest.approx(own, rel=1e-12 if e == 60 else 3e-3)
        assert v == pytest.approx(limit_epsilon(at, 1e-5), rel=1e-2)
        assert v <= limit_bracket(at, 1e-5)[1]
        # the limit is a lower bound: every sound curve of the plan lies above it
        i = int(np.flatnonzero(p.epochs == e)[0])
        assert all(c.epsilon[i] >= v * (1 - 1e-9) for c in p.curves.values() if c.applies and c.sound)
    assert p.to_dict()["limit_line"] == line
    assert "limit line: no sound analysis" in p.summary()


def test_plan_says_why_there_is_no_limit_line():
    import noisysgd

    run = _plan_run().replace(diameter=10.0)
    p = noisysgd.plan(run, delta=1e-5, epochs="1:3", analyses=["composition"])
    assert "reason" in p.limit_line and "limit line: n/a" in p.summary()


@pytest.mark.slow
def test_calibrate_cli_reports_the_limit_noise(capsys):
    import json

    from noisysgd.cli import main
    from noisysgd.limits import limit_delta

    argv = ["calibrate", "--n", "5000", "--batch-size", "250", "--batching", "poisson", "--lr", "0.5",
            "--lipschitz", "1", "--smoothness", "1", "--strong-convexity", "0.01", "--epochs", "20",
            "--epsilon", "1", "--delta", "1e-5"]
    assert main(argv + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    z_lim, z = out["limit"]["noise_multiplier"], out["noise_multiplier"]
    assert 0 < z_lim <= z
    run = _plan_run().replace(steps=20 * 20, noise_multiplier=z_lim)
    assert limit_delta(run, 1.0) > 1e-5  # at z_lim even the linear instance misses the target
    assert main(argv) == 0
    assert "limit: no sound analysis can meet this target with z below" in capsys.readouterr().out


def test_no_overflow_when_the_privacy_loss_is_huge():
    """Regression (hypothesis, CI): n = 20, b = 1, shuffle, z = 0.5 made e^ε overflow inside the
    search (ε along the curve beyond 709).  The limit is finite and below composition."""
    run = Run.from_epochs(epochs=10, n=20, batch_size=1, batching="shuffle", learning_rate=0.05,
                          noise_multiplier=0.5, lipschitz=1.0, smoothness=1.25, strong_convexity=0.0,
                          adjacency="replace")
    lim = limit_epsilon(run, 1e-5)
    comp = noisysgd.epsilon(run, delta=1e-5, analyses=["composition-pld"]).epsilon
    assert 0.0 < lim <= comp


@pytest.mark.parametrize("batching", ["poisson", "sample", "shuffle"])
def test_limit_epsilons_in_one_pass(batching):
    # poisson/sample: one pass over the steps on the largest count's lattice, each a lower bound
    # (below the bracket's upper estimate) and within the discretisation gap of its own-grid value;
    # other batchings: limit_epsilon one by one
    from noisysgd.limits import limit_bracket, limit_epsilons

    run = _plan_run().replace(batching=batching)
    steps = [20, 60, 200, 1000]
    got = limit_epsilons(run, steps, 1e-5, cells=1 << 12)
    for t, v in zip(steps, got):
        lo, hi = limit_bracket(run.replace(steps=t), 1e-5, cells=1 << 12)
        if batching == "shuffle":
            assert v == lo
        else:
            assert lo - 2 * (hi - lo) <= v <= hi   # within twice the own grid's discretisation gap
    assert got[-1] == pytest.approx(limit_bracket(run.replace(steps=1000), 1e-5, cells=1 << 12)[0], rel=1e-12)
    with pytest.raises(ValueError, match="steps must be increasing"):
        limit_epsilons(run, [60, 20], 1e-5)


@pytest.mark.slow
def test_plan_of_a_run_without_steps_has_its_limit_line():
    # plan ignores run.steps (the CLI's run has none): the limit line must not need them
    import noisysgd

    from noisysgd.limits import limit_epsilons
    from noisysgd.planning import LIMIT_CELLS

    run = _plan_run().replace(steps=None)
    p = noisysgd.plan(run, delta=1e-5, epochs="1:5", analyses=["composition"])
    assert p.limit_line["epochs"] == [1, 2, 3, 4, 5]
    steps = [e * run.steps_per_epoch for e in range(1, 6)]
    assert p.limit_line["epsilon"] == pytest.approx(
        limit_epsilons(_plan_run(), steps, 1e-5, cells=LIMIT_CELLS), rel=1e-12)
