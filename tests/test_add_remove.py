"""Add/remove adjacency (issue 24): which batchings admit it, checked by exact attacks.

Under add/remove the neighbour has one example more.  With fixed-partition
batches (``shuffle``, ``shuffle-once``, ``cyclic``) that example moves every
later batch, and with ``full`` batches it changes the divisor: before issue 24
the composition baselines certified those runs as if only the added example's
own steps changed (sensitivity L on the touched epochs), half the true ε or
less.  With ``sample`` the added row displaces another (2L) and changes every
other row's chance b/m of being drawn.  :class:`noisysgd.Run` now refuses
them all, naming the two sound choices.

Poisson batches stay, at the rate b/n of a *declared public* n (``public_n``):
a rate, a step count or a divisor taken from the data's own number of rows
differ between neighbours, which certified too small as well (b = n: every
row every step, divisor n → n+1; a rate b/m against b/(m+1); epochs·⌈m/b⌉
steps against one more).

The attacks below are computed here from the batch layout and the noise
alone — not with the library's accountants — and every certificate the
library still issues under add/remove is checked against one.
"""

from __future__ import annotations

import itertools
import math
import warnings

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import noisysgd
from mp_reference import gdp_epsilon_mp
from noisysgd import Run
from noisysgd.cli import main as cli_main
from noisysgd.run import ADD_REMOVE_BATCHINGS, BATCHING_SCHEMES

REFUSED = tuple(b for b in BATCHING_SCHEMES if b not in ADD_REMOVE_BATCHINGS)
DELTA = 1e-5


def _kw(batching, **extra):
    kw = dict(n=1000, batch_size=100, batching=batching, steps=50, learning_rate=0.1, noise_multiplier=2.0,
              lipschitz=1.0, adjacency="add-remove")
    if batching == "full":
        kw["batch_size"] = kw["n"]
    kw.update(extra)
    return kw


# ------------------------------------------------------------------ the refusal, everywhere


@pytest.mark.parametrize("batching", REFUSED)
def test_run_refuses_add_remove_with_fixed_partition_or_full_batches(batching):
    with pytest.raises(ValueError) as err:
        Run(**_kw(batching))
    message = str(err.value)
    assert message.startswith("adjacency='add-remove' needs batching='poisson'. ")
    assert f"Found batching={batching!r}" in message
    assert "Use adjacency='replace', or batching='poisson'." in message
    Run(**_kw(batching, adjacency="replace"))  # the sound choices are accepted
    Run(**_kw("poisson", batch_size=100))


def test_poisson_alone_keeps_add_remove():
    assert ADD_REMOVE_BATCHINGS == ("poisson",)
    run = Run(**_kw("poisson"))
    assert run.adjacency == "add-remove" and run.sensitivity == 1.0


@pytest.mark.parametrize("command", ["epsilon", "calibrate", "plan"])
@pytest.mark.parametrize("batching", ["cyclic", "full"])
def test_cli_refuses_in_one_line(capsys, command, batching):
    argv = [command, "--n", "3", "--batch-size", "3" if batching == "full" else "2", "--lipschitz", "1",
            "--batching", batching, "--adjacency", "add-remove", "--delta", "1e-5"]
    argv += {"epsilon": ["--steps", "100", "--noise-multiplier", "10"],
             "calibrate": ["--steps", "100", "--epsilon", "1"],
             "plan": ["--noise-multiplier", "10", "--epochs", "1:5"]}[command]
    assert cli_main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and f"noisysgd {command}: error: adjacency='add-remove' needs" in err
    assert "Traceback" not in err


def _digits_binary(n=300):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    keep = y < 2
    return X[keep][:n] / 16.0 / 8.0, y[keep][:n]


@pytest.mark.parametrize("batching", ["cyclic", "shuffle-once", "full"])
def test_estimators_and_train_cli_refuse_before_training(tmp_path, capsys, batching):
    X, y = _digits_binary()
    clf = noisysgd.NoisySGDClassifier(epsilon=1.0, adjacency="add-remove", batching=batching,
                                      batch_size=None if batching == "full" else 50, epochs=5, alpha=0.01,
                                      classes=[0, 1])
    with pytest.raises(ValueError, match="adjacency='add-remove' needs batching='poisson'"):
        clf.fit(X, y)
    reg = noisysgd.NoisySGDRegressor(epsilon=1.0, adjacency="add-remove", batching=batching,
                                     batch_size=None if batching == "full" else 50, epochs=5, alpha=0.01,
                                     target_bound=1.0)
    with pytest.raises(ValueError, match="adjacency='add-remove' needs"):
        reg.fit(X, y.astype(float))
    data = tmp_path / "d.csv"
    np.savetxt(data, np.column_stack([X[:, :4], y]), delimiter=",", header="a,b,c,d,y", comments="")
    out = tmp_path / "out"
    code = cli_main(["train", str(data), "--target", "y", "--out", str(out), "--adjacency", "add-remove",
                     "--batching", batching, "--epochs", "2", "--alpha", "0.01", "--classes", "0,1",
                     "--seed", "0"] + ([] if batching == "full" else ["--batch-size", "20"]))
    _, err = capsys.readouterr()
    assert code == 2 and "adjacency='add-remove' needs" in err and err.count("\n") == 1
    assert not out.exists() or not any(out.iterdir())  # nothing written


@pytest.mark.slow
def test_auto_configuration_under_add_remove_picks_poisson_batches():
    """The automatic search (cyclic and full batches under replace) searches Poisson batches
    under add/remove, and an explicit batch size alone asks for them too."""
    X, y = _digits_binary()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = noisysgd.NoisySGDClassifier(epsilon=2.0, adjacency="add-remove", classes=[0, 1],
                                          public_n=300, random_state=0).fit(X, y)
        sized = noisysgd.NoisySGDClassifier(epsilon=2.0, adjacency="add-remove", batch_size=32, classes=[0, 1],
                                            public_n=300, random_state=0).fit(X, y)
    assert clf.run_.batching == "poisson" and sized.run_.batching == "poisson"
    assert clf.run_.adjacency == "add-remove" and clf.epsilon_ <= 2.0 * (1 + 1e-9)
    assert all(r["batching"] == "poisson" for r in clf.privacy_report_["config"]["candidates"])


# ------------------------------------------------------------------ exact attacks on the refused pairs


def _cyclic_sums(grads: np.ndarray, b: int, steps: int) -> np.ndarray:
    """Per-step gradient sums of cyclic batches over ``grads`` in their order: ⌊n/b⌋ batches
    of b consecutive rows, the n mod b left-over rows unused (the trainer's layout)."""
    K = len(grads) // b
    return np.array([grads[(t % K) * b:(t % K + 1) * b].sum() for t in range(steps)])


def _worst_cyclic_insertion_mu(n: int, b: int, steps: int, z: float) -> float:
    """μ of the all-iterates pair D (n rows) vs D' (the same rows with one more in front), 1-D
    gradients in {−1, +1} (L = 1), maximised over every sign pattern: the transcript is T
    Gaussians of standard deviation z on the sums, so the pair is exactly μ-GDP with
    μ = ‖sums(D') − sums(D)‖ / z."""
    best = 0.0
    for signs in itertools.product((-1.0, 1.0), repeat=n + 1):
        g = np.array(signs)
        diff = _cyclic_sums(g, b, steps) - _cyclic_sums(g[1:], b, steps)
        best = max(best, float(np.linalg.norm(diff)) / z)
    return best


@pytest.mark.parametrize("n,b,steps,z", [(3, 2, 100, 10.0), (6, 2, 30, 4.0), (9, 3, 24, 3.0)])
def test_cyclic_insertion_attack_beats_every_certificate_of_the_old_accounting(n, b, steps, z):
    """The issue's reproduction: `noisysgd epsilon --n 3 --batch-size 2 --steps 100
    --noise-multiplier 10 --batching cyclic --adjacency add-remove` certified 4.377; the exact
    pair attains μ = 2√T/z (9.997 at δ = 1e-5).  It also beats the replace-one composition of
    the same run (μ = 2√E/z) once an epoch has two batches: certifying at replace-one would
    still be wrong, so the run is refused."""
    mu = _worst_cyclic_insertion_mu(n, b, steps, z)
    assert mu == pytest.approx(2.0 * math.sqrt(steps) / z, rel=1e-12)  # every step moves by 2L
    exact = gdp_epsilon_mp(mu, DELTA)
    replace = Run(n=n, batch_size=b, batching="cyclic", steps=steps, noise_multiplier=z, lipschitz=1.0)
    epochs = replace.epochs_touched
    old = gdp_epsilon_mp(math.sqrt(epochs) / z, DELTA)  # what add-remove used to certify (L, per epoch)
    assert old < exact / 2
    if n // b >= 2:
        assert noisysgd.epsilon(replace, delta=DELTA).epsilon < exact
    if (n, b, steps, z) == (3, 2, 100, 10.0):
        assert old == pytest.approx(4.377, abs=5e-4) and exact == pytest.approx(9.997, abs=5e-4)
    with pytest.raises(ValueError, match="needs batching='poisson'"):
        replace.replace(adjacency="add-remove")


def _two_gaussians_epsilon(m1, s1, m2, s2, delta) -> float:
    """ε(δ) of the 1-D pair N(m1, s1²) vs N(m2, s2²), both directions, in mpmath: for each ε the
    hockey-stick divergence ∫ (p − e^ε q)₊ is integrated over the set where p > e^ε q (an
    interval or its complement: the log-ratio is quadratic), ε found by bisection."""
    mp.mp.dps = 40

    def hockey(ma, sa, mb, sb, eps):
        # log p − log q − ε = A x² + B x + C
        A = 1 / (2 * sb ** 2) - 1 / (2 * sa ** 2)
        B = ma / sa ** 2 - mb / sb ** 2
        C = mb ** 2 / (2 * sb ** 2) - ma ** 2 / (2 * sa ** 2) + mp.log(sb / sa) - eps
        P = lambda lo, hi: mp.ncdf((hi - ma) / sa) - mp.ncdf((lo - ma) / sa)  # noqa: E731
        Q = lambda lo, hi: mp.ncdf((hi - mb) / sb) - mp.ncdf((lo - mb) / sb)  # noqa: E731
        if A == 0:  # equal variances: a half-line
            t = -C / B
            return (1 - P(-mp.inf, t) - mp.e ** eps * (1 - Q(-mp.inf, t)) if B > 0
                    else P(-mp.inf, t) - mp.e ** eps * Q(-mp.inf, t))
        disc = B * B - 4 * A * C
        if disc <= 0:
            return mp.mpf(1) - mp.e ** eps if A > 0 else mp.mpf(0)
        r1, r2 = sorted([(-B - mp.sqrt(disc)) / (2 * A), (-B + mp.sqrt(disc)) / (2 * A)])
        if A < 0:  # p > e^ε q between the roots
            return P(r1, r2) - mp.e ** eps * Q(r1, r2)
        return 1 - P(r1, r2) - mp.e ** eps * (1 - Q(r1, r2))  # outside the roots

    def delta_at(eps):
        return max(hockey(m1, s1, m2, s2, eps), hockey(m2, s2, m1, s1, eps))

    lo, hi = mp.mpf(0), mp.mpf(100)
    for _ in range(150):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if delta_at(mid) > delta else (lo, mid)
    return float(lo)


def test_full_batch_attack_beats_the_old_certificate():
    """Full batches, n = 1000 against 999 (the issue: certified 4.377, exact ≈ 10): the
    differing row has gradient +L, the others −L.  The trainer's step is the mean over n plus
    noise zL/n, so after T steps of a linear loss (no projection) the sum of the noisy means
    is N(−T(n−2)L/n, T(zL/n)²) on D and N(−TL, T(zL/(n−1))²) on D'.  Its ε — a test of one
    statistic, so a lower bound on the pair's — is far above what add-remove used to certify."""
    n, T, z = 1000, 100, 10.0
    got = _two_gaussians_epsilon(mp.mpf(-T) * (n - 2) / n, mp.sqrt(T) * z / n,
                                 mp.mpf(-T), mp.sqrt(T) * z / (n - 1), DELTA)
    old = gdp_epsilon_mp(math.sqrt(T) / z, DELTA)
    assert old == pytest.approx(4.377, abs=5e-4)
    assert 9.9 < got and got > 2 * old
    with pytest.raises(ValueError, match="changes the divisor n"):
        Run(n=n, batch_size=None, batching="full", steps=T, noise_multiplier=z, lipschitz=1.0,
            adjacency="add-remove")


def test_two_gaussians_helper_matches_gdp_with_equal_variances():
    for mu in (0.5, 2.0):
        assert _two_gaussians_epsilon(mp.mpf(0), mp.mpf(1), mp.mpf(mu), mp.mpf(1), DELTA) == pytest.approx(
            gdp_epsilon_mp(mu, DELTA), rel=1e-9)
    assert gdp_epsilon_mp(1.0, DELTA) == pytest.approx(noisysgd.gdp.gdp_epsilon(1.0, DELTA), rel=1e-9)


# ------------------------------------------------------------------ what is still certified


def test_sample_displacement_attack_is_real_in_the_trainer():
    """Under `sample` (fixed-size batches) an added example displaces another one of its
    batch: with the others' slope −L and its own +L a batch holding it moves by 2L, not L
    (and every other row's chance to be drawn moves from b/(n−1) to b/n) — why `sample` is
    refused under add/remove.  Measured on the real replica trainer without noise: the final
    iterates of D (n rows) and D' (D without the extra row) differ by exactly
    (η/b)·2L·(number of batches holding it)."""
    from noisysgd.audit.losses import Linear
    from noisysgd.train.replicas import train_replicas

    n, b, T, eta, R = 12, 3, 40, 0.5, 400
    run = Run(n=n, batch_size=b, batching="sample", steps=T, learning_rate=eta, noise_multiplier=1e-12,
              lipschitz=1.0)
    with pytest.raises(ValueError, match="changes every other row's chance"):
        run.replace(adjacency="add-remove")
    X = np.zeros((n, 0))
    y = -np.ones(n)
    y[-1] = 1.0
    seeds = [np.random.default_rng(s) for s in range(R)]
    with_row = train_replicas(run, Linear(), X, y, replicas=R, feature_clip=1.0, random_state=seeds)
    without = train_replicas(run.replace(n=n - 1), Linear(), X[:-1], y[:-1], replicas=R, feature_clip=1.0,
                             random_state=[np.random.default_rng(s) for s in range(R)])
    gap = (with_row.coef[:, 0] - without.coef[:, 0]) / (eta / b)   # = −2L · (steps holding the row)
    held = -gap / 2.0
    assert np.allclose(held, np.round(held), atol=1e-6) and held.min() >= 0 and held.max() <= T
    # the count is Binomial(T, b/n): its mean within 5 standard errors
    assert abs(held.mean() - T * b / n) < 5 * math.sqrt(T * (b / n) * (1 - b / n) / R)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batching=st.sampled_from(("poisson",) + REFUSED), n=st.integers(8, 200), b_frac=st.floats(0.05, 0.5),
       steps=st.integers(1, 60), z=st.floats(0.5, 20.0), lam=st.sampled_from([0.0, 0.01, 0.1]))
def test_add_remove_never_certifies_below_replace_one_for_fixed_size_batches(batching, n, b_frac, steps, z,
                                                                            lam):
    """Fixed-size batches under add/remove are refused; Poisson batches (sensitivity L, the
    only ones admitted) never certify *more* than replace-one (2L) with any sound analysis —
    the two adjacencies are ordered as they must be (an add/remove pair composes into a
    replace-one pair)."""
    b = n if batching == "full" else max(1, int(b_frac * n))
    kw = dict(n=n, batch_size=b, batching=batching, steps=steps, learning_rate=0.5, noise_multiplier=z,
              lipschitz=1.0, smoothness=1.0, strong_convexity=lam, diameter=2.0, convex=True)
    replace = Run(**kw)
    if batching != "poisson":
        with pytest.raises(ValueError, match="adjacency='add-remove' needs"):
            Run(**kw, adjacency="add-remove")
        return
    add_remove = Run(**kw, adjacency="add-remove")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = noisysgd.epsilon(add_remove, delta=DELTA)
        r = noisysgd.epsilon(replace, delta=DELTA)
    assert a.best is not None and a.best.analysis in ("composition", "composition-pld")
    compared = 0
    for name, res in a.results.items():
        other = r.results.get(name)
        if res.applies and res.sound and other is not None and other.applies and other.epsilon is not None:
            assert res.epsilon <= other.epsilon * (1 + 1e-9), name
            compared += 1
    assert compared >= 2  # composition and composition-pld at least


def test_load_model_warns_about_a_certificate_the_old_accounting_issued(tmp_path):
    import json

    from noisysgd.model import InvalidCertificateWarning, model_document
    from noisysgd.train import BinaryLogistic

    doc = model_document(task="classification", loss=BinaryLogistic(), target="y", feature_names=["a"],
                         classes=[0, 1], feature_clip=1.0, coef=np.zeros(2), version="0.1.0")
    (tmp_path / "model.json").write_text(json.dumps(doc))
    cert = {"noisysgd_version": "0.1.0", "run": {"adjacency": "add-remove", "batching": "cyclic"}}
    (tmp_path / "certificate.json").write_text(json.dumps(cert))
    with pytest.warns(InvalidCertificateWarning, match="accounted too small"):
        noisysgd.load_model(tmp_path)
    cert["run"]["batching"] = "poisson"
    (tmp_path / "certificate.json").write_text(json.dumps(cert))
    with warnings.catch_warnings():
        warnings.simplefilter("error", InvalidCertificateWarning)
        noisysgd.load_model(tmp_path)


# ------------------------------------------------------------------ the public n (add/remove)


def _linear_pair(m: int):
    """D: m rows of slope +L = +1 (a 1-D linear loss, no features: the gradient is the slope),
    D' = D plus one row of slope −1 — the attack that moved every other row's law before the
    sampling rate, the steps and the divisor were fixed from a declared n."""
    X = np.zeros((m + 1, 0))
    y = np.ones(m + 1)
    y[-1] = -1.0
    return (X[:-1], y[:-1]), (X, y)


def test_poisson_with_b_equal_to_n_is_exactly_sensitivity_l_in_the_trainer():
    """b = n (q = 1, every row every step) was the full-batch bug again while n, and so the
    divisor, came from the data: D (m rows of +1) against D' (one more of −1) moved by
    −2L/(m+1) per step relative to noise zL/m, an exact ε of 10.2 where 4.377 was certified
    (n = 100, T = 100, z = 10).  With n declared, both run the same mechanism on their rows:
    the real engine's final iterates (same seed, so the same noise) differ by exactly ηTL/b,
    and the final model is N(·, T(ηzL/b)²): the pair is exactly μ-GDP with μ = √T/z, which
    the certificate must not undercut (mpmath)."""
    from noisysgd.audit.losses import Linear
    from noisysgd.train import train

    n, T, z, eta = 100, 100, 10.0, 0.5
    run = Run(n=n, batch_size=n, batching="poisson", steps=T, learning_rate=eta, noise_multiplier=z,
              lipschitz=1.0, adjacency="add-remove")
    (XD, yD), (XE, yE) = _linear_pair(n)
    fits = [train(run, Linear(), X, y, feature_clip=1.0, random_state=7) for X, y in ((XD, yD), (XE, yE))]
    gap = float(fits[1].coef[0] - fits[0].coef[0])
    assert gap == pytest.approx(eta * T * 1.0 / n, rel=1e-9)  # only the added row's gradient, divided by b
    mu = abs(gap) / (math.sqrt(T) * eta * z * 1.0 / n)
    exact = gdp_epsilon_mp(mu, DELTA)
    assert mu == pytest.approx(math.sqrt(T) / z, rel=1e-9)
    certified = noisysgd.epsilon(run, delta=DELTA).epsilon
    assert certified >= exact * (1 - 1e-6)
    # what the data's own n gave: divisor (and noise) 1/n on D, 1/(n+1) on D' — the final models are
    # N(−ηT, (η√T·z/n)²) and N(−ηT(n−1)/(n+1), (η√T·z/(n+1))²), a pair of 1-D Gaussians, exact in mpmath
    old = _two_gaussians_epsilon(mp.mpf(-eta * T), mp.mpf(eta) * mp.sqrt(T) * z / n,
                                 mp.mpf(-eta * T) * (n - 1) / (n + 1), mp.mpf(eta) * mp.sqrt(T) * z / (n + 1), DELTA)
    assert old == pytest.approx(10.2, abs=0.1) and old > 2 * certified


@pytest.mark.parametrize("m", [40, 80, 120])
def test_poisson_rate_comes_from_the_public_n_not_the_rows(m):
    """Each row is in each step's batch with probability b/n, n the declared size, whatever
    the number of rows m (the replica trainer, without noise: the iterate counts the rows
    used).  Before, the rate was b/m: the others' rows moved with the added one (exact
    ε ≥ 5.70 against a certified 3.19, n = 100, b = 1, T = 20000, z = 2).  With the rate
    fixed, the others' contribution has the same law on D and D' and is independent of the
    added row's: the pair is a post-processing of the Poisson-subsampled Gaussian pair the
    accountants certify (adding an independent common term cannot help the adversary)."""
    from noisysgd.audit.losses import Linear
    from noisysgd.train.replicas import train_replicas

    n, b, T, eta, R = 80, 8, 30, 1.0, 400
    run = Run(n=n, batch_size=b, batching="poisson", steps=T, learning_rate=eta, noise_multiplier=1e-12,
              lipschitz=1.0, adjacency="add-remove")
    (X, y), _ = _linear_pair(m)
    fit = train_replicas(run, Linear(), X, y, replicas=R, feature_clip=1.0,
                         random_state=[np.random.default_rng(s) for s in range(R)])
    used = -fit.coef[:, 0] * b / eta  # rows used over the T steps, per replica
    assert np.allclose(used, np.round(used), atol=1e-6)
    q = b / n
    assert abs(used.mean() - T * m * q) < 5 * math.sqrt(T * m * q * (1 - q) / R)


def test_add_remove_run_does_not_depend_on_the_number_of_rows():
    """Estimators fitted on m and m + 1 rows with the same declared public_n run the same
    mechanism — the same rate, steps, divisor, noise and δ — and certify the same ε (before:
    epochs·⌈m/b⌉ steps, so a neighbour ran one more step: exact 6.73 against 0.98 certified
    for sample, n = 100 → 101, b = 10, 10 epochs, z = 8).  The certificate records the
    declared n, never the rows."""
    X, y = _digits_binary(301)
    fits = []
    for rows in (300, 301):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits.append(noisysgd.NoisySGDClassifier(
                epsilon=None, noise_multiplier=3.0, adjacency="add-remove", public_n=250, batching="poisson", batch_size=25,
                epochs=3, alpha=0.01, classes=[0, 1], center=None, random_state=0).fit(X[:rows], y[:rows]))
    a, b = fits
    assert a.run_ == b.run_ and a.run_.n == 250 and a.run_.steps == 3 * 10 and a.run_.sampling_rate == 0.1
    assert a.epsilon_ == b.epsilon_ and a.delta_ == b.delta_ == min(1e-5, 1 / 2500)
    data = a.privacy_report_["certificate"]["data"]
    assert data["n"] == 250 and "declared public size" in data["n_is"]
    assert a.privacy_report_["certificate"]["data"] == b.privacy_report_["certificate"]["data"]


@pytest.mark.slow
def test_add_remove_needs_a_declared_n_at_every_entry_point(tmp_path, capsys):
    X, y = _digits_binary()
    with pytest.raises(ValueError, match=r"public_n must be given with adjacency='add-remove'.*Found None\."):
        noisysgd.NoisySGDClassifier(epsilon=1.0, adjacency="add-remove", classes=[0, 1]).fit(X, y)
    with pytest.raises(ValueError, match="public_n must be given"):
        noisysgd.NoisySGDRegressor(epsilon=1.0, adjacency="add-remove", target_bound=1.0).fit(X, y.astype(float))
    with pytest.raises(ValueError, match=r"public_n must equal the number of rows \(300\).*Found 299\."):
        noisysgd.NoisySGDClassifier(epsilon=1.0, public_n=299, classes=[0, 1]).fit(X, y)
    data = tmp_path / "d.csv"
    np.savetxt(data, np.column_stack([X[:, :4], y]), delimiter=",", header="a,b,c,d,y", comments="")
    out = tmp_path / "out"
    base = ["train", str(data), "--target", "y", "--out", str(out), "--adjacency", "add-remove", "--classes",
            "0,1", "--seed", "0", "--epochs", "2"]
    for extra, message in (([], "public_n must be given"),
                           (["--public-n", "300", "--workers", "1"], "not available for data-parallel"),
                           # a split whose sizes follow the rows makes a neighbour's training set a
                           # replacement of this one (found in review: ε 9.79 against 4.38 certified)
                           (["--public-n", "300", "--holdout", "0.1"], "--holdout needs --adjacency replace")):
        assert cli_main(base + extra) == 2
        _, err = capsys.readouterr()
        assert message in err and err.count("\n") == 1 and "Traceback" not in err
        assert not out.exists() or not any(out.iterdir())
    assert cli_main(base + ["--public-n", "300", "--quiet"]) == 0
    cert = __import__("json").loads((out / "certificate.json").read_text())
    assert cert["run"]["n"] == 300 and cert["run"]["batching"] == "poisson"


def test_data_parallel_engine_refuses_add_remove():
    from noisysgd.audit.losses import Linear
    from noisysgd.train.engine import prepare_run

    run = Run(n=10, batch_size=2, batching="poisson", steps=3, learning_rate=0.1, noise_multiplier=1.0,
              lipschitz=1.0, adjacency="add-remove")
    with pytest.raises(ValueError, match="run.adjacency must be 'replace' for data-parallel training"):
        prepare_run(run, Linear(), np.zeros((5, 0)), np.ones(5), feature_clip=1.0, target_bound=None, init=None,
                 random_state=0, dtype=np.float64, callback=None, n_rows=5)


def test_load_model_warns_about_a_poisson_certificate_from_the_data_size(tmp_path):
    """A trainer's add/remove certificate without a declared n (noisysgd < 0.2: the rate and
    the steps came from the data's own size) is flagged; one with it is not."""
    import json

    from noisysgd.model import InvalidCertificateWarning, model_document
    from noisysgd.train import BinaryLogistic

    doc = model_document(task="classification", loss=BinaryLogistic(), target="y", feature_names=["a"],
                         classes=[0, 1], feature_clip=1.0, coef=np.zeros(2), version="0.1.0")
    (tmp_path / "model.json").write_text(json.dumps(doc))
    cert = {"noisysgd_version": "0.1.0", "run": {"adjacency": "add-remove", "batching": "poisson"},
            "certificate": {"data": {"n": 100, "n_features": 1}}}
    (tmp_path / "certificate.json").write_text(json.dumps(cert))
    with pytest.warns(InvalidCertificateWarning, match="no declared public_n"):
        noisysgd.load_model(tmp_path)
    cert["certificate"]["data"]["n_is"] = "the declared public size (public_n)"
    (tmp_path / "certificate.json").write_text(json.dumps(cert))
    with warnings.catch_warnings():
        warnings.simplefilter("error", InvalidCertificateWarning)
        noisysgd.load_model(tmp_path)


def test_add_remove_warnings_do_not_print_the_rows():
    """Under add/remove the number of rows is not public: the preprocessing warnings (shown to
    whoever fits) leave it out, as the certificate does; under replace they may say it."""
    from noisysgd.preprocessing import private_center

    X = np.random.default_rng(0).uniform(0, 1, size=(37, 5)) / 5
    for adjacency, shown in (("add-remove", False), ("replace", True)):
        with pytest.warns(UserWarning, match="does not stand out of its noise") as caught:
            private_center(X, 0.01, radius=1.0, adjacency=adjacency, rng=0)
        text = " ".join(str(w.message) for w in caught)
        assert ("n = 37 rows" in text) is shown
