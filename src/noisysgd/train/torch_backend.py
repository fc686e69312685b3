"""The trainer's engine on PyTorch tensors (CPU, or CUDA when available).

:func:`train_torch` runs the same Noisy-SGD as :func:`noisysgd.train.train`,

    ω ← Π_K[ω − η_t·(g_t + λ·ω + ξ_t)],   ξ_t ~ N(0, (z·L/b)²·I),

    g_t = (1/b)·Σ_{i∈B_t} clip_L(∇ℓ_i(ω)),

every constant read from the :class:`~noisysgd.Run`, with the data, the
parameters and the noise held as tensors on ``device`` — for large data sets
or features precomputed by a frozen network, on a GPU.  There is one place for
the rules: the validation, the loss constants and their checks against the
run, the analyses check, the privacy-leak warnings, the random streams, the
start point, the clip thresholds and the batch stream are the numpy engine's
own (:mod:`noisysgd.train.engine`, :mod:`noisysgd.train.batching`), called
from here.  Only the step loop is written again, in torch.

* Batches: drawn by the numpy batch stream (:func:`~noisysgd.train.run_batches`)
  from the same ``batches`` generator of :func:`~noisysgd.train.rng_streams`,
  so a given ``random_state`` gives exactly the batches :func:`train` uses;
  they are moved to the device in chunks of steps.
* Noise: a :class:`torch.Generator` on the device, seeded with one 63-bit
  integer drawn from the ``noise`` stream.  For a given seed it is *not* the
  noise :func:`train` draws (the tests check the two engines agree in
  distribution), but it is independent of the batches and of the start.
* Start: drawn (``run.initialization="gaussian"``) or given exactly as in
  :func:`train`, from the ``init`` stream.
* Clipping: the closed form of the numpy losses — a GLM's per-example
  gradient is x̄ᵢ·φ'(sᵢ)ᵀ, so clipping to norm L rescales the derivative with
  the thresholds τᵢ = L/‖x̄ᵢ‖ (computed once, in float64, rounded down into
  ``dtype``); no per-example gradient matrix is ever formed.  A step is one
  gather, one matmul forward, the clipped derivative, and one fused
  ``addmm``/``addmv`` back (W ← (1 − η_tλ)·W − (η_t/b)·X̄_Bᵀψ).
* The loop does not synchronise with the device: step sizes are host floats,
  the projection factor min(1, (D/2)/‖W‖) is computed on the device.

Only the five losses of :mod:`noisysgd.train.losses` are supported (their
exact classes; a subclass could change the derivative and is refused).

PyTorch is optional: it is imported on the first call, and a missing torch
raises :class:`ImportError` with the hint ``pip install 'noisysgd[torch]'``.
``X``, ``y`` and ``init`` may be numpy arrays or tensors (a tensor is copied
to the host once for the checks, which are numpy's).

What is released: as for :func:`train`, a certificate covers ``coef`` only.
"""

from __future__ import annotations

import math

import numpy as np

from ..run import Run
from .batching import run_batches
from .engine import (
    refuse_adaptive,
    TrainResult,
    checked_constants,
    enforced_record,
    initial_iterate,
    prepare_run,
    PreparedRun,
    safe_radius,
    clip_thresholds,
    rng_streams,
)
from .leaks import TRAINER_FRAMES, check_declared_constants
from .losses import (
    BinaryLogistic,
    Huber,
    Loss,
    OneVsRestLogistic,
    Softmax,
    Squared,
)
from ..rowmaps import augment_blocks
from .rows import block_rows
from .declared import takes_declarations

__all__ = ["train_torch", "sgd_torch", "noisy_sgd_core_torch", "TORCH_INSTALL_HINT"]

#: What the ImportError says when PyTorch is missing.
TORCH_INSTALL_HINT = "pip install 'noisysgd[torch]'"

#: Steps whose batch indices are moved to the device in one transfer.
_CHUNK_STEPS = 512


def import_torch():
    """The torch module, or ImportError with the install hint."""
    try:
        import torch
    except ImportError as err:
        raise ImportError(
            f"noisysgd.train.torch_backend needs PyTorch, which is not installed: {TORCH_INSTALL_HINT}"
        ) from err
    return torch


# --------------------------------------------------------------------------- derivatives
#
# Each takes the loss, the batch scores S (a fresh tensor it may overwrite),
# the encoded labels Y of the batch, the thresholds τ = L/‖x̄‖ of the batch
# (None: no clipping) and a 1×1 tensor holding −1 (made once per run), and
# returns ψ with ‖x̄ᵢ‖·‖ψᵢ‖ ≤ L — the torch twins of the numpy losses'
# ``derivative`` / ``clipped_derivative``.


def _clip_scalar(D, t):
    if t is not None:
        D.clamp_(min=-t, max=t)  # = clip(φ', −τ, τ)
    return D


def _binary_logistic(loss, S, Y, t, minus_one):
    D = S.mul_(Y).neg_().sigmoid_()  # σ(−y·s)
    D.mul_(Y).neg_()  # φ' = −y·σ(−y·s)
    return _clip_scalar(D, t)


def _minus_one_at_labels(D, Y, minus_one):
    """D[i, y_i] −= 1 without building a one-hot matrix."""
    return D.scatter_add_(1, Y.unsqueeze(1), minus_one.expand(Y.shape[0], 1))


def _one_vs_rest(loss, S, Y, t, minus_one):
    D = _minus_one_at_labels(S.sigmoid_(), Y, minus_one)  # σ(s_c) − 1[c = y]
    if t is not None:
        tk = (t / math.sqrt(loss.n_classes)).unsqueeze(1)  # each class to ±L/(√k·‖x̄‖)
        D.clamp_(min=-tk, max=tk)
    return D


def _softmax(loss, S, Y, t, minus_one):
    D = _minus_one_at_labels(S.softmax(dim=1), Y, minus_one)  # softmax(s) − e_y
    if t is not None:
        dn = D.norm(dim=1)
        D.mul_(t.div(dn.maximum(t)).unsqueeze(1))  # min(1, τ/‖φ'‖), no division by zero
    return D


def _squared(loss, S, Y, t, minus_one):
    return _clip_scalar(S.sub_(Y), t)


def _huber(loss, S, Y, t, minus_one):
    return _clip_scalar(S.sub_(Y).clamp_(-loss.delta, loss.delta), t)


_DERIVATIVES = {
    BinaryLogistic: _binary_logistic,
    OneVsRestLogistic: _one_vs_rest,
    Softmax: _softmax,
    Squared: _squared,
    Huber: _huber,
}


def derivative_for(loss: Loss):
    fn = _DERIVATIVES.get(type(loss))
    if fn is None:
        supported = ", ".join(cls.__name__ for cls in _DERIVATIVES)
        raise ValueError(f"loss must be one of {supported} for the torch backend (no torch derivative "
                         f"for its class). Found {loss!r}.")
    return fn


# --------------------------------------------------------------------------- core


def _device_batches(torch, batches, device):
    """The numpy batch stream as index tensors on ``device`` (None: every example),
    moved in one transfer per chunk of steps."""
    chunk = []

    def flush():
        sizes = [len(b) for b in chunk]
        flat = np.concatenate(chunk).astype(np.int64, copy=False) if chunk else np.empty(0, np.int64)
        on_device = torch.from_numpy(flat).to(device)
        chunk.clear()
        return torch.split(on_device, sizes)

    for batch in batches:
        if isinstance(batch, slice):  # 'full': X̄ itself, no gather
            if chunk:
                yield from flush()
            yield None
            continue
        chunk.append(np.asarray(batch))
        if len(chunk) == _CHUNK_STEPS:
            yield from flush()
    if chunk:
        yield from flush()


def noisy_sgd_core_torch(
    loss: Loss,
    Xbar,
    Y,
    *,
    batches,
    step_sizes,
    denominator: int,
    init,
    l2: float = 0.0,
    thresholds=None,
    noise_std: float = 0.0,
    radius: float | None = None,
    generator=None,
):
    """The step loop on tensors, without validation (use :func:`train_torch`).

    The torch twin of :func:`noisysgd.train.noisy_sgd_core`: W ← Π[W −
    η_t·(X̄_Bᵀψ(X̄_B W)/b + λW + ξ_t)] for each batch B of ``batches`` (numpy
    index arrays or ``slice`` for every example, as the batch streams yield)
    and η_t of ``step_sizes``; ψ clipped per example to ``thresholds[i]`` =
    L/‖x̄ᵢ‖ unless ``thresholds`` is None; ξ_t ~ N(0, noise_std²·I) drawn
    with ``generator`` (none when ``noise_std`` is 0); Π the projection onto
    the ball of ``radius`` (none when None).  ``Xbar``, ``Y`` (float of
    ``Xbar``'s dtype, or int64 class indices), ``thresholds`` and ``init``
    must be tensors on one device, floats in one dtype.

    Returns (W, steps run) — W a tensor on the device.
    """
    torch = import_torch()
    derivative = derivative_for(loss)
    device, dtype = Xbar.device, Xbar.dtype
    W = init.to(device=device, dtype=dtype).clone()
    matrix = W.dim() == 2
    inv_b = 1.0 / denominator
    noise_std = float(noise_std)
    noise = torch.empty_like(W) if noise_std > 0.0 else None
    minus_one = torch.full((1, 1), -1.0, dtype=dtype, device=device)
    if noise is not None and generator is None:
        raise ValueError("generator must be a torch.Generator when noise_std > 0. Found None.")
    etas = [float(e) for e in np.asarray(step_sizes, dtype=float)]
    t = 0
    for t, (idx, eta) in enumerate(zip(_device_batches(torch, batches, device), etas), start=1):
        if idx is None:
            Xb, Yb, tb = Xbar, Y, thresholds
        else:
            Xb, Yb = Xbar.index_select(0, idx), Y.index_select(0, idx)
            tb = None if thresholds is None else thresholds.index_select(0, idx)
        D = derivative(loss, Xb @ W, Yb, tb, minus_one)
        # W ← (1 − ηλ)·W − (η/b)·X̄_Bᵀψ in one kernel
        if matrix:
            W.addmm_(Xb.T, D, beta=1.0 - eta * l2, alpha=-eta * inv_b)
        else:
            W.addmv_(Xb.T, D, beta=1.0 - eta * l2, alpha=-eta * inv_b)
        if noise is not None:
            noise.normal_(generator=generator)
            W.add_(noise, alpha=-eta * noise_std)
        if radius is not None:  # W ← W·min(1, r/‖W‖), on the device (no sync)
            W.mul_(torch.linalg.vector_norm(W).reciprocal_().mul_(radius).clamp_(max=1.0))
    return W, t


# --------------------------------------------------------------------------- public


def _host(torch, value):
    """A tensor as a host numpy array (for numpy's checks); anything else untouched."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return value


def _numpy_dtype(torch, dtype):
    """torch.float32/float64 as numpy dtypes; anything else passed on to numpy's check."""
    return {torch.float32: np.float32, torch.float64: np.float64}.get(dtype, dtype) \
        if isinstance(dtype, torch.dtype) else dtype


def resolve_device(torch, device):
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"device must be None, 'cpu', 'cuda', 'cuda:N' or a torch.device. Found {device!r}.") from None
    if dev.type == "cpu":
        return dev
    if dev.type != "cuda":
        raise ValueError(f"device must be a CPU or CUDA device. Found {device!r}.")
    if not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asks for CUDA, which is not available here (use 'cpu' or None).")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device {device!r} does not exist: {torch.cuda.device_count()} CUDA device(s).")
    return dev


def _prepare_torch(torch, run, loss, X, y, *, feature_clip, target_bound, init, random_state, dtype,
                   intercept_scaling=1.0):
    """numpy's checks, same messages in the same order (tensors copied to the host first)."""
    return prepare_run(run, loss, _host(torch, X), _host(torch, y), feature_clip=feature_clip,
                 target_bound=target_bound, init=_host(torch, init), random_state=random_state,
                 dtype=_numpy_dtype(torch, dtype), callback=None, intercept_scaling=intercept_scaling)


@takes_declarations
def train_torch(
    run: Run,
    loss: Loss,
    X,
    y,
    *,
    feature_clip: float,
    target_bound: float | None = None,
    intercept_scaling: float = 1.0,
    init=None,
    random_state=None,
    dtype="float64",
    device=None,
    analyses=None,
) -> TrainResult:
    """Train with the Noisy-SGD that ``run`` describes, on torch tensors.

    Same arguments, checks, errors, warnings and result as
    :func:`noisysgd.train.train` (see there), except:

    Parameters
    ----------
    X, y, init : numpy arrays or torch tensors
    dtype : torch.float32, torch.float64 (or the numpy / string names)
        Precision of the data, parameters and noise; float64 by default, as
        :func:`train`.
    device : None, str or torch.device
        ``"cpu"``, ``"cuda"`` or ``"cuda:N"``; None: CUDA when available,
        else the CPU.

    There is no ``callback`` and no ``record`` (the hidden iterates stay on
    the device).  ``enforced`` adds ``backend`` ("torch"), ``device`` and
    ``torch_version``; ``coef`` is returned as a numpy array.

    Raises
    ------
    ImportError
        PyTorch is not installed (``pip install 'noisysgd[torch]'``).
    ValueError
        As :func:`train`; also a device that is not available and a loss
        class without a torch derivative.  Nothing is computed (and no
        random number drawn) before every check has passed.
    """
    torch = import_torch()
    p = _prepare_torch(torch, run, loss, X, y, feature_clip=feature_clip, target_bound=target_bound,
                       intercept_scaling=intercept_scaling,
                       init=init, random_state=random_state, dtype=dtype)
    constants, checked = checked_constants(run, loss, p, analyses)
    derivative_for(loss)
    dev = resolve_device(torch, device)
    # every check passed: warn, then compute
    check_declared_constants(feature_clip=p.feature_clip, row_norms=p.row_norms, target_bound=p.target_bound,
                             y=p.raw_y if p.target_bound else None, stacklevel=3 + TRAINER_FRAMES)
    refuse_adaptive(run, "trained by the torch backend")
    noise_std = run.noise_multiplier * run.lipschitz / run.batch_size
    return _execute_torch(torch, p, dev, noise_std=noise_std, clip_norm=run.lipschitz, extra={
        "constants": constants.to_dict(),
        "derivation": constants.derivation,
        "analyses_checked": list(checked),
        "noise_multiplier": run.noise_multiplier,
        "secure_mode": False,
    })


@takes_declarations
def sgd_torch(
    run: Run,
    loss: Loss,
    X,
    y,
    *,
    feature_clip: float,
    target_bound: float | None = None,
    intercept_scaling: float = 1.0,
    init=None,
    random_state=None,
    dtype="float64",
    device=None,
    clip: bool = False,
) -> TrainResult:
    """Non-private baseline on tensors: :func:`noisysgd.train.sgd` (no noise;
    no clipping unless ``clip=True``) with the loop of :func:`train_torch`.

    Same ``random_state`` ⇒ the same batches and start as :func:`sgd` and
    :func:`train`, so its result equals :func:`sgd`'s to rounding.  For
    comparisons and benchmarks only.
    """
    torch = import_torch()
    p = _prepare_torch(torch, run, loss, X, y, feature_clip=feature_clip, target_bound=target_bound,
                       intercept_scaling=intercept_scaling,
                       init=init, random_state=random_state, dtype=dtype)
    if not isinstance(clip, bool):
        raise ValueError(f"clip must be True or False. Found {clip!r}.")
    derivative_for(loss)
    dev = resolve_device(torch, device)
    return _execute_torch(torch, p, dev, noise_std=0.0, clip_norm=run.lipschitz if clip else None,
                          extra={"private": False})


def _augment_on(torch, X: np.ndarray, R: float, dt: np.dtype, device, norms: np.ndarray | None = None,
                bias: float = 1.0):
    """(X̄ as a tensor on ``device``, ‖x̄_i‖ in float64): :func:`~noisysgd.train.losses.augment_blocks`
    written a block of rows at a time straight into the device tensor: the host holds one block,
    never X̄ (on a GPU the host held X̄ whole and the device its copy).  On the CPU
    the tensor is the one working copy, as before."""
    blocks, bar_norms = augment_blocks(X, R, dt, norms, bias, step=block_rows(X.shape[1]))
    out = torch.empty((X.shape[0], X.shape[1] + 1), dtype=torch.from_numpy(np.empty(0, dtype=dt)).dtype,
                      device=device)
    for rows, values in blocks:
        out[rows, :-1] = torch.from_numpy(values).to(device)
    out[:, -1] = bias
    return out, bar_norms


def _execute_torch(torch, p: PreparedRun, device, *, noise_std, clip_norm, extra) -> TrainResult:
    run, loss, dt = p.run, p.loss, p.dtype
    Xbar, norms = _augment_on(torch, p.X, p.feature_clip, dt, device, p.row_norms, bias=p.intercept_scaling)
    Y = p.Y.astype(dt) if p.Y.dtype.kind == "f" else p.Y.astype(np.int64)
    shape = loss.param_shape(p.X.shape[1])
    streams = rng_streams(p.random_state)
    W0, init_kind = initial_iterate(p, shape, streams.init)
    thresholds = None if clip_norm is None else clip_thresholds(clip_norm, norms, dt)
    radius = safe_radius(run, dt)
    generator = None
    if noise_std > 0.0:
        generator = torch.Generator(device=device)
        generator.manual_seed(int(streams.noise.integers(0, 2**63)))

    def put(a):
        return torch.from_numpy(np.ascontiguousarray(a)).to(device)

    W, steps = noisy_sgd_core_torch(
        loss, Xbar, put(Y),
        batches=run_batches(run, streams.batches, rows=p.X.shape[0]),
        step_sizes=run.step_sizes(),
        denominator=run.batch_size,
        init=torch.as_tensor(np.asarray(W0, dtype=dt), device=device),
        l2=run.strong_convexity,
        thresholds=None if thresholds is None else put(thresholds),
        noise_std=noise_std,
        radius=radius,
        generator=generator,
    )
    coef = W.detach().cpu().numpy()
    enforced = {
        **enforced_record(p, clip_norm=clip_norm, radius=radius, init_kind=init_kind, steps=steps,
                    noise_std=noise_std),
        "backend": "torch",
        "device": str(device),
        "torch_version": torch.__version__,
    }
    enforced.update(extra)
    return TrainResult(coef=coef, steps=steps, history=(), enforced=enforced, run=run, loss=loss,
                       feature_clip=p.feature_clip, intercept_scaling=p.intercept_scaling)
