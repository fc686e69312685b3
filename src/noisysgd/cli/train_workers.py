"""``noisysgd train`` on several processes: ``--workers K`` (local, gloo) or under torchrun.

The run, its calibration and its certificate are those of the single-process run
on the whole data set (:mod:`noisysgd.cli.train` shares its steps: flags, loss,
schedule, outputs); each rank reads only its own rows or shards
(:mod:`noisysgd.train.distributed`), and rank 0 alone writes the outputs.
"""

from __future__ import annotations

import os
import sys
import time

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


def cmd_train_distributed(args, env) -> int:
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


def _workers_rank(rank, world, args, out):  # one of the --workers processes (spawned)
    _train_rank(rank, world, args, out)


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
    import functools

    import torch.distributed as dist

    info, error = None, None
    try:
        X, y, offset, n, names, source = _read_rank_rows(args.data, args.target, rank, world)
        labels = None
        if args.task == "classification":
            labels = np.unique(y).tolist()
        info = {"names": names, "n": n, "labels": labels}
    except ValueError as err:
        error = str(err)
    gathered = [None] * world
    dist.all_gather_object(gathered, {"error": error, "info": info})
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
    trainer = functools.partial(_shard_trainer, rows=offset, device=device)
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
    sums = [None] * world
    dist.all_gather_object(sums, local)
    if rank != 0:
        return
    total = float(sum(sums))
    quality = ({"train_rmse": float(np.sqrt(total / n))} if args.task == "regression"
               else {"train_accuracy": total / n})
    finish(args, out, fit, dict(loss=loss, classes=classes, target=args.target, feature_names=names),
            source=source, n=n, quality=quality, seconds=seconds,
            extra={"workers": world, "backend": "torch.distributed " + args.backend})


def _shard_trainer(run, loss, X, y, *, rows, device, record=False, callback=None, **engine):
    """fit_private's trainer on this rank's shard: :func:`noisysgd.train.train`'s signature
    (``engine``: its keyword arguments), with no trajectory record and no progress callback."""
    from ..train.distributed import Placement, train_distributed

    return train_distributed(run, loss, X, y, rows=rows, placement=Placement(device=device), **engine)
