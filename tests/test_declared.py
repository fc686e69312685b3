"""The trainers take the frozen declarations (noisysgd.train.declared): Bounds and Execution in place
of their keywords, the same run bit for bit; a value given twice, a field a trainer has no keyword
for, or a Bounds of another run is refused, naming it."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from noisysgd import Run
from noisysgd.train import BinaryLogistic, Bounds, Execution, sgd, train
from noisysgd.train.declared import declared_keywords
from noisysgd.train.replicas import train_replicas


def _data(n=240, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * np.array([1.0, 3.0, 0.5, 2.0, 1.0])
    y = (X[:, 0] - 0.5 * X[:, 1] + rng.standard_normal(n) > 0).astype(int)
    return X, y


def _run(**kw):
    base = dict(n=240, batch_size=24, batching="poisson", steps=60, learning_rate=0.2, noise_multiplier=1.5,
                lipschitz=1.0, diameter=None)
    return Run(**{**base, **kw})


def test_private_fit_keeps_the_names():
    """Bounds and Execution live in the trainers' layer and are private_fit's as they were."""
    from noisysgd import private_fit

    assert private_fit.Bounds is Bounds and private_fit.Execution is Execution


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_train_with_the_objects_is_train_with_the_keywords(dtype):
    X, y = _data()
    run = _run(diameter=6.0)
    a = train(run, BinaryLogistic(), X, y, feature_clip=2.5, intercept_scaling=0.5, random_state=7, dtype=dtype,
              record=True)
    b = train(run, BinaryLogistic(), X, y, bounds=Bounds(feature_clip=2.5, intercept_scaling=0.5, diameter=6.0,
                                                         clip_norm=1.0),
              execution=Execution(random_state=7, dtype=dtype, record=True))
    assert np.array_equal(a.coef, b.coef) and a.coef.dtype == b.coef.dtype
    assert [h["objective"] for h in a.history] == [h["objective"] for h in b.history]


def test_sgd_and_replicas_take_them_too():
    X, y = _data()
    run = _run()
    a = sgd(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=3)
    b = sgd(run, BinaryLogistic(), X, y, bounds=Bounds(feature_clip=2.0), execution=Execution(random_state=3))
    assert np.array_equal(a.coef, b.coef)
    a = train_replicas(run, BinaryLogistic(), X, y, replicas=3, feature_clip=2.0, random_state=5)
    b = train_replicas(run, BinaryLogistic(), X, y, replicas=3, bounds=Bounds(feature_clip=2.0),
                       execution=Execution(random_state=5))
    assert np.array_equal(a.coef, b.coef)


def test_progress_is_the_callback_with_the_runs_steps():
    X, y = _data()
    seen = []
    train(_run(), BinaryLogistic(), X, y, bounds=Bounds(feature_clip=2.0),
          execution=Execution(random_state=0, progress=lambda step, total: seen.append((step, total))))
    assert seen == [(t, 60) for t in range(1, 61)]


def test_checkpoint_fields_are_the_checkpointing(tmp_path):
    X, y = _data()
    path = tmp_path / "run.ckpt"
    a = train(_run(), BinaryLogistic(), X, y, feature_clip=2.0, random_state=4)
    b = train(_run(), BinaryLogistic(), X, y, bounds=Bounds(feature_clip=2.0),
              execution=Execution(random_state=4, checkpoint=str(path), keep_checkpoint=True))
    assert np.array_equal(a.coef, b.coef) and path.exists()


@pytest.mark.parametrize("call, match", [
    (dict(feature_clip=2.0, bounds=Bounds(feature_clip=2.0)), r"feature_clip is given twice.*bounds\.feature_clip"),
    (dict(bounds=Bounds(feature_clip=2.0), random_state=1, execution=Execution(random_state=2)),
     r"random_state is given twice"),
    (dict(bounds=Bounds(feature_clip=2.0, diameter=5.0)), r"bounds\.diameter must describe the run.*run\.diameter=None"),
    (dict(bounds=Bounds(feature_clip=2.0, clip_norm=0.5)), r"bounds\.clip_norm must describe the run.*run\.lipschitz=1\.0"),
    (dict(bounds=Bounds(feature_clip=2.0), execution=Execution(n_rows=10)), r"takes no execution\.n_rows"),
    (dict(bounds=Bounds(feature_clip=2.0), execution=Execution(trainer=train)), r"takes no execution\.trainer"),
    (dict(bounds=dict(feature_clip=2.0)), r"bounds must be a noisysgd\.private_fit\.Bounds"),
    (dict(feature_clip=2.0, execution="fast"), r"execution must be a noisysgd\.private_fit\.Execution"),
])
def test_what_cannot_be_meant_is_refused_by_name(call, match):
    X, y = _data()
    with pytest.raises(ValueError, match=match):
        train(_run(), BinaryLogistic(), X, y, **call)


def test_a_field_the_trainer_has_no_keyword_for_is_refused():
    """train_replicas keeps no trajectory and has no checkpoints: Execution(record=True) or a
    checkpoint is refused, not dropped; an Execution at its defaults is accepted."""
    X, y = _data()
    with pytest.raises(ValueError, match=r"train_replicas takes no record\. Found execution\.record=True"):
        train_replicas(_run(), BinaryLogistic(), X, y, replicas=2, bounds=Bounds(feature_clip=2.0),
                       execution=Execution(record=True))
    with pytest.raises(ValueError, match=r"train_replicas takes no checkpointing"):
        train_replicas(_run(), BinaryLogistic(), X, y, replicas=2, bounds=Bounds(feature_clip=2.0),
                       execution=Execution(checkpoint="x.ckpt"))
    with pytest.raises(ValueError, match=r"train_replicas takes no intercept_scaling"):
        train_replicas(_run(), BinaryLogistic(), X, y, replicas=2, bounds=Bounds(feature_clip=2.0, intercept_scaling=2.0))
    train_replicas(_run(), BinaryLogistic(), X, y, replicas=2, bounds=Bounds(feature_clip=2.0), execution=Execution())


def test_without_a_feature_clip_the_trainer_says_where_to_give_it():
    X, y = _data()
    with pytest.raises(TypeError, match=r"train\(\) needs feature_clip \(a keyword, or bounds=Bounds"):
        train(_run(), BinaryLogistic(), X, y, random_state=0)


@pytest.mark.parametrize("name", ["train", "sgd", "train_replicas", "train_distributed", "train_torch", "sgd_torch"])
def test_every_trainer_says_it_takes_them(name):
    """The six trainers' signatures list bounds and execution; the data-parallel one translates
    them as the others do (its run needs a world of workers: the translation alone is checked)."""
    import importlib

    module = {"train": "noisysgd.train.engine", "sgd": "noisysgd.train.engine",
              "train_replicas": "noisysgd.train.replicas", "train_distributed": "noisysgd.train.distributed",
              "train_torch": "noisysgd.train.torch_backend", "sgd_torch": "noisysgd.train.torch_backend"}[name]
    fn = getattr(importlib.import_module(module), name)
    params = inspect.signature(fn).parameters
    assert {"bounds", "execution"} <= set(params) and params["feature_clip"].default is None
    if name == "train_distributed":
        accepts = {p for p, v in inspect.signature(fn.__wrapped__).parameters.items() if v.kind is v.KEYWORD_ONLY}
        out = declared_keywords(name, accepts, _run(), Bounds(feature_clip=2.0, intercept_scaling=0.5),
                                Execution(random_state=1, secure_mode=True, checkpoint="c.ckpt"), {"rows": None})
        assert out["feature_clip"] == 2.0 and out["intercept_scaling"] == 0.5 and out["secure_mode"] is True
        assert out["random_state"] == 1 and out["checkpointing"].path == "c.ckpt" and out["rows"] is None
        with pytest.raises(ValueError, match="train_distributed takes no record"):
            declared_keywords(name, accepts, _run(), None, Execution(record=True), {})


@pytest.mark.parametrize("trainer", ["train", "train_replicas"])
def test_a_trainers_warning_names_the_callers_line(trainer):
    """takes_declarations adds a frame between a trainer and its caller: the privacy-leak warning
    (a feature clip equal to the data's largest row norm) still points at the caller's line."""
    import warnings

    X, y = _data()
    clip = float(np.max(np.linalg.norm(X, axis=1)))
    call = {"train": lambda: train(_run(), BinaryLogistic(), X, y, feature_clip=clip, random_state=0),
            "train_replicas": lambda: train_replicas(_run(), BinaryLogistic(), X, y, replicas=2, feature_clip=clip,
                                                     random_state=0)}[trainer]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    leaks = [w for w in caught if w.category.__name__ == "PrivacyLeakWarning"]
    assert leaks and all(w.filename == __file__ for w in leaks), [(w.filename, w.lineno) for w in leaks]


def test_a_dtype_numpy_cannot_read_is_not_taken_for_the_default():
    """Execution(dtype=<torch's>) reaches the torch trainer (whose keyword takes it) rather than
    failing in the comparison with Execution's default."""
    class TorchLikeDtype:  # what np.dtype() refuses with a TypeError, as it refuses torch.float32
        pass

    dtype = TorchLikeDtype()
    accepts = {"feature_clip", "dtype", "random_state"}
    out = declared_keywords("train_torch", accepts, _run(), Bounds(feature_clip=1.0), Execution(dtype=dtype), {})
    assert out["dtype"] is dtype
