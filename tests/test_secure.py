"""secure_mode: the noise, the batches and the start come from the operating
system's CSPRNG.  The draws have the right laws (KS and χ² tests on many
draws, moments, tails), no seed is accepted and two runs never repeat each
other, the engine in secure mode meets every engine test that does not rest
on seeded noise (the tests of test_train_engine.py, run again with secure
randomness), and a secure run's checkpoint resumes: not bit-identically —
the steps after the resume draw fresh noise and batches — but as the same
run: same steps (none lost or repeated), same start point, cyclic's one
order kept, and a final model with the law of an uninterrupted run.

Every statistical test is at level 1e-6 or below.
"""

from __future__ import annotations

import itertools
import math
import os
import pickle
import shutil
import warnings

import numpy as np
import pytest
from scipy import special, stats

import test_train_engine as E
from noisysgd.train.checkpoint import Checkpointing
from noisysgd import NoisySGDClassifier, Run
from noisysgd.cli import main
from noisysgd.train import BinaryLogistic, PrivacyLeakWarning, Squared, batches, engine, run_batches, train
from noisysgd.train.checkpoint import read_checkpoint
from noisysgd.train.engine import clip_thresholds
from noisysgd.rowmaps import augment_rows, row_norms
from noisysgd.train.secure import SecureRandom
from noisysgd.private_fit import Bounds, Execution, Privacy, Schedule, fit_private

LEVEL = 1e-6


# --------------------------------------------------------------------------- the laws of the draws


def test_standard_normal_has_the_normal_law():
    rng = SecureRandom()
    N = 1_000_000
    z = rng.standard_normal(N)
    assert z.dtype == np.float64 and z.shape == (N,)
    assert stats.kstest(z, "norm").pvalue > LEVEL
    edges = special.ndtri(np.linspace(0, 1, 101)[1:-1])  # 100 equiprobable bins
    counts = np.bincount(np.searchsorted(edges, z), minlength=100)
    assert stats.chisquare(counts).pvalue > LEVEL
    # moments, within 6 standard errors: mean, variance, skewness, excess kurtosis
    assert abs(z.mean()) < 6 / math.sqrt(N)
    assert abs(z.var() - 1) < 6 * math.sqrt(2 / N)
    assert abs(stats.skew(z)) < 6 * math.sqrt(6 / N)
    assert abs(stats.kurtosis(z)) < 6 * math.sqrt(24 / N)
    # tails: P(|z| > 4) = 6.3e-5, Poisson counts
    expected = N * 2 * special.ndtr(-4.0)
    assert abs(np.sum(np.abs(z) > 4) - expected) < 6 * math.sqrt(expected)
    # symmetric, and no dependence between consecutive draws
    assert abs(np.mean(z > 0) - 0.5) < 6 * 0.5 / math.sqrt(N)
    assert abs(np.corrcoef(z[1:], z[:-1])[0, 1]) < 6 / math.sqrt(N)


def test_standard_normal_in_float32_and_into_out():
    rng = SecureRandom()
    out = np.empty((400, 500), dtype=np.float32)
    assert rng.standard_normal(dtype=np.float32, out=out) is out
    assert stats.kstest(out.ravel().astype(np.float64), "norm").pvalue > LEVEL
    assert rng.standard_normal((2, 3), dtype=np.float32).dtype == np.float32
    assert isinstance(rng.standard_normal(), np.float64)
    with pytest.raises(ValueError, match="out must have dtype float32"):
        rng.standard_normal(dtype=np.float32, out=np.empty(3))
    with pytest.raises(ValueError, match="dtype must be float32 or float64"):
        rng.standard_normal(3, dtype=np.float16)


def test_uniforms_are_on_the_53_bit_grid_strictly_inside_0_1():
    u = SecureRandom().random(200_000)
    k = u * 2.0**53
    assert np.all(k == np.floor(k)) and k.min() >= 1 and k.max() <= 2.0**53 - 1
    assert stats.kstest(u, "uniform").pvalue > LEVEL


def test_integers_permutations_subsets_and_binomials_are_uniform():
    rng = SecureRandom()
    draws = rng.integers(7, size=70_000)  # 7 is not a power of two: rejection needed
    assert draws.min() == 0 and draws.max() == 6
    assert stats.chisquare(np.bincount(draws, minlength=7)).pvalue > LEVEL
    big = rng.integers(2**63, size=1000)
    assert big.min() >= 0 and big.max() > 2**61  # the whole range is reached
    # permutations of 4: the 24 orders equally often
    index = {p: i for i, p in enumerate(itertools.permutations(range(4)))}
    counts = np.bincount([index[tuple(rng.permutation(4))] for _ in range(12_000)], minlength=24)
    assert stats.chisquare(counts).pvalue > LEVEL
    # 3 of 10 without replacement (the rejection path): the 720 ordered samples equally often
    index = {p: i for i, p in enumerate(itertools.permutations(range(10), 3))}
    samples = [tuple(rng.choice(10, 3, replace=False)) for _ in range(14_400)]
    assert all(len(set(s)) == 3 for s in samples)
    assert stats.chisquare(np.bincount([index[s] for s in samples], minlength=720)).pvalue > LEVEL
    # 7 of 10 (more than half: the permutation path): the 120 subsets equally often
    index = {p: i for i, p in enumerate(itertools.combinations(range(10), 7))}
    subsets = [tuple(sorted(rng.choice(10, 7))) for _ in range(6_000)]
    assert stats.chisquare(np.bincount([index[s] for s in subsets], minlength=120)).pvalue > LEVEL
    # Binomial(50, 0.1) against its probability function (tails pooled)
    k = rng.binomial(50, 0.1, size=40_000)
    observed = np.bincount(np.minimum(k, 12), minlength=13)
    pmf = stats.binom.pmf(np.arange(13), 50, 0.1)
    pmf[12] = stats.binom.sf(11, 50, 0.1)
    assert stats.chisquare(observed, 40_000 * pmf).pvalue > LEVEL
    assert isinstance(rng.binomial(10, 0.5), int)


def test_no_two_generators_and_no_fork_share_random_bytes():
    a, b = SecureRandom(), SecureRandom()
    assert not np.array_equal(a.standard_normal(8), b.standard_normal(8))
    a.standard_normal(4)  # a block is now buffered
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child's next words must not be the parent's
        os.write(write, a.integers(2**63, size=4).tobytes())
        os._exit(0)
    os.waitpid(pid, 0)
    child = np.frombuffer(os.read(read, 32), dtype=np.int64)
    os.close(read)
    os.close(write)
    assert not np.array_equal(child, a.integers(2**63, size=4))
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(a)
    with pytest.raises(ValueError, match="without replacement only"):
        a.choice(5, 2, replace=True)


# --------------------------------------------------------------------------- no seed, no repeat


def _setup():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    run = Run.from_epochs(epochs=3, n=200, batch_size=20, batching="poisson", learning_rate=0.3,
                          noise_multiplier=1.0, lipschitz=1.0, strong_convexity=0.01)
    return run, X, y


def test_two_secure_runs_differ_and_a_seed_is_refused_everywhere(tmp_path, capsys):
    run, X, y = _setup()
    a = train(run, BinaryLogistic(), X, y, feature_clip=2.0, secure_mode=True)
    b = train(run, BinaryLogistic(), X, y, feature_clip=2.0, secure_mode=True)
    assert not np.array_equal(a.coef, b.coef)
    assert a.enforced["secure_mode"] is True
    assert train(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=0).enforced["secure_mode"] is False
    message = "random_state must be None with secure_mode=True"
    for seed in (0, 3, np.random.default_rng(0)):
        with pytest.raises(ValueError, match=message):
            train(run, BinaryLogistic(), X, y, feature_clip=2.0, secure_mode=True, random_state=seed)
    with pytest.raises(ValueError, match="secure_mode must be True or False"):
        train(run, BinaryLogistic(), X, y, feature_clip=2.0, secure_mode="yes")
    with pytest.raises(ValueError, match=message):
        fit_private(X, y, BinaryLogistic(), Schedule(epochs=2, batch_size=20, batching="cyclic"),
                    Bounds(feature_clip=2.0), Privacy(noise_multiplier=1.0),
                    Execution(secure_mode=True, random_state=1))
    with pytest.raises(ValueError, match="The 'random_state' parameter .* None with secure_mode=True"):
        NoisySGDClassifier(secure_mode=True, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="The 'secure_mode' parameter"):
        NoisySGDClassifier(secure_mode=1).fit(X, y)
    clf = NoisySGDClassifier(secure_mode=True, feature_clip=2.0, epochs=5, batch_size=20, delta=1e-5).fit(X, y)
    assert clf.privacy_report_["certificate"]["trainer_enforced"]["secure_mode"] is True
    data = tmp_path / "d.csv"
    data.write_text("a,b,c,label\n" + "".join(f"{r[0]},{r[1]},{r[2]},{t}\n" for r, t in zip(X, y)))
    assert main(["train", str(data), "--target", "label", "--secure-mode", "--seed", "1",
                 "--out", str(tmp_path / "m"), "--quiet"]) == 2
    assert "--seed cannot be combined with --secure-mode" in capsys.readouterr().err
    assert main(["train", str(data), "--target", "label", "--secure-mode", "--epochs", "3", "--batch-size", "20",
                 "--feature-clip", "2", "--out", str(tmp_path / "m"), "--quiet", "--json"]) == 0


def test_bad_input_is_refused_in_secure_mode_before_any_random_byte_is_read(monkeypatch):
    def no_entropy(k):
        raise AssertionError("os.urandom called before every check passed")

    monkeypatch.setattr("noisysgd.train.secure.os.urandom", no_entropy)
    for param in E._bad_calls():
        kwargs, match = param.values
        if "random_state" in match:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("error", PrivacyLeakWarning)
            with pytest.raises(ValueError, match=match):
                train(**kwargs, secure_mode=True)


# --------------------------------------------------------------------------- the engine tests, again


def _secure_train(*args, random_state=None, **kwargs):
    """train() in secure mode; the tests' seeds are dropped (secure mode refuses them)."""
    result = train(*args, secure_mode=True, **kwargs)
    assert result.enforced["secure_mode"] is True
    return result


def _secure_batches(scheme, *, rng, **kwargs):
    return batches(scheme, rng=SecureRandom(), **kwargs)


def _secure_run_batches(run, rng):
    return run_batches(run, SecureRandom())


ENGINE_TESTS = [
    # the engine, through train()
    ("test_noise_has_the_declared_scale", {"dtype": np.float64}),
    ("test_noise_has_the_declared_scale", {"dtype": np.float32}),
    ("test_gaussian_initialization_scale", {}),
    ("test_projection_keeps_every_iterate_in_K", {}),
    ("test_high_privacy_run_stays_near_init_in_expectation", {}),
    ("test_bounds_survive_rounding", {"dtype": np.float32}),
    ("test_bounds_survive_rounding", {"dtype": np.float64}),
    ("test_privacy_leak_warnings_from_train", {}),
    ("test_clipped_softmax_refuses_convex_runs_but_trains_for_composition", {}),
    ("test_smoothness_exactly_M_plus_lambda_is_accepted_and_below_is_refused", {}),
    ("test_analysis_and_init_refusals", {}),
    ("test_squared_loss_without_a_domain_trains_with_the_clip_norm", {}),
    # the batch streams, driven by the CSPRNG
    ("test_shuffle_and_cyclic_partition_each_epoch", {"scheme": "shuffle"}),
    ("test_shuffle_and_cyclic_partition_each_epoch", {"scheme": "cyclic"}),
    ("test_sample_batches_have_exactly_b_distinct_uniform_indices", {}),
    ("test_poisson_batch_sizes_are_binomial", {}),
    ("test_full_batches_and_run_batches", {}),
]


@pytest.mark.parametrize("name, kwargs", ENGINE_TESTS,
                         ids=[f"{n}-{'-'.join(map(str, k.values()))}" for n, k in ENGINE_TESTS])
def test_engine_tests_hold_in_secure_mode(monkeypatch, name, kwargs):
    """Not reused: the tests that compare against the same seeded noise or batches
    (naive loop with the same noise stream, same seed ⇒ same model) and the
    random_state refusals — none can hold without a seed."""
    monkeypatch.setattr(E, "train", _secure_train)
    monkeypatch.setattr(E, "batches", _secure_batches)
    monkeypatch.setattr(E, "run_batches", _secure_run_batches)
    getattr(E, name)(**kwargs)


# --------------------------------------------------------------------------- checkpoints of secure runs


class _Stop(Exception):
    pass


def _spy(monkeypatch, stop=None, seen=None):
    """Record the batches the engine uses; raise after ``stop`` steps (a crash)."""
    core = engine.noisy_sgd_core

    def spying(*args, batches, start_step=0, **kwargs):
        def stream():
            for t, batch in enumerate(batches, start=start_step + 1):
                if stop is not None and t > stop:
                    raise _Stop
                seen.append((t, np.arange(args[1].shape[0])[batch].copy()))
                yield batch

        return core(*args, batches=stream(), start_step=start_step, **kwargs)

    monkeypatch.setattr(engine, "noisy_sgd_core", spying)


def test_a_secure_checkpoint_resumes_the_same_run(tmp_path, monkeypatch):
    """Cyclic batches: the steps continue where the checkpoint stopped (none lost
    or repeated), from its iterate, with its one order; the noise after the
    resume is fresh (two resumes of one checkpoint differ).  The file holds no
    generator state."""
    run, X, y = _setup()
    run = run.replace(batching="cyclic", steps=3 * 10)
    path = tmp_path / "s.ckpt"
    seen, starts = [], []
    with monkeypatch.context() as m:
        _spy(m, stop=15, seen=seen)
        with pytest.raises(_Stop):
            train(run, BinaryLogistic(), X, y, feature_clip=2.0, secure_mode=True, checkpointing=Checkpointing(path))
    ck = read_checkpoint(path)
    assert ck.header["progress"]["step"] == 10
    assert ck.header["rng"]["source"] == "os.urandom" and ck.header["rng"]["noise"] is None
    assert ck.header["rng"]["batches"]["rng"] is None
    order = ck.arrays["batches.perm"]
    shutil.copy(path, tmp_path / "copy.ckpt")
    resumed = []
    for p in (path, tmp_path / "copy.ckpt"):
        later = []
        with monkeypatch.context() as m:
            _spy(m, seen=later)
            first = []
            result = train(run, BinaryLogistic(), X, y, feature_clip=2.0, secure_mode=True,
                           checkpointing=Checkpointing(p, resume=True),
                           callback=lambda t, W: first.append(W.copy()) if t == 11 else None)
        assert [t for t, _ in later] == list(range(11, 31)) and result.steps == 30
        for t, batch in seen[:10] + later:  # one order, every epoch, across the resume
            j = (t - 1) % 10
            np.testing.assert_array_equal(batch, order[j * 20:(j + 1) * 20])
        starts.append(first[0])
        resumed.append(result.coef)
        assert result.enforced["checkpoint"]["sessions"] == [[0, 10], [10, 30]]
    assert not np.array_equal(resumed[0], resumed[1])  # fresh noise after each resume
    # both resumed runs started from the checkpoint's iterate W₁₀: their step 11 is
    # W₁₁ = (1 − ηλ)W₁₀ − η(g(W₁₀) + ξ) on the 11th batch, so the implied noise ξ is N(0, σ²)-sized
    W10, eta, lam, sigma = ck.arrays["W"], 0.3, 0.01, run.noise_multiplier * run.lipschitz / 20
    Xbar, norms = augment_rows(X, 2.0, np.dtype(np.float64), row_norms(X))
    tau = clip_thresholds(run.lipschitz, norms, np.dtype(np.float64))
    batch = order[:20]  # step 11 is the first batch of epoch 2
    D = BinaryLogistic().clipped_derivative(Xbar[batch] @ W10, 2.0 * y[batch] - 1.0, tau[batch])
    g = Xbar[batch].T @ D / 20
    for W11 in starts:
        xi = ((1 - eta * lam) * W10 - eta * g - W11) / eta
        assert np.max(np.abs(xi)) < 6 * sigma
    assert np.max(np.abs(W10)) / eta > 30 * sigma  # a restart from 0 would have been seen


def test_a_resumed_secure_run_has_the_law_of_an_uninterrupted_one(tmp_path, monkeypatch):
    """Zero features (as in test_noise_has_the_declared_scale): the weights are
    pure noise, N(0, (zL/b)²·Σ_t η_t² c_{>t}²) after T steps.  Interrupted after
    step 13 and resumed from the checkpoint at step 8 (Poisson sizes drawn
    ahead in the file), the final weights still have exactly that law: no
    step lost, none counted twice."""
    n, d = 30, 5000
    run = Run(n=n, batch_size=4, batching="poisson", steps=24, learning_rate=0.3, lr_decay=0.4,
              noise_multiplier=2.5, lipschitz=0.7, strong_convexity=0.1)
    path = tmp_path / "z.ckpt"
    args = (run, Squared(), np.zeros((n, d)), np.zeros(n))
    with monkeypatch.context() as m:
        _spy(m, stop=13, seen=[])
        with pytest.raises(_Stop):
            train(*args, feature_clip=1.0, secure_mode=True, checkpointing=Checkpointing(path))
    assert read_checkpoint(path).header["progress"]["step"] == 8
    result = train(*args, feature_clip=1.0, secure_mode=True, checkpointing=Checkpointing(path, resume=True))
    eta = run.step_sizes()
    shrink = np.array([np.prod(1 - eta[t + 1:] * 0.1) for t in range(run.steps)])
    var = (2.5 * 0.7 / 4) ** 2 * np.sum(eta**2 * shrink**2)
    z = result.coef[:d] / math.sqrt(var)
    assert stats.kstest(z, "norm").pvalue > LEVEL
    chi2 = float(np.sum(z * z))
    assert min(stats.chi2.sf(chi2, d), stats.chi2.cdf(chi2, d)) > LEVEL
    # the variance of the 8 steps lost, or of 8 steps counted twice, would be caught
    var_lost = (2.5 * 0.7 / 4) ** 2 * np.sum((eta**2 * shrink**2)[8:])
    assert stats.chi2.cdf(chi2 * var / var_lost, d) < LEVEL or stats.chi2.sf(chi2 * var / var_lost, d) < LEVEL


def test_normal_tails_reach_far_beyond_the_53_bit_grid(monkeypatch):
    """The extreme cells are refined with 53 more bits: the smallest and largest
    words give |z| ≈ 11.9 = −Φ⁻¹(2⁻¹⁰⁷) (not Φ⁻¹(2⁻⁵⁴) ≈ 8.3), symmetrically, and cells next to
    the tails keep their centres."""
    rng = SecureRandom()
    feed = iter([
        np.array([0, (2**53 - 1) << 11, 5 << 11, 2**63], dtype=np.uint64),  # k = 0, max, 5, 2^52
        np.array([0, (2**53 - 1) << 11, 7 << 11], dtype=np.uint64),  # j for the three tail draws
    ])
    monkeypatch.setattr(rng, "_raw", lambda k: next(feed))
    z = rng.standard_normal(4)
    assert z[0] == pytest.approx(special.ndtri(0.5 * 2.0**-106), rel=1e-12) and z[0] < -11.8
    assert z[1] == pytest.approx(-z[0], rel=1e-12)
    assert z[2] == pytest.approx(special.ndtri((5 + 7.5 * 2.0**-53) * 2.0**-53), rel=1e-12)
    assert z[3] == pytest.approx(special.ndtri((2**52 + 0.5) * 2.0**-53), abs=1e-15)
    # every extreme combination of words gives a finite draw (1 − f computed in floats gave inf)
    for k in (0, 2**53 - 1):
        for j in (0, 1, 2**52, 2**53 - 2, 2**53 - 1):
            feed = iter([np.array([k << 11], dtype=np.uint64), np.array([j << 11], dtype=np.uint64)])
            monkeypatch.setattr(rng, "_raw", lambda n: next(feed))
            assert np.isfinite(rng.standard_normal(1)).all()
