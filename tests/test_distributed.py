"""Data-parallel Noisy-SGD (noisysgd.train.distributed) against the single-process engine.

The main test: with the same seed, 1, 2 and 3 gloo processes on 127.0.0.1
give the model noisysgd.train.train gives in one process, for every batching.
The batches, the start and the noise draws are identical (same streams); only
the floating-point rounding differs — the batch sum is added in another order
(per rank, then across ranks) and the per-example derivatives come from
torch's kernels rather than numpy's.  Every run here has η ≤ 2/(M + λ), so a
step is non-expansive (and so is the projection): per-step rounding
differences of order b·ε·L ≈ 10·2.2e-16·2.3 ≈ 5e-15 add up at most linearly
over the ≤ 40 steps, ≲ 2e-13.  The tolerance 1e-9 leaves four orders of
margin and is still ten orders below the noise std (z·L/b ≈ 0.1): a single
different batch or noise draw would show up as a difference ~0.01-0.1.

Spawning is slow (each process imports torch), so each spawned group runs
many checks and writes what it saw to files the test reads back.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

pytest.importorskip("torch")

from noisysgd.train.distributed import (  # noqa: E402
    _ranges,
    _tiling_error,
    launch_local,
    local_rows,
    train_distributed,
)
from distributed_workers import (  # noqa: E402
    _oserror_worker,
    _threads_worker,
    KILL_AT,
    KILL_STEPS,
    TOL,
    _cases,
    _data,
    _equality_worker,
    _reference,
    _resume_worker,
)

def test_cases_are_non_expansive():
    """The tolerance argument needs η ≤ 2/(M + λ) in every case."""
    for name, run, *_ in _cases():
        assert run.max_learning_rate <= 2.0 / run.smoothness, name


def test_one_process_equals_train():
    """Without torch.distributed initialised: one process, the same model as train()."""
    X, y_bin, y_cls, y_reg = _data()
    ys = {"bin": y_bin, "cls": y_cls, "reg": y_reg}
    ref = _reference()
    for name, run, loss, key, kw in _cases():
        res = train_distributed(run, loss, X, ys[key], feature_clip=2.0, random_state=11, **kw)
        assert res.enforced["world_size"] == 1
        np.testing.assert_allclose(res.coef, ref[name], rtol=0, atol=TOL, err_msg=name)
        # another seed: another model (the comparison can fail)
        other = train_distributed(run, loss, X, ys[key], feature_clip=2.0, random_state=12, **kw).coef
        assert np.max(np.abs(other - ref[name])) > 1e-3, name


@pytest.mark.slow
@pytest.mark.parametrize("world,layout", [(2, "blocks"), (3, "interleaved")])
def test_k_processes_equal_train(tmp_path, world, layout):
    """Equality with train() on K processes; then (one spawn serves both: spawning is slow) the
    last rank dies in the middle of a long run and every other rank must stop with the error."""
    t0 = time.monotonic()
    kill = world == 2
    codes = launch_local(_equality_worker, world, (str(tmp_path), layout, kill), timeout=20, grace=40)
    assert time.monotonic() - t0 < 120
    ref = _reference()
    coefs = [np.load(tmp_path / f"coef{r}.npz") for r in range(world)]
    infos = [json.loads((tmp_path / f"info{r}.json").read_text()) for r in range(world)]
    for name, run, *_ in _cases():
        for r in range(world):
            assert np.array_equal(coefs[r][name], coefs[0][name]), (name, r)  # bitwise, every rank
            assert infos[r]["seen"][name] == {"steps": run.steps, "world": world}
        np.testing.assert_allclose(coefs[0][name], ref[name], rtol=0, atol=TOL, err_msg=name)
    for extra in ("secure", "no-seed"):  # fresh randomness: same on every rank, not the seeded model
        assert all(np.array_equal(coefs[r][extra], coefs[0][extra]) for r in range(world))
        assert np.max(np.abs(coefs[0][extra] - ref["logistic-poisson"])) > 1e-3
    for r in range(world):
        errors = infos[r]["errors"]
        assert "ranks disagree on the job" in errors["seed"] and "random_state" in errors["seed"]
        assert "must tile" in errors["overlap"] and "held twice" in errors["overlap"]
        last = world - 1
        if r == last:
            assert errors["nan-on-last-rank"].startswith("X must be finite")
        else:
            assert errors["nan-on-last-rank"].startswith(f"rank {last} refused the job: X must be finite")
        assert "differs from rank 0 in run" in errors["run"]
    if not kill:
        assert codes == [0] * world
        return
    # the killed rank: it died (17); every other rank stopped by itself with the error (1, not terminated)
    assert codes == [1] * (world - 1) + [17]
    for r in range(world - 1):
        seen = json.loads((tmp_path / f"killed{r}.json").read_text())
        assert seen["message"].startswith(f"noisysgd distributed: rank {r}: the gradient all_reduce failed at step ")
        assert "\n" not in seen["message"]
        assert seen["seconds"] < seen["died_after"] + 25.0  # within the collective timeout (20 s)
    # the last checkpoint (rank 0's) is intact, mid-run, and resumes bit-identically on 2 new processes
    from noisysgd.train.checkpoint import read_checkpoint

    progress = read_checkpoint(tmp_path / "kill.ckpt").header["progress"]
    assert KILL_AT <= progress["step"] < KILL_STEPS and not progress["finished"]
    assert launch_local(_resume_worker, world, (str(tmp_path),), timeout=20) == [0] * world
    out = [np.load(tmp_path / f"resumed{r}.npz") for r in range(world)]
    for r in range(world):
        assert np.array_equal(out[r]["resumed"], out[r]["uninterrupted"])  # bit for bit
    assert out[0]["resumed_at"] == progress["step"]
    assert not (tmp_path / "kill.ckpt").exists()  # deleted once the run finished


def test_rows_validation():
    assert local_rows(None, 4, 10).tolist() == [0, 1, 2, 3]
    assert local_rows(6, 4, 10).tolist() == [6, 7, 8, 9]
    with pytest.raises(ValueError, match=r"rows must be an offset .* Found 7"):
        local_rows(7, 4, 10)
    with pytest.raises(ValueError, match="rows must be distinct"):
        local_rows(np.array([1, 1, 2]), 3, 10)
    with pytest.raises(ValueError, match=r"rows must lie in 0..run.n − 1 = 9"):
        local_rows(np.array([1, 10]), 2, 10)
    with pytest.raises(ValueError, match="one global index per row of X"):
        local_rows(np.array([1, 2]), 3, 10)
    assert _ranges(np.array([0, 1, 2, 5, 6, 9])) == [(0, 3), (5, 7), (9, 10)]
    assert _tiling_error([[(0, 5)], [(5, 10)]], 10) is None
    assert "rows 5..6 are held by no rank" in _tiling_error([[(0, 5)], [(7, 10)]], 10)
    assert "held twice" in _tiling_error([[(0, 6)], [(5, 10)]], 10)
    assert "rows 8..9 are held by no rank" in _tiling_error([[(0, 4)], [(4, 8)]], 10)


def test_single_process_refuses_a_partial_shard():
    X, y_bin, _, _ = _data()
    name, run, loss, key, kw = _cases()[0]
    with pytest.raises(ValueError, match=r"must tile 0..run.n − 1 = 49 exactly: rows 40..49 are held by no rank"):
        train_distributed(run, loss, X[:40], y_bin[:40], feature_clip=2.0, random_state=1)
    with pytest.raises(ValueError, match="random_state must be None or a non-negative int"):
        train_distributed(run, loss, X, y_bin, feature_clip=2.0, random_state=np.random.default_rng(0))


# --------------------------------------------------------------------------- the command line


def _cli(*argv, env=None, cwd):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "noisysgd", "train", *argv], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, **(env or {})}, timeout=240)


def _shards(tmp_path, n=90, parts=3):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(n, 4))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=n) > 0, "yes", "no")  # text labels: classes agreed across ranks
    d = tmp_path / "shards"
    d.mkdir()
    cuts = [0, 20, 55, n]
    for i in range(parts):
        np.savez(d / f"part{i}.npz", X=X[cuts[i]:cuts[i + 1]], y=y[cuts[i]:cuts[i + 1]])
    np.savez(tmp_path / "all.npz", X=X, y=y)
    return d


COMMON = ("--target", "y", "--seed", "5", "--epochs", "3", "--batch-size", "10", "--batching", "shuffle",
          "--noise-multiplier", "3", "--quiet", "--json")


def _compare_outputs(single, multi, workers):
    a = json.loads((single / "model.json").read_text())
    b = json.loads((multi / "model.json").read_text())
    assert a["classes"] == b["classes"] == ["no", "yes"]
    np.testing.assert_allclose(b["coef"], a["coef"], rtol=0, atol=TOL)
    ca = json.loads((single / "certificate.json").read_text())
    cb = json.loads((multi / "certificate.json").read_text())
    ea, eb = ca["certificate"].pop("trainer_enforced"), cb["certificate"].pop("trainer_enforced")
    assert ca == cb  # run, ε, analyses, guarantee, assumptions, data: the accountant sees the same run
    assert set(ea) <= set(eb) and all(eb[k] == ea[k] for k in ea), [k for k in ea if eb.get(k) != ea[k]]
    assert eb["world_size"] == workers and eb["backend"] == "torch.distributed"
    ma = json.loads((single / "metrics.json").read_text())
    mb = json.loads((multi / "metrics.json").read_text())
    assert mb["workers"] == workers and ma["n"] == mb["n"] == 90
    assert ma["epsilon"] == mb["epsilon"]
    assert ma["not_private"]["train_accuracy"] == mb["not_private"]["train_accuracy"]


def _main(*argv):
    from noisysgd.cli import main

    return main(["train", *argv])


@pytest.mark.slow
def test_cli_workers_on_shards_equals_one_process(tmp_path, monkeypatch, capsys):
    """The data-parallel engine, reached the way --engine auto reaches it: this process starts the
    run itself (writing the checkpoint's first state); after two steps the workers could pay, so
    it starts them (waiting here until they have joined: the run is short), they measure the
    collective, it chooses them, removes the checkpoint it began and tells them to train; they
    train the single-process run."""
    import noisysgd.cli.train_workers as tw

    shards = _shards(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert _main("all.npz", *COMMON, "--out", "one") == 0
    capsys.readouterr()
    monkeypatch.setattr(tw, "_PROBE_STEPS", 1)
    monkeypatch.setattr(tw, "_PROBE_S", 0.0)
    seen = []

    def workers(**numbers):
        seen.append(numbers)
        return tw.EngineChoice("data-parallel", numbers["workers"], "chosen by the test")

    monkeypatch.setattr(tw, "choose_engine", workers)
    ready = tw._Speculation.ready

    def joined(self):
        while not ready(self) and not self.job.failed():
            time.sleep(0.05)
        return self.joined

    monkeypatch.setattr(tw._Speculation, "ready", joined)
    assert _main(str(shards), *COMMON, "--workers", "2", "--checkpoint", "run.ckpt", "--out", "two") == 0
    assert seen[0]["done"] == 2 and all(s["workers"] == 2 and s["steps"] > s["done"] >= 2 for s in seen)
    assert "noisysgd train: engine: 2 data-parallel workers: chosen by the test" in capsys.readouterr().err
    _compare_outputs(tmp_path / "one", tmp_path / "two", 2)
    assert not (tmp_path / "run.ckpt").exists()  # written by rank 0, deleted once the outputs were
    metrics = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert metrics["checkpoint"] == {"sessions": [[0, metrics["steps"]]], "resumed_at_step": None}
    assert metrics["engine"] == {"chosen": "data-parallel", "workers": 2, "why": "chosen by the test"}


@pytest.mark.slow
def test_cli_under_torchrun(tmp_path):
    import shutil
    import subprocess
    import sys

    torchrun = shutil.which("torchrun") or os.path.join(os.path.dirname(sys.executable), "torchrun")
    if not os.path.exists(torchrun):
        pytest.skip("torchrun not installed")
    shards = _shards(tmp_path)
    one = _cli("all.npz", *COMMON, "--out", "one", cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    res = subprocess.run([torchrun, "--standalone", "--nproc-per-node", "2", "-m", "noisysgd", "train",
                          str(shards), *COMMON, "--out", "two"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=240)
    assert res.returncode == 0, res.stderr
    _compare_outputs(tmp_path / "one", tmp_path / "two", 2)


def test_cli_refusals_are_one_line(tmp_path, monkeypatch, capsys):
    shards = _shards(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert _main(str(shards), *COMMON, "--workers", "4", "--out", "o") == 2
    assert capsys.readouterr().err.strip() == (
        "noisysgd train: error: data: 3 shard(s) for 4 workers; every worker needs at least one shard (split "
        "the data into more files, or use fewer workers).")
    (tmp_path / "c.ckpt").write_bytes(b"x")
    assert _main("all.npz", *COMMON, "--workers", "2", "--checkpoint", "c.ckpt", "--out", "o") == 2
    err = capsys.readouterr().err
    assert "already exists" in err and len(err.strip().splitlines()) == 1
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert _main("all.npz", *COMMON, "--out", "o") == 2
    assert "MASTER_ADDR" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_memory_mapped_features_give_the_same_model(tmp_path):
    """X memory-mapped from a .npy file: rows are read and augmented per batch (X̄ never formed
    whole), with augment_rows's arithmetic, so the model is bit-identical to the in-memory one."""
    X, y_bin, y_cls, y_reg = _data()
    ys = {"bin": y_bin, "cls": y_cls, "reg": y_reg}
    np.save(tmp_path / "X.npy", X)
    Xm = np.load(tmp_path / "X.npy", mmap_mode="r")
    assert isinstance(Xm, np.memmap)
    for name, run, loss, key, kw in _cases():
        a = train_distributed(run, loss, X, ys[key], feature_clip=2.0, random_state=11, **kw).coef
        b = train_distributed(run, loss, Xm, ys[key], feature_clip=2.0, random_state=11, **kw).coef
        assert np.array_equal(a, b), name


@pytest.mark.slow
def test_local_workers_start_with_one_blas_thread_each(tmp_path, monkeypatch):
    """Issue 28 §2: each spawned worker starts with the thread limits in its environment, so
    its BLAS pool is one thread wide (before, the limit was set after numpy was imported and
    two workers on two cores each ran a machine-wide pool); the parent's environment is
    left as it was, and a limit the user set is kept."""
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(v, raising=False)
    assert launch_local(_threads_worker, 2, (str(tmp_path),), timeout=20) == [0, 0]
    for rank in range(2):
        got = json.loads((tmp_path / f"threads{rank}.json").read_text())
        assert got["env"] == {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        assert all(t == 1 for t in got["blas"])
    assert "OMP_NUM_THREADS" not in os.environ and "OPENBLAS_NUM_THREADS" not in os.environ
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    assert launch_local(_threads_worker, 1, (str(tmp_path),), timeout=20) == [0]
    assert json.loads((tmp_path / "threads0.json").read_text())["env"]["OPENBLAS_NUM_THREADS"] == "2"


@pytest.mark.slow
def test_a_worker_refused_by_the_machine_prints_one_line_not_a_traceback(capfd):
    """Issue 28 §6: an OSError in a spawned worker (X not mappable under `prlimit --as`) is one
    error line on stderr and exit code 1, as the single-process command prints it."""
    assert launch_local(_oserror_worker, 1, (), timeout=20) == [1]
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == ["noisysgd: error: data: X of big.npz could not be memory-mapped (Cannot allocate memory): "
                     "raise the process's address-space limit"]


# --------------------------------------------------------------------------- which engine --workers K runs


def test_choose_engine_from_the_measured_numbers():
    """--engine auto's choice on synthetic numbers: small steps with a dear collective train in one
    process, a full batch on many rows goes to the workers; the collective is measured only when
    the answer depends on it."""
    from noisysgd.cli.train_workers import choose_engine, predicted_seconds

    def never():
        raise AssertionError("measured although free collectives could not pay for the start-up")

    # many small Poisson steps (40 µs each), 3 s to start each worker: one process, nothing measured
    c = choose_engine(workers=2, cores=2, steps=23500, done=1250, step_seconds=4e-5, startup_seconds=3.0,
                      collective=never)
    assert c.engine == "local" and c.numbers["collective_ms"] is None and "even with free collectives" in c.why
    # small steps over a run long enough that free collectives would pay: the measured cost decides
    calls = []

    def dear():
        calls.append(1)
        return {"in_loop_s": 2e-3, "back_to_back_s": 4e-4, "reps": 10}

    c = choose_engine(workers=2, cores=2, steps=10**6, done=100, step_seconds=1e-3, startup_seconds=3.0,
                      collective=dear)
    assert calls == [1] and c.engine == "local"
    assert c.numbers["collective_ms"] == pytest.approx(2.0) and c.numbers["back_to_back_ms"] == pytest.approx(0.4)
    assert c.numbers["data_parallel_s"] > c.numbers["local_s"]
    # a full batch on many rows: 50 ms of arithmetic a step against 0.5 ms of collective: the workers
    c = choose_engine(workers=2, cores=2, steps=400, done=3, step_seconds=0.05, startup_seconds=3.0,
                      collective=5e-4)
    assert c.engine == "data-parallel" and "they save" in c.why
    p = predicted_seconds(workers=2, cores=2, steps=400, done=3, step_seconds=0.05, startup_seconds=3.0,
                          collective_seconds=5e-4)
    assert p["local_s"] == pytest.approx(397 * 0.05)
    assert p["data_parallel_s"] == pytest.approx(3.0 + 400 * (0.025 + 5e-4)) == c.numbers["data_parallel_s"]
    assert c.record()["chosen"] == "data-parallel" and c.line().startswith("engine: 2 data-parallel workers: ")
    # the same on one core: the processes cannot share the arithmetic
    c = choose_engine(workers=2, cores=1, steps=400, done=3, step_seconds=0.05, startup_seconds=3.0,
                      collective=never)
    assert c.engine == "local" and "on 1 core cannot share" in c.why
    # more workers than cores share the start-up of all of them over the cores
    p = predicted_seconds(workers=4, cores=2, steps=400, done=3, step_seconds=0.05, startup_seconds=3.0)
    assert p["parallel_cores"] == 2 and p["data_parallel_s"] == pytest.approx(6.0 + 400 * 0.025)
    # a predicted gain under the margin is no gain: a lower bound 5% under the local time
    c = choose_engine(workers=2, cores=2, steps=1000, done=0, step_seconds=0.01, startup_seconds=0.0,
                      collective=0.0095)
    assert c.engine == "local" and "under the 10%" in c.why


def test_collectives_are_timed_back_to_back_and_between_stretches_of_work():
    """The measurement every endpoint runs (here with a stand-in collective of ~0.2 ms): the
    work between collectives is not counted, and the count of collectives is agreed."""
    from noisysgd.cli.train_workers import _timed_collectives

    agreed = []
    c = _timed_collectives(lambda: time.sleep(2e-4), agreed.append, work_seconds=1e-3, budget=0.05)
    assert len(agreed) == 1 and agreed[0].shape == (1,)
    assert 2e-4 <= c["back_to_back_s"] < 0.05 and 2e-4 <= c["in_loop_s"] < 0.05
    assert c["reps"] == int(min(200, max(10, 0.05 / (1e-3 + c["back_to_back_s"]))))


def test_checkpoint_to_resume_names_the_engine_that_wrote_it(tmp_path):
    import argparse

    from noisysgd.cli.train_workers import _checkpoint_engine
    from noisysgd.train import train
    from noisysgd.train.checkpoint import Checkpointing

    X, y_bin, _, _ = _data()
    name, run, loss, key, kw = _cases()[0]
    for engine, fn in (("local", train), ("data-parallel", train_distributed)):
        path = tmp_path / f"{engine}.ckpt"
        fn(run, loss, X, y_bin, feature_clip=2.0, random_state=1, checkpointing=Checkpointing(path, keep=True))
        assert _checkpoint_engine(argparse.Namespace(resume=True, checkpoint=str(path))) == engine
        assert _checkpoint_engine(argparse.Namespace(resume=False, checkpoint=str(path))) is None
    assert _checkpoint_engine(argparse.Namespace(resume=True, checkpoint=str(tmp_path / "none.ckpt"))) is None


#: a small Poisson run of many small steps (the default configuration's kind of run)
POISSON = ("--target", "y", "--seed", "5", "--epochs", "150", "--batch-size", "10", "--batching", "poisson",
           "--noise-multiplier", "3", "--quiet", "--json")


def test_cli_workers_trains_in_one_process_when_steps_are_small(tmp_path, monkeypatch, capsys):
    """--workers 2 on many small steps: this process trains the run itself and says why, on stderr
    (one line) and in metrics.json; the certificate says which engine ran."""
    import noisysgd.cli.train_workers as tw

    _shards(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tw, "_PROBE_S", 0.0)  # decide after the 4th step, however fast this machine
    assert _main("all.npz", *POISSON, "--workers", "2", "--out", "two") == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "engine:" in line]
    assert len(lines) == 1 and lines[0].startswith("noisysgd train: engine: one process (local): "), lines
    metrics = json.loads((tmp_path / "two" / "metrics.json").read_text())
    engine = metrics["engine"]
    assert metrics["workers"] == 1 and metrics["backend"] == "numpy (one process)"
    assert engine["chosen"] == "local" and engine["workers"] == 2 and engine["why"] in lines[0]
    assert engine["steps"] == metrics["steps"] == 1350 and engine["measured_steps"] == 4
    assert engine["local_s"] < engine["data_parallel_s"] and engine["step_ms"] > 0
    enforced = json.loads((tmp_path / "two" / "certificate.json").read_text())["certificate"]["trainer_enforced"]
    assert enforced["backend"] == "numpy (one process)" and enforced["engine"] == "local: " + engine["why"]
    assert "world_size" not in enforced and enforced["steps"] == 1350


@pytest.mark.slow
def test_cli_workers_in_one_process_gives_the_model_of_one_worker(tmp_path, monkeypatch, capsys):
    """The run --workers 2 trains in one process is the run --workers 1 trains on the data-parallel
    engine: the same calibration and certificate (but for what the trainer enforced), and the same
    model up to rounding (same seed: same batches, start and noise draws)."""
    _shards(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert _main("all.npz", *POISSON, "--workers", "1", "--out", "one") == 0  # one spawned rank
    assert _main("all.npz", *POISSON, "--workers", "2", "--out", "two") == 0  # this process
    a = json.loads((tmp_path / "one" / "model.json").read_text())
    b = json.loads((tmp_path / "two" / "model.json").read_text())
    assert a["classes"] == b["classes"] == ["no", "yes"]
    np.testing.assert_allclose(b["coef"], a["coef"], rtol=0, atol=TOL)
    assert np.max(np.abs(np.asarray(a["coef"]))) > 1e-2  # a model, not zeros
    ca = json.loads((tmp_path / "one" / "certificate.json").read_text())
    cb = json.loads((tmp_path / "two" / "certificate.json").read_text())
    ea, eb = ca["certificate"].pop("trainer_enforced"), cb["certificate"].pop("trainer_enforced")
    assert ca == cb
    assert ea["backend"] == "torch.distributed" and ea["world_size"] == 1 and eb["backend"] == "numpy (one process)"
    assert all(ea[k] == eb[k] for k in ("steps", "noise_std", "clip_norm", "batching", "denominator", "init",
                                        "projection_radius", "l2", "feature_clip", "intercept_scaling", "dtype"))
    ma = json.loads((tmp_path / "one" / "metrics.json").read_text())
    mb = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert ma["engine"]["chosen"] == "data-parallel" and ma["engine"]["why"].startswith("--workers 1")
    assert mb["engine"]["chosen"] == "local"
    for key in ("epsilon", "noise_multiplier", "steps", "n"):
        assert ma[key] == mb[key], key
    assert ma["not_private"]["train_accuracy"] == mb["not_private"]["train_accuracy"]


def test_engine_flag(tmp_path, monkeypatch, capsys):
    """--engine (cli/train.py's data-parallel group, from train_workers.add_engine_flag): auto by
    default; local trains in this process without measuring; refused under torchrun."""
    from noisysgd.cli import build_parser

    args = build_parser("train").parse_args(["train", "d.csv", "--target", "y", "--out", "o"])
    assert args.engine == "auto"
    _shards(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert _main("all.npz", *COMMON, "--workers", "3", "--engine", "local", "--out", "three") == 0
    err = capsys.readouterr().err
    assert "noisysgd train: engine: one process (local): --engine local" in err
    metrics = json.loads((tmp_path / "three" / "metrics.json").read_text())
    assert metrics["engine"] == {"chosen": "local", "workers": 3, "why": "--engine local"}
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "1")):
        monkeypatch.setenv(name, value)
    assert _main("all.npz", *COMMON, "--engine", "local", "--out", "o") == 2
    assert "--engine local cannot be combined with torchrun" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_workers_started_early_wait_measure_and_train_when_told(tmp_path, monkeypatch):
    """--engine auto's workers started beside this process's first steps (no checkpoint): they
    join, say so, print nothing and read nothing until asked to measure the collective among
    them (rank 0 reports it), then train when told, writing the record they were sent; stopped
    instead, they leave nothing."""
    from noisysgd.cli import build_parser
    from noisysgd.cli.train_workers import _Speculation
    from noisysgd.cli.training import check_flags

    _shards(tmp_path)
    monkeypatch.chdir(tmp_path)
    parse = build_parser("train").parse_args
    args = parse(["train", "all.npz", *COMMON, "--workers", "2", "--out", "w"])
    check_flags(args)
    early = _Speculation(args, "w")
    try:
        t0 = time.monotonic()
        while not early.ready():
            assert time.monotonic() - t0 < 120 and not early.job.failed()
            time.sleep(0.05)
        measured = early.measure(5, "float64", 1e-4)
        assert measured["measured_between"] == "the 2 workers"
        assert measured["in_loop_s"] > 0 and measured["back_to_back_s"] > 0 and measured["reps"] >= 10
        assert not (tmp_path / "w").exists()
        early.go({"chosen": "data-parallel", "workers": 2, "why": "told by the test"})
        assert early.job.wait() == [0, 0]
    finally:
        early.stop()
    metrics = json.loads((tmp_path / "w" / "metrics.json").read_text())
    assert metrics["engine"] == {"chosen": "data-parallel", "workers": 2, "why": "told by the test"}
    assert metrics["workers"] == 2 and metrics["backend"] == "torch.distributed gloo"
    stopped = _Speculation(parse(["train", "all.npz", *COMMON, "--workers", "2", "--out", "s"]), "s")
    stopped.stop()
    assert all(code not in (0, None) for code in stopped.job.wait()) and not (tmp_path / "s").exists()
