"""The worker functions that tests/test_distributed.py spawns in several processes.

They live in their own module, imported as ``distributed_workers`` (``tests``
is on pytest's ``pythonpath``): a spawned process re-imports a worker by its
module name, and the test module's own name (``tests.test_distributed`` under
``--import-mode=importlib``) is not importable in a child started from a clean
checkout.
"""

from __future__ import annotations

import json
import os
import threading
import time

import numpy as np

import noisysgd
from noisysgd.train.checkpoint import Checkpointing
from noisysgd.train import BinaryLogistic, Softmax, Squared, train
from noisysgd.train.distributed import DistributedError, train_distributed

N, D = 50, 3
TOL = 1e-9
BATCHINGS = ("poisson", "sample", "shuffle", "cyclic", "full")


def _data():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(N, D))
    y_bin = (X[:, 0] + 0.3 * rng.normal(size=N) > 0).astype(int)
    y_cls = np.digitize(X[:, 1], [-0.5, 0.5])  # 3 classes
    y_reg = X @ np.array([1.0, -0.5, 0.25]) + 0.1 * rng.normal(size=N)
    return X, y_bin, y_cls, y_reg


def _cases():
    """(name, run, loss, y key, train kwargs) of every equality check."""
    out = []
    cb = BinaryLogistic().constants(feature_clip=2.0, clip_norm=1.0)
    for batching in BATCHINGS:
        b = N if batching == "full" else 8
        run = noisysgd.Run.from_epochs(
            epochs=4 if batching != "full" else 30, n=N, batch_size=b, batching=batching,
            learning_rate=1.0, noise_multiplier=2.0, lipschitz=cb.lipschitz, strong_convexity=0.01,
            smoothness=cb.smoothness + 0.01, diameter=4.0)
        out.append((f"logistic-{batching}", run, BinaryLogistic(), "bin", {}))
    cs = Softmax(3).constants(feature_clip=2.0, clip_norm=5.0)  # convex (no clipping)
    run = noisysgd.Run.from_epochs(epochs=4, n=N, batch_size=10, batching="poisson", learning_rate=0.5,
                                   noise_multiplier=1.5, lipschitz=cs.lipschitz, strong_convexity=0.05,
                                   smoothness=cs.smoothness + 0.05)
    out.append(("softmax-poisson", run, Softmax(3), "cls", {}))
    cq = Squared().constants(feature_clip=2.0, clip_norm=1.0, target_bound=2.0)
    run = noisysgd.Run.from_epochs(epochs=4, n=N, batch_size=10, batching="shuffle", learning_rate=0.1,
                                   noise_multiplier=1.0, lipschitz=cq.lipschitz, strong_convexity=0.1,
                                   smoothness=cq.smoothness + 0.1, initialization="gaussian", diameter=6.0)
    out.append(("squared-gaussian-start", run, Squared(), "reg", {"target_bound": 2.0}))
    return out


def _shard(rank, world, layout):
    """(rows argument, row indices) of this rank: contiguous uneven blocks or interleaved rows."""
    if layout == "blocks":
        cuts = np.linspace(0, N, world + 1).astype(int)
        cuts[1:-1] += 3  # uneven on purpose
        return int(cuts[rank]), np.arange(cuts[rank], cuts[rank + 1])
    rows = np.arange(rank, N, world)[::-1].copy()  # interleaved, and not sorted
    return rows, rows


def _equality_worker(rank, world, outdir, layout, kill):
    X, y_bin, y_cls, y_reg = _data()
    ys = {"bin": y_bin, "cls": y_cls, "reg": y_reg}
    rows, idx = _shard(rank, world, layout)
    coefs, seen = {}, {}
    for name, run, loss, key, kw in _cases():
        res = train_distributed(run, loss, X[idx], ys[key][idx], rows=rows, feature_clip=2.0, random_state=11,
                                **kw)
        coefs[name] = res.coef
        seen[name] = {"steps": res.steps, "world": res.enforced["world_size"]}
    # secure mode: rank 0's CSPRNG; identical parameters on every rank (checked inside), saved to compare
    name, run, loss, key, kw = _cases()[0]
    coefs["secure"] = train_distributed(run, loss, X[idx], y_bin[idx], rows=rows, feature_clip=2.0,
                                        secure_mode=True).coef
    coefs["no-seed"] = train_distributed(run, loss, X[idx], y_bin[idx], rows=rows, feature_clip=2.0).coef
    # refusals, on every rank, before any step
    errors = {}
    attempts = {
        "seed": dict(random_state=11 + rank),
        "overlap": dict(rows=0 if layout == "blocks" else np.arange(len(idx))),
        "nan-on-last-rank": dict(X=np.where(rank == world - 1, np.nan, X[idx])),
        "run": dict(run=run if rank == 0 else _cases()[1][1]),
    }
    for what, change in attempts.items():
        kwargs = dict(run=run, loss=loss, X=X[idx], y=y_bin[idx], rows=rows, feature_clip=2.0, random_state=11)
        kwargs.update(change)
        try:
            train_distributed(kwargs.pop("run"), kwargs.pop("loss"), kwargs.pop("X"), kwargs.pop("y"), **kwargs)
            errors[what] = None
        except ValueError as err:
            errors[what] = str(err)
    np.savez(os.path.join(outdir, f"coef{rank}.npz"), **coefs)
    with open(os.path.join(outdir, f"info{rank}.json"), "w") as f:
        json.dump({"seen": seen, "errors": errors}, f)
    if kill:
        _kill_phase(rank, world, outdir, X[idx], y_bin[idx], rows)


def _reference():
    X, y_bin, y_cls, y_reg = _data()
    ys = {"bin": y_bin, "cls": y_cls, "reg": y_reg}
    return {name: train(run, loss, X, ys[key], feature_clip=2.0, random_state=11, **kw).coef
            for name, run, loss, key, kw in _cases()}


KILL_AT, KILL_STEPS = 12, 1500


def _kill_run():
    name, run, loss, key, kw = _cases()[0]
    return noisysgd.Run(n=N, batch_size=8, batching="poisson", steps=KILL_STEPS, learning_rate=1.0,
                        noise_multiplier=2.0, lipschitz=run.lipschitz, strong_convexity=0.01,
                        smoothness=run.smoothness), loss


def _die_after_checkpoint(path, t0, outdir):
    """The last rank dies once rank 0 has written a checkpoint at step >= KILL_AT (mid-run)."""
    from noisysgd.train.checkpoint import read_checkpoint

    while True:
        try:
            if read_checkpoint(path).header["progress"]["step"] >= KILL_AT:
                with open(os.path.join(outdir, "died.json"), "w") as f:
                    json.dump(time.monotonic() - t0, f)
                os._exit(17)
        except (OSError, ValueError):
            pass
        time.sleep(0.005)


def _kill_phase(rank, world, outdir, X, y, rows):
    run, loss = _kill_run()
    path = os.path.join(outdir, "kill.ckpt")
    start = time.monotonic()
    if rank == world - 1:
        threading.Thread(target=_die_after_checkpoint, args=(path, start, outdir), daemon=True).start()
    try:
        train_distributed(run, loss, X, y, rows=rows, feature_clip=2.0, random_state=1,
                          checkpointing=Checkpointing(path, every=2))
    except DistributedError as err:
        time.sleep(0.2)
        with open(os.path.join(outdir, "died.json")) as f:
            died = json.load(f)
        with open(os.path.join(outdir, f"killed{rank}.json"), "w") as f:
            json.dump({"message": str(err), "seconds": time.monotonic() - start, "died_after": died}, f)
        raise


def _resume_worker(rank, world, outdir):
    X, y_bin, _, _ = _data()
    rows, idx = _shard(rank, world, "blocks")
    run, loss = _kill_run()
    resumed = train_distributed(run, loss, X[idx], y_bin[idx], rows=rows, feature_clip=2.0, random_state=1,
                                checkpointing=Checkpointing(os.path.join(outdir, "kill.ckpt"), resume=True))
    plain = train_distributed(run, loss, X[idx], y_bin[idx], rows=rows, feature_clip=2.0, random_state=1)
    at = resumed.enforced["checkpoint"]["resumed_at_step"] if rank == 0 else -1
    np.savez(os.path.join(outdir, f"resumed{rank}.npz"), resumed=resumed.coef, uninterrupted=plain.coef,
             resumed_at=at)


def _threads_worker(rank, world, out_dir):
    """Report the thread-count variables this worker started with, and the BLAS pools numpy
    actually runs (threadpoolctl: a maintained library that reads them)."""
    from threadpoolctl import threadpool_info

    pools = [p["num_threads"] for p in threadpool_info() if p.get("user_api") == "blas"]
    with open(os.path.join(out_dir, f"threads{rank}.json"), "w") as f:
        json.dump({"env": {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
                   "blas": pools}, f)


def _oserror_worker(rank, world):
    """A rank whose data cannot be mapped (what ENOMEM under an address-space limit raises)."""
    raise OSError("data: X of big.npz could not be memory-mapped (Cannot allocate memory): raise the "
                  "process's address-space limit")
