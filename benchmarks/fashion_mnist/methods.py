"""The five methods of the benchmark, each trained from one configuration dict.

Every method sees the same features, clipped per example to norm
``FEATURE_CLIP`` = 1 (the ScatterNet features already have norm 1; the pixel
images, of norm 2.2 to 23 after /255, are all scaled to norm 1, i.e.
normalised per example), and fits the same linear model (weights and a bias
per class, 10 classes).

* ``hidden``: :func:`noisysgd.private_fit.fit_private` with ``analyses="best"``
  (the best *sound* bound, which for these runs is a hidden-state analysis —
  the certificate says which).
* ``composition``: the same call with ``analyses=["composition",
  "composition-pld"]`` (every iterate released).
* ``ryffel``: Ryffel et al.'s Theorem 3.2 (``analyses=["ryffel"]``), flagged
  NOT SOUND in noisysgd.  ``fit_private`` cannot calibrate an unsound
  analysis (it has no ``include_unsound``, and the engine refuses a
  certificate resting on one), so the noise is calibrated with
  ``noisysgd.calibrate(..., include_unsound=True)`` and the run trained with
  ``noisysgd.train.train`` without an analyses check.  NOT a guarantee.
* ``opacus``: Opacus DP-SGD, ``torch.nn.Linear`` with cross-entropy,
  ``PrivacyEngine.make_private_with_epsilon`` (Poisson sampling, flat
  clipping at C, its own PRV accountant, add/remove adjacency), plain SGD
  without momentum, ``grad_sample_mode="ghost"`` (Opacus' fast gradient
  clipping; the same clipping, without per-example gradient tensors).
* ``opacus-replace``: the same DP-SGD with its noise multiplier calibrated by
  noisysgd's composition accountant for *replace* adjacency (that of every
  noisysgd row), passed to ``PrivacyEngine.make_private``.
* ``nonprivate``: :func:`noisysgd.train.sgd` (the same engine without noise
  and without clipping), softmax loss.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

import noisysgd
from noisysgd.train import OneVsRestLogistic, Softmax, sgd, train
from noisysgd.private_fit import Bounds, Execution, Privacy, Schedule, fit_private

FEATURE_CLIP = 1.0
N_CLASSES = 10


def make_loss(cfg: dict):
    return OneVsRestLogistic(N_CLASSES) if cfg.get("loss", "ovr") == "ovr" else Softmax(N_CLASSES)


def learning_rate(cfg: dict):
    """``lr`` in the config: ``"auto"`` (1/(2(M+λ))) or a multiple ``"x2"`` of it."""
    lr = cfg.get("lr", "auto")
    if isinstance(lr, str) and lr.startswith("x"):
        loss = make_loss(cfg)
        c = loss.constants(feature_clip=FEATURE_CLIP, clip_norm=cfg.get("clip"))
        return float(lr[1:]) * 0.5 / (c.smoothness + cfg.get("l2", 0.0))
    return lr


def accuracy(predict, X, y) -> float:
    return float(np.mean(predict(X) == y))


def _noisysgd_common(cfg):
    """(schedule, bounds) of a grid configuration."""
    return (Schedule(epochs=cfg["epochs"], batch_size=cfg["batch_size"], batching=cfg["batching"],
                     learning_rate=learning_rate(cfg), l2=cfg.get("l2", 0.0)),
            Bounds(feature_clip=FEATURE_CLIP, clip_norm=cfg.get("clip")))


def train_noisysgd(X, y, cfg, *, method, epsilon, delta, seed):
    """hidden / composition: calibrate, train, certify (``fit_private``)."""
    analyses = "best" if method == "hidden" else ["composition", "composition-pld"]
    t0 = time.perf_counter()
    fit = fit_private(X, y, make_loss(cfg), *_noisysgd_common(cfg),
                      Privacy(epsilon=epsilon, delta=delta, analyses=analyses),
                      Execution(random_state=seed, dtype=np.float32))
    wall = time.perf_counter() - t0
    best = fit.report.best
    info = {
        "noise_multiplier": fit.noise_multiplier,
        "epsilon": fit.epsilon,
        "certified_by": best.analysis,
        "components": best.details.get("components") if best.analysis == "order-wise-minimum" else None,
        "sound": bool(best.sound),
        "guarantee": fit.certificate["certificate"]["guarantee"],
        "calibration_evaluations": fit.calibration.evaluations,
        "run": fit.run.to_dict(),
        "noise_std_per_step": fit.result.enforced["noise_std"],
        "wall_s": wall,
    }
    return fit.result.predict, info


def train_ryffel(X, y, cfg, *, epsilon, delta, seed):
    """Ryffel et al.'s (unsound) bound: calibrate with include_unsound, train with the engine."""
    t0 = time.perf_counter()
    loss = make_loss(cfg)
    lam = cfg["l2"]
    c = loss.constants(feature_clip=FEATURE_CLIP, clip_norm=cfg.get("clip"))
    M = c.smoothness + lam
    lr = learning_rate(cfg)
    eta = 0.5 / M if lr == "auto" else float(lr)
    run = noisysgd.Run.from_epochs(
        epochs=cfg["epochs"], n=len(X), batch_size=cfg["batch_size"], batching=cfg["batching"],
        learning_rate=eta, noise_multiplier=1.0, lipschitz=c.lipschitz, smoothness=M,
        strong_convexity=lam, convex=c.convex, initialization="gaussian")
    cal = noisysgd.calibrate(run, epsilon=epsilon, delta=delta, analyses=["ryffel"],
                             include_unsound=True)
    run = run.replace(noise_multiplier=cal.noise_multiplier)
    result = train(run, loss, X, y, feature_clip=FEATURE_CLIP, random_state=seed, dtype=np.float32)
    wall = time.perf_counter() - t0
    r = cal.report.results["ryffel"]
    info = {
        "noise_multiplier": cal.noise_multiplier,
        "epsilon": cal.epsilon,
        "certified_by": "ryffel",
        "sound": False,
        "guarantee": f"NONE -- ryffel is NOT SOUND: {r.not_sound_reason}",
        "calibration_evaluations": cal.evaluations,
        "run": run.to_dict(),
        "noise_std_per_step": result.enforced["noise_std"],
        "wall_s": wall,
    }
    return result.predict, info


def train_nonprivate(X, y, cfg, *, seed, **_):
    t0 = time.perf_counter()
    loss = make_loss(cfg)
    lam = cfg.get("l2", 0.0)
    c = loss.constants(feature_clip=FEATURE_CLIP)
    lr = cfg.get("lr", "auto")
    eta = 0.5 / (c.smoothness + lam) if lr == "auto" else (
        float(lr[1:]) * 0.5 / (c.smoothness + lam) if isinstance(lr, str) else float(lr))
    run = noisysgd.Run.from_epochs(epochs=cfg["epochs"], n=len(X), batch_size=cfg["batch_size"],
                                   batching=cfg["batching"], learning_rate=eta, noise_multiplier=1.0,
                                   lipschitz=c.lipschitz, strong_convexity=lam)
    result = sgd(run, loss, X, y, feature_clip=FEATURE_CLIP, random_state=seed, dtype=np.float32)
    return result.predict, {"epsilon": None, "sound": None, "certified_by": None,
                            "wall_s": time.perf_counter() - t0, "run": run.to_dict()}


def _opacus_run(n, cfg, *, steps, z, adjacency):
    """The Opacus run as a noisysgd Run (Poisson, q = b/n, step divides by b, clip C)."""
    return noisysgd.Run(n=n, batch_size=cfg["batch_size"], batching="poisson", steps=steps,
                        learning_rate=cfg["lr"], noise_multiplier=z, lipschitz=cfg["clip"],
                        adjacency=adjacency)


def train_opacus(X, y, cfg, *, epsilon, delta, seed, adjacency="add-remove", threads=1):
    """Opacus DP-SGD on a torch.nn.Linear softmax model, same (clipped) features.

    ``adjacency="add-remove"``: ``make_private_with_epsilon`` with Opacus' PRV
    accountant (its default adjacency).  ``adjacency="replace"``: the noise
    multiplier is calibrated by noisysgd's composition accountant
    (``composition`` and ``composition-pld``, Poisson, replace adjacency — the
    adjacency of every noisysgd row) and passed to ``make_private``.
    """
    import torch
    from opacus import PrivacyEngine

    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    torch.manual_seed(seed)
    n = len(X)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    Xc = (X * np.minimum(1.0, FEATURE_CLIP / np.maximum(norms, 1e-30))).astype(np.float32)
    ds = torch.utils.data.TensorDataset(torch.from_numpy(Xc), torch.from_numpy(y.astype(np.int64)))
    loader = torch.utils.data.DataLoader(ds, batch_size=cfg["batch_size"])
    steps_planned = cfg["epochs"] * len(loader)
    model = torch.nn.Linear(X.shape[1], N_CLASSES)
    torch.nn.init.zeros_(model.weight)
    torch.nn.init.zeros_(model.bias)
    opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=0.0)
    accountant = cfg.get("accountant", "prv")
    engine = PrivacyEngine(accountant=accountant)
    # grad_sample_mode="ghost": Opacus' fast gradient clipping (the per-example gradient norms
    # of a Linear layer without materialising per-example gradients; the same flat clipping)
    common = dict(module=model, optimizer=opt, criterion=torch.nn.CrossEntropyLoss(),
                  data_loader=loader, max_grad_norm=cfg["clip"], poisson_sampling=True,
                  grad_sample_mode="ghost", noise_generator=torch.Generator().manual_seed(seed + 1))
    calibration = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if adjacency == "add-remove":
            model, opt, lossf, loader = engine.make_private_with_epsilon(
                target_epsilon=epsilon, target_delta=delta, epochs=cfg["epochs"], **common)
        else:
            cal = noisysgd.calibrate(_opacus_run(n, cfg, steps=steps_planned, z=1.0,
                                                 adjacency="replace"),
                                     epsilon=epsilon, delta=delta,
                                     analyses=["composition", "composition-pld"])
            calibration = {"noise_multiplier": cal.noise_multiplier, "epsilon": cal.epsilon,
                           "by": cal.report.best.analysis}
            model, opt, lossf, loader = engine.make_private(
                noise_multiplier=cal.noise_multiplier, **common)
    assert abs(opt.expected_batch_size - cfg["batch_size"]) <= 0, opt.expected_batch_size
    steps = 0
    for _ in range(cfg["epochs"]):
        for xb, yb in loader:
            opt.zero_grad(set_to_none=True)
            # an empty Poisson batch has probability (1 - b/n)^n ≈ e^(-b): never at b >= 100
            assert len(xb) > 0, "empty Poisson batch"
            loss_value = lossf(model(xb), yb)
            loss_value.backward()
            opt.step()
            steps += 1
    z = float(opt.noise_multiplier)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eps_opacus = float(engine.get_epsilon(delta))  # Opacus' own, add-remove
    W = model._module.weight.detach().numpy().copy()
    b = model._module.bias.detach().numpy().copy()
    wall = time.perf_counter() - t0

    def predict(Xn):
        nn_ = np.linalg.norm(Xn, axis=1, keepdims=True)
        Xn = Xn * np.minimum(1.0, FEATURE_CLIP / np.maximum(nn_, 1e-30))
        return np.argmax(Xn @ W.T + b, axis=1)

    # the same run under noisysgd's composition accountant, both adjacencies
    eps_ns = {adj: noisysgd.epsilon(_opacus_run(n, cfg, steps=steps, z=z, adjacency=adj),
                                    delta=delta, analyses=["composition", "composition-pld"]).epsilon
              for adj in ("replace", "add-remove")}
    if adjacency == "add-remove":
        eps, by = eps_opacus, f"opacus {accountant} accountant"
    else:
        eps, by = eps_ns["replace"], "noisysgd " + calibration["by"]
    info = {
        "noise_multiplier": z,
        "epsilon": eps,
        "adjacency": adjacency,
        "certified_by": by,
        "sound": True,
        "guarantee": f"({eps:.4g}, {delta:g})-DP for every iterate, {adjacency} adjacency, "
                     "Poisson sampling",
        "epsilon_opacus_add_remove": eps_opacus,
        "epsilon_noisysgd_composition": eps_ns,
        "calibration": calibration,
        "sampling_rate": cfg["batch_size"] / n,
        "steps": steps,
        "wall_s": wall,
    }
    return predict, info


TRAINERS = {
    "hidden": lambda X, y, cfg, **kw: train_noisysgd(X, y, cfg, method="hidden", **kw),
    "composition": lambda X, y, cfg, **kw: train_noisysgd(X, y, cfg, method="composition", **kw),
    "ryffel": train_ryffel,
    "opacus": train_opacus,
    "opacus-replace": lambda X, y, cfg, **kw: train_opacus(X, y, cfg, adjacency="replace", **kw),
    "nonprivate": train_nonprivate,
}
