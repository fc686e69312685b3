"""``noisysgd train`` on several processes: ``--workers K`` (local, gloo) or under torchrun.

The run, its calibration and its certificate are those of the single-process run
on the whole data set (:mod:`noisysgd.cli.train` shares its steps: flags, loss,
schedule, outputs); each rank reads only its own rows or shards
(:mod:`noisysgd.train.distributed`), and rank 0 alone writes the outputs.

Which engine ``--workers K`` runs (``--engine``, :data:`ENGINES`).  K processes pay a
start-up each (interpreter, torch, reading, configuration, calibration) and a collective
per step, which costs more than a small step's arithmetic.  So with ``--engine auto`` (the
default) and K >= 2 this process first trains the run itself, with the single-process
engine (:func:`noisysgd.train.train`) on every rank's rows, as the one rank of a world of
one — the run is built by the code the ranks run (:func:`_train_rank`), and no torch is
needed.  After its first steps it predicts, from their measured pace and, where the
answer depends on it, the measured cost of a collective among K gloo endpoints here, how
long the rest takes against K workers starting now (:func:`choose_engine`), and either
goes on (nothing was wasted) or stops and launches the K workers.  The choice and its
numbers are one line on stderr and ``engine`` in metrics.json.  Both engines run the same
run from the same seed — the same batches, start and noise draws, the same calibration
and certificate, the same model up to floating-point rounding (1e-9 in float64,
``tests/test_distributed.py``); only ``trainer_enforced`` says which ran.  Under torchrun,
with ``--workers 1`` and with ``--engine data-parallel`` the data-parallel engine runs as
before; a checkpoint to resume is continued by the engine that wrote it.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from ..io import check_output_dir, load_table
from ..train import PrivacyLeakWarning
from ..pipeline import fit_declared
from ..private_fit import Execution
from .training import check_flags, declared, finish, task_loss

def torchrun_env():
    """(rank, world size) when started by torchrun (or any launcher setting RANK and
    WORLD_SIZE for torch.distributed's env:// rendezvous), else None."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        raise ValueError(f"RANK and WORLD_SIZE are set (torchrun?) but {', '.join(missing)} is not: start the "
                         "job with torchrun, or unset RANK and WORLD_SIZE.")
    try:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except ValueError:
        raise ValueError(f"RANK and WORLD_SIZE must be integers. Found RANK={os.environ['RANK']!r}, "
                         f"WORLD_SIZE={os.environ['WORLD_SIZE']!r}.") from None


#: ``--engine``'s values: auto (the default: chosen from measurements, module docstring), the
#: data-parallel engine on K processes, or the single-process engine in this process.
ENGINES = ("auto", "data-parallel", "local")


def add_engine_flag(group) -> None:
    """``--engine``, beside ``--workers`` in ``noisysgd train``'s data-parallel group."""
    group.add_argument("--engine", default="auto", choices=ENGINES,
                       help="with --workers K: data-parallel (K processes, one collective per step), local (this "
                            "process alone: the same run, certificate and model up to rounding), or auto "
                            "(default): local unless the first steps' measured pace and a collective's measured "
                            "cost predict the K workers faster; the choice is printed on stderr and recorded in "
                            "metrics.json")


def _engine_flag(args) -> str:
    engine = getattr(args, "engine", None) or "auto"
    if engine not in ENGINES:
        raise ValueError(f"--engine must be one of {', '.join(ENGINES)}. Found {engine!r}.")
    return engine


def cmd_train_distributed(args, env) -> int:
    started = time.perf_counter()
    if env is not None and _engine_flag(args) == "local":
        raise ValueError("--engine local cannot be combined with torchrun (RANK and WORLD_SIZE are set): every "
                         "process torchrun starts is a rank of the data-parallel engine; run noisysgd train "
                         "without torchrun to train in one process.")
    if env is not None and args.workers is not None:
        raise ValueError("--workers cannot be combined with torchrun (RANK and WORLD_SIZE are set): torchrun "
                         "already starts one process per rank; leave --workers out.")
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be a whole number >= 1. Found {args.workers}.")
    if not args.timeout > 0:
        raise ValueError(f"--timeout must be a positive number of seconds. Found {args.timeout}.")
    if getattr(args, "feature_range", None) is not None:
        raise ValueError("--feature-range is not available for data-parallel training (--workers, torchrun) yet: "
                         "scale the shards beforehand with bounds you know.")
    if getattr(args, "center", "auto") == "private":
        raise ValueError("--center private is not available for data-parallel training (--workers, torchrun) yet "
                         "(--center auto trains on the rows as they are there).")
    if getattr(args, "class_weight", None) is not None:
        raise ValueError("--class-weight is not available for data-parallel training (--workers, torchrun) yet: "
                         "train in one process.")
    if getattr(args, "average", None) == "yes":  # ("auto": the final iterate there, as with a checkpoint)
        raise ValueError("--average is not available for data-parallel training (--workers, torchrun) yet: train "
                         "in one process.")
    if args.categorical:
        raise ValueError("--categorical is not available for data-parallel training (--workers, torchrun) yet: "
                         "one-hot encode the shards beforehand with the declared categories.")
    if args.adjacency == "add-remove":
        raise ValueError("--adjacency add-remove is not available for data-parallel training (--workers, torchrun): "
                         "its shards tile a public number of rows, while under add-remove the data may hold any; "
                         "train in one process, or use --adjacency replace.")
    if args.holdout is not None:
        raise ValueError("--holdout is not available for data-parallel training (--workers, torchrun): "
                         "split the data into training and hold-out files, and score with noisysgd predict.")
    if args.backend == "nccl" and env is None:
        raise ValueError("--backend nccl needs torchrun (one GPU per process); --workers uses gloo.")
    check_flags(args)
    if env is None:
        out = check_output_dir(args.out)  # before starting anything
        from ..train.distributed import launch_local
        from ..train.shards import assign_shards, list_shards

        if os.path.isdir(args.data):  # refuse too few shards here, before spawning anything
            assign_shards(list_shards(args.data), args.workers)

        engine, workers = _engine_flag(args), None
        if engine == "local" or (engine == "auto" and args.workers > 1):
            code, choice, workers = _train_here(args, str(out), started, decide=engine == "auto")
            if code is not None:
                return code
        else:
            choice = _forced_data_parallel(args, engine)
        if args.workers > 1 or engine != "auto":
            print(f"noisysgd train: {choice.line()}", file=sys.stderr, flush=True)
        if workers is not None:  # started early, told to train
            codes = workers.job.wait()
        else:
            args.engine_record = choice.record()  # rank 0 writes it into metrics.json
            codes = launch_local(_workers_rank, args.workers, (args, str(out)), timeout=args.timeout,
                                 prog="noisysgd train", refusals_from_rank0=True)
        if all(c == 0 for c in codes):
            return 0
        if 2 in codes:
            return 2  # the refusal was printed by rank 0
        print(f"noisysgd train: error: the job stopped (exit codes of ranks 0..{len(codes) - 1}: {codes}); "
              "no output was written", file=sys.stderr)
        return 1
    rank, world = env
    import datetime

    import torch.distributed as dist

    from ..train.distributed import DistributedError

    out = check_output_dir(args.out) if rank == 0 else args.out
    dist.init_process_group(args.backend, init_method="env://",
                            timeout=datetime.timedelta(seconds=args.timeout))
    try:
        _train_rank(rank, world, args, str(out))
    except (DistributedError, OSError) as err:
        print(f"noisysgd train: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    finally:
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - a dead peer may make the teardown fail too
            pass
    return 0


def _read_rank_rows(path, target, rank, world):
    """This rank's (X, y, global offset of its first row, n, feature names, source)."""
    from pathlib import Path

    from ..train.shards import assign_shards, list_shards

    p = Path(path)
    if p.is_dir():
        shards = list_shards(p)
        mine = assign_shards(shards, world)[rank]
        tables = []
        for shard in mine:
            table = load_table(shard.path, target=target)
            if table.X.shape[0] != shard.rows:
                raise ValueError(f"data: shard {shard.path!r} holds {table.X.shape[0]} rows, its header said "
                                 f"{shard.rows}.")
            if tables and table.feature_names != tables[0].feature_names:
                raise ValueError(f"data: shard {shard.path!r} has other feature columns than {mine[0].path!r}.")
            tables.append(table)
        # one shard per rank keeps a memory-mapped X as it is (read a batch at a time);
        # several are joined in memory
        X = tables[0].X if len(tables) == 1 else np.concatenate([t.X for t in tables])
        y = tables[0].y if len(tables) == 1 else np.concatenate([t.y for t in tables])
        n = sum(s.rows for s in shards)
        return X, y, mine[0].start, n, tables[0].feature_names, f"{path} ({len(shards)} shards)"
    table = load_table(path, target=target)  # one file: every rank reads it and keeps its block of rows
    n = table.X.shape[0]
    lo, hi = rank * n // world, (rank + 1) * n // world
    if hi == lo:
        raise ValueError(f"data: {n} examples for {world} workers; every worker needs at least one row.")
    return table.X[lo:hi], table.y[lo:hi], lo, n, table.feature_names, table.path


def _train_rank(rank, world, args, out) -> None:
    """One rank of a data-parallel `noisysgd train`: read its rows, agree with the others on
    the labels and columns, calibrate (the same on every rank), train, and (rank 0) write."""
    info, error = None, None
    try:
        X, y, offset, n, names, source = _read_rank_rows(args.data, args.target, rank, world)
        labels = None
        if args.task == "classification":
            labels = np.unique(y).tolist()
        info = {"names": names, "n": n, "labels": labels}
    except ValueError as err:
        error = str(err)
    gathered = _all_gather(world, {"error": error, "info": info})
    for r, g in enumerate(gathered):
        if g["error"] is not None:
            raise ValueError(g["error"] if r == rank or r == 0 else f"rank {r}: {g['error']}")
    if any(g["info"]["names"] != gathered[0]["info"]["names"] for g in gathered):
        raise ValueError("data: the ranks' rows have different feature columns.")
    if args.task == "classification":
        all_labels = np.unique(np.concatenate([np.asarray(g["info"]["labels"]) for g in gathered]))
        import warnings

        with warnings.catch_warnings():
            if rank != 0:  # one warning (if any) for the whole data set, from rank 0
                warnings.simplefilter("ignore", PrivacyLeakWarning)
            loss, _, classes = task_loss(args, all_labels)  # checks on the classes of the whole data set
        y_enc = np.searchsorted(classes, y)
    else:
        loss, y_enc, classes = task_loss(args, y)
    epsilon = None if args.noise_multiplier is not None else (1.0 if args.epsilon is None else args.epsilon)
    decl = declared(args, X.shape[1], epsilon, queries=False)  # the same on every rank: no query on a shard
    device = "cpu"
    if args.backend == "nccl":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    trainer = _rank_trainer(args, offset, device)
    start = time.perf_counter()
    # the checkpoint is rank 0's alone (its file system): it writes it and, on --resume, reads the
    # calibration from it; the other ranks calibrate again (deterministic: the same noise, or
    # train_distributed refuses the job because the runs differ)
    first = rank == 0
    fit = fit_declared(X, y_enc, loss, decl, Execution(
        random_state=args.seed, dtype=np.dtype(args.dtype), secure_mode=args.secure_mode, n_rows=n,
        trainer=trainer, checkpoint=args.checkpoint if first else None,
        checkpoint_every=args.checkpoint_every if first else None, resume=args.resume and first,
        keep_checkpoint=first and args.checkpoint is not None)).fit
    seconds = time.perf_counter() - start
    local = 0.0
    for lo in range(0, X.shape[0], 1 << 16):  # a block of rows at a time: X may be memory-mapped
        pred, yb = fit.result.predict(X[lo:lo + (1 << 16)]), y_enc[lo:lo + (1 << 16)]
        if args.task == "regression":
            local += float(np.sum((pred - yb) ** 2))
        else:
            local += float(np.sum((pred == (2 * yb - 1)) if classes.size == 2 else (pred == yb)))
    sums = _all_gather(world, local)
    if rank != 0:
        return
    total = float(sum(sums))
    quality = ({"train_rmse": float(np.sqrt(total / n))} if args.task == "regression"
               else {"train_accuracy": total / n})
    finish(args, out, fit, dict(loss=loss, classes=classes, target=args.target, feature_names=names),
            source=source, n=n, quality=quality, seconds=seconds,
            extra=_engine_extra(args, world))


def _all_gather(world, obj) -> list:
    """Every rank's ``obj``, on every rank; a world of one outside any process group (the
    single-process engine, :func:`_train_here`) needs no torch."""
    dist = sys.modules.get("torch.distributed")
    if world == 1 and (dist is None or not dist.is_initialized()):
        return [obj]
    import torch.distributed as dist

    out = [None] * world
    dist.all_gather_object(out, obj)
    return out


def _shard_trainer(run, loss, X, y, *, rows, device, record=False, callback=None, **engine):
    """fit_private's trainer on this rank's shard: :func:`noisysgd.train.train`'s signature
    (``engine``: its keyword arguments), with no trajectory record and no progress callback."""
    from ..train.distributed import Placement, train_distributed

    return train_distributed(run, loss, X, y, rows=rows, placement=Placement(device=device), **engine)


# --------------------------------------------------------------------------- which engine


#: The data-parallel engine is chosen only where it is predicted to take at most this share of
#: the time the single-process engine still needs: the prediction is a lower bound on its time
#: (the batch draw, the noise and the update are repeated on every rank, and each step waits for
#: the slowest rank), so a predicted gain smaller than this margin is no gain.
ENGINE_MARGIN = 0.9

#: The longest stretch of arithmetic between two collectives in :func:`_timed_collectives` (s):
#: past a few milliseconds of work per step the wait at the collective is no longer what decides.
_MAX_WORK_S = 2e-3


@dataclass(frozen=True)
class EngineChoice:
    """How ``noisysgd train --workers K`` trains: ``engine`` "local" (one process, the
    single-process engine :func:`noisysgd.train.train`: the same run, the same certificate,
    the same model up to rounding) or "data-parallel" (K processes,
    :func:`noisysgd.train.distributed.train_distributed`),
    ``why`` (one clause) and the ``numbers`` it was chosen from (seconds; None: not measured)."""

    engine: str
    workers: int
    why: str
    numbers: dict | None = None

    def record(self) -> dict:
        """What metrics.json records (``engine``)."""
        return {"chosen": self.engine, "workers": self.workers, "why": self.why, **(self.numbers or {})}

    def line(self) -> str:
        """The line ``noisysgd train`` prints on stderr."""
        where = "one process (local)" if self.engine == "local" else f"{self.workers} data-parallel workers"
        return f"engine: {where}: {self.why}"


def predicted_seconds(*, workers: int, cores: int, steps: int, done: int, step_seconds: float,
                      startup_seconds: float, collective_seconds: float = 0.0) -> dict:
    """The two engines' predicted times from here, for a run of ``steps`` steps of which the
    single-process engine has done ``done``, at ``step_seconds`` a step (measured on those).

    * local: the remaining steps at the measured pace, ``(steps − done)·step_seconds``;
    * data-parallel: K = ``workers`` processes on k = min(K, ``cores``) cores, each of which repeats
      this process's ``startup_seconds`` (imports, reading, configuration, calibration: K/k times
      that, as they share the cores) and then runs all ``steps`` at ``step_seconds/k`` of arithmetic
      plus one collective (``collective_seconds``) a step.  A lower bound: it assumes the step's
      arithmetic divides by k and the ranks never wait for one another.
    """
    k = max(1, min(int(workers), int(cores)))
    local = max(0, steps - done) * step_seconds
    parallel = startup_seconds * workers / k + steps * (step_seconds / k + collective_seconds)
    return {"local_s": local, "data_parallel_s": parallel, "parallel_cores": k}


def choose_engine(*, workers: int, cores: int, steps: int, done: int, step_seconds: float,
                  startup_seconds: float, collective, margin: float = ENGINE_MARGIN) -> EngineChoice:
    """Local or data-parallel, from the measured pace of the single-process engine and what one
    collective costs (:func:`predicted_seconds`): data-parallel only where its predicted time is
    at most ``margin`` × the local time left.  ``collective``: the seconds a step's collective
    costs, a measurement (:func:`_timed_collectives`' dict) or a function returning one, called
    only when the answer
    depends on it — when even free collectives would not pay for the workers' start-up (or there
    is one core), it is not measured; a collective that cannot be measured here (RuntimeError)
    cannot pay either.

    >>> choose_engine(workers=2, cores=2, steps=20000, done=500, step_seconds=4e-5,
    ...               startup_seconds=3.0, collective=5e-4).engine
    'local'
    >>> choose_engine(workers=2, cores=2, steps=400, done=3, step_seconds=0.05,
    ...               startup_seconds=3.0, collective=5e-4).engine
    'data-parallel'
    """
    common = {"steps": int(steps), "measured_steps": int(done), "step_ms": step_seconds * 1e3,
              "startup_s": startup_seconds, "margin": margin}
    free = predicted_seconds(workers=workers, cores=cores, steps=steps, done=done, step_seconds=step_seconds,
                             startup_seconds=startup_seconds)
    k = free["parallel_cores"]
    if free["data_parallel_s"] > margin * free["local_s"]:
        why = (f"{workers} processes on {cores} core{'s' if cores != 1 else ''} cannot share the arithmetic"
               if k == 1 else
               f"{steps - done} more steps at {step_seconds * 1e3:.3g} ms here take {free['local_s']:.3g} s; "
               f"{workers} workers need {free['data_parallel_s']:.3g} s even with free collectives "
               f"(each repeats this process's {startup_seconds:.3g} s of start-up)")
        return EngineChoice("local", workers, why, {**common, **free, "collective_ms": None})
    try:
        measured = collective() if callable(collective) else collective
    except RuntimeError as err:
        return EngineChoice("local", workers, f"{err}", {**common, **free, "collective_ms": None})
    if not isinstance(measured, dict):
        measured = {"in_loop_s": float(measured)}
    cost = measured["in_loop_s"]
    pred = predicted_seconds(workers=workers, cores=cores, steps=steps, done=done, step_seconds=step_seconds,
                             startup_seconds=startup_seconds, collective_seconds=cost)
    numbers = {**common, **pred, "collective_ms": cost * 1e3}
    if "back_to_back_s" in measured:
        numbers.update(back_to_back_ms=measured["back_to_back_s"] * 1e3, collective_reps=measured.get("reps"),
                       collective_measured_between=measured.get("measured_between"))
    engine = "data-parallel" if pred["data_parallel_s"] <= margin * pred["local_s"] else "local"
    saved = 1.0 - pred["data_parallel_s"] / pred["local_s"] if pred["local_s"] > 0 else 0.0
    verdict = (f"they save {saved:.0%}" if engine == "data-parallel" else
               f"they would save {max(saved, 0.0):.0%}, under the {1 - margin:.0%} a lower bound must show")
    why = (f"{steps - done} more steps at {step_seconds * 1e3:.3g} ms here take {pred['local_s']:.3g} s; "
           f"{workers} workers ≈ {pred['data_parallel_s']:.3g} s ({startup_seconds * workers / k:.3g} s to start, "
           f"{step_seconds / k * 1e3:.3g} ms of arithmetic and {cost * 1e3:.3g} ms of collective a step, "
           f"measured): {verdict}")
    return EngineChoice(engine, workers, why, numbers)


def _torch_distributed():
    try:
        import torch
        import torch.distributed as dist
    except ImportError as err:
        raise RuntimeError(f"the data-parallel engine needs torch, which cannot be imported here ({err})") from None
    return torch, dist


def _timed_collectives(allreduce, agree_max, work_seconds: float, budget: float) -> dict:
    """One endpoint's side of a measurement (every endpoint runs it at once): seconds of an
    all-reduce ``back_to_back_s`` (one after another: the latency) and ``in_loop_s`` (one after
    each stretch of ``work_seconds``, at most 2 ms, of numpy arithmetic, minus that work: what a
    training step pays, as the endpoints arrive at different times and the early ones wait to be
    woken — several times the latency, docs/scaling.md), over ``reps`` collectives (about
    ``budget`` seconds; the same count on every endpoint, agreed through ``agree_max``).  The
    work is elementwise, not BLAS: it must not depend on the endpoints' thread pools."""
    import torch

    work = min(max(float(work_seconds), 0.0), _MAX_WORK_S)
    A = np.random.default_rng().standard_normal(1 << 18)
    B = np.empty_like(A)
    calls = int(np.ceil(work / min(_elementwise_seconds(A, B) for _ in range(3))))
    for _ in range(3):
        allreduce()
    t = time.perf_counter()
    for _ in range(10):
        allreduce()
    back = torch.tensor([(time.perf_counter() - t) / 10], dtype=torch.float64)
    agree_max(back)  # the slowest endpoint's, on every one: the same count below
    back = float(back[0])
    reps = int(min(200, max(10, budget / (work + back))))
    worked = 0.0
    t = time.perf_counter()
    for _ in range(reps):
        w0 = time.perf_counter()
        for _ in range(calls):
            np.multiply(A, 1.0000001, out=B)
        worked += time.perf_counter() - w0
        allreduce()
    return {"back_to_back_s": back, "in_loop_s": (time.perf_counter() - t - worked) / reps, "reps": reps}


def _elementwise_seconds(A, B) -> float:
    t = time.perf_counter()
    np.multiply(A, 1.0000001, out=B)
    return time.perf_counter() - t


def _rank_trainer(args, rows, device):
    """fit_private's trainer in :func:`_train_rank`: this rank's shard on the data-parallel
    engine, or — in the world of one :func:`_train_here` runs — the single-process engine."""
    import functools

    local = getattr(args, "local_engine", None)
    return local if local is not None else functools.partial(_shard_trainer, rows=rows, device=device)


def _engine_extra(args, world) -> dict:
    """metrics.json's workers, backend and engine."""
    local = getattr(args, "local_engine", None)
    if local is not None:
        return {"workers": 1, "backend": "numpy (one process)", "engine": local.choice.record()}
    extra = {"workers": world, "backend": "torch.distributed " + args.backend}
    record = getattr(args, "engine_record", None)
    extra["engine"] = record if record is not None else {
        "chosen": "data-parallel", "workers": world, "why": "started by torchrun"}
    return extra


# --------------------------------------------------------------------------- workers started early


class _Speculation:
    """The K workers ``--engine auto`` starts before it has chosen them (:func:`_train_here`: at
    once, or once the first steps show that they could pay).
    Once joined (rank 0 says ``ready``) each waits, before it reads anything (so that it prints
    nothing), for a request to measure the collective among them — made while this process
    waits, so that nothing else competes for the cores — reports it (rank 0), then waits for
    ``go`` (train), or is stopped."""

    def __init__(self, args, out):
        import copy
        import multiprocessing as mp

        from ..train.distributed import start_local

        args = copy.copy(args)  # what the workers get: not this process's engine
        args.__dict__.pop("local_engine", None)
        ctx = mp.get_context("spawn")
        self.inboxes = [ctx.Queue() for _ in range(args.workers)]
        self.reports = ctx.Queue()
        self.gone = False  # go sent: the workers train
        self.joined = False  # rank 0 said ready
        self.job = start_local(_workers_rank, args.workers, (args, out, (self.inboxes, self.reports)),
                               timeout=args.timeout, prog="noisysgd train", refusals_from_rank0=True)

    def ready(self) -> bool:
        """Whether the workers have joined their process group (does not wait)."""
        import queue

        if not self.joined:
            try:
                self.joined = bool(self.reports.get_nowait().get("ready"))
            except queue.Empty:
                pass
        return self.joined

    def measure(self, size: int, dtype, work_seconds: float):
        """The collective measured between the workers (waits for it), or None if they stopped."""
        import queue

        for q in self.inboxes:
            q.put({"size": size, "dtype": np.dtype(dtype).name, "work": work_seconds})
        while True:
            try:
                return self.reports.get(timeout=0.1)
            except queue.Empty:
                if self.job.failed():
                    return None

    def go(self, record: dict) -> None:
        for q in self.inboxes:
            q.put({"go": True, "record": record})
        self.gone = True

    def stop(self) -> None:
        if not self.gone:
            self.job.stop()
        for q in (*self.inboxes, self.reports):
            q.cancel_join_thread()  # (a stopped reader must not hold this process's exit)


def _workers_rank(rank, world, args, out, channel=None):  # one of the --workers processes (spawned)
    if channel is not None:
        _await_choice(rank, world, args, channel)
    _train_rank(rank, world, args, out)


def _await_choice(rank, world, args, channel) -> None:
    """A worker started early (:class:`_Speculation`): measure the collective with the other
    ranks when asked (the model's size, between stretches of the step's arithmetic), rank 0
    reports it; then train when told to (the engine record for metrics.json comes with it).
    Exits quietly if this process's parent is gone."""
    import multiprocessing as mp
    import queue

    inboxes, reports = channel
    parent = mp.parent_process()
    if rank == 0:
        reports.put({"ready": True})

    def get():
        while True:
            try:
                return inboxes[rank].get(timeout=1.0)
            except queue.Empty:
                if parent is not None and not parent.is_alive():
                    os._exit(0)

    ask = get()
    torch, dist = _torch_distributed()
    x = torch.zeros(max(1, int(ask["size"])), dtype=getattr(torch, ask["dtype"]))
    measured = _timed_collectives(lambda: dist.all_reduce(x), lambda t: dist.all_reduce(t, op=dist.ReduceOp.MAX),
                                  ask["work"], 0.15)
    if rank == 0:
        reports.put({**measured, "measured_between": f"the {world} workers"})
    args.engine_record = get()["record"]


def _forced_data_parallel(args, engine):
    why = ("--engine data-parallel" if engine == "data-parallel" else
           "--workers 1: one rank of the data-parallel engine")
    return EngineChoice("data-parallel", args.workers, why)


class _UseDataParallel(Exception):
    """Raised from the single-process engine's step callback: the workers will be faster."""


#: The single-process engine's first steps, before it predicts the rest (--engine auto): it
#: times the steps after the first (warm caches) and decides after _PROBE_STEPS of them taking
#: _PROBE_S seconds, or after one taking _PROBE_LONG_S (a slow step is timed well enough alone).
#: They are the run's own steps: nothing is wasted when it goes on.  With workers started early,
#: it times its steps again once they have measured the collective (and stopped competing for
#: the cores), and decides then.
_PROBE_STEPS, _PROBE_S, _PROBE_LONG_S = 3, 0.05, 0.2


class _LocalEngine:
    """fit_private's trainer when this process trains (``--engine local``, or ``auto`` while it
    is deciding): :func:`noisysgd.train.train` on every row, whose step callback times the first
    steps and then (``decide``) chooses; a choice for the workers stops it (:class:`_UseDataParallel`)."""

    def __init__(self, args, out, started: float, decide: bool, choice=None, speculation=None):
        self.args, self.out, self.started, self.decide, self.choice = args, out, started, decide, choice
        self.speculation = speculation
        self.existed = args.checkpoint is not None and os.path.exists(args.checkpoint)
        self.window = None  # (step, time) the pace is timed from
        self.startup = None  # this process's start-up, which a worker repeats (s)
        self.measured = None  # the workers' collective (speculation)
        self.polled, self.work = 0.0, 0.0
        self.run = self.size = self.dtype = None

    def __call__(self, run, loss, X, y, *, callback=None, **engine):
        from ..train import train

        self.run, self.dtype = run, np.dtype(engine.get("dtype") or np.float64)
        self.size = int(np.prod(loss.param_shape(int(np.shape(X)[1]))))
        probe = self.probe if self.decide and self.choice is None else None
        both = probe if callback is None else (callback if probe is None else _chain(probe, callback))
        result = train(run, loss, X, y, callback=both, **engine)
        if self.choice is None:  # the run ended before the choice was made
            waited = " while the workers were starting" if self.startup is not None else ""
            self.settle(EngineChoice("local", self.args.workers, f"the whole run ({run.steps} steps) ended here"
                                     f"{waited}, before the choice was made"))
        result.enforced["backend"] = "numpy (one process)"
        result.enforced["engine"] = f"local: {self.choice.why}"
        return result

    def settle(self, choice) -> None:
        """The choice is made: local (the workers started early are stopped) or data-parallel
        (the checkpoint this process began is removed before the workers may look for it)."""
        self.choice = choice
        if choice.engine == "data-parallel":
            from ..train.checkpoint import delete_checkpoint

            if self.args.checkpoint is not None and not self.existed and os.path.exists(self.args.checkpoint):
                delete_checkpoint(self.args.checkpoint)
            if self.speculation is not None:
                self.speculation.go(choice.record())
            raise _UseDataParallel()
        if self.speculation is not None:
            self.speculation.stop()
        print(f"noisysgd train: {choice.line()}", file=sys.stderr, flush=True)

    def probe(self, step, _W):
        if self.choice is not None:
            return
        now = time.perf_counter()
        if self.window is None:  # the first step's end: from here, the pace (warm caches)
            self.window = (step, now)
            return
        spec = self.speculation
        if self.measured is None and self.work:
            if now - self.polled < 0.005:  # training on until the workers have started
                return
            self.polled = now
            if not spec.job.failed() and spec.ready():
                self.measured = spec.measure(self.size, self.dtype, self.work)
            if spec.job.failed() or (self.measured is None and spec.joined):
                return self.settle(EngineChoice("local", self.args.workers, "the workers stopped before training"))
            if self.measured is not None:
                self.window = (step, time.perf_counter())  # time the pace again, the workers now idle
            return
        s0, t0 = self.window
        steps, seconds = step - s0, now - t0
        if not ((steps >= _PROBE_STEPS and seconds >= _PROBE_S) or seconds >= _PROBE_LONG_S):
            return
        pace = seconds / steps
        if self.startup is None:
            self.startup = max(0.0, t0 - pace - self.started)
        workers, cores = self.args.workers, _cores()
        free = choose_engine(workers=workers, cores=cores, steps=self.run.steps, done=step, step_seconds=pace,
                             startup_seconds=self.startup, collective=0.0)
        if free.engine == "local":
            return self.settle(free)
        if self.measured is not None:  # the answer depends on the collective: measured between the workers
            return self.settle(choose_engine(workers=workers, cores=cores, steps=self.run.steps, done=step,
                                             step_seconds=pace, startup_seconds=self.startup,
                                             collective=self.measured))
        if not _has_torch():
            return self.settle(EngineChoice("local", workers, "the data-parallel engine needs torch, which is not "
                                            "installed"))
        if spec is None:  # start them now, training on meanwhile
            self.speculation = _Speculation(self.args, self.out)
        self.work = pace / min(workers, cores)  # measured between the workers once they have started


def _chain(first, second):
    def both(step, W):
        first(step, W)
        second(step, W)
    return both


#: Input of at least this many bytes: --engine auto starts the workers at once even where they
#: share the cores with this process.  Their start-up then slows this one's by about one
#: start-up (2 s on the 2-core machine of docs/scaling.md) — small against reading and training
#: on such data, where the workers can pay — while below it they start only once the first steps
#: show that they could pay (smaller runs, where that much contention would be felt).
_EARLY_BYTES = 128 << 20


def _input_bytes(path) -> int:
    try:
        if os.path.isdir(path):
            return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
        return os.path.getsize(path)
    except OSError:
        return 0


def _has_torch() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _checkpoint_engine(args) -> str | None:
    """The engine that wrote the checkpoint --resume continues ("local", "data-parallel"), or None."""
    if not (args.resume and args.checkpoint is not None and os.path.exists(args.checkpoint)):
        return None
    from ..train.checkpoint import read_checkpoint

    try:
        algorithm = read_checkpoint(args.checkpoint).header.get("description", {}).get("algorithm", "")
    except ValueError:  # not a checkpoint: the engine refuses it, naming why
        return None
    return "data-parallel" if algorithm.endswith("train_distributed") else "local"


def _joined_shards_bytes(path) -> int:
    """Bytes of the shard files one process would join in memory (0: a file, or one shard)."""
    if not os.path.isdir(path):
        return 0
    from ..train.shards import list_shards

    shards = list_shards(path)
    return 0 if len(shards) < 2 else sum(os.path.getsize(s.path) for s in shards)


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _early_choice(args, decide: bool):
    """The engine, where it is settled before training: a checkpoint to resume follows the engine
    that wrote it; shards one process would join in memory beyond a quarter of the memory
    available stay with the workers; ``--engine local``.  None: the first steps decide."""
    workers = args.workers
    written_by = _checkpoint_engine(args)
    if written_by is not None and decide:
        return EngineChoice(written_by, workers, "the checkpoint to resume was written by that engine")
    joined, available = _joined_shards_bytes(args.data), _available_bytes()
    if decide and available is not None and joined > available / 4:
        return EngineChoice("data-parallel", workers, f"one process would join the shards in memory "
                            f"({joined / 2**30:.1f} GiB, {available / 2**30:.1f} GiB available)")
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_initialized():
        if decide:
            return EngineChoice("data-parallel", workers, "this process is in a torch.distributed group")
        raise ValueError("--engine local cannot run in a process already in a torch.distributed group.")
    return None if decide else EngineChoice("local", workers, "--engine local")


def _train_here(args, out, started, *, decide: bool):
    """Train in this process (``--engine local``, or ``auto`` until its first steps decide):
    :func:`_train_rank` as the one rank of a world of one (no process group, no torch), with
    the single-process engine as its trainer.  With ``auto`` the K workers start before they
    are chosen (:class:`_Speculation`), so that choosing them costs little: at once where a
    core is free for each of them beside this process, or where the input is large
    (:data:`_EARLY_BYTES`); else once the first steps show that they could pay.  Returns (0, the choice, None) once the
    outputs are written, or (None, the choice, the workers told to train, or None) for the
    caller to wait for them or launch them (nothing written, no warning issued: the ranks
    issue them)."""
    import warnings

    choice = _early_choice(args, decide)
    if choice is not None and choice.engine == "data-parallel":
        return None, choice, None
    speculation = None
    if choice is None and _has_torch() and (args.workers < _cores() or _input_bytes(args.data) >= _EARLY_BYTES):
        speculation = _Speculation(args, out)
    engine = _LocalEngine(args, out, started, decide=choice is None, choice=choice, speculation=speculation)
    if choice is not None:
        print(f"noisysgd train: {choice.line()}", file=sys.stderr, flush=True)
    args.local_engine = engine
    try:
        with warnings.catch_warnings(record=True) as issued:  # issued once it is known who trains
            warnings.simplefilter("default")
            try:
                _train_rank(0, 1, args, out)
            except _UseDataParallel:
                return None, engine.choice, engine.speculation
    finally:
        del args.local_engine
        if engine.speculation is not None and not engine.speculation.gone:
            engine.speculation.stop()
    for w in issued:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return 0, engine.choice, None
