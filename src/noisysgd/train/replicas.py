"""Many independent runs of the same Noisy-SGD at once (for privacy audits).

:func:`train_replicas` runs R independent copies of the algorithm that
:func:`noisysgd.train.train` runs for a :class:`~noisysgd.Run` — same
validation (``prepare_run``, the loss constants, the analyses), same clipping
(``loss.clipped_derivative`` with the engine's ``clip_thresholds``), same λ,
projection radius (``safe_radius``), step sizes (``run.step_sizes()``),
denominator b, noise std z·L/b and start (the engine's ``initial_iterate``) — with
the parameters of all replicas stacked into one array of shape (R, *shape)
and every step vectorised over replicas.  Each replica draws its own batches
(as the batching scheme says) and its own noise.

Randomness, two modes:

* ``random_state`` None, an int or a Generator (the default, fast): one set
  of streams (:func:`~noisysgd.train.rng_streams`, as the engine), shared by
  the replicas in turn.  Noise: one (R, *shape) draw per step from the noise
  stream.  Batches from the batch stream: ``full`` none; ``cyclic`` and
  ``shuffle-once`` R permutations drawn once, ``shuffle`` R permutations per epoch
  (``Generator.permuted`` row by row, the same numbers as R successive
  ``permutation(n)`` calls); ``sample`` b distinct indices per replica
  (Floyd's algorithm vectorised over replicas when b² ≤ 4n, else the b
  smallest of n uniform keys); ``poisson`` an (R, n) Bernoulli(b/n)
  inclusion mask.  With R = 1 a ``full``, ``cyclic``, ``shuffle-once`` or ``shuffle`` run
  consumes the streams exactly as :func:`train` does, so it reproduces it
  (up to the summation order of floating point); ``sample`` and ``poisson``
  have the engine's law but not its stream.
* ``random_state`` a sequence of R seeds (ints or Generators): replica r uses
  ``rng_streams(random_state[r])`` and the engine's own batch generator
  (:func:`~noisysgd.train.run_batches`), so it *is* ``train(...,
  random_state=random_state[r])``.  Slower (a Python loop over replicas per
  step); for tests.

Cost per step: O(R·b·p) for index batches (gathered in chunks of replicas to
bound memory), O(R·n·p) for ``full`` and ``poisson`` (every example's score is
computed and masked).

What is released: only the final iterates, one per replica, as in
:func:`train`; nothing else is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..run import Run
from .batching import run_batches
from .engine import (
    refuse_adaptive,
    checked_constants,
    enforced_record,
    initial_iterate,
    prepare_run,
    safe_radius,
    clip_thresholds,
    random_source,
    rng_streams,
)
from .leaks import TRAINER_FRAMES, check_declared_constants
from ..rowmaps import augment_rows
from .losses import Loss
from .release import MIN_STEPS, BlockSums, check_average, mean_reversion, settled
from .declared import takes_declarations

__all__ = ["ReplicaResult", "train_replicas", "replica_batches"]

#: Largest number of gathered feature entries (replicas × batch × features)
#: held at once by an index-batch step; replicas are processed in chunks.
_GATHER_BUDGET = 1 << 22


@dataclass(frozen=True, eq=False)
class ReplicaResult:
    """The final iterates of R independent runs.

    Attributes
    ----------
    coef : numpy.ndarray, shape (R, *param_shape)
        Replica r's final iterate is ``coef[r]`` (the only thing released).
    replicas, steps : int
    enforced : dict
        What every replica enforced (as :attr:`TrainResult.enforced`), plus
        the randomness mode and the wall time.
    run, loss, feature_clip : as in :class:`~noisysgd.train.TrainResult`.
    """

    coef: np.ndarray
    replicas: int
    steps: int
    enforced: dict = field(default_factory=dict)
    run: Run | None = None
    loss: Loss | None = None
    feature_clip: float | None = None

    def scores(self, X) -> np.ndarray:
        """Scores x̄ᵀW_r of new examples for every replica: shape (R, m) or (R, m, k)."""
        from .losses import augment

        Xbar = augment(X, self.feature_clip, dtype=self.coef.dtype)
        return np.einsum("mp,rp...->rm...", Xbar, self.coef)

    def example_losses(self, X, y) -> np.ndarray:
        """The loss of every replica's final model on each example of (X, y):
        shape (R, m).  Uses ``loss.value`` on one example at a time."""
        from .losses import augment

        Xbar = augment(X, self.feature_clip, dtype=np.float64)
        Y = self.loss.encode_labels(y)
        if Y.shape[0] != Xbar.shape[0]:
            raise ValueError(f"y must have one label per row of X ({Xbar.shape[0]}). Found {Y.shape[0]}.")
        out = np.empty((self.replicas, Xbar.shape[0]))
        for i in range(Xbar.shape[0]):
            xi, yi = Xbar[i:i + 1], Y[i:i + 1]
            for r in range(self.replicas):
                out[r, i] = self.loss.value(self.coef[r].astype(np.float64), xi, yi)
        return out


# --------------------------------------------------------------------------- batches


def _floyd(rng: np.random.Generator, R: int, n: int, b: int) -> np.ndarray:
    """R uniform b-subsets of range(n): Floyd's algorithm, vectorised over rows.
    For j = n−b..n−1: t ~ U{0..j}; take t unless already taken, else j."""
    out = np.empty((R, b), dtype=np.int64)
    for i, j in enumerate(range(n - b, n)):
        t = rng.integers(0, j + 1, size=R)
        if i:
            taken = (out[:, :i] == t[:, None]).any(axis=1)
            t = np.where(taken, j, t)
        out[:, i] = t
    return out


def _sample_rows(rng: np.random.Generator, R: int, n: int, b: int) -> np.ndarray:
    if b == n:
        return np.broadcast_to(np.arange(n), (R, n)).copy()
    if b * b <= 4 * n:
        return _floyd(rng, R, n, b)
    keys = rng.random((R, n))
    return np.argpartition(keys, b - 1, axis=1)[:, :b]


class _VectorBatches:
    """Batches of R replicas from one shared batch stream (module docstring).
    Each step yields ("full", None), ("index", (R, b) int array) or
    ("mask", (R, n) bool array)."""

    def __init__(self, run: Run, R: int, rng: np.random.Generator, rows: int | None = None):
        self.run, self.R, self.rng = run, R, rng
        self.rows = run.n if rows is None else rows  # poisson under add-remove: q = b/run.n over these rows
        self.perm = None
        self.t = 0

    def __iter__(self):
        return self

    def __next__(self):
        run, R, rng = self.run, self.R, self.rng
        n, b, t = run.n, run.batch_size, self.t
        self.t += 1
        scheme = run.batching
        if scheme == "full":
            return "full", None
        if scheme == "poisson":
            q = b / n
            if q >= 1.0:
                return "full", None
            return "mask", rng.random((R, self.rows)) < q
        if scheme == "sample":
            return "index", _sample_rows(rng, R, n, b)
        K = n // b
        j = t % K
        if self.perm is None or (scheme == "shuffle" and j == 0):  # cyclic/shuffle-once: once
            self.perm = rng.permuted(np.broadcast_to(np.arange(n), (R, n)).copy(), axis=1)
        return "index", self.perm[:, j * b:(j + 1) * b]


class _EngineBatches:
    """Batches of R replicas, replica r from the engine's own generator on its own stream."""

    def __init__(self, run: Run, streams, rows: int | None = None):
        self.run = run
        self.rows = run.n if rows is None else rows
        self.iters = [run_batches(run, s.batches, rows=rows) for s in streams]

    def __iter__(self):
        return self

    def __next__(self):
        run = self.run
        got = [next(it) for it in self.iters]
        if run.batching == "full":
            return "full", None
        if run.batching == "poisson":
            mask = np.zeros((len(got), self.rows), dtype=bool)
            for r, idx in enumerate(got):
                mask[r, idx] = True
            return "mask", mask
        return "index", np.stack([np.asarray(g) for g in got])


def replica_batches(run: Run, replicas: int, rng: np.random.Generator, steps: int | None = None):
    """The first ``steps`` (default ``run.steps``) batches of ``replicas``
    replicas drawn as :func:`train_replicas` draws them from one stream, each
    as a list of R index arrays (for tests of the batch law).

    >>> import numpy as np, noisysgd
    >>> run = noisysgd.Run(n=6, batch_size=2, batching="cyclic", steps=4, learning_rate=0.1,
    ...                    noise_multiplier=1.0, lipschitz=1.0)
    >>> out = replica_batches(run, 2, np.random.default_rng(0))   # 4 steps of 2 replicas
    >>> [sorted(np.concatenate([out[t][r] for t in range(3)]).tolist()) for r in range(2)]
    [[0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5]]
    >>> [bool(np.array_equal(out[3][r], out[0][r])) for r in range(2)]   # cyclic: epoch 2 repeats
    [True, True]
    """
    it = _VectorBatches(run, int(replicas), rng)
    out = []
    for _ in range(run.steps if steps is None else int(steps)):
        kind, value = next(it)
        if kind == "full":
            out.append([np.arange(run.n) for _ in range(replicas)])
        elif kind == "mask":
            out.append([np.flatnonzero(row) for row in value])
        else:
            out.append([row.copy() for row in value])
    return out


# --------------------------------------------------------------------------- the step


def _gradient_index(loss, Xbar, Y, thr, W, idx, k_shape):
    """Σ_{i∈B_r} clipped ∇ℓ_i(W_r) for index batches idx (R, b): shape (R, p, k)."""
    R, b = idx.shape
    p = Xbar.shape[1]
    G = np.empty((R, p, W.shape[2]), dtype=W.dtype)
    chunk = max(1, _GATHER_BUDGET // max(1, b * p))
    for lo in range(0, R, chunk):
        hi = min(R, lo + chunk)
        ids = idx[lo:hi]
        Xb = Xbar[ids]                             # (r, b, p)
        S = np.matmul(Xb, W[lo:hi])                # (r, b, k)
        m = (hi - lo) * b
        D = _derivative(loss, S.reshape((m,) + k_shape), Y[ids].reshape(m), thr, ids)
        np.matmul(Xb.transpose(0, 2, 1), D.reshape(hi - lo, b, -1), out=G[lo:hi])
    return G


def _derivative(loss, S, Yb, thr, ids):
    if thr is None:
        return loss.derivative(S, Yb)
    return loss.clipped_derivative(S, Yb, thr[ids].reshape(-1))


def _gradient_all(loss, Xbar, Y, thr, W, mask, k_shape, tiled):
    """Σ over all n examples (``mask`` None) or over each replica's masked subset
    (``mask`` (R, n) bool), for replicas in chunks: shape (R, p, k).  ``tiled``
    caches the labels and thresholds repeated for a chunk."""
    R = W.shape[0]
    n, p = Xbar.shape
    G = np.empty((R, p, W.shape[2]), dtype=W.dtype)
    chunk = max(1, _GATHER_BUDGET // max(1, n * max(p, W.shape[2])))
    for lo in range(0, R, chunk):
        hi = min(R, lo + chunk)
        r = hi - lo
        if r not in tiled:
            tiled[r] = (np.tile(Y, r) if Y.ndim == 1 else np.concatenate([Y] * r),
                        None if thr is None else np.tile(thr, r))
        Yr, tr = tiled[r]
        S = np.matmul(Xbar, W[lo:hi])              # (r, n, k)
        m = r * n
        if tr is None:
            D = loss.derivative(S.reshape((m,) + k_shape), Yr)
        else:
            D = loss.clipped_derivative(S.reshape((m,) + k_shape), Yr, tr)
        D = D.reshape(r, n, -1)
        if mask is not None:
            D *= mask[lo:hi, :, None]
        np.matmul(Xbar.T, D, out=G[lo:hi])
    return G


def _core(loss, Xbar, Y, *, batches, step_sizes, denominator, W, l2, thresholds, noise_std, radius,
          noise_draw, on_step=None):
    """The step loop of :func:`noisy_sgd_core`, over a stack W of shape (R, p, k)."""
    k_shape = () if loss.n_classes is None else (loss.n_classes,)
    inv_b = 1.0 / denominator
    r2 = None if radius is None else float(radius) ** 2
    tiled: dict = {}
    t = 0
    for t, ((kind, batch), eta) in enumerate(zip(batches, step_sizes), start=1):
        eta = float(eta)
        if kind == "index":
            G = _gradient_index(loss, Xbar, Y, thresholds, W, batch, k_shape)
        else:
            G = _gradient_all(loss, Xbar, Y, thresholds, W, batch if kind == "mask" else None, k_shape, tiled)
        G *= inv_b
        if noise_std > 0.0:
            noise = noise_draw(W.shape)
            noise *= noise_std
            G += noise
        if l2:
            W *= 1.0 - eta * l2
        G *= eta
        W -= G
        if r2 is not None:
            sq = np.einsum("rpk,rpk->r", W, W)
            over = sq > r2
            if over.any():
                W[over] *= np.sqrt(r2 / sq[over])[:, None, None]
        if on_step is not None:
            on_step()
    return t


class _TailSum:
    """The running sum of the iterates after steps ⌊T/2⌋+1..T of the stack ``W`` (updated in
    place by the step loop), as an ``on_step`` hook that then calls ``then``; with
    ``average="auto"`` also the sums of the blocks :func:`noisysgd.train.release.mean_reversion`
    reads, per replica."""

    def __init__(self, W, steps: int, then, average):
        self.W, self.steps, self.first, self.then, self.seen = W, steps, steps // 2 + 1, then, 0
        self.average = check_average(average)
        self.total = np.zeros(W.shape) if average else None
        self.blocks = BlockSums(steps) if average == "auto" else None

    def step(self):
        self.seen += 1
        if self.seen >= self.first:
            np.add(self.total, self.W, out=self.total)
        if self.blocks is not None:
            self.blocks.add(self.seen, self.W)
        if self.then is not None:
            self.then()

    def released(self, steps: int):
        """(the released stack, None or "auto"'s record): the tail mean (True), or per replica the
        tail mean where its block means revert and the last iterate elsewhere ("auto")."""
        mean = self.total / (steps - self.first + 1)
        if self.average is True:
            return mean.astype(self.W.dtype), None
        if steps < MIN_STEPS:
            return self.W, {"rule": "auto", "statistics": None, "averaged": 0}
        means = self.blocks.means()
        stats = [mean_reversion([m[r] for m in means]) for r in range(self.W.shape[0])]
        out = self.W.copy()
        averaged = [r for r, c in enumerate(stats) if settled(c)]
        out[averaged] = mean[averaged].astype(self.W.dtype)
        return out, {"rule": "auto", "statistics": stats, "averaged": len(averaged)}


# --------------------------------------------------------------------------- public


@takes_declarations
def train_replicas(
    run: Run,
    loss: Loss,
    X,
    y,
    *,
    replicas: int,
    feature_clip: float,
    target_bound: float | None = None,
    init=None,
    random_state=None,
    dtype=np.float64,
    analyses=None,
    on_step=None,
    average: bool | str = False,
) -> ReplicaResult:
    """R independent runs of the Noisy-SGD ``run`` describes, vectorised.

    Same arguments, checks and algorithm as :func:`noisysgd.train.train`
    (no ``callback``, no ``record``), plus ``replicas`` = R ≥ 1 and
    ``on_step``, called with no argument after every step (progress).
    ``average``: each replica's ``coef`` is the mean of its iterates after steps
    ⌊T/2⌋+1..T (what ``release="tail-average"`` releases) instead of the last; "auto": that
    mean for the replicas whose iterates settled and the last for the others, as
    ``release="auto"`` decides under a composition certificate (the caller's to check: this
    function applies the rule whatever the run's certificate).
    ``random_state``: None, an int or a Generator (one set of streams shared
    by the replicas), or a sequence of R of those (replica r then reproduces
    ``train(..., random_state=random_state[r])``); see the module docstring.

    >>> import numpy as np, noisysgd
    >>> from noisysgd.train import BinaryLogistic, train
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40, 3)); y = (X[:, 0] > 0).astype(int)
    >>> run = noisysgd.Run(n=40, batch_size=40, batching="full", steps=30, learning_rate=0.5,
    ...                    noise_multiplier=2.0, lipschitz=1.0)
    >>> many = train_replicas(run, BinaryLogistic(), X, y, replicas=500, feature_clip=1.0,
    ...                       random_state=1)
    >>> many.coef.shape
    (500, 4)
    >>> one = train_replicas(run, BinaryLogistic(), X, y, replicas=1, feature_clip=1.0, random_state=7)
    >>> ref = train(run, BinaryLogistic(), X, y, feature_clip=1.0, random_state=7)
    >>> bool(np.allclose(one.coef[0], ref.coef, rtol=1e-12, atol=1e-14))
    True
    """
    if isinstance(replicas, bool) or not isinstance(replicas, (int, np.integer)) or replicas < 1:
        raise ValueError(f"replicas must be an integer >= 1. Found {replicas!r}.")
    R = int(replicas)
    per_replica = isinstance(random_state, Sequence) and not isinstance(random_state, (str, bytes))
    if per_replica:
        if len(random_state) != R:
            raise ValueError(
                f"random_state must be one seed, or a sequence of one seed per replica ({R}). "
                f"Found {len(random_state)}."
            )
        seeds = [random_source(s) for s in random_state]
        if any(s is None for s in seeds):
            raise ValueError("random_state must not hold None when it is a sequence (replicas would "
                             "not be reproducible). Found None.")
        state0 = None
    else:
        seeds = None
        state0 = random_state
    p = prepare_run(run, loss, X, y, feature_clip=feature_clip, target_bound=target_bound, init=init,
                 random_state=state0, dtype=dtype, callback=None)
    constants, checked = checked_constants(run, loss, p, analyses)
    check_declared_constants(feature_clip=p.feature_clip, row_norms=p.row_norms, target_bound=p.target_bound,
                             y=p.raw_y if p.target_bound else None, stacklevel=3 + TRAINER_FRAMES)
    started = time.perf_counter()
    dt = p.dtype
    Xbar, norms = augment_rows(p.X, p.feature_clip, dt, p.row_norms)
    Y = p.Y.astype(dt) if p.Y.dtype.kind == "f" else p.Y
    shape = loss.param_shape(p.X.shape[1])
    refuse_adaptive(run, "trained by replicated training")
    noise_std = run.noise_multiplier * run.lipschitz / run.batch_size
    if per_replica:
        streams = [rng_streams(s) for s in seeds]
        starts = [initial_iterate(p, shape, s.init) for s in streams]
        batches = _EngineBatches(run, streams, rows=p.X.shape[0])

        def noise_draw(full_shape):
            out = np.empty(full_shape, dtype=dt)
            for r, s in enumerate(streams):
                s.noise.standard_normal(dtype=dt, out=out[r].reshape(shape))
            return out
    else:
        s = rng_streams(p.random_state)
        starts = [initial_iterate(p, shape, s.init) for _ in range(R)]
        batches = _VectorBatches(run, R, s.batches, rows=p.X.shape[0])

        def noise_draw(full_shape):
            return s.noise.standard_normal(full_shape, dtype=dt)
    init_kind = starts[0][1]
    k = 1 if loss.n_classes is None else loss.n_classes
    W = np.empty((R, Xbar.shape[1], k), dtype=dt)
    for r, (W0, _) in enumerate(starts):
        W[r] = np.asarray(W0, dtype=dt).reshape(Xbar.shape[1], k)
    thresholds = clip_thresholds(run.lipschitz, norms, dt)
    radius = safe_radius(run, dt)
    tail = _TailSum(W, run.steps, on_step, average)
    steps = _core(loss, Xbar, Y, batches=batches, step_sizes=run.step_sizes(), denominator=run.batch_size,
                  W=W, l2=run.strong_convexity, thresholds=thresholds, noise_std=noise_std,
                  radius=radius, noise_draw=noise_draw, on_step=tail.step if average else on_step)
    W, record = tail.released(steps) if average else (W, None)
    enforced = {
        **enforced_record(p, clip_norm=run.lipschitz, radius=radius, init_kind=init_kind, steps=steps,
                    noise_std=noise_std),
        "constants": constants.to_dict(),
        "derivation": constants.derivation,
        "analyses_checked": list(checked),
        "noise_multiplier": run.noise_multiplier,
        "replicas": R,
        "randomness": "one stream per replica (engine streams)" if per_replica
        else "shared streams, vectorised over replicas",
        "seconds": time.perf_counter() - started,
    }
    if record is not None:  # average="auto": which replicas released their tail mean, and the statistics
        enforced["release"] = record
    return ReplicaResult(coef=W.reshape((R,) + shape), replicas=R, steps=steps, enforced=enforced,
                         run=run, loss=loss, feature_clip=p.feature_clip)
