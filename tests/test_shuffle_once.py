"""``shuffle-once``: one secret uniformly random partition drawn once and reused
every epoch (Ye & Shokri, Algorithm 1 line 3; issue 17 §3), and the Poisson
contraction audit (issue 17 §5).

Trainer: the stream reuses one permutation, its position law is uniform, a
resumed run is bit-identical, the torch backend and the replica engine run
the same batches, the certificate says what was done.  Accountant: ye-shokri
equals Theorem 4.2 (5) computed here from the paper's formula with mpmath;
the partial-epoch mixture equals an independent evaluation of its
definition; the cyclic (worst position) bounds apply and bound it.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

import noisysgd
from noisysgd.train.checkpoint import Checkpointing
from noisysgd import Run
from noisysgd.analyses import ANALYSES
from noisysgd.analyses.ye_shokri import YeShokri, fixed_order_rdp, shuffle_once_rdp, shuffle_rdp
from noisysgd.cli import main
from noisysgd.train import BinaryLogistic, sgd, train
from noisysgd.train import engine
from noisysgd.train.batching import batches, describe_batches
from noisysgd.train.replicas import train_replicas
from noisysgd.train.secure import SecureRandom


def _binary(n=103, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)


def _strong(batching="shuffle-once", **changes):
    kw = dict(epochs=6, n=103, batch_size=10, batching=batching, learning_rate=0.3,
              noise_multiplier=1.5, lipschitz=1.0, smoothness=1.5, strong_convexity=0.05, diameter=3.0)
    kw.update(changes)
    return Run.from_epochs(**kw)


# ============================================================== the run description


def test_the_run_knows_shuffle_once():
    assert "shuffle-once" in noisysgd.BATCHING_SCHEMES
    run = Run.from_epochs(epochs=3, n=1030, batch_size=100, batching="Shuffle_Once", lipschitz=1.0)
    assert run.batching == "shuffle-once"
    assert run.steps_per_epoch == 10 and run.steps == 30  # ⌊n/b⌋: the 30 left over are dropped
    assert run.replace(steps=31).epochs_touched == 4
    with pytest.raises(ValueError, match=r"batching must be one of .*shuffle-once.* Found 'shuffle-twice'"):
        Run(n=10, batch_size=2, batching="shuffle-twice", steps=1, lipschitz=1.0)


# ============================================================== the trainer's batches


def test_one_permutation_reused_every_epoch_and_the_leftovers_never_used():
    n, b, l = 23, 5, 4
    got = [x.copy() for x in batches("shuffle-once", n=n, batch_size=b, steps=5 * l + 2,
                                     rng=np.random.default_rng(3))]
    first = got[:l]
    assert sorted(np.concatenate(first).tolist()) != list(range(n))  # 3 examples dropped
    assert len(set(np.concatenate(first).tolist())) == l * b  # a partition of 20 distinct indices
    for t, batch in enumerate(got):
        np.testing.assert_array_equal(batch, first[t % l])
    # the very same stream as the trainer's cyclic (documented: one random order drawn once)
    cyc = [x.copy() for x in batches("cyclic", n=n, batch_size=b, steps=5 * l + 2, rng=np.random.default_rng(3))]
    assert all(np.array_equal(a, c) for a, c in zip(got, cyc))
    # secure mode: drawn from the OS once, then reused
    sec = [x.copy() for x in batches("shuffle-once", n=n, batch_size=b, steps=3 * l, rng=SecureRandom())]
    for t, batch in enumerate(sec):
        np.testing.assert_array_equal(batch, sec[t % l])


def test_the_stream_state_keeps_the_permutation_in_secure_mode_too():
    """A checkpoint holds the permutation; a resumed secure-mode stream draws no new one."""
    from noisysgd.train.batching import BatchStream
    n, b, l = 23, 5, 4
    stream = batches("shuffle-once", n=n, batch_size=b, steps=3 * l, rng=SecureRandom())
    head = [next(stream).copy() for _ in range(l + 2)]
    meta, arrays = stream.state()
    assert meta["rng"] is None and arrays["perm"].shape == (n,)
    rest = [x.copy() for x in BatchStream.from_state(meta, arrays, SecureRandom())]
    assert len(rest) == 3 * l - (l + 2)
    for t, batch in enumerate(head + rest):
        np.testing.assert_array_equal(batch, head[t % l])


def test_the_position_of_an_example_is_uniform():
    """Theorem 4.2 averages over a uniform position: over 7,000 seeds, the batch
    holding example 0 (n = 7, b = 2: 3 batches and one dropped example) has the
    law (2, 2, 2, 1)/7.  Pearson χ² with 3 degrees of freedom below 30.7 (its
    1e-6 quantile); the seeds are fixed, so the outcome is too.  The same
    check on the data's own order (example 0 always first) fails."""
    n, b, runs = 7, 2, 7000
    counts = np.zeros(4)
    for seed in range(runs):
        first_epoch = list(batches("shuffle-once", n=n, batch_size=b, steps=3, rng=np.random.default_rng(seed)))
        where = [j for j, batch in enumerate(first_epoch) if 0 in batch.tolist()]
        counts[where[0] if where else 3] += 1
    expected = runs * np.array([2, 2, 2, 1]) / 7

    def chi2(c):
        return float(((c - expected) ** 2 / expected).sum())

    assert chi2(counts) < 30.7
    assert chi2(np.array([runs, 0, 0, 0])) > 30.7  # the check can fail


def test_resume_is_bit_identical_and_restores_the_permutation(tmp_path, monkeypatch):
    X, y = _binary()
    run = _strong()
    kw = dict(feature_clip=2.0, random_state=7)
    reference = train(run, BinaryLogistic(), X, y, **kw)
    spe = run.steps_per_epoch
    stop = 3 * spe + 4  # a crash inside epoch 4, after the checkpoint of step 2·spe
    core = engine.noisy_sgd_core

    class Crash(Exception):
        pass

    def crashing(*args, batches, start_step=0, **kwargs):
        def stream():
            for t, batch in enumerate(batches, start=start_step + 1):
                if t > stop:
                    raise Crash
                yield batch
        return core(*args, batches=stream(), start_step=start_step, **kwargs)

    path = tmp_path / "run.ckpt"
    with monkeypatch.context() as m:
        m.setattr(engine, "noisy_sgd_core", crashing)
        with pytest.raises(Crash):
            train(run, BinaryLogistic(), X, y, checkpointing=Checkpointing(path, every=2), **kw)
    resumed = train(run, BinaryLogistic(), X, y, checkpointing=Checkpointing(path, resume=True), **kw)
    np.testing.assert_array_equal(resumed.coef, reference.coef)
    assert resumed.enforced["checkpoint"]["resumed_at_step"] == 2 * spe
    # and the permutation matters: another seed's permutation gives another model
    other = train(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=8)
    assert not np.array_equal(other.coef, reference.coef)


def test_the_certificate_says_what_the_trainer_did():
    X, y = _binary()
    res = train(_strong(), BinaryLogistic(), X, y, feature_clip=2.0, random_state=1)
    assert res.enforced["batching"] == "shuffle-once"
    text = res.enforced["batches"]
    assert text == describe_batches("shuffle-once")
    assert "drawn once" in text and "reused in the same order every epoch" in text and "secret" in text
    assert "CSPRNG" in describe_batches("shuffle-once", secure=True)
    assert "worst position" in describe_batches("cyclic")
    assert "fresh" in describe_batches("shuffle")


def test_replica_engine_reproduces_train():
    X, y = _binary()
    run = _strong()
    ref = train(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=5)
    one = train_replicas(run, BinaryLogistic(), X, y, replicas=1, feature_clip=2.0, random_state=5)
    # same streams, same batches: equal up to the summation order of floating point
    np.testing.assert_allclose(one.coef[0], ref.coef, rtol=1e-10, atol=1e-12)
    # several replicas: each keeps its own permutation for the whole run (epochs repeat)
    from noisysgd.train.replicas import _VectorBatches
    stream = _VectorBatches(run, 3, np.random.default_rng(0))
    got = [next(stream)[1].copy() for _ in range(2 * run.steps_per_epoch)]
    l = run.steps_per_epoch
    assert all(np.array_equal(got[t], got[t + l]) for t in range(l))
    assert not np.array_equal(got[0][0], got[0][1])


def test_torch_backend_runs_the_same_batches_and_agrees_without_noise():
    torch = pytest.importorskip("torch")
    from noisysgd.train.torch_backend import sgd_torch
    X, y = _binary()
    run = _strong()
    expected = sgd(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=11)
    got = sgd_torch(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=11, device="cpu",
                    dtype=torch.float64)
    # no noise: the same batches give the same iterates (up to summation order)
    np.testing.assert_allclose(got.coef, expected.coef, rtol=1e-11, atol=1e-13)
    other = sgd(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=12)
    assert np.max(np.abs(other.coef - expected.coef)) > 1e-6  # the batches matter


def test_estimator_and_cli_accept_shuffle_once(capsys):
    X, y = _binary(n=200)
    clf = noisysgd.NoisySGDClassifier(epsilon=2.0, delta=1e-5, batching="shuffle-once", batch_size=20,
                                      epochs=5, feature_clip=2.0, random_state=0).fit(X, y)
    cert = clf.privacy_report_["certificate"]
    assert clf.run_.batching == "shuffle-once" and clf.epsilon_ <= 2.0 + 1e-9
    assert cert["trainer_enforced"]["batching"] == "shuffle-once"
    code = main(["epsilon", "--n", "1000", "--batch-size", "50", "--epochs", "20", "--lr", "0.5",
                 "--noise-multiplier", "2", "--lipschitz", "1", "--smoothness", "1",
                 "--strong-convexity", "0.01", "--batching", "shuffle-once", "--delta", "1e-5"])
    out = capsys.readouterr().out
    assert code == 0 and "ye-shokri" in out


# ============================================================== the accountant


def _paper_theorem_4_2(alpha, *, n, b, eta, lam, sigma2, S_g, K, dps=50):
    """Ye & Shokri, Theorem 4.2 (5), transcribed from the paper with mpmath:
    ε ≤ ε₀^{⌊n/2b⌋}·(1 − (1−ηλ)^{2(K−1)(n/b−⌊n/2b⌋)})/(1 − (1−ηλ)^{2(n/b−⌊n/2b⌋)})
        + 1/(α−1)·log Avg_{0≤j₀<n/b} e^{(α−1)ε₀^{n/b−j₀}},
    ε₀ʲ = αηS_g²/(4σ²b²)·(1−ηλ)^{2(j−1)}/Σ_{s=0}^{j−1}(1−ηλ)^{2s}."""
    with mpmath.workdps(dps):
        a, eta, lam, s2, Sg = (mpmath.mpf(v) for v in (alpha, eta, lam, sigma2, S_g))
        c = 1 - eta * lam
        l = n // b
        h = n // (2 * b)

        def e0(j):
            return a * eta * Sg ** 2 / (4 * s2 * b * b) * c ** (2 * (j - 1)) / mpmath.fsum(
                c ** (2 * s) for s in range(j))

        first = e0(h) * (1 - c ** (2 * (K - 1) * (l - h))) / (1 - c ** (2 * (l - h)))
        avg = mpmath.fsum(mpmath.exp((a - 1) * e0(l - j0)) for j0 in range(l)) / l
        return first + mpmath.log(avg) / (a - 1)


@pytest.mark.parametrize("n,b,K", [(50, 2, 1), (50, 2, 7), (50, 2, 40), (60, 4, 25), (1200, 100, 300)])
def test_ye_shokri_on_shuffle_once_is_theorem_4_2(n, b, K):
    """Figure 2(a)'s setting (λ = 1, β = 4, S_g = 4, η = 0.02, σ² = 4) and two others.
    In this library's convention S_g = 2L (replace) and σ = z·L·√(η/2)/b."""
    eta, lam, beta, sigma2, S_g = 0.02, 1.0, 4.0, 4.0, 4.0
    L = S_g / 2
    z = math.sqrt(sigma2) * b / (L * math.sqrt(eta / 2))
    run = Run(n=n, batch_size=b, batching="shuffle-once", steps=K * (n // b), learning_rate=eta,
              noise_multiplier=z, lipschitz=L, smoothness=beta, strong_convexity=lam)
    orders = np.array([1.5, 2.0, 10.0, 15.0, 64.0])
    ours = YeShokri().rdp(run, orders)
    exact = np.array([float(_paper_theorem_4_2(a, n=n, b=b, eta=eta, lam=lam, sigma2=sigma2, S_g=S_g, K=K))
                      for a in orders])
    np.testing.assert_allclose(ours, exact, rtol=1e-10)
    assert (ours >= exact * (1 - 1e-13)).all()  # rounded up, never below
    # one pass over epochs gives the same values
    np.testing.assert_allclose(YeShokri().rdp_over_epochs(run, [K], orders)[0], ours, rtol=1e-12)
    assert set(YeShokri().rdp_with_details(run, orders)[1]["bound"]) == {"Theorem 4.2"}


def _mixture_of_positions(alpha, *, l, E, r, rho, c2, dps=40):
    """(1/(α−1))·log Avg_{j₀} e^{(α−1)ε(j₀)} over the l positions of the per-position
    Theorem 3.3 bounds of a run of E − 1 whole epochs plus r steps, with mpmath."""
    with mpmath.workdps(dps):
        a, rho, c2 = mpmath.mpf(alpha), mpmath.mpf(rho) * alpha, mpmath.mpf(c2)
        h = l // 2

        def e0(j):
            return rho * c2 ** (j - 1) / mpmath.fsum(c2 ** s for s in range(j))

        def first(k):
            return e0(h) * (1 - c2 ** ((k - 1) * (l - h))) / (1 - c2 ** (l - h))

        terms = []
        for j0 in range(l):
            if j0 < r:
                terms.append(first(E) + e0(r - j0))
            elif E > 1:
                terms.append(first(E - 1) + e0(l - j0))
            else:
                terms.append(mpmath.mpf(0))
        return mpmath.log(mpmath.fsum(mpmath.exp((a - 1) * t) for t in terms) / l) / (a - 1)


@pytest.mark.parametrize("E,r", [(1, 3), (2, 1), (5, 7), (30, 9)])
def test_partial_epoch_is_the_lemma_4_1_mixture(E, r):
    n, b = 1030, 100  # l = 10, 30 left over
    run = _strong(epochs=1, n=n, batch_size=b).replace(steps=(E - 1) * 10 + r)
    orders = np.array([1.25, 2.0, 8.0, 32.0])
    ours = YeShokri().rdp(run, orders)
    nu = run.noise_to_sensitivity
    c2 = (1 - run.learning_rate * run.strong_convexity) ** 2
    exact = np.array([float(_mixture_of_positions(a, l=10, E=E, r=r, rho=1 / (2 * nu * nu), c2=c2))
                      for a in orders])
    np.testing.assert_allclose(ours, exact, rtol=1e-10)
    # ... which is the mixture of rdp_per_position's rows
    per = YeShokri().rdp_per_position(run, orders)
    mix = (special.logsumexp((orders - 1) * per, axis=0) - math.log(len(per))) / (orders - 1)
    np.testing.assert_allclose(ours, mix, rtol=1e-10)
    # and below the worst position (the cyclic bound), above the best
    assert (ours <= per.max(axis=0) * (1 + 1e-12)).all() and (ours >= per.min(axis=0)).all()


@settings(max_examples=40, deadline=None)
@given(l=st.integers(2, 60), E=st.integers(1, 50), r=st.integers(1, 60),
       z=st.floats(0.5, 50), eta_lam=st.floats(1e-5, 0.5))
def test_mixture_between_best_and_worst_position_and_continuous_across_epochs(l, E, r, z, eta_lam):
    r = min(r, l)
    alpha = np.array([1.5, 4.0, 32.0])
    rho = alpha / (2 * (z / 2) ** 2)
    lc2 = 2 * math.log1p(-eta_lam)
    v = shuffle_once_rdp(alpha, rho, lc2, batches=l, epochs=E, last_epoch_steps=r)
    assert np.isfinite(v).all() and (v >= 0).all()
    # whole epochs: exactly Theorem 4.2
    np.testing.assert_array_equal(shuffle_once_rdp(alpha, rho, lc2, batches=l, epochs=E),
                                  shuffle_rdp(alpha, rho, lc2, batches=l, epochs=E))
    # at least the bound of E − 1 whole epochs (each position's bound is), at most the
    # worst position of the E-epoch fixed order, Theorem 3.3 with j₀ = l − 1 (the cyclic bound)
    if E > 1:
        before = shuffle_rdp(alpha, rho, lc2, batches=l, epochs=E - 1)
        assert (v >= before * (1 - 1e-12)).all()
    worst = fixed_order_rdp(rho, lc2, batches=l, epochs=E)
    assert (v <= worst * (1 + 1e-12)).all()
    # (not: at most E whole epochs — stopping right after a use can cost more than the
    # steps that follow it, which the E-epoch bound gets to contract)


def test_cyclic_bounds_apply_to_shuffle_once_and_bound_it():
    kw = dict(epochs=40, n=1050, batch_size=50, learning_rate=0.5, noise_multiplier=3.0, lipschitz=1.0,
              smoothness=1.0, strong_convexity=0.01, diameter=2.0)
    once, cyc = Run.from_epochs(batching="shuffle-once", **kw), Run.from_epochs(batching="cyclic", **kw)
    a = noisysgd.epsilon(once, delta=1e-5, include_unsound=True).results
    c = noisysgd.epsilon(cyc, delta=1e-5, include_unsound=True).results
    # worst-position analyses: the same value (a random order is some order)
    for name in ("altschuler-talwar", "shifted-interpolation", "composition", "composition-pld",
                 "ye-shokri-naive"):
        assert a[name].applies and a[name].epsilon == pytest.approx(c[name].epsilon, rel=1e-12), name
    # ye-shokri averages over the secret position: strictly below its worst position
    assert a["ye-shokri"].applies and a["ye-shokri"].epsilon < c["ye-shokri"].epsilon
    assert a["ye-shokri"].details["at_optimal_order"]["bound"] == "Theorem 4.2"
    # the flagged per-epoch reshuffling variant is not for shuffle-once, nor ye-shokri for shuffle
    assert not a["ye-shokri-reshuffle"].applies
    shuf = noisysgd.epsilon(Run.from_epochs(batching="shuffle", **kw), delta=1e-5).results
    assert not shuf["ye-shokri"].applies and "shuffle-once" in shuf["ye-shokri"].reason


def test_add_remove_and_one_batch_per_epoch_are_refused():
    # add/remove: refused by Run itself since issue 24 (the partition changes), for every analysis
    with pytest.raises(ValueError, match=r"Found batching='shuffle-once': adding a row moves every later batch"):
        _strong(adjacency="add-remove")
    one = _strong(batch_size=60)
    assert "at least 2 batches" in ANALYSES["ye-shokri"].why_not(one)


# ============================================================== issue 17 §5: Poisson and contraction


def test_every_analysis_that_applies_to_poisson_needs_no_contraction_or_enforces_it():
    """At b = 2000, n = 50,000, η = 1.95/M a Poisson batch exceeds b(2/η − λ)/M
    in about 12 % of steps (the step is then not a contraction).  No analysis
    that needs a contraction may apply there: only the composition baselines
    (no contraction used).  At η ≤ 2b/(nM) — every batch, even of n examples,
    contracts — altschuler-talwar applies again."""
    lam, M = 1e-5, 1.0 + 1e-5
    kw = dict(epochs=5, n=50_000, batch_size=2000, noise_multiplier=10.0, lipschitz=2.0, smoothness=M,
              strong_convexity=lam, diameter=10.0)
    fast = Run.from_epochs(batching="poisson", learning_rate=1.95 / M, **kw)
    # the claim of the issue: P(|B| > b(2/η − λ)/M) for |B| ~ Binomial(n, b/n)
    from scipy import stats
    cut = math.floor(2000 * (2 / fast.learning_rate - lam) / M)
    assert 0.10 < stats.binom.sf(cut, 50_000, 2000 / 50_000) < 0.14
    applying = {name for name, an in ANALYSES.items() if an.why_not(fast) is None}
    assert applying == {"composition", "composition-pld"}
    limit = 2 * 2000 / (50_000 * M)
    slow = fast.replace(learning_rate=limit)
    assert ANALYSES["altschuler-talwar"].why_not(slow) is None
    assert "2b/(nM)" in ANALYSES["altschuler-talwar"].why_not(slow.replace(learning_rate=limit * 1.001))
