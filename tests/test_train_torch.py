"""The torch backend runs the numpy engine's algorithm: the same noise-free step
map on the same batches (to rounding), the same batch stream and start for a
given seed, noise of the same law, and the same checks and error messages.

Noise cannot be switched off in a Run (z > 0), and the two engines draw their
noise from different generators, so the comparison is split:

* the noise-free cores (``noisy_sgd_core`` and ``noisy_sgd_core_torch``) on
  identical, materialised batches, for every loss and batching scheme, with
  clipping and the projection active; and ``sgd_torch`` against ``sgd``
  through the whole call (validation, streams, start);
* the batches ``train_torch`` draws are recorded and compared with ``train``'s;
* the noise in law: on a linear-Gaussian problem (squared loss, full batches,
  clipping inactive) the final iterate of both engines is exactly
  N(μ_T, Σ_T), with μ_T and Σ_T known in closed form, so exact one- and
  two-sample tests apply (mean and scale), each at level 1e-5 (six tests:
  a false alarm has probability < 1e-4); a 10% wrong noise multiplier is
  rejected.  On zero features the weights are pure noise: a χ² test of the
  declared scale (Poisson batches, decaying steps, λ).
"""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")

from noisysgd import Run  # noqa: E402
from noisysgd.train import (  # noqa: E402
    BinaryLogistic,
    Huber,
    OneVsRestLogistic,
    PrivacyLeakWarning,
    Softmax,
    Squared,
    augment,
    noisy_sgd_core,
    run_batches,
    sgd,
    torch_backend,
    train,
)
from noisysgd.train import engine as numpy_engine  # noqa: E402
from noisysgd.train.torch_backend import noisy_sgd_core_torch, sgd_torch, train_torch  # noqa: E402

CUDA = torch.cuda.is_available()
LEVEL = 1e-5  # per test; at most six tests per sample: family-wise < 1e-4


def _data(loss, seed, n, d):
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=1.5, size=(n, d))
    if isinstance(loss, BinaryLogistic):
        return X, (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int), None
    if loss.n_classes is not None:
        return X, rng.integers(0, loss.n_classes, size=n), None
    return X, X @ rng.normal(size=d) + 0.5 * rng.normal(size=n), 2.0  # regression, target bound


LOSSES = [BinaryLogistic(), Softmax(3), OneVsRestLogistic(3), Squared(), Huber(0.5)]
SCHEMES = [("poisson", 5), ("poisson", 1), ("sample", 7), ("shuffle", 7), ("cyclic", 7), ("full", 37)]


# --------------------------------------------------------------------------- noise-free map


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("loss", LOSSES, ids=repr)
def test_noise_free_core_matches_numpy_on_identical_batches(loss, dtype):
    """Every batching scheme (Poisson with b = 1 has empty batches), clipped and
    unclipped, decaying steps, λ, projection active."""
    n, d = 37, 4
    X, y, bound = _data(loss, 0, n, d)
    Xbar, norms = augment(X, 2.0, dtype=dtype, return_norms=True)
    Y = loss.encode_labels(y, target_bound=bound)
    Y = Y.astype(dtype) if Y.dtype.kind == "f" else Y
    thresholds = numpy_engine.clip_thresholds(0.4, norms, np.dtype(dtype))
    W0 = np.random.default_rng(1).normal(scale=0.2, size=loss.param_shape(d)).astype(dtype)
    tdt = torch.float64 if dtype == np.float64 else torch.float32
    tol = dict(rtol=1e-11, atol=1e-13) if dtype == np.float64 else dict(rtol=2e-5, atol=2e-6)
    for batching, b in SCHEMES:
        run = Run(n=n, batch_size=b, batching=batching, steps=40, learning_rate=0.5, lr_decay=0.3,
                  noise_multiplier=1.0, lipschitz=0.4, strong_convexity=0.05, diameter=1.0)
        batches = [bt if isinstance(bt, slice) else bt.copy()
                   for bt in run_batches(run, np.random.default_rng(7))]
        results = {}
        for clip, radius in ((True, 0.3), (False, 0.3), (True, None)):
            common = dict(batches=batches, step_sizes=run.step_sizes(), denominator=b, l2=0.05, radius=radius)
            expected, steps, _ = noisy_sgd_core(loss, Xbar, Y, init=W0, thresholds=thresholds if clip else None,
                                                **common)
            got, tsteps = noisy_sgd_core_torch(
                loss, torch.from_numpy(Xbar), torch.from_numpy(Y.astype(np.int64) if Y.dtype.kind == "i" else Y),
                init=torch.from_numpy(W0), thresholds=torch.from_numpy(thresholds) if clip else None, **common)
            assert got.dtype == tdt and tsteps == steps == 40
            np.testing.assert_allclose(got.numpy(), expected, **tol,
                                       err_msg=f"{batching} b={b} clip={clip} radius={radius}")
            results[clip, radius] = expected
        # the clip and the projection were both active
        assert np.max(np.abs(results[True, 0.3] - results[False, 0.3])) > 1e-3, batching
        assert np.max(np.abs(results[True, 0.3] - results[True, None])) > 1e-3, batching


@pytest.mark.parametrize("initialization", ["fixed", "gaussian"])
@pytest.mark.parametrize("loss", LOSSES, ids=repr)
def test_sgd_torch_matches_sgd_through_the_whole_call(loss, initialization):
    """Same random_state: the same batch stream and the same start, drawn or given."""
    n, d = 40, 3
    X, y, bound = _data(loss, 2, n, d)
    run = Run.from_epochs(epochs=3, n=n, batch_size=6, batching="poisson", learning_rate=0.3,
                          noise_multiplier=2.0, lipschitz=0.5, strong_convexity=0.1, diameter=2.0,
                          initialization=initialization)
    for clip in (True, False):
        kw = dict(feature_clip=2.0, target_bound=bound, random_state=11, clip=clip)
        expected = sgd(run, loss, X, y, **kw)
        got = sgd_torch(run, loss, X, y, device="cpu", **kw)
        np.testing.assert_allclose(got.coef, expected.coef, rtol=1e-11, atol=1e-13)
        assert got.enforced["init"] == expected.enforced["init"]
        got32 = sgd_torch(run, loss, X, y, device="cpu", dtype=torch.float32, **kw)
        assert got32.coef.dtype == np.float32
        np.testing.assert_allclose(got32.coef, expected.coef, rtol=1e-4, atol=1e-5)


def test_train_torch_draws_the_batches_of_train(monkeypatch):
    n, d = 50, 3
    X, y, _ = _data(Softmax(3), 3, n, d)
    run = Run.from_epochs(epochs=3, n=n, batch_size=8, batching="shuffle", learning_rate=0.2,
                          noise_multiplier=1.0, lipschitz=1.0)
    seen = {}

    def spy(name):
        def recording(run, rng, rows=None):
            seen[name] = [b.copy() for b in run_batches(run, rng, rows=rows)]
            return iter(seen[name])
        return recording

    monkeypatch.setattr(numpy_engine, "run_batches", spy("numpy"))
    monkeypatch.setattr(torch_backend, "run_batches", spy("torch"))
    train(run, Softmax(3), X, y, feature_clip=2.0, random_state=4)
    train_torch(run, Softmax(3), X, y, feature_clip=2.0, random_state=4, device="cpu")
    assert len(seen["numpy"]) == len(seen["torch"]) == run.steps
    assert all(np.array_equal(a, b) for a, b in zip(seen["numpy"], seen["torch"]))


def test_tensor_inputs_and_the_result():
    n, d = 40, 3
    X, y, _ = _data(BinaryLogistic(), 5, n, d)
    c = BinaryLogistic().constants(feature_clip=2.0, clip_norm=1.0)
    run = Run(n=n, batch_size=8, batching="cyclic", steps=20, learning_rate=0.5, noise_multiplier=2.0,
              lipschitz=1.0, strong_convexity=0.01, smoothness=c.smoothness + 0.01, diameter=4.0)
    W0 = np.array([0.1, -0.2, 0.3, 0.0])
    kw = dict(feature_clip=2.0, random_state=0, analyses=["ye-shokri", "composition"], device="cpu")
    a = train_torch(run, BinaryLogistic(), X, y, init=W0, **kw)
    b = train_torch(run, BinaryLogistic(), torch.from_numpy(X).float(), torch.from_numpy(y), init=torch.from_numpy(W0),
                    **kw)
    np.testing.assert_allclose(b.coef, a.coef, rtol=1e-6, atol=1e-6)  # X given in float32
    reference = train(run, BinaryLogistic(), X, y, init=W0, feature_clip=2.0, random_state=0,
                      analyses=["ye-shokri", "composition"])
    torch_only = {"backend", "device", "torch_version"}
    assert set(a.enforced) == set(reference.enforced) | torch_only
    assert {k: v for k, v in a.enforced.items() if k not in torch_only} == reference.enforced
    assert (a.enforced["backend"], a.enforced["device"]) == ("torch", "cpu")
    assert a.coef.dtype == np.float64 and isinstance(a.coef, np.ndarray) and a.steps == 20
    assert a.predict(X).shape == (n,) and a.run is run
    again = train_torch(run, BinaryLogistic(), X, y, init=W0, **kw)
    np.testing.assert_array_equal(again.coef, a.coef)  # same seed, same noise
    other = train_torch(run, BinaryLogistic(), X, y, init=W0, **{**kw, "random_state": 1})
    assert np.max(np.abs(other.coef - a.coef)) > 1e-3


# --------------------------------------------------------------------------- noise in law


def _linear_gaussian_problem():
    """Squared loss, full batches, clip norm far above any gradient that can
    occur: W_{t+1} = A_t W_t + η_t X̄ᵀy/n − η_t ξ_t, A_t = (1 − η_tλ)I − η_t X̄ᵀX̄/n,
    so W_T ~ N(μ_T, Σ_T) exactly, Σ_{t+1} = A_t Σ_t A_tᵀ + η_t² s² I."""
    n, d = 30, 29
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d)) / math.sqrt(d)  # ‖x‖ ≈ 1 < R: the feature clip is inactive too
    y = rng.normal(size=n)
    run = Run(n=n, batch_size=n, batching="full", steps=20, learning_rate=0.3, lr_decay=0.2,
              noise_multiplier=0.06, lipschitz=100.0, strong_convexity=0.1)
    Xbar = augment(X, 3.0)
    s = run.noise_multiplier * run.lipschitz / n
    p = d + 1
    mu, cov = np.zeros(p), np.zeros((p, p))
    H = Xbar.T @ Xbar / n
    for eta in run.step_sizes():
        A = (1 - eta * run.strong_convexity) * np.eye(p) - eta * H
        mu = A @ mu + eta * Xbar.T @ y / n
        cov = A @ cov @ A.T + (eta * s) ** 2 * np.eye(p)
    return run, X, y, mu, cov


def _whitened(samples, mu, cov):
    vals, vecs = np.linalg.eigh(cov)
    return (samples - mu) @ vecs / np.sqrt(vals)


def _two_sided(cdf_value):
    return 2 * min(cdf_value, 1 - cdf_value)


def _p_values(za, zb):
    """Exact under H0 (both N(0, I)): one-sample mean and scale of each, two-sample mean and scale."""
    N, p = za.shape
    out = {}
    for name, z in (("numpy", za), ("torch", zb)):
        out[f"{name} mean"] = stats.chi2.sf(N * float(z.mean(0) @ z.mean(0)), p)
        out[f"{name} scale"] = _two_sided(stats.chi2.cdf(float(np.sum(z * z)), N * p))
    diff = za.mean(0) - zb.mean(0)
    out["two-sample mean"] = stats.chi2.sf(N / 2 * float(diff @ diff), p)
    ss = [float(np.sum((z - z.mean(0)) ** 2)) for z in (za, zb)]
    df = p * (N - 1)
    out["two-sample scale"] = _two_sided(stats.f.cdf(ss[1] / ss[0], df, df))
    return out


@pytest.mark.slow
def test_noise_agrees_in_law_with_numpy_and_a_ten_percent_error_is_caught():
    run, X, y, mu, cov = _linear_gaussian_problem()
    np.testing.assert_allclose(sgd(run, Squared(), X, y, feature_clip=3.0, clip=True).coef, mu, atol=1e-12)
    N = 200

    def finals(fn, run, seeds):
        return np.array([fn(run, Squared(), X, y, feature_clip=3.0, random_state=s).coef for s in seeds])

    ours = lambda run, *a, **k: train_torch(run, *a, device="cpu", **k)  # noqa: E731
    wa, wb = finals(train, run, range(N)), finals(ours, run, range(10_000, 10_000 + N))
    # gradients stay far below the clip norm (|s − y|·‖x̄‖ ≪ L = 100): the map is linear
    Xbar = augment(X, 3.0)
    largest = np.max(np.abs(np.concatenate([wa, wb]) @ Xbar.T - y)) * np.max(np.linalg.norm(Xbar, axis=1))
    assert largest < run.lipschitz / 10
    za, zb = _whitened(wa, mu, cov), _whitened(wb, mu, cov)
    p_values = _p_values(za, zb)
    assert min(p_values.values()) > LEVEL, p_values
    for factor in (1.1, 1 / 1.1):  # a noise multiplier 10% off is rejected
        zw = _whitened(finals(ours, run.replace(noise_multiplier=factor * run.noise_multiplier),
                              range(20_000, 20_000 + N)), mu, cov)
        wrong = _p_values(za, zw)
        assert wrong["two-sample scale"] < LEVEL and wrong["torch scale"] < LEVEL, wrong


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_noise_has_the_declared_scale(dtype):
    """Zero features and labels: the weights (not the bias) never get a gradient,
    W_j = −Σ_t η_t·c_{>t}·ξ_t,j with c_{>t} = Π_{s>t}(1 − η_s λ), i.i.d.
    N(0, (zL/b)²·Σ_t η_t² c_{>t}²) — b the fixed denominator under Poisson."""
    n, d = 30, 5000
    run = Run(n=n, batch_size=4, batching="poisson", steps=15, learning_rate=0.3, lr_decay=0.4,
              noise_multiplier=2.5, lipschitz=0.7, strong_convexity=0.1)
    result = train_torch(run, Squared(), np.zeros((n, d)), np.zeros(n), feature_clip=1.0, random_state=2,
                         dtype=dtype, device="cpu")
    eta = run.step_sizes()
    shrink = np.array([np.prod(1 - eta[t + 1:] * 0.1) for t in range(run.steps)])
    var = (2.5 * 0.7 / 4) ** 2 * np.sum(eta**2 * shrink**2)
    z = result.coef[:d].astype(float) / math.sqrt(var)
    assert stats.kstest(z, "norm").pvalue > 1e-6
    chi2 = float(np.sum(z * z))
    assert _two_sided(stats.chi2.cdf(chi2, d)) > 1e-6
    assert _two_sided(stats.chi2.cdf(chi2 / 1.1**2, d)) < 1e-7  # 10% off would be caught
    assert abs(float(z.mean())) * math.sqrt(d) < 5  # zero mean
    assert abs(np.corrcoef(z[:-1], z[1:])[0, 1]) * math.sqrt(d) < 5  # coordinates independent


# --------------------------------------------------------------------------- validation


def _numpy_bad_calls():
    from test_train_engine import _bad_calls

    return [case for case in _bad_calls() if not {"callback", "record"} & set(case.values[0])]


@pytest.mark.parametrize("kwargs, match", _numpy_bad_calls())
def test_the_same_errors_as_numpy(kwargs, match):
    messages = []
    for fn in (train, train_torch):
        gen = np.random.default_rng(123)
        state = gen.bit_generator.state
        with warnings.catch_warnings():
            warnings.simplefilter("error", PrivacyLeakWarning)
            with pytest.raises(ValueError, match=match) as err:
                fn(**{"random_state": gen, **kwargs})
        assert gen.bit_generator.state == state and gen.bit_generator.seed_seq.n_children_spawned == 0
        messages.append(str(err.value))
    assert messages[0] == messages[1]


def _ok_call():
    n, d = 20, 2
    X, y, _ = _data(BinaryLogistic(), 6, n, d)
    run = Run(n=n, batch_size=5, batching="sample", steps=3, learning_rate=0.1, noise_multiplier=1.0,
              lipschitz=1.0)
    return dict(run=run, loss=BinaryLogistic(), X=X, y=y, feature_clip=2.0)


class _MyLogistic(BinaryLogistic):
    pass


@pytest.mark.parametrize("changes, match", [
    ({"dtype": torch.float16}, r"dtype must be float32 or float64. Found torch.float16"),
    ({"dtype": torch.int64}, r"dtype must be float32 or float64"),
    ({"device": "tpu"}, r"device must be None, 'cpu', 'cuda'"),
    ({"device": "meta"}, r"device must be a CPU or CUDA device"),
    ({"loss": _MyLogistic()}, r"no torch derivative for its class"),
    pytest.param({"device": "cuda"}, "CUDA, which is not available",
                 marks=pytest.mark.skipif(CUDA, reason="CUDA is available")),
])
def test_backend_specific_errors(changes, match):
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    with pytest.raises(ValueError, match=match):
        train_torch(**{**_ok_call(), "random_state": gen, **changes})
    assert gen.bit_generator.state == state
    with pytest.raises(ValueError, match="clip must be True or False"):
        sgd_torch(**_ok_call(), clip=1)


def test_the_errors_of_train_come_first():
    """A bad argument numpy checks wins over a bad device: the same message as train."""
    with pytest.raises(ValueError, match="feature_clip"):
        train_torch(**{**_ok_call(), "feature_clip": -1.0, "device": "tpu"})


@pytest.mark.slow
def test_missing_torch_says_how_to_install_it():
    code = (
        "import sys\n"
        "class NoTorch:\n"  # a finder that refuses torch, as when it is not installed
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch' or name.startswith('torch.'):\n"
        "            raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n"
        "sys.meta_path.insert(0, NoTorch())\n"
        "import numpy as np, noisysgd\n"
        "from noisysgd.train.torch_backend import train_torch\n"  # importable without torch
        "run = noisysgd.Run(n=4, batch_size=2, batching='sample', steps=1, learning_rate=0.1,\n"
        "                   noise_multiplier=1.0, lipschitz=1.0)\n"
        "try:\n"
        "    train_torch(run, noisysgd.train.Squared(), np.zeros((4, 1)), np.zeros(4), feature_clip=1.0)\n"
        "except ImportError as e:\n"
        "    print('ImportError:', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "pip install 'noisysgd[torch]'" in out.stdout, out.stdout


# --------------------------------------------------------------------------- CUDA


@pytest.mark.skipif(not CUDA, reason="no CUDA device")
def test_cuda_matches_cpu():
    n, d, k = 300, 6, 4
    X, y, _ = _data(Softmax(k), 8, n, d)
    run = Run.from_epochs(epochs=3, n=n, batch_size=16, batching="poisson", learning_rate=0.3,
                          noise_multiplier=1.0, lipschitz=0.5, strong_convexity=0.01, diameter=2.0)
    kw = dict(feature_clip=2.0, random_state=3, clip=True)
    np.testing.assert_allclose(sgd_torch(run, Softmax(k), X, y, device="cuda", **kw).coef,
                               sgd(run, Softmax(k), X, y, **kw).coef, rtol=1e-9, atol=1e-11)
    result = train_torch(run, Softmax(k), X, y, feature_clip=2.0, random_state=3, device="cuda")
    assert result.enforced["device"].startswith("cuda") and np.all(np.isfinite(result.coef))
    zeros = train_torch(run.replace(strong_convexity=0.0, diameter=None), Squared(), np.zeros((n, 2000)),
                        np.zeros(n), feature_clip=1.0, random_state=1, device="cuda", dtype=torch.float32)
    var = (1.0 * 0.5 / 16) ** 2 * 0.3**2 * run.steps
    z = zeros.coef[:2000].astype(float) / math.sqrt(var)
    assert _two_sided(stats.chi2.cdf(float(np.sum(z * z)), 2000)) > 1e-6


@pytest.mark.parametrize("xdt, dt", [(np.float64, np.float64), (np.float64, np.float32), (np.float32, np.float32),
                                     (np.float32, np.float64)])
@pytest.mark.parametrize("block", [pytest.param(1, marks=pytest.mark.slow), 3, 64])
def test_the_torch_rows_are_built_on_the_device_as_the_numpy_engine_builds_them(xdt, dt, block, monkeypatch):
    """X̄ written into the device tensor a block of rows at a time equals rowmaps.augment_rows's X̄ bit
    for bit (the float64 scaling rounded once to the training dtype, the bias column), whatever the
    block size, and the host allocates one block of it, not X̄ (issue 28 §4)."""
    import tracemalloc

    from noisysgd.train import rows as rows_module
    from noisysgd.rowmaps import augment_rows, row_norms

    rng = np.random.default_rng(block)
    X = (rng.normal(size=(200, 7)) * rng.uniform(0.1, 3.0, size=(200, 1))).astype(xdt)
    monkeypatch.setattr(rows_module, "block_rows", lambda d: block)
    monkeypatch.setattr(torch_backend, "block_rows", lambda d: block)
    want, want_norms = augment_rows(X, 1.3, np.dtype(dt), bias=0.7)
    got, norms = torch_backend._augment_on(torch, X, 1.3, np.dtype(dt), "cpu", bias=0.7)
    assert got.dtype == torch.from_numpy(want).dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(norms, want_norms)
    # written out from the definition (the same row norms given): x_i·min(1, R/‖x_i‖) in float64,
    # rounded once to the training dtype, then the bias; ‖x̄_i‖ = √(min(‖x_i‖, R)² + s²)
    r = row_norms(X)
    formula = np.hstack([(X.astype(np.float64) * np.minimum(1.0, 1.3 / r)[:, None]).astype(dt),
                         np.full((X.shape[0], 1), 0.7, dtype=dt)])
    got, norms = torch_backend._augment_on(torch, X, 1.3, np.dtype(dt), "cpu", r, bias=0.7)
    np.testing.assert_array_equal(got.numpy(), formula)
    np.testing.assert_array_equal(norms, np.sqrt(np.minimum(r, 1.3) ** 2 + 0.7 ** 2))
    big = rng.normal(size=(20000, 50))
    norms = row_norms(big)
    tracemalloc.start()
    try:
        torch_backend._augment_on(torch, big, 1.0, np.dtype(np.float64), "cpu", norms)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 0.1 * big.nbytes  # numpy's blocks and vectors of n; the tensor is torch's
