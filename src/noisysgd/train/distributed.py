"""Data-parallel Noisy-SGD on :mod:`torch.distributed` (gloo on CPU, NCCL on GPU).

:func:`train_distributed` runs, on K processes that each hold a shard of the
rows, exactly the Noisy-SGD :func:`noisysgd.train.train` runs in one process
on the whole data set,

    ω ← Π_K[ω − η_t·(g_t + λ·ω + ξ_t)],   ξ_t ~ N(0, (z·L/b)²·I),

    g_t = (1/b)·Σ_{i∈B_t} clip_L(∇ℓ_i(ω)),

so that the certificate of the single-process run is the certificate of the
distributed one: the accountant cannot tell the difference.

Which rows a rank holds.  Explicit, never guessed: ``rows`` gives the
global index (0..n−1, in the order of the whole data set the run describes)
of each row of the rank's ``X``: an int (the shard is the contiguous range
``rows .. rows + len(X) − 1``) or an array of indices.  Before any step the
ranks exchange, in one ``all_gather``, the ranges they hold and a
description of the run (the :class:`~noisysgd.Run`, loss, feature clip,
target bound, dtype, start, analyses, secure mode and seed); the job is
refused on *every* rank (:class:`ValueError`) if the shards do not tile
0..n−1 exactly (a gap, an overlap, a row out of range) or if any rank
disagrees with rank 0 on the description — the message names the rank and
what differs.  A check that fails on one rank only (bad features, say) is
reported through the same exchange, so every rank refuses with it instead of
waiting on the others.

Batches.  Every rank runs the single-process batch stream
(:func:`~noisysgd.train.run_batches`) from the same seed — the ``batches``
stream of :func:`~noisysgd.train.rng_streams` — so every rank knows, without
talking, the global batch B_t of each step, and it is exactly the batch
:func:`train` uses for every batching (poisson: each example with
probability b/n whichever rank holds it; sample: one global b-subset;
shuffle / shuffle-once / cyclic: one global permutation per epoch / once;
full: everything).  Each rank keeps the members of B_t it holds, in the
batch's order, and computes their clipped gradient sum with the torch
backend's per-example derivatives (:mod:`.torch_backend`, the closed form
x̄ᵢ·ψᵢ, clipped to ‖x̄ᵢ‖·‖ψᵢ‖ ≤ L with the thresholds of the numpy engine).
The K partial sums are ``all_reduce``-d (SUM): d·k floats per step, the
only communication of a step.

Noise.  Seeded runs: every rank draws ξ_t from the ``noise`` stream of
:func:`~noisysgd.train.rng_streams`, with the same numpy call as
:func:`train` (``standard_normal(dtype, out=…)`` then ×(z·L/b)); the streams
are identical on every rank, so each rank draws the *same* noise — and the
same noise as the single-process :func:`train` with that seed, bit for bit —
with no communication.  (Drawing on rank 0 and broadcasting would give the
same numbers at the price of a second collective per step.)  So the noise
is added once, the same ξ_t on every rank, never K times.  Secure mode
(``secure_mode=True``): rank 0 alone draws from the operating system's
CSPRNG (:class:`~noisysgd.train.secure.SecureRandom`) — the start, which it
broadcasts; each batch, which it broadcasts (its size, then its indices);
and the noise, which it adds, multiplied by b, to its own partial sum before
the all-reduce, so that the reduced sum divided by b is g_t + ξ_t (one
collective per step, and ξ_t drawn once).  Other ranks never hold an
unreduced noise draw.

Every rank then applies the same update to the same reduced sum, so all
ranks hold bitwise identical parameters (checked at the end with one
broadcast; a difference raises :class:`RuntimeError`).

Equality with :func:`train`.  With the same seed the batches, the start and
the noise draws are identical; what differs is floating-point rounding:
the batch sum Σ_{i∈B} x̄ᵢψᵢ is added in another order (per rank, then
across ranks), and the per-example derivatives come from torch's kernels
instead of numpy's (σ, softmax: a few ulps).  For a convex, M-smooth loss
and η ≤ 2/(M + λ) a step is non-expansive and so is the projection, so
these per-step rounding differences (each ≲ b·ε·max‖x̄ᵢψᵢ‖ with ε the
machine epsilon) add up at most linearly in the number of steps; the tests
check agreement to 1e-9 in float64 (``tests/test_distributed.py``).

Data larger than memory.  When a rank's ``X`` is a :class:`numpy.memmap`
(``np.load("X.npy", mmap_mode="r")``, also on one process) the clipped,
augmented X̄ is never formed: each step reads the rows of its batch from the
file and augments them with :func:`~noisysgd.train.losses._augment`'s
arithmetic (the model is bit-identical to the in-memory one); ``full``
batches go through in chunks of 65 536 rows; the input is checked a block of
rows at a time.  What stays in memory is O(n) per rank, about 100 bytes per row
whatever d is (row norms, thresholds, labels; the permutation of shuffle/cyclic;
a Poisson step's draws): ``benchmarks/distributed_speed.py --rss``, and
``benchmarks/memory.py`` (a job under a memory limit 4× smaller than its data).
``noisysgd train`` memory-maps an uncompressed NPZ (:func:`noisysgd.io.npz_memmap`).

Faults.  A collective that fails (a rank that died, or the process group's
timeout, :func:`torch.distributed.init_process_group`'s ``timeout``) stops
the rank with :class:`RuntimeError` ``"noisysgd distributed: … at step
t …"``: one line, naming the rank and the step.

What is released: as for :func:`train`, a certificate covers ``coef`` only.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass

import numpy as np

from ..run import Run
from . import checkpoint as _ckpt
from .batching import BatchStream, generator_from_state, run_batches
from .engine import (
    refuse_adaptive,
    TrainResult,
    checked_constants,
    checkpoint_options,
    run_description,
    enforced_record,
    initial_iterate,
    prepare_run,
    safe_radius,
    clip_thresholds,
    rng_streams,
)
from .leaks import TRAINER_FRAMES, check_declared_constants
from ..rowmaps import augment_rows
from .losses import BinaryLogistic, Loss
from .secure import SecureRandom
from .torch_backend import derivative_for, resolve_device, import_torch
from .declared import takes_declarations

__all__ = ["train_distributed", "Placement", "DistributedError", "local_rows", "launch_local", "start_local",
           "LocalJob", "free_port"]


#: Rows of a memory-mapped X processed at once (bounds the memory of a 'full' step).
_LAZY_CHUNK = 65536


class DistributedError(RuntimeError):
    """A collective failed during training: a rank died, stopped, or timed out."""


# --------------------------------------------------------------------------- rows


def local_rows(rows, count: int, n: int) -> np.ndarray:
    """The global indices of a rank's ``count`` rows, validated.

    ``rows`` is an int (the contiguous range rows .. rows + count − 1) or an
    array of ``count`` distinct indices in 0..n−1; None means 0 (the whole
    data set on one rank).
    """
    if rows is None:
        rows = 0
    if isinstance(rows, (int, np.integer)) and not isinstance(rows, bool):
        start = int(rows)
        if start < 0 or start + count > n:
            raise ValueError(f"rows must be an offset with 0 <= rows and rows + len(X) <= run.n = {n} "
                             f"(len(X) = {count}). Found {rows!r}.")
        return np.arange(start, start + count, dtype=np.int64)
    try:
        idx = np.asarray(rows)
    except (TypeError, ValueError):
        raise ValueError(f"rows must be an int offset or an array of global row indices. Found {rows!r}.") from None
    if idx.ndim != 1 or idx.dtype.kind not in "iu":
        raise ValueError(f"rows must be a 1-D array of integer global row indices. Found dtype {idx.dtype}, "
                         f"shape {idx.shape}.")
    if idx.shape[0] != count:
        raise ValueError(f"rows must hold one global index per row of X ({count}). Found {idx.shape[0]}.")
    idx = idx.astype(np.int64)
    if count and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f"rows must lie in 0..run.n − 1 = {n - 1}. Found indices from {int(idx.min())} "
                         f"to {int(idx.max())}.")
    if np.unique(idx).size != count:
        raise ValueError("rows must be distinct (a row held twice would be counted twice). Found repeats.")
    return idx


def _ranges(sorted_idx: np.ndarray) -> list[tuple[int, int]]:
    """Sorted distinct indices as maximal [start, stop) ranges (compact for contiguous shards)."""
    if sorted_idx.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(sorted_idx) != 1) + 1
    starts = np.concatenate(([0], breaks))
    stops = np.concatenate((breaks, [sorted_idx.size]))
    return [(int(sorted_idx[a]), int(sorted_idx[b - 1]) + 1) for a, b in zip(starts, stops)]


def _tiling_error(all_ranges, n: int) -> str | None:
    """Why the ranks' ranges do not tile 0..n−1 exactly (None when they do)."""
    flat = sorted((a, b, r) for r, ranges in enumerate(all_ranges) for a, b in ranges)
    pos = 0
    for a, b, r in flat:
        if a > pos:
            return f"rows {pos}..{a - 1} are held by no rank"
        if a < pos:
            return f"row {a} is held twice (rank {r} and another rank)"
        pos = b
    if pos != n:
        return f"rows {pos}..{n - 1} are held by no rank (run.n = {n})"
    return None


# --------------------------------------------------------------------------- group


def _group_info(dist, group):
    """(rank, world size) of this process in ``group`` (the default group when
    None); (0, 1) and no communication when torch.distributed is not initialised."""
    if not dist.is_available() or not dist.is_initialized():
        if group is not None:
            raise ValueError("group was given but torch.distributed is not initialised "
                             "(call torch.distributed.init_process_group first).")
        return 0, 1, False
    return dist.get_rank(group), dist.get_world_size(group), True


def _fail(rank, what, t, err) -> DistributedError:
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return DistributedError(
        f"noisysgd distributed: rank {rank}: {what} failed at step {t} (another rank died, stopped or "
        f"timed out; the job is stopped): {first}")


def _describe(p, checked, random_state, rows_count) -> dict:
    """What every rank must agree on: the engine's description of the job (what a
    checkpoint must match), plus the seed and the number of features."""
    out = run_description(p, checked, None)
    del out["algorithm"], out["context"]
    out.update(random_state=random_state, n_features=int(p.X.shape[1]))
    return out


def _first_difference(a: dict, b: dict) -> str:
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            return f"{key}: rank 0 has {a.get(key)!r}, this one {b.get(key)!r}"
    return "?"


# --------------------------------------------------------------------------- public


@takes_declarations
def train_distributed(
    run: Run,
    loss: Loss,
    X,
    y,
    *,
    rows=None,
    feature_clip: float,
    target_bound: float | None = None,
    intercept_scaling: float = 1.0,
    init=None,
    random_state=None,
    dtype="float64",
    analyses=None,
    secure_mode: bool = False,
    placement: "Placement | None" = None,
    checkpointing=None,
) -> TrainResult:
    """Train the Noisy-SGD ``run`` describes, data-parallel over a process group.

    Call it on every rank of ``placement.group`` (the default process group when None;
    without an initialised :mod:`torch.distributed` it runs on one process),
    each with its shard.  Same arguments, checks and result as
    :func:`noisysgd.train.train`, except:

    Parameters
    ----------
    X, y : arrays
        This rank's rows (features and labels) — a shard of the run's n.
    rows : None, int or array of int
        Global indices of this rank's rows (module docstring): an offset
        (contiguous shard) or one index per row.  None: 0.  The ranks'
        shards must tile 0..run.n − 1 exactly.
    random_state : None or int
        The shared seed (every rank must pass the same; a Generator is
        refused, its agreement could not be checked).  None: rank 0 draws
        one from the OS and sends it to the others in the opening exchange.
    secure_mode : bool
        Randomness from rank 0's CSPRNG (module docstring).
    placement : Placement, optional
        Where this rank computes: its ``device`` (default "cpu" with gloo; a
        CUDA device with NCCL) and process ``group`` (None: the default one).
    checkpointing : Checkpointing, optional
        As :func:`train`, read on rank 0 only: rank 0 alone writes the
        checkpoint (atomically, every ``every`` epochs, and at
        step 0), on its own file system.  It records the run, the generators'
        states (rank 0's equal every rank's), and a keyed fingerprint of every
        rank's shard (rows, features, labels): a resume needs the same number
        of ranks holding the same shards, and continues bit-identically
        (seeded runs; secure mode draws fresh randomness, as :func:`train`).
        After a rank dies, the last checkpoint is the last one written before
        it: the job stops at the next collective, before any later write.

    Returns
    -------
    TrainResult
        The same on every rank (``coef`` bitwise identical).  ``enforced``
        adds ``backend`` ("torch.distributed"), ``world_size``, ``rank``,
        ``device`` and ``shards`` (the [start, stop) ranges each rank held).

    Raises
    ------
    ValueError
        On every rank, before any step: bad input on any rank, shards that do
        not tile 0..n−1, ranks that disagree on the run, loss, seed, ….
    DistributedError
        A collective failed (a rank died or timed out).
    """
    torch = import_torch()
    import torch.distributed as dist

    placement = Placement() if placement is None else placement
    group = placement.group
    rank, world, connected = _group_info(dist, group)
    engine = dict(feature_clip=feature_clip, target_bound=target_bound, intercept_scaling=intercept_scaling,
                  init=init, dtype=dtype, secure_mode=secure_mode)
    job, mine = _local_checks(torch, run, loss, X, y, rows, random_state, analyses, placement.device, checkpointing,
                              engine, rank)
    gathered = _gather(dist, mine, rank=rank, world=world, connected=connected, group=group)
    _agree(gathered, rank=rank, world=world, n=run.n, binary=job.labels is not None)
    p = job.p
    given_seed = random_state
    if random_state is None and not secure_mode:
        p.random_state = gathered[0]["seed"]
    all_ranges = [g["ranges"] for g in gathered]
    ledger, resumed = None, None
    if gathered[0]["checkpoint"] is not None:
        ledger, resumed = _open_ledger(dist, p, job.checked, gathered[0]["checkpoint"], rank=rank, world=world,
                                       connected=connected, group=group, idx=job.idx, given_seed=given_seed,
                                       all_ranges=all_ranges)

    # every check passed, on every rank: warn, then compute
    check_declared_constants(feature_clip=p.feature_clip, row_norms=p.row_norms, target_bound=p.target_bound,
                             y=p.raw_y if p.target_bound else None, stacklevel=3 + TRAINER_FRAMES)
    refuse_adaptive(run, "trained by data-parallel training")
    noise_std = run.noise_multiplier * run.lipschitz / run.batch_size
    return _execute(torch, dist, p, job.device, job.idx, job.order, rank=rank, world=world, connected=connected,
                    group=group, noise_std=noise_std, ledger=ledger, resumed=resumed, all_ranges=all_ranges,
                    extra={"constants": job.constants.to_dict(), "derivation": job.constants.derivation,
                           "analyses_checked": list(job.checked), "noise_multiplier": run.noise_multiplier,
                           "secure_mode": p.secure_mode})


@dataclass(frozen=True)
class Placement:
    """Where a rank of :func:`train_distributed` computes: its ``device`` ("cpu" with gloo,
    a CUDA device with NCCL) and its process ``group`` (None: the default group)."""

    device: object = "cpu"
    group: object = None


@dataclass
class _Job:
    """This rank's side of the job once its own checks passed (``p`` None if they failed)."""

    p: object = None
    constants: object = None
    checked: tuple = ()
    device: object = None
    idx: np.ndarray | None = None
    order: np.ndarray | None = None
    labels: list | None = None


def _local_checks(torch, run, loss, X, y, rows, random_state, analyses, device, checkpointing, engine: dict,
                  rank: int):
    """This rank's checks (the numpy engine's, on its shard) and what it tells the others in
    the opening exchange: (its :class:`_Job`, its message).  A refusal is not raised here but
    sent, so that every rank refuses together."""
    job, error, description, ckpt = _Job(), None, None, None
    try:
        if not isinstance(run, Run):
            raise ValueError(f"run must be a noisysgd.Run. Found {type(run).__name__}.")
        if isinstance(random_state, np.random.Generator) or not (
                random_state is None or (isinstance(random_state, (int, np.integer))
                                         and not isinstance(random_state, bool) and random_state >= 0)):
            raise ValueError("random_state must be None or a non-negative int for train_distributed (the "
                             f"shared seed every rank passes). Found {random_state!r}.")
        Xa = X.detach().cpu().numpy() if isinstance(X, torch.Tensor) else X
        ya = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else y
        count = np.shape(Xa)[0] if np.ndim(Xa) == 2 else None
        if count is None:
            raise ValueError(f"X must be a 2-D array. Found shape {np.shape(Xa)}.")
        job.idx = local_rows(rows, count, run.n)
        # the numpy engine's checks, on this shard's rows
        job.p = prepare_run(run, loss, Xa, ya, random_state=None if random_state is None else int(random_state),
                         callback=None, n_rows=count, **engine)
        job.constants, job.checked = checked_constants(run, loss, job.p, analyses)
        derivative_for(loss)
        job.device = resolve_device(torch, device)
        description = _describe(job.p, job.checked, random_state, count)
        if rank == 0:
            ckpt = checkpoint_options(run, checkpointing)
            ckpt = ckpt if ckpt[0] is not None else None
        if isinstance(loss, BinaryLogistic):
            job.labels = sorted({float(v) for v in np.unique(np.asarray(ya, dtype=np.float64))})
    except (ValueError, TypeError) as err:
        error = str(err)
        ckpt = None
    idx = job.idx
    job.order = np.argsort(idx, kind="stable") if idx is not None else None
    ranges = _ranges(idx[job.order]) if idx is not None else []
    seed = None
    if rank == 0 and random_state is None and not engine["secure_mode"]:
        seed = secrets.randbits(63)
    mine = {"error": error, "description": description, "ranges": ranges, "seed": seed, "labels": job.labels,
            "checkpoint": None if ckpt is None else (str(ckpt[0]),) + tuple(ckpt[1:])}
    return job, mine


def _gather(dist, mine: dict, *, rank, world, connected, group) -> list:
    """The opening exchange: every rank's message, on every rank."""
    if not connected:
        return [mine]
    gathered = [None] * world
    try:
        dist.all_gather_object(gathered, mine, group=group)
    except Exception as err:  # noqa: BLE001 - any backend failure is reported the same way
        raise _fail(rank, "the opening exchange (all_gather)", 0, err) from None
    return gathered


def _agree(gathered: list, *, rank: int, world: int, n: int, binary: bool) -> None:
    """Every rank decides the same, from the same gathered list: a refusal anywhere, ranks
    that disagree on the job, shards that do not tile 0..n − 1, or mixed label codings."""
    for r, g in enumerate(gathered):
        if g["error"] is not None:
            raise ValueError(g["error"] if r == rank else f"rank {r} refused the job: {g['error']}")
    ref = gathered[0]["description"]
    for r, g in enumerate(gathered):
        if g["description"] != ref:
            raise ValueError(f"ranks disagree on the job: rank {r} differs from rank 0 in "
                             f"{_first_difference(ref, g['description'])}")
    why = _tiling_error([g["ranges"] for g in gathered], n)
    if why is not None:
        raise ValueError(f"rows: the shards of the {world} rank(s) must tile 0..run.n − 1 = {n - 1} "
                         f"exactly: {why}.")
    if binary:
        values = set().union(*(set(g["labels"]) for g in gathered))
        if not (values <= {-1.0, 1.0} or values <= {0.0, 1.0}):
            raise ValueError("y must hold binary labels in {0, 1} or {-1, +1} on every rank (one coding "
                             f"for the whole data set). Found values {sorted(values)} across ranks.")


def _open_ledger(dist, p, checked, options, *, rank, world, connected, group, idx, given_seed, all_ranges):
    """Rank 0 opens the checkpoint (new, or the run to resume, checked against this run and
    every rank's shard); every rank gets the resume state.  Refusals reach every rank."""
    path, every, resume, keep, context = options

    def share(obj):
        box = [obj]
        if connected:
            try:
                dist.broadcast_object_list(box, src=0, group=group)
            except Exception as err:  # noqa: BLE001
                raise _fail(rank, "the checkpoint exchange", 0, err) from None
        return box[0]

    def gather(obj):
        if not connected:
            return [obj]
        out = [None] * world
        try:
            dist.all_gather_object(out, obj, group=group)
        except Exception as err:  # noqa: BLE001
            raise _fail(rank, "the checkpoint exchange", 0, err) from None
        return out

    key = None
    if rank == 0:  # the key of the shards' fingerprints: the recorded one on resume, else fresh
        try:
            from pathlib import Path

            if resume and Path(path).exists():
                key = _ckpt.read_checkpoint(path).header.get("description", {}).get("shard_key")
            key = key or _ckpt.new_key().hex()
        except ValueError as err:
            key = ("error", str(err))
    key = share(key)
    if isinstance(key, (tuple, list)):
        raise ValueError(key[1])
    rows_sorted = np.ascontiguousarray(np.sort(idx))
    digest = _ckpt.data_fingerprint(np.concatenate([p.X.reshape(-1), rows_sorted.astype(np.float64)]),
                                    p.Y, bytes.fromhex(key))
    digests = gather(digest)
    ledger, state = None, None
    if rank == 0:
        try:
            description = {**run_description(p, checked, context),
                           "algorithm": "noisysgd.train.distributed.train_distributed",
                           "world_size": world, "shard_key": key}
            fingerprints = np.array([list(bytes.fromhex(d)) for d in digests], dtype=np.uint8)
            ranges = np.array([[r, a, b] for r, rr in enumerate(all_ranges) for a, b in rr], dtype=np.int64)
            ledger = _ckpt.Ledger.open(path, resume=resume, description=description, X=fingerprints, Y=ranges,
                                       random_state=given_seed, every_steps=every, keep=keep)
            r = ledger.resumed
            state = None if r is None else {
                "step": r.step, "W": r.W, "noise_state": r.noise_state, "batch_meta": r.batch_meta,
                "batch_arrays": r.batch_arrays, "init_kind": r.init_kind}
            state = {"ok": state}
        except ValueError as err:
            state = {"error": str(err)}
    state = share(state)
    if "error" in state:
        raise ValueError(state["error"] if rank == 0 else f"rank 0 refused the checkpoint: {state['error']}")
    return ledger, state["ok"]


def _execute(torch, dist, p, device, idx, order, *, rank, world, connected, group, noise_std,
             all_ranges, extra, ledger=None, resumed=None) -> TrainResult:
    run, dt = p.run, p.dtype
    r = _RankLoop(torch, dist, p, device, idx, order, rank=rank, connected=connected, group=group)
    W, stream, noise_rng, init_kind, start = r.start(resumed)
    flat = W.view(-1)

    def save(step):  # rank 0: the state after `step` steps (atomic); every rank holds the same W
        ledger.save(step, W.detach().cpu().numpy(), stream, noise_rng, [], init_kind)

    if ledger is not None and resumed is None:
        save(0)
    inv_b = 1.0 / run.batch_size
    radius = safe_radius(run, dt)
    r2 = None if radius is None else float(radius) ** 2
    l2 = run.strong_convexity
    noise_np = np.empty(r.shape, dtype=dt) if noise_std > 0.0 else None
    etas = [float(e) for e in np.asarray(run.step_sizes(start), dtype=float)]
    G = torch.zeros_like(W)
    secure = p.secure_mode
    t = start
    for t, eta in enumerate(etas, start=start + 1):
        r.t = t
        # ---- this rank's clipped gradient sum Σ x̄ᵢψᵢ over B_t ∩ shard, then the sum over ranks
        r.local_sum(r.local_positions(r.global_batch(stream)), W, G)
        if secure and noise_rng is not None:  # rank 0 adds b·ξ_t: the reduced sum / b is g_t + ξ_t
            noise_rng.standard_normal(dtype=dt, out=noise_np)
            noise_np *= noise_std * run.batch_size
            G.add_(r.put(noise_np))
        r.collective("the gradient all_reduce", dist.all_reduce, G, group=group)
        G.mul_(inv_b)
        if noise_np is not None and not secure:  # the same draw as train(), on every rank
            noise_rng.standard_normal(dtype=dt, out=noise_np)
            noise_np *= noise_std
            G.add_(r.put(noise_np))
        if l2:
            W.mul_(1.0 - eta * l2)
        G.mul_(eta)
        W.sub_(G)
        if r2 is not None:
            sq = float(flat @ flat)
            if sq > r2:
                W.mul_(float(np.sqrt(r2 / sq)))
        if ledger is not None and t % ledger.every_steps == 0:
            save(t)
    steps = t
    r.check_agreement(W, world)
    if ledger is not None:  # every rank has finished (the check above): the end of the checkpoint
        if ledger.keep:
            if steps > start and steps % ledger.every_steps != 0:
                save(steps)
        else:
            ledger.sessions[-1][1] = steps
            _ckpt.delete_checkpoint(ledger.path)
        extra = {**extra, "checkpoint": ledger.summary()}
    enforced = {
        **enforced_record(p, clip_norm=run.lipschitz, radius=radius, init_kind=init_kind, steps=steps,
                    noise_std=noise_std),
        "backend": "torch.distributed",
        "world_size": world,
        "rank": rank,
        "device": str(device),
        "torch_version": torch.__version__,
        "shards": [[list(rg) for rg in ranges] for ranges in all_ranges],
        "noise_drawn": ("once per step by rank 0 from the CSPRNG, added to its partial sum before the "
                        "all-reduce" if p.secure_mode else
                        "once per step from the shared seeded noise stream (the same draw on every rank, "
                        "as noisysgd.train.train draws it)"),
    }
    enforced.update(extra)
    return TrainResult(coef=W.detach().cpu().numpy(), steps=steps, history=(), enforced=enforced, run=run,
                       loss=p.loss, feature_clip=p.feature_clip, intercept_scaling=p.intercept_scaling)


class _RankLoop:
    """One rank's side of the step loop of :func:`_execute`: its rows (X̄ in memory, or read
    from disk a chunk at a time when X is memory-mapped), the start and the streams, the
    global batch of each step (broadcast by rank 0 in secure mode), the positions of its rows
    in it, and its partial clipped-gradient sum."""

    def __init__(self, torch, dist, p, device, idx, order, *, rank, connected, group):
        self.torch, self.dist, self.p, self.device = torch, dist, p, device
        self.idx, self.order, self.rank, self.connected, self.group = idx, order, rank, connected, group
        self.t = 0
        run, loss, dt = p.run, p.loss, p.dtype
        self.lazy = isinstance(p.X, np.memmap)  # rows read from disk per step, X̄ never formed whole
        if self.lazy:  # the same arithmetic as augment_rows, row by row when a batch needs the rows
            self.scale = p.feature_clip / np.maximum(p.row_norms, p.feature_clip)
            clipped = np.minimum(p.row_norms, p.feature_clip)
            self.Xbar, norms = None, np.sqrt(clipped * clipped + p.intercept_scaling * p.intercept_scaling)
        else:
            self.Xbar, norms = augment_rows(p.X, p.feature_clip, dt, p.row_norms, bias=p.intercept_scaling)
        self.Y = p.Y.astype(dt) if p.Y.dtype.kind == "f" else p.Y.astype(np.int64)
        self.shape = loss.param_shape(p.X.shape[1])
        self.derivative = derivative_for(loss)
        self.thr = clip_thresholds(run.lipschitz, norms, dt)
        self.Xt, self.Yt, self.tt = (None, None, None) if self.lazy else (
            self.put(self.Xbar), self.put(self.Y), self.put(self.thr))
        self.all_local = np.arange(idx.size)
        self.sorted_rows = idx[order]
        # a contiguous shard in order (the usual case): membership is a range test, 'full' needs no gather
        self.lo = int(idx[0]) if idx.size else 0
        self.contiguous = bool(idx.size) and bool(np.array_equal(idx, np.arange(self.lo, self.lo + idx.size)))
        self.on_cpu = device.type == "cpu"  # gather rows with numpy there: torch's CPU index_select is ~7x slower
        self.count_t = torch.zeros(1, dtype=torch.int64, device=device)

    def put(self, a):
        return self.torch.from_numpy(np.ascontiguousarray(a)).to(self.device)

    def collective(self, what, fn, *args, **kwargs):
        if not self.connected:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as err:  # noqa: BLE001
            raise _fail(self.rank, what, self.t, err) from None

    def start(self, resumed):
        """(W, the batch stream, the noise stream, how the start was drawn, the first step):
        the run the checkpoint holds from where it stopped (the same on every rank), or a new
        start (rank 0's, broadcast, in secure mode)."""
        p, dt, rank, secure = self.p, self.p.dtype, self.rank, self.p.secure_mode
        start = 0
        if resumed is not None:
            start, init_kind = int(resumed["step"]), resumed["init_kind"]
            W0t = self.put(np.asarray(resumed["W"], dtype=dt))
            if secure:
                batch_rng = SecureRandom() if rank == 0 else None
                noise_rng = SecureRandom() if rank == 0 else None
            else:
                batch_rng = None
                noise_rng = generator_from_state(resumed["noise_state"])
        elif secure:
            batch_rng = SecureRandom() if rank == 0 else None
            noise_rng = SecureRandom() if rank == 0 else None
            W0, init_kind = initial_iterate(p, self.shape, SecureRandom())  # rank 0's is broadcast below
            W0t = self.put(np.array(W0, dtype=dt))
            self.collective("broadcasting the start", self.dist.broadcast, W0t, 0, group=self.group)
        else:
            streams = rng_streams(p.random_state)
            W0, init_kind = initial_iterate(p, self.shape, streams.init)
            W0t = self.put(np.array(W0, dtype=dt))
            batch_rng, noise_rng = streams.batches, streams.noise
        W = W0t.clone()
        if resumed is not None:
            fresh = (batch_rng if batch_rng is not None else SecureRandom()) if secure else None
            stream = BatchStream.from_state(resumed["batch_meta"], resumed["batch_arrays"], fresh)
        else:
            stream = run_batches(p.run, batch_rng if batch_rng is not None else SecureRandom())  # 'full': none
        self.minus_one = self.torch.full((1, 1), -1.0, dtype=W.dtype, device=self.device)
        self.matrix = W.dim() == 2
        return W, stream, noise_rng, init_kind, start

    def global_batch(self, stream):
        """The global batch B_t (rank 0's, broadcast, in secure mode)."""
        torch, p = self.torch, self.p
        if p.secure_mode and self.connected and p.run.batching != "full":
            batch = next(stream) if self.rank == 0 else None
            self.count_t.fill_(0 if batch is None else len(batch))
            self.collective("broadcasting the batch size", self.dist.broadcast, self.count_t, 0, group=self.group)
            bt = (torch.from_numpy(np.asarray(batch, dtype=np.int64)).to(self.device) if self.rank == 0
                  else torch.empty(int(self.count_t.item()), dtype=torch.int64, device=self.device))
            self.collective("broadcasting the batch", self.dist.broadcast, bt, 0, group=self.group)
            return bt.cpu().numpy()
        return next(stream)

    def local_positions(self, batch):
        """The positions (in this rank's rows) of the rows of ``batch`` it holds; None: all."""
        if isinstance(batch, slice):  # every local row, in global order
            return None if self.contiguous else self.order
        batch = np.asarray(batch, dtype=np.int64)
        if self.contiguous:
            return batch[(batch >= self.lo) & (batch < self.lo + self.idx.size)] - self.lo
        sorted_rows = self.sorted_rows
        pos = np.searchsorted(sorted_rows, batch)
        pos[pos >= sorted_rows.size] = 0
        hit = sorted_rows[pos] == batch if sorted_rows.size else np.zeros(batch.size, bool)
        return self.order[pos[hit]]

    def _lazy_rows(self, part):  # X̄ rows `part`, computed as augment_rows computes them (bit for bit)
        p, dt = self.p, self.p.dtype
        Xr = np.asarray(p.X[part])
        out = np.empty((part.size, Xr.shape[1] + 1), dtype=dt)
        if Xr.dtype == np.float64:
            np.multiply(Xr, self.scale[part, None], out=out[:, :-1], casting="same_kind")
        else:
            out[:, :-1] = Xr.astype(np.float64) * self.scale[part, None]
        out[:, -1] = p.intercept_scaling
        return out

    def local_sum(self, local, W, G) -> None:
        """G ← this rank's clipped gradient sum Σ x̄ᵢψᵢ over its rows ``local`` of the batch."""
        torch, loss, Y, thr = self.torch, self.p.loss, self.Y, self.thr
        if self.lazy and (local is None or local.size):
            sel = self.all_local if local is None else local
            G.zero_()
            for c in range(0, sel.size, _LAZY_CHUNK):  # 'full': a chunk of rows at a time
                part = sel[c:c + _LAZY_CHUNK]
                Xb = self.put(self._lazy_rows(part))
                D = self.derivative(loss, Xb @ W, self.put(Y[part]), self.put(thr[part]), self.minus_one)
                G.add_(Xb.T @ D)
        elif local is None or local.size:
            if local is None:
                Xb, Yb, tb = self.Xt, self.Yt, self.tt
            elif self.on_cpu:
                Xb, Yb, tb = (torch.from_numpy(self.Xbar[local]), torch.from_numpy(Y[local]),
                              torch.from_numpy(thr[local]))
            else:
                li = torch.from_numpy(local).to(self.device)
                Xb, Yb, tb = self.Xt.index_select(0, li), self.Yt.index_select(0, li), self.tt.index_select(0, li)
            D = self.derivative(loss, Xb @ W, Yb, tb, self.minus_one)
            if self.matrix:
                torch.mm(Xb.T, D, out=G)
            else:
                torch.mv(Xb.T, D, out=G)
        else:
            G.zero_()

    def check_agreement(self, W, world: int) -> None:
        """Every rank must hold rank 0's parameters, bit for bit."""
        if self.connected and world > 1:
            ref = W.clone()
            self.collective("the final parameter check", self.dist.broadcast, ref, 0, group=self.group)
            if not self.torch.equal(ref, W):
                raise DistributedError(f"noisysgd distributed: rank {self.rank}: parameters differ from rank 0's "
                                       "after the last step (a non-deterministic collective?)")


# --------------------------------------------------------------------------- local launcher


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a local process group)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: BLAS/OpenMP threads per local worker, unless the environment sets them: one each, so that K
#: workers on K cores do not each run a thread pool as wide as the machine.
WORKER_THREADS = 1
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
                     "NUMEXPR_NUM_THREADS")


@contextlib.contextmanager
def _thread_limits(threads: int):
    """The thread-count variables a spawned worker reads when it imports numpy and torch, set
    to ``threads`` where the user has not set them, for the duration of the ``with`` block (the
    parent's own pools are already sized; a spawned child copies the environment at start)."""
    added = [v for v in _THREAD_VARIABLES if v not in os.environ]
    for v in added:
        os.environ[v] = str(threads)
    try:
        yield
    finally:
        for v in added:
            os.environ.pop(v, None)


def _local_worker(rank, world, port, timeout_s, fn, args, prog="noisysgd", refusals_from_rank0=False):
    import datetime
    import os
    import sys

    import torch.distributed as dist

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    code = 0
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=timeout_s))
        try:
            fn(rank, world, *args)
        finally:
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001 - a dead peer may make the teardown fail too
                pass
    except (ValueError, RuntimeError, OSError) as err:
        # OSError: what the machine refused (a file that cannot be memory-mapped under an
        # address-space limit, a full disk): one line, as for a refusal, never a traceback
        msg = " ".join(str(err).split()) or type(err).__name__
        code = 2 if isinstance(err, ValueError) else 1
        if not (code == 2 and refusals_from_rank0 and rank != 0):  # a refusal is the same on every rank
            print(f"{prog}: error: {msg}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(code)  # no interpreter teardown: a dead peer must not hang the exit


def launch_local(fn, world_size: int, args=(), *, timeout: float = 60.0, grace: float | None = None,
                 prog: str = "noisysgd", refusals_from_rank0: bool = False) -> list:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` fresh local processes
    (``spawn``), joined in one gloo process group on 127.0.0.1 (a free port)
    whose collectives time out after ``timeout`` seconds.

    Returns the processes' exit codes (0: success; 2: a ValueError, e.g. a
    refused job; 1: a RuntimeError, e.g. a dead peer; None: still running
    ``grace`` seconds after the first failure, then terminated).  ``fn``
    must be importable (a module-level function).  Each failing process
    prints one line ``{prog}: error: …`` on its stderr — for a ValueError
    (a refused job, the same on every rank) only rank 0 does when
    ``refusals_from_rank0``.
    """
    return start_local(fn, world_size, args, timeout=timeout, grace=grace, prog=prog,
                       refusals_from_rank0=refusals_from_rank0).wait()


class LocalJob:
    """The processes :func:`start_local` started: :meth:`wait` for their exit codes (as
    :func:`launch_local` returns them), or :meth:`stop` them."""

    def __init__(self, procs, grace: float):
        self.procs, self.grace = procs, grace

    def failed(self) -> bool:
        """Whether a process has exited with an error (or been killed)."""
        return any(proc.exitcode not in (None, 0) for proc in self.procs)

    def wait(self) -> list:
        import time

        deadline = None
        while any(proc.is_alive() for proc in self.procs):
            if deadline is None and self.failed():
                deadline = time.monotonic() + self.grace  # one failed: the others get `grace` to notice
            if deadline is not None and time.monotonic() > deadline:
                break
            time.sleep(0.05)
        codes = []
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(5)
                codes.append(None)
            else:
                codes.append(proc.exitcode)
        return codes

    def stop(self) -> None:
        """Terminate every process still running (SIGTERM), and reap them."""
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
        for proc in self.procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(5)


def start_local(fn, world_size: int, args=(), *, timeout: float = 60.0, grace: float | None = None,
                prog: str = "noisysgd", refusals_from_rank0: bool = False) -> LocalJob:
    """:func:`launch_local` without waiting: the processes are started, and the returned
    :class:`LocalJob` waits for them or stops them.  ``args`` may hold objects of the ``spawn``
    context (its queues), passed to every process as it starts."""
    import multiprocessing as mp

    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive int. Found {world_size!r}.")
    ctx = mp.get_context("spawn")
    port = free_port()
    procs = [ctx.Process(target=_local_worker, args=(r, world_size, port, float(timeout), fn, tuple(args), prog,
                                                     refusals_from_rank0))
             for r in range(world_size)]
    with _thread_limits(WORKER_THREADS):  # in the environment the workers start with, before their imports
        for proc in procs:
            proc.start()
    return LocalJob(procs, 2.0 * timeout if grace is None else grace)
