"""Checkpoints: a resumed run is the uninterrupted run, bit for bit; a checkpoint
of another run or other data is refused, naming what differs; the privacy spent
is never reset or counted twice; a process killed at any moment leaves the
previous complete checkpoint or the new complete one.

Interruptions are simulated in-process by a batch stream that raises after a
given step (the engine's own checkpoints are then on disk, exactly as after a
crash), and for real by SIGKILL: a zygote process imports noisysgd once and
forks one child per kill, so twenty kills cost a few seconds.
"""

from __future__ import annotations

import json
import os
import random
import select
import shutil
import stat
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

from noisysgd import NoisySGDClassifier, Run
from noisysgd.cli import main
from noisysgd.train import BinaryLogistic, Softmax, Squared, train
from noisysgd.train import engine
from noisysgd.train.checkpoint import (
    FORMAT,
    Checkpointing,
    SECRET_NOTICE,
    CheckpointError,
    data_fingerprint,
    read_checkpoint,
    write_checkpoint,
)
from noisysgd.private_fit import Bounds, Execution, Privacy, Schedule, fit_private


class Interrupted(Exception):
    """The simulated crash."""


def interrupt_after(monkeypatch, step):
    """Make the engine stop (raise) once ``step`` steps are done — after their
    checkpoint, before the next step — as a crash would."""
    core = engine.noisy_sgd_core

    def crashing(*args, batches, start_step=0, **kwargs):
        def stream():
            for t, batch in enumerate(batches, start=start_step + 1):
                if t > step:
                    raise Interrupted(f"stopped after step {step}")
                yield batch

        return core(*args, batches=stream(), start_step=start_step, **kwargs)

    monkeypatch.setattr(engine, "noisy_sgd_core", crashing)


def _binary(n=103, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)


def _run(batching="cyclic", n=103, **changes):
    kw = dict(epochs=6, n=n, batch_size=n if batching == "full" else 10, batching=batching,
              learning_rate=0.3, lr_decay=0.2, noise_multiplier=1.5, lipschitz=1.0, strong_convexity=0.01,
              diameter=3.0)
    kw.update(changes)
    return Run.from_epochs(**kw)


# --------------------------------------------------------------------------- bit-identical resume


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("batching", ["poisson", "sample", "shuffle", "cyclic", "full"])
def test_resumed_run_is_bit_identical_to_the_uninterrupted_one(tmp_path, monkeypatch, batching, dtype):
    X, y = _binary()
    run = _run(batching)
    kw = dict(feature_clip=2.0, random_state=7, dtype=dtype, record=True)
    reference = train(run, BinaryLogistic(), X, y, **kw)
    path = tmp_path / "run.ckpt"
    spe = run.steps_per_epoch
    stop = 3 * spe + spe // 2 + 1 if spe > 1 else 3  # mid-epoch: the checkpoint is of step 2·spe
    seen = []
    with monkeypatch.context() as m:
        interrupt_after(m, stop)
        with pytest.raises(Interrupted):
            train(run, BinaryLogistic(), X, y, checkpointing=Checkpointing(path, every=2),
                  callback=lambda t, W: seen.append(t), **kw)
    header = read_checkpoint(path).header
    assert header["progress"]["step"] == 2 * spe and not header["progress"]["finished"]
    resumed = train(run, BinaryLogistic(), X, y, checkpointing=Checkpointing(path, resume=True),
                    callback=lambda t, W: seen.append(t), **kw)
    np.testing.assert_array_equal(resumed.coef, reference.coef)
    assert resumed.coef.dtype == dtype
    assert resumed.history == reference.history  # the records of the first session were kept
    assert resumed.steps == run.steps
    # the ledger: steps 1..2·spe, lost work after the checkpoint redone once, nothing reset
    assert seen == list(range(1, stop + 1)) + list(range(2 * spe + 1, run.steps + 1))
    assert resumed.enforced["checkpoint"] == {"sessions": [[0, 2 * spe], [2 * spe, run.steps]],
                                              "resumed_at_step": 2 * spe}
    assert not path.exists()  # deleted once finished
    assert {k: v for k, v in resumed.enforced.items() if k != "checkpoint"} == reference.enforced


@pytest.mark.parametrize("case", ["softmax, explicit start", "gaussian start", "no seed"])
def test_resume_with_matrix_weights_a_drawn_start_and_without_a_seed(tmp_path, monkeypatch, case):
    n, d, k = 60, 4, 3
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(n, d)), rng.integers(0, k, size=n)
    loss, kw = Softmax(k), dict(feature_clip=1.5, random_state=3)
    run = _run("shuffle", n=n, lipschitz=2 * 1.5, lr_decay=0.0)
    if case == "softmax, explicit start":
        kw["init"] = np.full((d + 1, k), 0.1)
    elif case == "gaussian start":
        loss, y = BinaryLogistic(), (X[:, 0] > 0).astype(int)
        run = _run("full", n=n, lr_decay=0.0, initialization="gaussian", smoothness=(1.5**2 + 1) / 4 + 0.01)
        kw["analyses"] = ["chourasia"]
    else:
        kw["random_state"] = None
    path = tmp_path / "c.ckpt"
    with monkeypatch.context() as m:
        interrupt_after(m, run.steps // 2)
        with pytest.raises(Interrupted):
            train(run, loss, X, y, checkpointing=Checkpointing(path), **kw)
    if case == "no seed":  # fresh entropy: the checkpoint's states make the rest deterministic
        shutil.copy(path, tmp_path / "copy.ckpt")
        a = train(run, loss, X, y, checkpointing=Checkpointing(path, resume=True), **kw)
        b = train(run, loss, X, y, checkpointing=Checkpointing(tmp_path / "copy.ckpt", resume=True), **kw)
        np.testing.assert_array_equal(a.coef, b.coef)
        return
    reference = train(run, loss, X, y, **kw)
    resumed = train(run, loss, X, y, checkpointing=Checkpointing(path, resume=True), **kw)
    np.testing.assert_array_equal(resumed.coef, reference.coef)
    assert resumed.enforced["init"] == reference.enforced["init"]


def test_a_finished_checkpoint_gives_back_its_model_and_cannot_be_stretched(tmp_path):
    X, y = _binary()
    run = _run("cyclic")
    path = tmp_path / "done.ckpt"
    first = train(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=1,
                  checkpointing=Checkpointing(path, every=4, keep=True))  # 6 epochs: the end is not a multiple of 4
    header = read_checkpoint(path).header
    assert header["progress"] == {"step": run.steps, "steps": run.steps, "finished": True,
                                  "sessions": [[0, run.steps]]}
    calls = []
    again = train(run, BinaryLogistic(), X, y, feature_clip=2.0,
                  checkpointing=Checkpointing(path, resume=True, keep=True), callback=lambda t, W: calls.append(t))
    np.testing.assert_array_equal(again.coef, first.coef)
    assert calls == [] and again.steps == run.steps  # no step run twice
    longer = run.replace(steps=2 * run.steps)
    with pytest.raises(CheckpointError, match=rf"holds a finished run of {run.steps} steps; it cannot be "
                       rf"resumed into a run of {2 * run.steps} steps. A longer run .* needs its own certificate"):
        train(longer, BinaryLogistic(), X, y, feature_clip=2.0, checkpointing=Checkpointing(path, resume=True))
    train(run, BinaryLogistic(), X, y, feature_clip=2.0,
          checkpointing=Checkpointing(path, resume=True))  # not kept: deleted
    assert not path.exists()


# --------------------------------------------------------------------------- refusals


def _refusals():
    base = _run("cyclic")
    X, y = _binary()
    Xo, yo = _binary(seed=5)
    ok = dict(run=base, loss=BinaryLogistic(), X=X, y=y, feature_clip=2.0, random_state=7)

    def case(match, **changes):
        return pytest.param({**ok, **changes}, match, id=match[:48])

    return [
        case(r"run.steps: 60 in the checkpoint, 70 now.*The number of steps is part of the run",
             run=base.replace(steps=70)),
        case(r"run.noise_multiplier: 1.5 in the checkpoint, 1.6 now", run=base.replace(noise_multiplier=1.6)),
        case(r"run.learning_rate: 0.3 in the checkpoint, 0.2 now", run=base.replace(learning_rate=0.2)),
        case(r"run.batching: 'cyclic' in the checkpoint, 'shuffle' now", run=base.replace(batching="shuffle")),
        case(r"run.diameter: 3.0 in the checkpoint, None now", run=base.replace(diameter=None)),
        case(r"loss: 'BinaryLogistic\(\)' in the checkpoint, 'Squared\(\)' now", loss=Squared(),
             y=y.astype(float), run=base.replace(diameter=3.0)),
        case(r"feature_clip: 2.0 in the checkpoint, 2.5 now", feature_clip=2.5),
        case(r"dtype: 'float64' in the checkpoint, 'float32' now", dtype=np.float32),
        case(r"init: 'zeros' in the checkpoint, \{'array_sha256'", init=np.full(4, 0.01)),
        case(r"analyses: \[\] in the checkpoint, \['composition'\] now", analyses=["composition"]),
        case(r"secure_mode: False in the checkpoint, True now", secure_mode=True, random_state=None),
        case(r"random_state: 7 in the checkpoint, 8 now", random_state=8),
        case(r"other training data.*keyed fingerprint of the features and labels differs", X=Xo, y=yo),
        case(r"other training data.*same shape", y=1 - y),
        case(r"other training data, so it is not resumed: n_features: 3 in the checkpoint, 4 now",
             X=np.hstack([X, np.zeros((len(X), 1))])),
    ]


@pytest.mark.parametrize("changes, match", _refusals())
def test_a_checkpoint_of_another_run_or_other_data_is_refused_naming_the_difference(
        tmp_path, monkeypatch, changes, match):
    X, y = _binary()
    path = tmp_path / "c.ckpt"
    kw = dict(feature_clip=2.0, random_state=7, checkpointing=Checkpointing(path))
    with monkeypatch.context() as m:
        interrupt_after(m, 25)
        with pytest.raises(Interrupted):
            train(_run("cyclic"), BinaryLogistic(), X, y, **kw)
    before = path.read_bytes()
    calls = []
    args = {k: changes[k] for k in ("run", "loss", "X", "y")}
    rest = {k: v for k, v in changes.items() if k not in args}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(CheckpointError, match=match):
            train(*args.values(),
                  checkpointing=Checkpointing(path, resume=True), callback=lambda t, W: calls.append(t), **rest)
    assert calls == [] and path.read_bytes() == before  # nothing ran, nothing written


def test_an_existing_checkpoint_needs_resume_and_bad_options_are_named(tmp_path, monkeypatch):
    X, y = _binary()
    run, path = _run(), tmp_path / "c.ckpt"
    with monkeypatch.context() as m:
        interrupt_after(m, 5)
        with pytest.raises(Interrupted):
            train(run, BinaryLogistic(), X, y, feature_clip=2.0, checkpointing=Checkpointing(path))
    with pytest.raises(CheckpointError, match=r"already exists .* pass resume=True .* or delete it"):
        train(run, BinaryLogistic(), X, y, feature_clip=2.0, checkpointing=Checkpointing(path))
    cases = [
        (dict(checkpointing=Checkpointing(every=2)), "checkpoint_every needs a checkpoint path"),
        (dict(checkpointing=Checkpointing(resume=True)), "resume needs a checkpoint path"),
        (dict(checkpointing=Checkpointing(tmp_path)), "checkpoint must be a file path. Found a directory"),
        (dict(checkpointing=Checkpointing(tmp_path / "no" / "c.ckpt")), "checkpoint must be in an existing directory"),
        (dict(checkpointing=Checkpointing(tmp_path / "d.ckpt", every=0)), "checkpoint_every must be a whole number"),
        (dict(checkpointing=Checkpointing(tmp_path / "d.ckpt", resume=1)), "resume must be True or False"),
        (dict(checkpointing=Checkpointing(tmp_path / "d.ckpt", context="x")), "checkpoint_context must be a dict"),
    ]
    for kwargs, match in cases:
        with pytest.raises(ValueError, match=match):
            train(run, BinaryLogistic(), X, y, feature_clip=2.0, **kwargs)
    assert sorted(os.listdir(tmp_path)) == ["c.ckpt"]


def test_damaged_files_are_refused(tmp_path):
    X, y = _binary()
    run, path = _run(), tmp_path / "c.ckpt"
    train(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=0, checkpointing=Checkpointing(path, keep=True))
    good = path.read_bytes()
    damaged = {
        "truncated": good[: len(good) // 2],
        "a flipped byte": good[:200] + bytes([good[200] ^ 1]) + good[201:],
        "another file": b"PK\x03\x04" + good[4:],
        "empty": b"",
    }
    for content in damaged.values():
        path.write_bytes(content)
        with pytest.raises(CheckpointError, match="is not a usable noisysgd checkpoint"):
            train(run, BinaryLogistic(), X, y, feature_clip=2.0, checkpointing=Checkpointing(path, resume=True))


# --------------------------------------------------------------------------- the file


def test_the_file_says_it_is_secret_and_is_private_to_its_owner(tmp_path):
    X, y = _binary()
    path = tmp_path / "c.ckpt"
    result = train(_run(), BinaryLogistic(), X, y, feature_clip=2.0, random_state=0,
                   checkpointing=Checkpointing(path, keep=True))
    raw = path.read_bytes()
    assert raw.startswith(FORMAT.encode() + b"\n# SECRET - a noisysgd training checkpoint. It holds a HIDDEN ITERATE")
    assert b"delete it once" in raw[:1000]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    ck = read_checkpoint(path)
    assert ck.header["notice"] == SECRET_NOTICE
    np.testing.assert_array_equal(ck.arrays["W"], result.coef)
    assert ck.arrays["batches.perm"].shape == (103,)  # cyclic's one order
    data = ck.header["data"]
    assert data["fingerprint"] == data_fingerprint(X, 2.0 * y - 1.0, bytes.fromhex(data["key"]))
    assert data["fingerprint"] != data_fingerprint(X, 2.0 * y - 1.0, bytes(32))  # keyed
    # another checkpoint of the same data has another key, so another fingerprint (unlinkable)
    other = tmp_path / "d.ckpt"
    train(_run(), BinaryLogistic(), X, y, feature_clip=2.0, random_state=0,
          checkpointing=Checkpointing(other, keep=True))
    assert read_checkpoint(other).header["data"]["fingerprint"] != data["fingerprint"]


def test_write_is_atomic_when_it_fails(tmp_path, monkeypatch):
    path = tmp_path / "c.ckpt"
    write_checkpoint(path, {"x": 1}, {"W": np.arange(3.0)})
    before = path.read_bytes()

    def failing(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OSError, match="disk full"):
        write_checkpoint(path, {"x": 2}, {"W": np.arange(4.0)})
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["c.ckpt"]


# --------------------------------------------------------------------------- SIGKILL


ZYGOTE = textwrap.dedent(r"""
    import json, os, signal, sys, time
    import numpy as np
    from noisysgd import Run
    from noisysgd.train import BinaryLogistic, train
    from noisysgd.train import checkpoint as ckpt

    n = 2000
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3)); y = (X[:, 0] > 0).astype(int)
    run = Run.from_epochs(epochs=int(sys.argv[1]), n=n, batch_size=100, batching="cyclic",
                          learning_rate=0.3, noise_multiplier=1.0, lipschitz=1.0, strong_convexity=0.01)

    def die_on(name, nth, before=None):
        calls = [0]
        real = getattr(ckpt.os, name)
        def patched(*args, **kwargs):
            calls[0] += 1
            if calls[0] == nth:
                if before:
                    before(*args)
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        setattr(ckpt.os, name, patched)

    print("ready", flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                mode = cmd["mode"]
                if mode == "kill in rename":
                    die_on("replace", 3)
                elif mode == "kill in fsync":  # two fsyncs a write (file, directory): the third write's file
                    die_on("fsync", 5)
                elif mode == "kill in write":  # half the bytes in the temporary file, then dead
                    real_fdopen = ckpt.os.fdopen
                    count = [0]
                    class Half:
                        def __init__(self, f): self.f = f
                        def __enter__(self): return self
                        def __exit__(self, *a): return self.f.__exit__(*a)
                        def write(self, data):
                            count[0] += 1
                            if count[0] == 3:
                                self.f.write(data[: len(data) // 2]); self.f.flush()
                                os.kill(os.getpid(), signal.SIGKILL)
                            return self.f.write(data)
                        def __getattr__(self, name): return getattr(self.f, name)
                    ckpt.os.fdopen = lambda *a, **k: Half(real_fdopen(*a, **k))
                train(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=11,
                      checkpointing=ckpt.Checkpointing(cmd["path"], every=1, keep=True))
            finally:
                os._exit(0)
        print("started", flush=True)
        # the kill: by the parent, while the child is alive or at least not reaped (no pid reuse),
        # "delay" seconds after its first checkpoint appeared
        deadline = None
        while True:
            if deadline is None and os.path.exists(cmd["path"]):
                deadline = time.perf_counter() + cmd["delay"]
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if deadline is not None and time.perf_counter() >= deadline:
                os.kill(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                break
            time.sleep(0.0005)
        print(json.dumps({"killed": os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL}),
              flush=True)
""")

KILL_EPOCHS = 120


def _kill_setup():
    n = 2000
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] > 0).astype(int)
    run = Run.from_epochs(epochs=KILL_EPOCHS, n=n, batch_size=100, batching="cyclic", learning_rate=0.3,
                          noise_multiplier=1.0, lipschitz=1.0, strong_convexity=0.01)
    return run, X, y


@pytest.mark.slow
def test_sigkill_at_random_moments_never_leaves_a_broken_checkpoint(tmp_path):
    """20 kills at random moments of a run that checkpoints every epoch (plus
    three at the worst moments: half the temporary file written, before its
    fsync, before the rename): the file is always a complete checkpoint — the
    previous one or the new one, as every read while the child ran also saw —
    and resuming from it gives the bit-identical final model."""
    run, X, y = _kill_setup()
    reference = train(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=11)
    proc = subprocess.Popen([sys.executable, "-c", ZYGOTE, str(KILL_EPOCHS)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    chooser = random.Random(20240611)
    try:
        assert proc.stdout.readline().strip() == "ready"

        def start(path, mode, delay=1e9):
            proc.stdin.write(json.dumps({"path": str(path), "mode": mode, "delay": delay}) + "\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "started"

        def finish():
            return json.loads(proc.stdout.readline())["killed"]

        # two runs to the end, to time one (the first is slower: a cold process)
        durations = []
        for name in ("warm-up.ckpt", "timing.ckpt"):
            t0 = time.perf_counter()
            start(tmp_path / name, "none")
            assert finish() is False
            durations.append(time.perf_counter() - t0)
            assert read_checkpoint(tmp_path / name).header["progress"]["finished"]
        duration = min(durations)

        # kills at random moments until 20 have landed (a run that ends before its kill
        # counts for the checks but not for the 20: the timing varies from machine to machine)
        killed, steps_seen = 0, []
        for i in range(60):
            if killed >= 20:
                break
            path = tmp_path / f"k{i}.ckpt"
            start(path, "none", delay=chooser.uniform(0.0, 0.7 * duration))
            last = -1
            while not select.select([proc.stdout], [], [], 0)[0]:  # until the child is dead or done,
                if path.exists():  # every read while it writes finds a complete checkpoint
                    step = read_checkpoint(path).header["progress"]["step"]
                    assert step >= last and step % run.steps_per_epoch == 0
                    last = step
                time.sleep(0.001)
            killed += finish()
            steps_seen.append(read_checkpoint(path).header["progress"]["step"])  # there is one
            # resume (or start, if killed before the first write): the same final model
            resumed = train(run, BinaryLogistic(), X, y, feature_clip=2.0, random_state=11,
                            checkpointing=Checkpointing(path, resume=True, every=KILL_EPOCHS))
            np.testing.assert_array_equal(resumed.coef, reference.coef)
            assert [f for f in os.listdir(tmp_path) if f.startswith(f".k{i}.ckpt.")] == []  # cleaned up
        assert killed >= 20  # the kills landed while the runs were going
        assert len(set(steps_seen)) >= 5  # at many different moments

        for mode in ("kill in write", "kill in fsync", "kill in rename"):
            path = tmp_path / (mode.replace(" ", "-") + ".ckpt")
            start(path, mode)
            assert finish() is True
            # the third write (after epoch 2) died: the file is the second, complete
            assert read_checkpoint(path).header["progress"]["step"] == run.steps_per_epoch
            leftovers = [f for f in os.listdir(tmp_path) if f.startswith(f".{path.name}.")]
            assert len(leftovers) == 1  # the dead write's temporary file
            resumed = train(run, BinaryLogistic(), X, y, feature_clip=2.0,
                            checkpointing=Checkpointing(path, resume=True, every=KILL_EPOCHS))
            np.testing.assert_array_equal(resumed.coef, reference.coef)
            assert [f for f in os.listdir(tmp_path) if f.startswith(f".{path.name}.")] == []
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()


# --------------------------------------------------------------------------- fit_private, estimators, CLI


def _blobs(n=600, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=n)
    return rng.normal(size=(n, 4)) + 1.5 * y[:, None], y


def test_fit_private_resumes_without_calibrating_again(tmp_path, monkeypatch):
    X, y = _blobs()
    schedule = Schedule(epochs=12, batch_size=50, batching="cyclic", l2=0.01)
    bounds, privacy = Bounds(feature_clip=4.0), Privacy(epsilon=1.0, delta=1e-5)
    reference = fit_private(X, y, BinaryLogistic(), schedule, bounds, privacy, Execution(random_state=3))
    path = tmp_path / "fit.ckpt"
    resume = Execution(random_state=3, checkpoint=path, resume=True)
    with monkeypatch.context() as m:
        interrupt_after(m, 70)
        with pytest.raises(Interrupted):
            fit_private(X, y, BinaryLogistic(), schedule, bounds, privacy, Execution(random_state=3, checkpoint=path))
    with pytest.raises(CheckpointError, match=r"context.epsilon_target: 1.0 in the checkpoint, 2.0 now"):
        fit_private(X, y, BinaryLogistic(), schedule, bounds, Privacy(epsilon=2.0, delta=1e-5), resume)
    with pytest.raises(CheckpointError, match=r"run.steps: 144 in the checkpoint, 240 now"):
        fit_private(X, y, BinaryLogistic(), Schedule(epochs=20, batch_size=50, batching="cyclic", l2=0.01),
                    bounds, privacy, resume)
    import noisysgd.private_fit as private_fit

    def no_calibration(*args, **kwargs):
        raise AssertionError("a resumed fit must not calibrate again")

    monkeypatch.setattr(private_fit, "calibrate", no_calibration)
    resumed = fit_private(X, y, BinaryLogistic(), schedule, bounds, privacy, resume)
    np.testing.assert_array_equal(resumed.result.coef, reference.result.coef)
    assert resumed.noise_multiplier == reference.noise_multiplier
    cert, ref = json.loads(json.dumps(resumed.certificate)), json.loads(json.dumps(reference.certificate))
    ledger = cert["certificate"]["trainer_enforced"].pop("checkpoint")
    assert ledger == {"sessions": [[0, 60], [60, 144]], "resumed_at_step": 60}
    assert cert == ref  # the same certificate, calibration record included
    assert not path.exists()


def test_estimator_checkpoint_resumes_and_is_deleted(tmp_path, monkeypatch):
    X, y = _blobs()
    path = tmp_path / "clf.ckpt"
    kw = dict(epsilon=None, noise_multiplier=4.0, delta=1e-5, feature_clip=4.0, epochs=10, batch_size=50,
              alpha=0.01, random_state=2)
    reference = NoisySGDClassifier(**kw).fit(X, y)
    with monkeypatch.context() as m:
        interrupt_after(m, 55)
        with pytest.raises(Interrupted):
            NoisySGDClassifier(checkpoint=str(path), checkpoint_every=2, **kw).fit(X, y)
    assert read_checkpoint(path).header["progress"]["step"] == 48
    with pytest.raises(CheckpointError, match=r"run.strong_convexity: 0.01 in the checkpoint, 0.02 now"):
        NoisySGDClassifier(checkpoint=str(path), **{**kw, "alpha": 0.02}).fit(X, y)
    clf = NoisySGDClassifier(checkpoint=str(path), **kw).fit(X, y)  # the file exists: resumed
    np.testing.assert_array_equal(clf.coef_, reference.coef_)
    assert clf.privacy_report_["certificate"]["trainer_enforced"]["checkpoint"]["resumed_at_step"] == 48
    assert not path.exists()
    with pytest.raises(ValueError, match="The 'checkpoint_every' parameter .* None when checkpoint is None"):
        NoisySGDClassifier(checkpoint_every=2, **kw).fit(X, y)


def _csv(tmp_path):
    X, y = _blobs()
    path = tmp_path / "data.csv"
    lines = ["a,b,c,d,label"] + [",".join(map(repr, row)) + f",{label}" for row, label in zip(X.tolist(), y)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_cli_checkpoint_resume(tmp_path, monkeypatch, capsys):
    data = _csv(tmp_path)
    ckpt = tmp_path / "run.ckpt"
    common = ["train", str(data), "--target", "label", "--noise-multiplier", "4", "--feature-clip", "4",
              "--epochs", "10", "--batch-size", "50", "--quiet"]
    assert main([*common, "--seed", "5", "--out", str(tmp_path / "ref")]) == 0
    with monkeypatch.context() as m:
        interrupt_after(m, 100)
        with pytest.raises(Interrupted):
            main([*common, "--seed", "5", "--checkpoint", str(ckpt), "--checkpoint-every", "3",
                  "--out", str(tmp_path / "m")])
    assert not (tmp_path / "m").exists() and ckpt.exists()
    capsys.readouterr()
    assert main([*common, "--seed", "5", "--checkpoint", str(ckpt), "--out", str(tmp_path / "m")]) == 2
    assert "--checkpoint: " + repr(str(ckpt)) + " already exists" in capsys.readouterr().err
    assert main([*common, "--checkpoint", str(ckpt), "--resume", "--out", str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out
    assert "resumed from the checkpoint at step 72" in out and "deleted the checkpoint" in out
    assert (tmp_path / "m" / "model.json").read_text() == (tmp_path / "ref" / "model.json").read_text()
    metrics = json.loads((tmp_path / "m" / "metrics.json").read_text())
    assert metrics["checkpoint"] == {"sessions": [[0, 72], [72, 120]], "resumed_at_step": 72}
    assert not ckpt.exists()
    for extra, message in [(["--resume"], "--resume needs --checkpoint PATH"),
                           (["--checkpoint-every", "2"], "--checkpoint-every needs --checkpoint PATH"),
                           (["--checkpoint", str(ckpt), "--checkpoint-every", "0"],
                            "--checkpoint-every must be a whole number of epochs >= 1")]:
        assert main([*common, *extra, "--out", str(tmp_path / "x")]) == 2
        assert message in capsys.readouterr().err
    assert main([*common, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "SECRET: it holds a hidden iterate" in text and "--secure-mode" in text


def _interrupted_after_first_save(monkeypatch, clf, X, y):
    from noisysgd.train import checkpoint as ck

    save = ck.Ledger.save

    def save_then_stop(self, *args, **kwargs):
        save(self, *args, **kwargs)
        raise KeyboardInterrupt("stopped after the first save")

    with monkeypatch.context() as m:
        m.setattr(ck.Ledger, "save", save_then_stop)
        with pytest.raises(KeyboardInterrupt), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf.fit(X, y)


@pytest.mark.parametrize("recorded_scaled", [True, False])
def test_an_auto_range_answer_recorded_by_an_older_version_resumes_with_its_decision(tmp_path, monkeypatch,
                                                                                     recorded_scaled):
    """A checkpoint whose feature_range="auto" answer was recorded by an older version (another rule,
    its own reason, no "scaled" flag) resumes — the recorded answer is reused as it was written,
    nothing added to it, so the resume's comparison of the data's preparation holds — and the rows are
    scaled or kept as that run decided, whatever this version's rule reads from the same answer."""
    import noisysgd.pipeline as pipeline
    from noisysgd.train.checkpoint import read_checkpoint, write_checkpoint

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 4)) * np.array([1.0, 1e4, 300.0, 1e-2])
    y = (X[:, 0] + X[:, 1] / 1e4 > 0).astype(int)
    assert pipeline.scaling_decision(NoisySGDClassifier(epsilon=2.0, classes=[0, 1], random_state=3).fit(X, y)
                                     .privacy_report_["preprocessing"]["parts"][0])[0]  # this version scales them
    reason = ("an older rule's reason: the rows were scaled by the private ranges" if recorded_scaled
              else "an older rule's reason: the rows were kept as given")
    path = tmp_path / "run.ckpt"
    clf = NoisySGDClassifier(epsilon=2.0, classes=[0, 1], random_state=3, checkpoint=str(path), checkpoint_every=1)
    with monkeypatch.context() as m:  # the older version's rule and reason
        m.setattr(pipeline, "scaling_decision", lambda q: (recorded_scaled, reason))
        _interrupted_after_first_save(monkeypatch, clf, X, y)
    ck = read_checkpoint(path)
    pre = ck.header["description"]["context"]["preprocessing"]
    part = next(p for p in pre.get("parts", [pre]) if "feature_range" in p)
    assert part.pop("scaled") is recorded_scaled and part["decision"] == reason  # recorded as before the flag
    write_checkpoint(path, ck.header, ck.arrays)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y)  # resumes (a CheckpointError would say the data were prepared otherwise)
    report = clf.privacy_report_["preprocessing"]
    replayed = next(p for p in report.get("parts", [report]) if "feature_range" in p)
    assert replayed["decision"] == reason and "scaled" not in replayed
    assert (clf.feature_map_.ranges is not None) == recorded_scaled
