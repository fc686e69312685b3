"""Altschuler & Talwar's Figures 1, 2(a), 2(b) and the cross-over figure: their data
(numpy only).  Every curve is a real bound at δ = 1e-5 (improved RDP → (ε, δ) over
:data:`noisysgd.DEFAULT_ORDERS`) against the number of steps T: the Altschuler–Talwar
curves from :meth:`AltschulerTalwar.rdp_over_steps`, the baselines from the
``composition`` and ``composition-pld`` analyses."""

from __future__ import annotations

import numpy as np

from ..rdp import DEFAULT_ORDERS
from ..run import Run
from ._common import (DELTA, Curve, FigureData, at_eps, burn_in, composition_eps, crossover_curves,
                      plan_text, plateau_start, run_caption, FigureSetting, Stages, step_grid, zoom_window)

__all__ = ["altschuler_talwar_figure_data"]


def altschuler_talwar_figure_data(
    *,
    delta: float = DELTA,
    orders=None,
    points: int = 200,
    max_steps: int = 10**7,
    pld: bool = True,
    crossover: bool = True,
    crossover_epochs: int = 20_000,
    crossover_points: int = 200,
    progress: bool = False,
) -> dict[str, FigureData]:
    """The data of Altschuler & Talwar's Figures 1, 2(a), 2(b) and a cross-over figure.

    Keys: ``"fig1"`` (convex, ``sample`` batches), ``"fig2a"`` (``cyclic``
    batches, Theorem 5.8, at whole epochs), ``"fig2b"`` (m-strongly convex,
    η = 1/M, several m) and, with ``crossover``, ``"crossover"`` (Figure 1's
    run against epochs 1..``crossover_epochs`` on a log grid of about
    ``crossover_points``: where :func:`noisysgd.plan` finds the bound below the
    composition baselines, RDP and PLD; ``pld=False`` leaves PLD out).  The
    paper figures' curves share one log grid of about ``points`` step counts
    up to ``max_steps``.  ``progress``: a progress bar on stderr (tqdm).
    """
    total = 10 + (3 if pld else 2) * crossover
    with Stages(total, "figures: altschuler-talwar", progress) as stages:
        return _altschuler_talwar_figure_data(
            delta=delta, orders=orders, points=points, max_steps=max_steps, pld=pld, crossover=crossover,
            crossover_epochs=crossover_epochs, crossover_points=crossover_points, stages=stages)

def _altschuler_talwar_figure_data(*, delta, orders, points, max_steps, pld, crossover, crossover_epochs,
                                   crossover_points, stages) -> dict[str, FigureData]:
    """The figures in the order their captions need them: the cross-over first (Figure 1's
    caption quotes it), then Figures 1, 2(a), 2(b); the cross-over is listed last."""
    orders = DEFAULT_ORDERS if orders is None else np.asarray(orders, dtype=float)
    base = _AT_RUN
    steps = step_grid(1, max_steps, points)
    crossover_fig, cross = None, None
    if crossover:
        crossover_fig, cross = _at_crossover(base, delta=delta, orders=orders, pld=pld, epochs=crossover_epochs,
                                             points=crossover_points, stages=stages)
    out: dict[str, FigureData] = {}  # the paper's figures first, then the cross-over
    out["fig1"], at = _at_fig1(base, steps, delta=delta, orders=orders, cross=cross, stages=stages)
    out["fig2a"] = _at_fig2a(base, steps, at, delta=delta, orders=orders, max_steps=max_steps, points=points,
                             stages=stages)
    out["fig2b"] = _at_fig2b(base, steps, delta=delta, orders=orders, stages=stages)
    if crossover_fig is not None:
        out["crossover"] = crossover_fig
    return out


#: The run of Figure 1 (convex, sampled batches); the other figures change it.
_AT_RUN = Run(
    n=1000, batch_size=10, batching="sample", steps=1, learning_rate=0.5,
    noise_multiplier=3.0, lipschitz=1.0, smoothness=1.0, diameter=1.0, convex=True,
)
_AT_LABEL = "Altschuler–Talwar, sound: last iterate only (worst-case batches)"


def _at_crossover(base: Run, *, delta, orders, pld, epochs, points, stages):
    """The cross-over figure: where :func:`noisysgd.plan` finds the sound bound below the
    composition baselines; (figure, the plan's numbers)."""
    K = base.steps_per_epoch
    t_bar = burn_in(base)
    setting = FigureSetting(
        key="", run=base, analysis="altschuler-talwar", label=_AT_LABEL, short="A&T", prefix="",
        colors=("C0", "C3", "C1"), steps_note=lambda e: f" (T = {e * K:,})",
    )
    grid = step_grid(1, epochs, points)
    stages.tick("cross-overs (noisysgd.plan)")
    curves, vlines, vstyles, dots, info = crossover_curves(
        [setting], delta=delta, epochs=grid, orders=orders, pld=pld, stages=stages)
    cross = info["run"]
    bar = f"T̄ = Dn/(Lη) = {t_bar:g} steps ({t_bar / K:g} epochs)"
    vlines = {bar: t_bar / K, **vlines}
    vstyles[bar] = {"color": "k", "ls": ":", "lw": 1}
    numbers = (
        f"The sound bound equals composition RDP (its composition branch) up to epoch "
        f"{cross['crossover_rdp']:,} and then stays at its limit {cross['limit']:.4f}"
        if cross["crossover_rdp"] is not None and cross["limit"] is not None else
        "The sound bound does not drop below composition RDP in this range"
    )
    if pld:
        numbers += (
            f"; it is below both composition bounds from epoch {cross['crossover']:,}"
            if cross["crossover"] is not None else "; it never drops below composition PLD here"
        )
    figure = FigureData(
        name="altschuler-talwar-crossover",
        title="Altschuler & Talwar: where the sound bound overtakes composition (sampled batches)",
        caption=run_caption(
            base, delta, orders,
            extra=(
                f"Epochs of n/b = {K} steps (T = {K}·epochs), 1..{epochs:,} on a log grid "
                f"of {grid.size} epochs plus every epoch around each cross-over. {numbers}. "
                + plan_text(pld)
            ),
        ),
        curves=curves, vlines=vlines, vline_styles=vstyles, dots=dots,
        xlim=(1.0, float(epochs)),
        inset=zoom_window(curves, [cross["crossover_rdp"], cross["crossover"]]),
        params={"run": base, "delta": delta, **{k: v for k, v in cross.items() if k != "run"}},
        xlabel=f"epochs ({K} noisy gradient steps each)", legend_loc="upper left",
    )
    return figure, cross


def _at_fig1(base: Run, steps, *, delta, orders, cross, stages):
    """Figure 1: convex losses, sampled batches; (figure, the sound bound's curve)."""
    K = base.steps_per_epoch
    t_bar = burn_in(base)
    stages.tick("Fig. 1")
    comp = composition_eps(base, steps, orders, delta)
    stages.tick("Fig. 1")
    at = at_eps(base, steps, orders, delta)
    stages.tick("Fig. 1")
    published = at_eps(base, steps, orders, delta, "altschuler-talwar-sampled")
    stages.tick("Fig. 2(a)")
    plateau = plateau_start(steps, at)
    published_label = "(B.2) as published: NOT sound (proof gap), for comparison"
    comp_label = "composition (RDP): every iterate released"
    if cross is not None and cross["crossover_rdp"] is not None:
        e = cross["crossover_rdp"]
        flat = (f"the sound bound equals composition (its composition branch; the lines coincide) "
                f"until it reaches its limit {cross['limit']:.4f} at epoch {e:,} (T = {e * K:,}; "
                "noisysgd.plan, see the cross-over figure) and is constant from there")
    else:
        flat = f"the sound bound is constant from the grid point T = {plateau:,}"
    figure = FigureData(
        name="altschuler-talwar-fig1",
        title="Altschuler & Talwar, Fig. 1: convex losses, sampled batches",
        caption=run_caption(
            base, delta, orders,
            extra=(
                f"T̄ = Dn/(Lη) = {t_bar:g}; {flat}. Dotted: the published (B.2), which conditions "
                "on the noise as if batch membership were independent of it, which fails "
                "(altschuler-talwar-sampled, NOT sound)."
            ),
        ),
        curves={
            "composition": Curve(comp_label, steps, comp, {"color": "C3", "ls": "--"}),
            "altschuler-talwar": Curve(_AT_LABEL, steps, at, {"color": "C0", "lw": 2}),
            "altschuler-talwar-sampled": Curve(published_label, steps, published,
                                               {"color": "0.45", "ls": ":", "lw": 1.5}),
        },
        vlines={f"T̄ = Dn/(Lη) = {t_bar:g}": t_bar},
        params={"run": base, "delta": delta, "plateau": plateau},
    )
    return figure, at


def _at_fig2a(base: Run, steps, at, *, delta, orders, max_steps, points, stages) -> FigureData:
    """Figure 2(a): convex losses, cyclic batches, at whole epochs (Figure 1's sound bound
    ``at`` for reference)."""
    t_bar = burn_in(base)
    cyc = base.replace(batching="cyclic")
    K = cyc.steps_per_epoch
    epochs = step_grid(1, max(1, max_steps // K), points)
    csteps = epochs * K
    comp_cyc = composition_eps(cyc, csteps, orders, delta)
    stages.tick("Fig. 2(a)")
    at_cyc = at_eps(cyc, csteps, orders, delta)
    stages.tick("Fig. 2(b)")
    return FigureData(
        name="altschuler-talwar-fig2a",
        title="Altschuler & Talwar, Fig. 2(a): convex losses, cyclic batches",
        caption=run_caption(
            cyc, delta, orders,
            extra=(
                f"T at whole epochs of K = ⌊n/b⌋ = {K} steps. Cyclic composition: one Gaussian "
                f"mechanism per epoch (no amplification by sampling). T̄ = {t_bar:g}."
            ),
        ),
        curves={
            "composition": Curve(
                "composition (RDP), cyclic: one Gaussian per epoch", csteps,
                comp_cyc, {"color": "C3", "ls": "--"},
            ),
            "altschuler-talwar": Curve(
                "Altschuler–Talwar, Theorem 5.8 (5.6), cyclic", csteps,
                at_cyc, {"color": "C0", "lw": 2},
            ),
            "altschuler-talwar-sample": Curve(
                "Altschuler–Talwar, sound, sample batches (Fig. 1, for reference)", steps, at,
                {"color": "0.45", "ls": ":", "lw": 1.5},
            ),
        },
        vlines={f"T̄ = Dn/(Lη) = {t_bar:g}": t_bar},
        params={"run": cyc, "delta": delta},
    )


def _at_fig2b(base: Run, steps, *, delta, orders, stages) -> FigureData:
    """Figure 2(b): strongly convex losses, η = 1/M, full batches (where the sound analysis
    uses the contraction: (B.3) with b = n), for several m."""
    sc = base.replace(learning_rate=1.0 / base.smoothness, batching="full", batch_size=None,
                      noise_multiplier=base.noise_multiplier * base.n / base.batch_size)
    curves = {
        "composition": Curve(
            "composition (RDP), any m", steps, composition_eps(sc, steps, orders, delta),
            {"color": "C3", "ls": "--"},
        )
    }
    stages.tick("Fig. 2(b)")
    plateaus = {}
    dots = {}
    for i, m in enumerate((0.0, 1e-3, 1e-2, 1e-1)):
        eps = at_eps(sc.replace(strong_convexity=m), steps, orders, delta)
        stages.tick("Fig. 2(b)")
        key = f"m={m:g}"
        plateaus[key] = plateau_start(steps, eps)
        dots[key] = (float(plateaus[key]), float(eps[np.searchsorted(steps, plateaus[key])]))
        kind = "convex, (B.1)/(B.2), b = n" if m == 0 else "(B.3), b = n"
        color = ("C0", "C1", "C2", "C4")[i]  # C3 (red) is composition
        curves[key] = Curve(f"Altschuler–Talwar, m = {m:g} {kind}", steps, eps, {"color": color, "lw": 2})
    t_bar_sc = burn_in(sc)
    plateau_text = ", ".join(f"{k.replace('m=', 'm = ')}: T = {v:,}" for k, v in plateaus.items())
    return FigureData(
        name="altschuler-talwar-fig2b",
        title="Altschuler & Talwar, Fig. 2(b): strongly convex losses, η = 1/M, full batches",
        caption=run_caption(
            sc, delta, orders,
            extra=(
                "Full batches with the same noise per step as Fig. 1 (σ = zL/b). "
                "m ∈ {0, 0.001, 0.01, 0.1} (contraction c = 1 − ηm); dots: the first T of the "
                f"plotted grid from which each bound is constant ({plateau_text}). "
                f"T̄ = Dn/(Lη) = {t_bar_sc:g} (convex)."
            ),
            m="see legend",
        ),
        curves=curves,
        vlines={f"T̄ = Dn/(Lη) = {t_bar_sc:g}": t_bar_sc},
        params={"run": sc, "delta": delta, "plateaus": plateaus},
        dots=dots,
    )
