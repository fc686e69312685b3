"""Paper figures, recomputed from the library's own bounds.

``altschuler_talwar_figure_data()`` and ``ye_shokri_figure_data()`` compute
the curves (numpy only); ``altschuler_talwar_figures(out_dir)`` and
``ye_shokri_figures(out_dir)`` draw them as PNG files with matplotlib's Agg
canvas (no pyplot, no global backend change); matplotlib is a dependency of
the package, imported only when a figure is drawn.  ``docs/figures.md`` shows and
discusses every figure (``noisysgd figures --paper all --out docs/figures``).

Altschuler & Talwar: every curve is a real bound at δ = 1e-5 (improved RDP →
(ε, δ) conversion over :data:`noisysgd.DEFAULT_ORDERS`) against the number of
steps T: the Altschuler–Talwar curves come from
:meth:`AltschulerTalwar.rdp_over_steps`, the composition baselines from the
``composition`` and ``composition-pld`` analyses.

Ye & Shokri: as in the paper, every curve is the *RDP* ε at a fixed order
α ∈ {10, 15} (no (ε, δ) conversion) against the number of epochs K, at the
setting of their Figures 1 and 2 (n = 50, b = 2, η = 0.02, λ = 1, β = 4,
S_g = 4, σ² = 4): Theorem 3.3 (first and last batch of a fixed order),
Theorem 2.1 (``ye-shokri-naive``), Theorem 4.2 (shuffle and partition; on
this library's per-epoch reshuffling it is the flagged, not sound
``ye-shokri-reshuffle``), Theorem 4.3 (sampling without replacement) and the
``composition`` analysis.  The curves of each figure are a table
(:data:`_YS_CURVES`).  The paper's Balle et al. + composition curve (Figure 1)
is not reproduced; its sampled-Gaussian composition for *shuffled* batches
(Figure 2(a)) is drawn but labelled as not valid there (the library composes
one Gaussian mechanism per epoch for shuffled batches).

Cross-over figures (one per paper, key ``"crossover"``): ε at δ = 1e-5
against epochs, where the paper's sound bound overtakes the composition
baselines (RDP and PLD).  They are drawn from :func:`noisysgd.plan` for the
same run — its curves, its cross-overs (against the smaller of
``composition`` and ``composition-pld``, and against ``composition`` alone)
and its plateaus — so figure and planner agree by construction; a figure on
a log grid of epochs is planned again with every epoch around each
cross-over, so the cross-overs are exact to the epoch.

:data:`PAPERS` maps a paper's name to the function that writes its figures;
the ``noisysgd figures --paper`` choices are its keys plus ``all``.
"""

from __future__ import annotations

import io
import json
import math
import textwrap
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .analyses import get_analysis
from .planning import BASELINES, plan
from .rdp import DEFAULT_ORDERS, OrderGridWarning, epsilon_from_rdp
from .run import Run, noise_multiplier_from_sigma

__all__ = [
    "Curve",
    "FigureData",
    "PAPERS",
    "MATPLOTLIB_MISSING",
    "require_matplotlib",
    "altschuler_talwar_figure_data",
    "altschuler_talwar_figures",
    "ye_shokri_figure_data",
    "ye_shokri_figures",
    "write_figures",
    "plan_figure",
    "plan_figure_data",
    "figure_series",
    "write_series",
    "SERIES_DIGITS",
]

MATPLOTLIB_MISSING = "matplotlib is needed for figures: pip install 'noisysgd[plot]'"

#: δ of every figure.
DELTA = 1e-5

#: Significant digits of the plotted values in a figure's data file (``<name>.json``).
SERIES_DIGITS = 6


class _Stages:
    """Progress over a figure's computation: a bar on stderr (:func:`noisysgd.progress.bar`,
    tqdm, removed when done) with ``progress``, else nothing.  ``tick(text)`` ends
    one stage and names the next (the first call only names it); ``more(k)`` adds
    stages found on the way."""

    def __init__(self, total: int, desc: str, progress: bool):
        from .progress import bar

        self.desc = desc
        self.enabled = bool(progress)
        self.started = False
        self.bar = bar(total, desc, self.enabled, unit="stage")

    def tick(self, text: str = "") -> None:
        if self.started:
            self.bar.update()
        self.started = True
        if text:
            self.bar.set_description_str(f"{self.desc}: {text}")

    def more(self, k: int) -> None:
        if self.enabled and k:
            self.bar.total += k
            self.bar.refresh()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()


_SILENT = _Stages(0, "", False)


@dataclass(frozen=True)
class Curve:
    """One plotted line: ``epsilon`` (the y values) at each of ``steps`` (the x values).

    Altschuler & Talwar: ε at δ against the number of steps T.  Ye & Shokri:
    the RDP ε at one order α against the number of epochs K.  Cross-over
    figures: ε at δ against the number of epochs.
    """

    label: str
    steps: np.ndarray
    epsilon: np.ndarray
    style: dict = field(default_factory=dict)


@dataclass(frozen=True)
class FigureData:
    """Everything one figure shows; ``curves`` are keyed by a short name."""

    name: str  # file stem
    title: str
    caption: str
    curves: dict[str, Curve]
    vlines: dict[str, float]  # label → x
    xlim: tuple[float, float] | None = None
    params: dict = field(default_factory=dict)
    # Axes; None keeps the Altschuler–Talwar defaults (steps T; ε at δ).
    xlabel: str | None = None
    ylabel: str | None = None
    xscale: str = "log"
    yscale: str = "log"
    ylim: tuple[float, float] | None = None
    legend_loc: str = "upper left"  # matplotlib's, or "below": between the x label and the caption
    legend_ncol: int = 1
    vline_styles: dict[str, dict] = field(default_factory=dict)  # label → plot style
    hlines: dict[str, float] = field(default_factory=dict)  # label → y
    dots: dict[str, tuple[float, float]] = field(default_factory=dict)  # curve key → (x, y), in its colour
    # A zoom drawn inside the axes on linear scales: {"xlim", "ylim", "bounds" (x0, y0, w, h
    # in axes fractions), optional "title"}.
    inset: dict | None = None


# --------------------------------------------------------------------------- data


def _step_grid(lo: int, hi: int, points: int) -> np.ndarray:
    return np.unique(np.round(np.geomspace(lo, hi, points)).astype(np.int64))


def _eps_rows(rdp_rows, orders, delta) -> np.ndarray:
    # The order grid's edge can be optimal at tiny T; the plotted value
    # is still a valid upper bound, so the edge warning is not repeated 1000 times.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrderGridWarning)
        return np.array([epsilon_from_rdp(orders, row, delta).epsilon for row in rdp_rows])


def _composition_eps(run: Run, steps: np.ndarray, orders, delta) -> np.ndarray:
    comp = get_analysis("composition")
    if run.batching in ("poisson", "sample"):
        # T sampled-Gaussian steps: RDP is T times one step's.
        per_step = comp.rdp(run.replace(steps=1), orders)
        rows = steps[:, None].astype(float) * per_step[None, :]
    else:
        rows = np.array([comp.rdp(run.replace(steps=int(t)), orders) for t in steps])
    return _eps_rows(rows, orders, delta)


def _at_eps(run: Run, steps: np.ndarray, orders, delta, name: str = "altschuler-talwar") -> np.ndarray:
    rows = get_analysis(name).rdp_over_steps(run, steps, orders)
    return _eps_rows(rows, orders, delta)


def _fmt(x: float) -> str:
    return f"{x:g}"


def _orders_text(orders) -> str:
    return (f"improved RDP→(ε, δ) conversion over {len(orders)} orders in "
            f"[{_fmt(float(np.min(orders)))}, {_fmt(float(np.max(orders)))}].")


def _run_caption(run: Run, delta: float, orders, *, extra: str = "", m: str | None = None) -> str:
    sigma = run.sigma("altschuler-talwar")
    parts = [
        f"n = {run.n}, b = {run.batch_size} ({run.batching}, q = b/n = {_fmt(run.sampling_rate)}),",
        f"η = {_fmt(run.learning_rate)}, z = {_fmt(run.noise_multiplier)} (σ = zL/b = {_fmt(sigma)}),",
        f"L = {_fmt(run.lipschitz)}, M = {_fmt(run.smoothness)}, m = {m or _fmt(run.strong_convexity)},",
        f"D = {_fmt(run.diameter)}, convex, adjacency = {run.adjacency}, δ = {_fmt(delta)},",
        _orders_text(orders),
    ]
    return " ".join(parts) + (f" {extra}" if extra else "")


def _burn_in(run: Run) -> float:
    """T̄ = Dn/(Lη) (Theorem 3.1, up to constants)."""
    return run.diameter * run.n / (run.lipschitz * run.learning_rate)


def _plateau_start(steps: np.ndarray, eps: np.ndarray, rel: float = 1e-9) -> int:
    """First T from which the curve equals its last value within ``rel``."""
    final = eps[-1]
    off = np.flatnonzero(np.abs(eps - final) > rel * abs(final))
    return int(steps[0] if off.size == 0 else steps[min(off[-1] + 1, steps.size - 1)])


def _first_below(steps, upper, lower, rel: float = 1e-9):
    """First x where ``lower`` is strictly (beyond ``rel``) below ``upper``; None if never."""
    below = np.flatnonzero(lower < upper * (1.0 - rel))
    return int(steps[below[0]]) if below.size else None


# --------------------------------------------------------------------------- cross-overs (plan)

@dataclass(frozen=True)
class _Setting:
    """One run of a cross-over figure: a hidden-state analysis against composition."""

    key: str  # prefix of its curve keys ("" for a figure of one run)
    run: Run
    analysis: str  # the hidden-state analysis
    label: str  # legend label of its curve (the limit is appended)
    short: str  # its name in the cross-over lines' labels
    prefix: str  # legend prefix of its baselines ("" for one run)
    colors: tuple[str, str, str]  # the bound, composition (RDP), composition-pld
    steps_note: Callable[[int], str] = lambda e: ""  # e.g. " (T = 349,400)"


def _crossover_plans(s: _Setting, *, delta, epochs: np.ndarray, orders, pld: bool, stages=_SILENT):
    """``noisysgd.plan`` of ``s.run`` at ``epochs``: ``"both"`` against both baselines
    (when ``pld``) and ``"rdp"`` against ``composition`` alone.  When a cross-over
    or a plateau epoch falls between two of ``epochs``, both are planned again with
    every epoch from the one before the cross-over to it (and the plateau epoch)
    added, so the cross-overs are exact to the epoch (the curves cross once).
    Returns (epochs, plans)."""
    names = {"rdp": ["composition", s.analysis]}
    if pld:
        names["both"] = [*BASELINES, s.analysis]

    def make(ep):
        out = {}
        for k, a in names.items():
            out[k] = plan(s.run, delta=delta, epochs=ep, analyses=a, orders=orders)
            stages.tick(f"{s.key.rstrip('/') or s.analysis} cross-overs")
        return out

    plans = make(epochs)
    extra: set[int] = set()
    for p in plans.values():
        c = p.curves[s.analysis]
        if c.crossover_epoch is not None:
            i = int(np.searchsorted(epochs, c.crossover_epoch))
            if i > 0:
                extra.update(range(int(epochs[i - 1]) + 1, c.crossover_epoch))
        if c.plateau_epoch is not None and c.plateau_epoch <= epochs[-1]:
            extra.add(int(c.plateau_epoch))
    extra -= set(epochs.tolist())
    if extra:
        epochs = np.union1d(epochs, np.array(sorted(extra), dtype=np.int64))
        stages.more(len(names))
        plans = make(epochs)
    return epochs, plans


def _crossover_curves(settings: list[_Setting], *, delta, epochs, orders, pld: bool, stages=_SILENT):
    """Curves, cross-over lines, plateau dots and parameters of a cross-over figure."""
    curves: dict[str, Curve] = {}
    vlines: dict[str, float] = {}
    vstyles: dict[str, dict] = {}
    dots: dict[str, tuple[float, float]] = {}
    info: dict[str, dict] = {}
    for s in settings:
        ep, plans = _crossover_plans(s, delta=delta, epochs=np.asarray(epochs, dtype=np.int64),
                                     orders=orders, pld=pld, stages=stages)
        rdp_plan, both = plans["rdp"], plans.get("both")
        hidden = (both or rdp_plan).curves[s.analysis]
        color, c_rdp, c_pld = s.colors
        curves[s.key + "composition"] = Curve(
            f"{s.prefix}composition (RDP): every iterate released", ep,
            rdp_plan.curves["composition"].epsilon, {"color": c_rdp, "ls": "--", "lw": 1.3})
        if both is not None:
            pc = both.curves["composition-pld"]
            exact = pc.exact
            style = {"color": c_pld, "ls": "-.", "lw": 1.3}
            if not exact.all():  # computed at a few epochs (and around the cross-over)
                style.update(marker="o", ms=3.5)
            curves[s.key + "composition-pld"] = Curve(
                f"{s.prefix}composition-pld (PLD): every iterate released", ep[exact],
                pc.epsilon[exact], style)
        limit = hidden.limit
        curves[s.key + s.analysis] = Curve(
            s.label + (f", limit {limit:.4g}" if limit is not None else ""), ep, hidden.epsilon,
            {"color": color, "lw": 2.5})
        line = (both or rdp_plan).limit_line or {}
        if line.get("epsilon"):  # no sound analysis can go below it (noisysgd.limits)
            curves[s.key + "limit line"] = Curve(
                f"{s.prefix}limit line: no sound bound below",
                np.asarray(line["epochs"]), np.asarray(line["epsilon"], dtype=float),
                {"color": color, "ls": (0, (4, 3)), "lw": 0.9, "marker": ".", "ms": 4})
        cross_rdp = rdp_plan.curves[s.analysis].crossover_epoch
        cross = None if both is None else hidden.crossover_epoch
        lines = []
        if cross is not None and cross == cross_rdp:
            lines.append((f"{s.short} < composition (RDP and PLD) from epoch {cross:,}", cross, "-."))
        else:
            if cross_rdp is not None:
                lines.append((f"{s.short} < composition RDP from epoch {cross_rdp:,}{s.steps_note(cross_rdp)}",
                              cross_rdp, "--"))
            if cross is not None:
                lines.append((f"{s.short} < both composition bounds from epoch {cross:,}{s.steps_note(cross)}",
                              cross, "-."))
        for label, x, ls in lines:
            vlines[label] = float(x)
            vstyles[label] = {"color": color, "ls": ls, "lw": 1}
        plateau = hidden.plateau_epoch
        if plateau is not None and plateau <= ep[-1]:
            i = int(np.searchsorted(ep, plateau))
            dots[s.key + s.analysis] = (float(plateau), float(hidden.epsilon[i]))
        info[s.key or "run"] = {
            "run": s.run, "analysis": s.analysis, "epochs": ep, "plan": both, "plan_rdp": rdp_plan,
            "crossover": cross, "crossover_rdp": cross_rdp, "limit": limit, "plateau_epoch": plateau,
        }
    return curves, vlines, vstyles, dots, info


def _plan_text(pld: bool, pld_note: str = "at the marked epochs, bisected around the cross-over") -> str:
    return (
        "Curves and numbers are noisysgd.plan's: the cross-over is the first epoch from which the bound "
        "stays below "
        + ("the smaller of composition and composition-pld (dashed line: composition RDP alone)"
           if pld else "composition RDP")
        + "; the limit is ε after unlimited epochs, the dot the first epoch within 0.1% of it."
        + (f" composition-pld: dp_accounting's PLD (pessimistic, discretisation 1e-4) {pld_note}."
           if pld else "")
    )


def _zoom(curves: dict[str, Curve], xs, *, pad: float = 0.25) -> dict | None:
    """A linear zoom around the epochs ``xs`` (the cross-overs), or None without any."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    lo, hi = min(xs), max(xs)
    width = max(hi - lo, 0.05 * hi)
    x0, x1 = lo - pad * 2 * width, hi + pad * 2 * width
    ys = np.concatenate([c.epsilon[(c.steps >= x0) & (c.steps <= x1)] for c in curves.values()])
    ys = ys[np.isfinite(ys)]
    y0, y1 = float(ys.min()), float(ys.max())
    margin = 0.08 * (y1 - y0)
    return {"xlim": (x0, x1), "ylim": (y0 - margin, y1 + margin), "bounds": (0.44, 0.05, 0.35, 0.3),
            "title": f"zoom: epochs {x0:,.0f}–{x1:,.0f} (linear axes)"}


# --------------------------------------------------------------------------- Altschuler & Talwar


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
    with _Stages(total, "figures: altschuler-talwar", progress) as stages:
        return _altschuler_talwar_figure_data(
            delta=delta, orders=orders, points=points, max_steps=max_steps, pld=pld, crossover=crossover,
            crossover_epochs=crossover_epochs, crossover_points=crossover_points, stages=stages)


def _altschuler_talwar_figure_data(*, delta, orders, points, max_steps, pld, crossover, crossover_epochs,
                                   crossover_points, stages) -> dict[str, FigureData]:
    orders = DEFAULT_ORDERS if orders is None else np.asarray(orders, dtype=float)
    base = Run(
        n=1000, batch_size=10, batching="sample", steps=1, learning_rate=0.5,
        noise_multiplier=3.0, lipschitz=1.0, smoothness=1.0, diameter=1.0, convex=True,
    )
    steps = _step_grid(1, max_steps, points)
    out: dict[str, FigureData] = {}  # the paper's figures first, then the cross-over
    crossover_fig = None
    K = base.steps_per_epoch
    t_bar = _burn_in(base)
    at_label = "Altschuler–Talwar, sound: last iterate only (worst-case batches)"

    # ---- Cross-over (computed first: Figure 1's caption quotes it).
    cross = None
    if crossover:
        setting = _Setting(
            key="", run=base, analysis="altschuler-talwar", label=at_label, short="A&T", prefix="",
            colors=("C0", "C3", "C1"), steps_note=lambda e: f" (T = {e * K:,})",
        )
        grid = _step_grid(1, crossover_epochs, crossover_points)
        stages.tick("cross-overs (noisysgd.plan)")
        curves, vlines, vstyles, dots, info = _crossover_curves(
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
        crossover_fig = FigureData(
            name="altschuler-talwar-crossover",
            title="Altschuler & Talwar: where the sound bound overtakes composition (sampled batches)",
            caption=_run_caption(
                base, delta, orders,
                extra=(
                    f"Epochs of n/b = {K} steps (T = {K}·epochs), 1..{crossover_epochs:,} on a log grid "
                    f"of {grid.size} epochs plus every epoch around each cross-over. {numbers}. "
                    + _plan_text(pld)
                ),
            ),
            curves=curves, vlines=vlines, vline_styles=vstyles, dots=dots,
            xlim=(1.0, float(crossover_epochs)),
            inset=_zoom(curves, [cross["crossover_rdp"], cross["crossover"]]),
            params={"run": base, "delta": delta, **{k: v for k, v in cross.items() if k != "run"}},
            xlabel=f"epochs ({K} noisy gradient steps each)", legend_loc="upper left",
        )

    # ---- Figure 1: convex, sampled batches.
    stages.tick("Fig. 1")
    comp = _composition_eps(base, steps, orders, delta)
    stages.tick("Fig. 1")
    at = _at_eps(base, steps, orders, delta)
    stages.tick("Fig. 1")
    published = _at_eps(base, steps, orders, delta, "altschuler-talwar-sampled")
    stages.tick("Fig. 2(a)")
    plateau = _plateau_start(steps, at)
    published_label = "(B.2) as published: NOT sound (proof gap), for comparison"
    comp_label = "composition (RDP): every iterate released"
    if cross is not None and cross["crossover_rdp"] is not None:
        e = cross["crossover_rdp"]
        flat = (f"the sound bound equals composition (its composition branch; the lines coincide) "
                f"until it reaches its limit {cross['limit']:.4f} at epoch {e:,} (T = {e * K:,}; "
                "noisysgd.plan, see the cross-over figure) and is constant from there")
    else:
        flat = f"the sound bound is constant from the grid point T = {plateau:,}"
    out["fig1"] = FigureData(
        name="altschuler-talwar-fig1",
        title="Altschuler & Talwar, Fig. 1: convex losses, sampled batches",
        caption=_run_caption(
            base, delta, orders,
            extra=(
                f"T̄ = Dn/(Lη) = {t_bar:g}; {flat}. Dotted: the published (B.2), which conditions "
                "on the noise as if batch membership were independent of it, which fails "
                "(altschuler-talwar-sampled, NOT sound)."
            ),
        ),
        curves={
            "composition": Curve(comp_label, steps, comp, {"color": "C3", "ls": "--"}),
            "altschuler-talwar": Curve(at_label, steps, at, {"color": "C0", "lw": 2}),
            "altschuler-talwar-sampled": Curve(published_label, steps, published,
                                               {"color": "0.45", "ls": ":", "lw": 1.5}),
        },
        vlines={f"T̄ = Dn/(Lη) = {t_bar:g}": t_bar},
        params={"run": base, "delta": delta, "plateau": plateau},
    )

    # ---- Figure 2(a): cyclic batches, at whole epochs.
    cyc = base.replace(batching="cyclic")
    K = cyc.steps_per_epoch
    epochs = _step_grid(1, max(1, max_steps // K), points)
    csteps = epochs * K
    comp_cyc = _composition_eps(cyc, csteps, orders, delta)
    stages.tick("Fig. 2(a)")
    at_cyc = _at_eps(cyc, csteps, orders, delta)
    stages.tick("Fig. 2(b)")
    out["fig2a"] = FigureData(
        name="altschuler-talwar-fig2a",
        title="Altschuler & Talwar, Fig. 2(a): convex losses, cyclic batches",
        caption=_run_caption(
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

    # ---- Figure 2(b): strongly convex, η = 1/M, full batches (where the sound
    # analysis uses the contraction: (B.3) with b = n).
    sc = base.replace(learning_rate=1.0 / base.smoothness, batching="full", batch_size=None,
                      noise_multiplier=base.noise_multiplier * base.n / base.batch_size)
    curves = {
        "composition": Curve(
            "composition (RDP), any m", steps, _composition_eps(sc, steps, orders, delta),
            {"color": "C3", "ls": "--"},
        )
    }
    stages.tick("Fig. 2(b)")
    plateaus = {}
    dots = {}
    for i, m in enumerate((0.0, 1e-3, 1e-2, 1e-1)):
        eps = _at_eps(sc.replace(strong_convexity=m), steps, orders, delta)
        stages.tick("Fig. 2(b)")
        key = f"m={m:g}"
        plateaus[key] = _plateau_start(steps, eps)
        dots[key] = (float(plateaus[key]), float(eps[np.searchsorted(steps, plateaus[key])]))
        kind = "convex, (B.1)/(B.2), b = n" if m == 0 else "(B.3), b = n"
        color = ("C0", "C1", "C2", "C4")[i]  # C3 (red) is composition
        curves[key] = Curve(f"Altschuler–Talwar, m = {m:g} {kind}", steps, eps, {"color": color, "lw": 2})
    t_bar_sc = _burn_in(sc)
    plateau_text = ", ".join(f"{k.replace('m=', 'm = ')}: T = {v:,}" for k, v in plateaus.items())
    out["fig2b"] = FigureData(
        name="altschuler-talwar-fig2b",
        title="Altschuler & Talwar, Fig. 2(b): strongly convex losses, η = 1/M, full batches",
        caption=_run_caption(
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
    if crossover_fig is not None:
        out["crossover"] = crossover_fig
    return out


# --------------------------------------------------------------------------- Ye & Shokri

#: Ye & Shokri's Figures 1 and 2 (from their captions), in the paper's convention.
_YS_SETTING = {"n": 50, "b": 2, "eta": 0.02, "lambda": 1.0, "beta": 4.0, "S_g": 4.0, "sigma2": 4.0}
_YS_ORDERS = (10.0, 15.0)
_YS_COLORS = ("C0", "C1", "C2", "C4")  # one per order

#: The curves of Ye & Shokri's figures, in legend order (repeated for each order α,
#: in the order's colour): (key, label, analysis, batching, style).  ``analysis``
#: is an analysis name evaluated on the figures' run with that batching, stopped
#: after each epoch, or ``"ye-shokri:first"``/``"ye-shokri:last"``: Theorem 3.3
#: with the differing example in the first/last batch
#: (:meth:`~noisysgd.analyses.ye_shokri.YeShokri.rdp_per_position`).
_YS_CURVES: dict[str, tuple[tuple[str, str, str, str, dict], ...]] = {
    "fig1": (
        ("naive", "Theorem 2.1 (naive baseline)", "ye-shokri-naive", "cyclic", {"lw": 1}),
        ("last-batch", "Theorem 3.3, last batch (j₀ = n/b − 1)", "ye-shokri:last", "cyclic",
         {"lw": 2.2, "ls": "--"}),
        ("first-batch", "Theorem 3.3, first batch (j₀ = 0)", "ye-shokri:first", "cyclic", {"lw": 2.2}),
    ),
    "fig2a": (
        ("composition", "composition, one Gaussian per epoch", "composition", "shuffle", {"lw": 1}),
        ("composition-sampled", "sampled-Gaussian comp., NOT valid here", "composition", "sample",
         {"lw": 1, "ls": ":"}),
        ("last-batch", "Theorem 3.3, last batch", "ye-shokri:last", "cyclic", {"lw": 1.2, "ls": "--"}),
        # Theorem 4.2 as the paper plots it: proved for one partition reused every epoch,
        # so on this run's per-epoch reshuffling it is the flagged ye-shokri-reshuffle.
        ("thm4.2", "Thm 4.2 = ye-shokri-reshuffle, NOT sound here", "ye-shokri-reshuffle",
         "shuffle", {"lw": 2.5}),
    ),
    "fig2b": (
        ("composition", "composition (sampled Gaussian, q = b/n)", "composition", "sample", {"lw": 1}),
        ("thm4.3", "Theorem 4.3", "ye-shokri", "sample", {"lw": 2.5}),
    ),
}


def _ye_shokri_run(batching: str, epochs: int = 1) -> Run:
    """The figures' run: replace-one, so S_g = 2L; σ converted to the canonical z."""
    p = _YS_SETTING
    lipschitz = p["S_g"] / 2.0
    z = noise_multiplier_from_sigma(
        math.sqrt(p["sigma2"]), convention="ye-shokri", lipschitz=lipschitz,
        batch_size=p["b"], learning_rate=p["eta"],
    )
    return Run.from_epochs(
        epochs=epochs, n=p["n"], batch_size=p["b"], batching=batching, learning_rate=p["eta"],
        noise_multiplier=z, lipschitz=lipschitz, smoothness=p["beta"], strong_convexity=p["lambda"],
    )


def _ys_caption(run: Run, epochs: np.ndarray, orders: np.ndarray, extra: str) -> str:
    nu = run.noise_to_sensitivity
    sigma = run.sigma("ye-shokri")
    alphas = ", ".join(_fmt(a) for a in orders)
    return " ".join([
        f"Setting (Ye & Shokri's convention, from their captions): α ∈ {{{alphas}}}, "
        f"n = {run.n}, b = {run.batch_size} (n/b = {run.steps_per_epoch} steps per epoch), "
        f"η = {_fmt(run.learning_rate)}, λ = {_fmt(run.strong_convexity)}, "
        f"β = {_fmt(run.smoothness)}, S_g = {_fmt(run.sensitivity)}, "
        f"σ² = {_fmt(round(sigma * sigma, 12))} (each step adds √(2ησ²)·N(0, I)).",
        f"Library: adjacency = {run.adjacency} (S_g = 2L, L = {_fmt(run.lipschitz)}), "
        f"m = λ, M = β, z = {_fmt(run.noise_multiplier)} (noise std zL/b = "
        f"{_fmt(run.noise_multiplier * run.lipschitz / run.batch_size)} on the mean gradient; "
        f"noise/sensitivity z/2 = {_fmt(nu)}, so one use of the differing example costs "
        f"ρ(α) = α/(2·{_fmt(nu)}²) = α/{_fmt(2 * nu * nu)}).",
        f"y: the RDP ε at order α (not (ε, δ)); x: K = {int(epochs[0])}..{int(epochs[-1])} whole "
        "epochs, log–log axes.",
        extra,
    ])


def _per_epoch(analysis_name: str, run: Run, epochs: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """``analysis.rdp`` of ``run`` stopped after each of ``epochs`` whole epochs,
    an array (len(epochs), len(orders))."""
    analysis = get_analysis(analysis_name)
    l = run.steps_per_epoch
    return np.array([analysis.rdp(run.replace(steps=int(k) * l), orders) for k in epochs])


def _ys_rdp(analysis: str, batching: str, epochs: np.ndarray, orders: np.ndarray, cache: dict,
            stages=_SILENT) -> np.ndarray:
    """RDP (len(epochs), len(orders)) of one :data:`_YS_CURVES` source, computed once."""
    key = (analysis, batching)
    if key not in cache:
        stages.tick(f"{analysis.replace(':', ', ')} ({batching})")
        run = _ye_shokri_run(batching)
        if analysis in ("ye-shokri:first", "ye-shokri:last"):
            ys = get_analysis("ye-shokri")
            l = run.steps_per_epoch
            positions = [ys.rdp_per_position(run.replace(steps=int(k) * l), orders) for k in epochs]
            cache[("ye-shokri:first", batching)] = np.array([p[0] for p in positions])
            cache[("ye-shokri:last", batching)] = np.array([p[-1] for p in positions])
        elif analysis in ("ye-shokri", "ye-shokri-reshuffle"):  # one pass of the recursion
            cache[key] = get_analysis(analysis).rdp_over_epochs(run, epochs, orders)
        else:
            cache[key] = _per_epoch(analysis, run, epochs, orders)
    return cache[key]


def _ys_curves(fig: str, alphas, epochs, orders, cache,
               stages=_SILENT) -> tuple[dict[str, Curve], dict[str, np.ndarray]]:
    """The curves of one Ye & Shokri figure from :data:`_YS_CURVES`, and each
    source's RDP array by curve name."""
    curves: dict[str, Curve] = {}
    rdp: dict[str, np.ndarray] = {}
    for i, a in enumerate(alphas):
        color = _YS_COLORS[i % len(_YS_COLORS)]
        for name, label, analysis, batching, style in _YS_CURVES[fig]:
            values = _ys_rdp(analysis, batching, epochs, orders, cache, stages)
            rdp[name] = values
            curves[f"{name}/α={a:g}"] = Curve(f"α = {a:g}: {label}", epochs, values[:, i],
                                              {"color": color, **style})
    return curves, rdp


def ye_shokri_figure_data(
    *,
    orders=_YS_ORDERS,
    max_epochs: int = 1000,
    crossover: bool = True,
    crossover_epochs: int = 1000,
    delta: float = DELTA,
    progress: bool = False,
) -> dict[str, FigureData]:
    """The data of Ye & Shokri's Figures 1, 2(a) and 2(b) (numpy only), and a
    cross-over figure.

    Keys ``"fig1"`` (fixed order: Theorem 3.3 for the first and the last batch,
    Theorem 2.1), ``"fig2a"`` (shuffle and partition: Theorem 4.2, Theorem 3.3
    last batch, composition) and ``"fig2b"`` (sampling without replacement:
    Theorem 4.3, composition).  Every curve is the RDP ε at one order α of
    ``orders`` after K = 1, …, ``max_epochs`` whole epochs; curve keys are
    ``"<bound>/α=<α>"``.  ``params`` holds the runs, the orders and the epochs
    where the hidden-state bounds cross composition.

    With ``crossover``, ``"crossover"``: ε at ``delta`` after 1..``crossover_epochs``
    epochs of the same setting with ``sample`` batches (Theorem 4.3) and
    ``cyclic`` batches (Theorem 3.3 at the worst position), each against the
    composition baselines (RDP and PLD), from :func:`noisysgd.plan`; curve keys
    ``"<batching>/<analysis>"``, ``params["settings"][batching]`` the plan's
    cross-overs and plateaus.  ``progress``: a progress bar on stderr (tqdm).
    """
    with _Stages(5 + 4 * crossover, "figures: ye-shokri", progress) as stages:
        return _ye_shokri_figure_data(orders=orders, max_epochs=max_epochs, crossover=crossover,
                                      crossover_epochs=crossover_epochs, delta=delta, stages=stages)


def _ye_shokri_figure_data(*, orders, max_epochs, crossover, crossover_epochs, delta,
                           stages) -> dict[str, FigureData]:
    orders = np.asarray(orders, dtype=float)
    alphas = [float(a) for a in orders]
    epochs = np.arange(1, int(max_epochs) + 1, dtype=np.int64)
    cyc = _ye_shokri_run("cyclic")
    shuf = _ye_shokri_run("shuffle")
    samp = _ye_shokri_run("sample")
    cache: dict = {}

    out: dict[str, FigureData] = {}
    axes = dict(xlabel="K (epochs)", ylabel="RDP ε at order α", xscale="log", yscale="log")

    # ---- Figure 1: fixed order.
    curves, rdp = _ys_curves("fig1", alphas, epochs, orders, cache, stages)
    first, last, naive = rdp["first-batch"], rdp["last-batch"], rdp["naive"]
    # Theorem 2.1 tends to 4ρ(α)/(ηλ), ρ(α) = α/(2ν²).
    naive_limit = 4.0 / (2.0 * cyc.noise_to_sensitivity**2 * cyc.learning_rate * cyc.strong_convexity)
    conv = "; ".join(
        f"α = {a:g}: first batch {first[-1, i]:.5f}, last batch {last[-1, i]:.5f}, "
        f"naive {naive[-1, i]:.4g} (→ 4ρ/(ηλ) = {a * naive_limit:g})"
        for i, a in enumerate(alphas)
    )
    out["fig1"] = FigureData(
        name="ye-shokri-fig1",
        title="Ye & Shokri, Fig. 1: fixed order of mini-batches (cyclic)",
        caption=_ys_caption(cyc, epochs, orders, (
            "Bold: Theorem 3.3 for the differing example in the first batch B⁰ (j₀ = 0, solid) and in "
            "the last batch (j₀ = n/b − 1, dashed, the worst position). Thin: Theorem 2.1, the naive "
            "extension of Chourasia et al., with K = uses of the differing example, one per epoch "
            "(the library's ye-shokri-naive). "
            f"At K = {int(epochs[-1])}: {conv}. "
            "Left out: the paper's Balle et al. (2019) Theorem 5 + composition curve (dashed in "
            "the paper), which this library does not implement faithfully."
        )),
        curves=curves,
        vlines={},
        params={"run": cyc, "orders": orders, "epochs": epochs},
        ylim=(1e-4, 40.0), legend_loc="lower right", legend_ncol=1, **axes,
    )

    # ---- Figure 2(a): shuffle and partition.
    curves, rdp = _ys_curves("fig2a", alphas, epochs, orders, cache, stages)
    thm42, sampled = rdp["thm4.2"], rdp["composition-sampled"]
    cross_42 = {a: _first_below(epochs, sampled[:, i], thm42[:, i]) for i, a in enumerate(alphas)}
    conv = "; ".join(
        f"α = {a:g}: Theorem 4.2 {thm42[-1, i]:.6f} (K = 1: {thm42[0, i]:.6f}), last batch "
        f"{last[-1, i]:.5f}; below the sampled-Gaussian line from K = {cross_42[a]}"
        for i, a in enumerate(alphas)
    )
    out["fig2a"] = FigureData(
        name="ye-shokri-fig2a",
        title="Ye & Shokri, Fig. 2(a): shuffle and partition (bold: NOT sound for reshuffling)",
        caption=_ys_caption(shuf, epochs, orders, (
            "Bold: Theorem 4.2 (5) as the paper plots it, here the library's ye-shokri-reshuffle, "
            "flagged NOT sound: the theorem is proved for one random partition drawn once and "
            "reused in every epoch (their Algorithm 1, line 3), while this run (batching = shuffle) "
            "draws a fresh permutation every epoch, so the differing example's position changes "
            "between epochs; the sound ye-shokri refuses shuffle. Thin dashed: Theorem 3.3 for the "
            "last batch (the worst fixed order). Thin solid: this library's composition for shuffled "
            "batches, one Gaussian mechanism per epoch, K·ρ(α) (an example's batches are not "
            "independent samples, so no amplification by sampling). Dotted: the paper's composition "
            "baseline, the sampled Gaussian (Mironov et al.) with q = b/n over K·n/b steps, "
            "≈ (b/n)·ρ(α)·K: NOT a valid bound for shuffle and partition in this library's view, "
            f"drawn only to compare with the paper. At K = {int(epochs[-1])}: {conv}."
        )),
        curves=curves,
        vlines={},
        params={"run": shuf, "orders": orders, "epochs": epochs, "crossover_sampled": cross_42},
        ylim=(1e-3, 200.0), legend_loc="below", legend_ncol=2, **axes,
    )

    # ---- Figure 2(b): sampling without replacement.
    curves, rdp = _ys_curves("fig2b", alphas, epochs, orders, cache, stages)
    thm43, comp_sampled = rdp["thm4.3"], rdp["composition"]
    cross_43 = {}
    vlines, vstyles = {}, {}
    for i, a in enumerate(alphas):
        k = _first_below(epochs, comp_sampled[:, i], thm43[:, i])
        cross_43[a] = k
        if k is not None:
            label = f"α = {a:g}: Theorem 4.3 < composition from K = {k}"
            vlines[label] = float(k)
            vstyles[label] = {"color": _YS_COLORS[i % len(_YS_COLORS)], "ls": "-.", "lw": 1}
    conv = "; ".join(
        f"α = {a:g}: Theorem 4.3 {thm43[0, i]:.5f} at K = 1, {thm43[-1, i]:.5f} at K = "
        f"{int(epochs[-1])}, below composition from K = {cross_43[a]}"
        for i, a in enumerate(alphas)
    )
    out["fig2b"] = FigureData(
        name="ye-shokri-fig2b",
        title="Ye & Shokri, Fig. 2(b): sampling without replacement (fixed-size batches)",
        caption=_ys_caption(samp, epochs, orders, (
            "Bold: Theorem 4.3 (recursion over every step). Thin: composition, the sampled "
            "Gaussian (Mironov et al.) with q = b/n over K·n/b steps (the library's composition "
            f"for sample batches). {conv}."
        )),
        curves=curves,
        vlines=vlines,
        vline_styles=vstyles,
        params={"run": samp, "orders": orders, "epochs": epochs, "crossover": cross_43},
        legend_loc="upper left", legend_ncol=1, **axes,
    )
    if crossover:
        out["crossover"] = _ye_shokri_crossover(samp, cyc, delta=delta, max_epochs=crossover_epochs,
                                                stages=stages)
    return out


def _ye_shokri_crossover(samp: Run, cyc: Run, *, delta: float, max_epochs: int, stages=_SILENT) -> FigureData:
    """ε at δ against epochs for the figures' setting, sample and cyclic batches,
    against composition (RDP and PLD): noisysgd.plan's curves and numbers."""
    orders = DEFAULT_ORDERS
    epochs = np.arange(1, int(max_epochs) + 1, dtype=np.int64)
    settings = [
        _Setting(key="sample/", run=samp, analysis="ye-shokri",
                 label="sample: Theorem 4.3 (ye-shokri)", short="sample: Thm 4.3", prefix="sample: ",
                 colors=("C0", "C0", "C0")),
        _Setting(key="cyclic/", run=cyc, analysis="ye-shokri",
                 label="cyclic: Theorem 3.3, worst position (ye-shokri)", short="cyclic: Thm 3.3",
                 prefix="cyclic: ", colors=("C2", "C2", "C2")),
    ]
    curves, vlines, vstyles, dots, info = _crossover_curves(
        settings, delta=delta, epochs=epochs, orders=orders, pld=True, stages=stages)
    settings_info = {k.rstrip("/"): v for k, v in info.items()}

    def numbers(name: str) -> str:
        s = settings_info[name]
        cross = (f"below both composition bounds from epoch {s['crossover']}" if s["crossover"] is not None
                 else f"not below both composition bounds by epoch {int(epochs[-1])}")
        rdp = f"RDP alone: {s['crossover_rdp']}" if s["crossover_rdp"] is not None else "never below RDP"
        limit = (f"limit {s['limit']:.4f} (within 0.1% from epoch {s['plateau_epoch']})"
                 if s["limit"] is not None else "no limit")
        return f"{name}: {cross} ({rdp}), {limit}"

    nu = samp.noise_to_sensitivity
    sigma = samp.sigma("ye-shokri")
    caption = " ".join([
        (f"The setting of their Figs. 1–2 (their convention): n = {samp.n}, b = {samp.batch_size} "
         f"({samp.steps_per_epoch} steps per epoch), η = {_fmt(samp.learning_rate)}, "
         f"λ = {_fmt(samp.strong_convexity)}, β = {_fmt(samp.smoothness)}, S_g = {_fmt(samp.sensitivity)}, "
         f"σ² = {_fmt(round(sigma * sigma, 12))}; library: adjacency = {samp.adjacency}, "
         f"L = {_fmt(samp.lipschitz)}, m = λ, M = β, z = {_fmt(samp.noise_multiplier)} "
         f"(noise/sensitivity {_fmt(nu)})."),
        f"y: ε at δ = {_fmt(delta)}, {_orders_text(orders)[:-1]}; x: every epoch 1..{int(epochs[-1])}.",
        ("Blue: sample batches, Theorem 4.3 (6), against composition over every step (sampled Gaussian, "
         "q = b/n). Green: cyclic batches, Theorem 3.3 (3) at the worst position (last batch), against "
         "one Gaussian mechanism per epoch. Shuffled batches are left out: ye-shokri refuses them "
         "(Theorem 4.2 covers one partition reused every epoch; see ye-shokri-reshuffle)."),
        f"{numbers('sample')}; {numbers('cyclic')}.",
        ("Thin dashed lines with dots: the limit line, the exact privacy of the run's linear + ridge "
         "instance (noisysgd.limits): no sound analysis in its class can certify less."),
        _plan_text(True, "for sample batches at the marked epochs, bisected around the cross-over; "
                         "for cyclic batches the exact Gaussian curve"),
    ])
    return FigureData(
        name="ye-shokri-crossover",
        title="Ye & Shokri: where the sound bound overtakes composition (ε at δ = "
              f"{_fmt(delta)})",
        caption=caption,
        curves=curves, vlines=vlines, vline_styles=vstyles, dots=dots,
        params={"delta": delta, "settings": settings_info, "epochs": epochs},
        xlabel="epochs", ylabel=f"ε at δ = {_fmt(delta)}", legend_loc="below", legend_ncol=2,
    )

# --------------------------------------------------------------------------- drawing


def require_matplotlib() -> None:
    """Raise ``ImportError`` with an installation hint if matplotlib is missing."""
    _matplotlib()


def _matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # tests simulate this by hiding matplotlib
        raise ImportError(MATPLOTLIB_MISSING) from exc
    return Figure, FigureCanvasAgg


#: Layout of a figure, in inches: the axes' height, the title above them, the tick
#: labels and x label below them, a caption line (7.5 pt) and a legend row (8 pt).
_AXES_HEIGHT, _TOP, _TICKS, _CAPTION_LINE, _LEGEND_ROW = 3.9, 0.45, 0.62, 0.135, 0.19
#: Colours of a PNG file: the image is reduced to a palette of this many colours
#: (Pillow's fast octree, no dithering), a third of the full-colour file; on the
#: paper figures no pixel moves by more than 14/255 in any channel (median cut
#: with fewer colours merged thin lines of different colours into grey).
_PNG_COLORS = 256
#: File formats, by suffix (what ``--plot`` accepts).
_FORMATS = {".png": "png", ".pdf": "pdf", ".svg": "svg"}


def _plot_lines(ax, data: FigureData, *, labels: bool) -> None:
    log_y = data.yscale == "log"
    for key, c in data.curves.items():
        eps = np.asarray(c.epsilon, dtype=float)
        ok = eps > 0 if log_y else np.isfinite(eps)
        ax.plot(np.asarray(c.steps)[ok], eps[ok], label=c.label if labels else None, **c.style)
        if key in data.dots:
            x, y = data.dots[key]
            ax.plot([x], [y], "o", color=c.style.get("color"), ms=6, zorder=5)
    line_styles = [":", "--", "-."]
    for j, (label, t) in enumerate(data.vlines.items()):
        style = {"color": "k" if j == 0 else "0.35", "ls": line_styles[j % 3], "lw": 1}
        style.update(data.vline_styles.get(label, {}))
        ax.axvline(t, label=label if labels else None, **style)
    for label, y in data.hlines.items():
        ax.axhline(y, label=label if labels else None, color="0.25", ls="-.", lw=1)


def _plain_tick(y: float, _pos=None) -> str:
    return f"{y:g}"


def _readable_log_y(ax) -> None:
    """On a log y axis spanning less than three decades, label ticks at 1, 2 and 5
    times each power of ten (at 1, 1.5, 2, 3, 5 and 7 times below 1.5 decades) in
    plain numbers: matplotlib would label one or two decades only, or its minor
    ticks as 2×10⁰."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    lo, hi = ax.get_ylim()
    if lo <= 0 or math.log10(hi / lo) >= 3:
        return
    subs = (1.0, 2.0, 5.0) if math.log10(hi / lo) >= 1.5 else (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(_plain_tick))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _save(fig, path: Path) -> None:
    """Save in the format ``path``'s suffix names; a PNG is palette-reduced (Pillow)."""
    fmt = _FORMATS[path.suffix.lower()]
    if fmt != "png":
        fig.savefig(path, format=fmt, metadata={"Creator": "noisysgd"})
        return
    from PIL import Image  # a dependency of matplotlib

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    buf.seek(0)
    with Image.open(buf) as im:
        small = im.convert("RGB").quantize(colors=_PNG_COLORS, method=2, dither=0)  # fast octree
        small.save(path, format="PNG", optimize=True)


def _draw(data: FigureData, path: Path) -> Path:
    Figure, FigureCanvasAgg = _matplotlib()
    caption = "\n".join(textwrap.wrap(data.caption, width=125))
    caption_h = _CAPTION_LINE * (caption.count("\n") + 1) + 0.2
    below = data.legend_loc == "below"  # the legend between the x label and the caption
    entries = len(data.curves) + len(data.vlines) + len(data.hlines)
    legend_h = _LEGEND_ROW * math.ceil(entries / data.legend_ncol) + 0.12 if below else 0.0
    height = _TOP + _AXES_HEIGHT + _TICKS + legend_h + caption_h
    fig = Figure(figsize=(8.0, height), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.12, (_TICKS + legend_h + caption_h) / height, 0.84, _AXES_HEIGHT / height))
    _plot_lines(ax, data, labels=True)
    ax.set_xscale(data.xscale)
    ax.set_yscale(data.yscale)
    if data.xlim is not None:
        ax.set_xlim(*data.xlim)
    if data.ylim is not None:
        ax.set_ylim(*data.ylim)
    if data.yscale == "log":
        _readable_log_y(ax)
    ax.set_xlabel(data.xlabel or "T (number of noisy gradient steps)")
    ax.set_ylabel(data.ylabel or f"ε at δ = {data.params.get('delta', DELTA):g}")
    ax.set_title(data.title, fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    if below:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -_TICKS / _AXES_HEIGHT),
                  ncol=data.legend_ncol, fontsize=8, frameon=False)
    else:
        ax.legend(loc=data.legend_loc, ncol=data.legend_ncol, fontsize=8, framealpha=0.9)
    if data.inset is not None:  # a zoom, linear axes
        zoom = ax.inset_axes(data.inset["bounds"], zorder=10)
        zoom.set_facecolor("white")
        _plot_lines(zoom, data, labels=False)
        zoom.set_xlim(*data.inset["xlim"])
        zoom.set_ylim(*data.inset["ylim"])
        zoom.tick_params(labelsize=7)
        zoom.grid(True, alpha=0.3)
        zoom.set_title(data.inset.get("title", ""), fontsize=7.5)
        ax.indicate_inset_zoom(zoom, edgecolor="0.4")
    fig.text(0.03, 0.08 / height, caption, ha="left", va="bottom", fontsize=7.5, family="sans-serif")
    _save(fig, path)
    return path


# --------------------------------------------------------------------------- the plotted data as JSON


def _round(values, digits: int | None) -> list:
    """``values`` as JSON numbers: integers stay exact, others keep ``digits``
    significant digits (all of them with None); not finite → None."""
    out = []
    for v in np.asarray(values).ravel().tolist():
        if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 2**53):
            out.append(int(v))
        elif not math.isfinite(v):
            out.append(None)
        else:
            out.append(v if digits is None else float(f"{v:.{digits}g}"))
    return out


def figure_series(data: FigureData, digits: int | None = SERIES_DIGITS) -> dict:
    """What the figure ``data`` shows, as JSON data: its title, caption and axis
    labels, every curve's label and points, the vertical and horizontal lines and
    the dots.  Integer x values are exact; every other number keeps ``digits``
    significant digits (``None``: unrounded); a value that is not finite is None.

    ``noisysgd figures`` writes this beside each figure (``<name>.json``), so a
    reader can check a figure against the code; ``tests/test_figures.py``
    recomputes the committed ones in ``docs/figures/``."""
    return {
        "name": data.name,
        "title": data.title,
        "xlabel": data.xlabel or "T (number of noisy gradient steps)",
        "ylabel": data.ylabel or f"ε at δ = {data.params.get('delta', DELTA):g}",
        "digits": digits,
        "caption": data.caption,
        "curves": {key: {"label": c.label, "x": _round(c.steps, digits), "y": _round(c.epsilon, digits)}
                   for key, c in data.curves.items()},
        "vlines": {label: _round([x], digits)[0] for label, x in data.vlines.items()},
        "hlines": {label: _round([y], digits)[0] for label, y in data.hlines.items()},
        "dots": {key: _round(xy, digits) for key, xy in data.dots.items()},
    }


def write_series(data: FigureData, path) -> Path:
    """Write :func:`figure_series` of ``data`` to ``path`` as JSON (one line per curve)."""
    series = figure_series(data)
    curves = series.pop("curves")
    text = json.dumps(series, ensure_ascii=False, indent=1, allow_nan=False)[:-2]
    lines = [f"  {json.dumps(k, ensure_ascii=False)}: {json.dumps(c, ensure_ascii=False, allow_nan=False)}"
             for k, c in curves.items()]
    text += ',\n "curves": {\n' + ",\n".join(lines) + "\n }\n}\n"
    path = Path(path)
    path.write_text(text, encoding="utf-8")
    return path


def _write(data: dict[str, FigureData], out_dir, progress: bool = False) -> list[Path]:
    """Each figure as ``<name>.png`` and its data as ``<name>.json`` in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    with _Stages(len(data) - 1, "figures: drawing", progress) as stages:
        for fig in data.values():
            stages.tick(fig.name)
            paths.append(_draw(fig, out / f"{fig.name}.png"))
            paths.append(write_series(fig, out / f"{fig.name}.json"))
    return paths


def altschuler_talwar_figures(out_dir, *, progress: bool = False, **options) -> list[Path]:
    """Write Altschuler & Talwar's Figures 1, 2(a), 2(b) and the cross-over
    figure into ``out_dir`` (created if missing), each as ``<name>.png`` and its
    plotted data as ``<name>.json`` (:func:`figure_series`); return their paths.
    ``options`` go to :func:`altschuler_talwar_figure_data` (the defaults draw
    the full figures); ``progress``: progress bars on stderr."""
    require_matplotlib()  # fail before the computation if matplotlib is missing
    return _write(altschuler_talwar_figure_data(progress=progress, **options), out_dir, progress)


def ye_shokri_figures(out_dir, *, progress: bool = False, **options) -> list[Path]:
    """Write Ye & Shokri's Figures 1, 2(a), 2(b) and the cross-over figure into
    ``out_dir`` (created if missing), as ``<name>.png`` and ``<name>.json``;
    return their paths.  ``options`` go to :func:`ye_shokri_figure_data`;
    ``progress``: progress bars on stderr."""
    require_matplotlib()
    return _write(ye_shokri_figure_data(progress=progress, **options), out_dir, progress)


# --------------------------------------------------------------------------- noisysgd plan --plot

#: A plan figure's y axis covers the best sound bound, the budget and every sound
#: bound whose largest value is at most this many times theirs; curves beyond
#: leave the axes (their legend entry says where).
_PLAN_KEEP = 3.0


def _plan_ylim(plan, curves: dict[str, Curve], budget: float | None):
    """(yscale, (bottom, top), kept curve names) of a plan figure: the axis covers
    the curves that matter (see :data:`_PLAN_KEEP`), composition only where it
    falls in that range."""
    def finite(v):
        v = np.asarray(v, dtype=float)
        return v[np.isfinite(v) & (v > 0)]

    best = finite(plan.best_epsilon)
    anchor = [float(best.max())] if best.size else []
    if budget is not None:
        anchor.append(float(budget))
    if not anchor:
        return "log", None, set(curves)
    ref = max(anchor)
    kept = {"best"}
    values = [best] + ([np.array([budget])] if budget is not None else [])
    for name, c in plan.curves.items():
        if name not in curves or not c.sound or name in BASELINES:
            continue
        v = finite(c.epsilon)
        if v.size and v.max() <= _PLAN_KEEP * ref:
            kept.add(name)
            values.append(v)
    line = finite((plan.limit_line or {}).get("epsilon", []))
    if line.size and best.size and line[-1] >= best[-1] / 2:  # the limit line where it is close to the best
        kept.add("limit line")
        values.append(line)
    allv = np.concatenate(values)
    lo, hi = float(allv.min()), float(allv.max())
    if hi / lo >= 4.0:
        return "log", (lo / 1.25, hi * 1.6), kept
    span = max(hi - lo, 0.02 * hi)
    return "linear", (max(0.0, lo - 0.15 * span), hi + 0.5 * span), kept


def _off_axes(steps, eps, bottom: float, top: float) -> str:
    """What of a curve the y range ``(bottom, top)`` leaves out, for its legend entry."""
    eps = np.asarray(eps, dtype=float)
    steps = np.asarray(steps)
    above, under = eps > top, eps < bottom
    if np.all(above):
        return f" [off the axes: above ε = {_fmt(float(f'{top:.3g}'))}]"
    if np.all(under):
        return f" [off the axes: below ε = {_fmt(float(f'{bottom:.3g}'))}]"
    notes = []
    if above.any():
        i = int(np.argmax(above))
        notes.append(f"above the axes from epoch {int(steps[i]):,}" if not above[:i].any() or i == 0
                     else "partly above the axes")
    if under.any():
        notes.append("partly below the axes")
    return f" [{'; '.join(notes)}]" if notes else ""


def plan_figure_data(plan) -> FigureData:
    """ε versus epochs of a :class:`~noisysgd.planning.Plan`: every applicable
    analysis (flagged ones dotted), the best sound bound in bold, each
    cross-over with composition, and the budget if one was given.

    The y axis covers the curves that matter (the best sound bound, the budget
    and every sound bound within a factor :data:`_PLAN_KEEP` of them): a
    curve that leaves it (composition, in the end; a loose bound such as
    ye-shokri-naive) says so in its legend entry, and the title says that
    curves are cut.  A linear y axis when that range spans less than a factor
    4, else a log one with ticks at 1, 2 and 5 times each power of ten.  The
    legend sits below the axes, where it covers nothing."""
    run = plan.run
    epochs = plan.epochs
    curves: dict[str, Curve] = {}
    colors = iter(f"C{i}" for i in range(20))
    for name, c in plan.curves.items():
        if not c.applies:
            continue
        if name in ("composition", "composition-pld"):
            style = {"color": "C3" if name == "composition" else "C1", "ls": "--", "lw": 1.5}
        elif not c.sound:
            style = {"color": "0.55", "ls": ":", "lw": 1.2}
        else:
            color = next(colors)
            while color in ("C1", "C3"):
                color = next(colors)
            style = {"color": color, "lw": 1.5}
        label = name + ("" if c.sound else " (NOT sound)")
        if c.limit is not None:
            label += f", plateau {c.limit:.3g}"
        curves[name] = Curve(label, epochs, c.epsilon, style)
    curves["best"] = Curve("best sound bound", epochs, plan.best_epsilon,
                           {"color": "k", "lw": 3, "alpha": 0.35})
    line = plan.limit_line or {}
    if line.get("epsilon"):
        curves["limit line"] = Curve(
            "limit line: no sound analysis can go below (exact privacy of a linear loss with ridge)",
            np.asarray(line["epochs"]), np.asarray(line["epsilon"], dtype=float),
            {"color": "k", "ls": (0, (4, 3)), "lw": 0.9, "marker": ".", "ms": 4})
    by_epoch: dict[int, list[str]] = {}
    for name, c in plan.curves.items():
        if c.crossover_epoch is not None and c.crossover_epoch > epochs[0] and c.sound:
            by_epoch.setdefault(c.crossover_epoch, []).append(name)
    vlines = {f"{', '.join(names)} < composition from epoch {e}": e for e, names in by_epoch.items()}
    hlines = {}
    budget = None
    if plan.budget is not None:
        b = plan.budget
        budget = float(b.target_epsilon)
        allowed = "unlimited epochs" if b.epochs is None else f"{b.epochs} epochs"
        hlines[f"budget ε = {b.target_epsilon:g} ({allowed})"] = b.target_epsilon
    yscale, ylim, _ = _plan_ylim(plan, curves, budget)
    title = "ε versus epochs, by analysis"
    if ylim is not None:
        cut = False
        for key, c in list(curves.items()):
            note = _off_axes(c.steps, c.epsilon, *ylim)
            if note:
                cut = True
                curves[key] = Curve(c.label + note, c.steps, c.epsilon, c.style)
        if cut:
            title += " (y axis: the bounds that matter; cut curves say so)"
    caption = (
        f"n = {run.n}, b = {run.batch_size} ({run.batching}, {run.steps_per_epoch} steps per epoch), "
        f"η = {_fmt(run.learning_rate)}" + (f"·(t+1)^-{_fmt(run.lr_decay)}" if run.lr_decay else "")
        + f", z = {_fmt(run.noise_multiplier)}, L = {_fmt(run.lipschitz)}, "
        f"M = {_fmt(run.smoothness) if run.smoothness else '-'}, m = {_fmt(run.strong_convexity)}, "
        f"D = {_fmt(run.diameter) if run.diameter else '-'}, adjacency = {run.adjacency}, "
        f"δ = {_fmt(plan.delta)}, {plan.details.get('conversion', 'improved')} RDP conversion. "
        "Composition: every iterate released; the others: the final model only. "
        + ("composition-pld is computed at a few epochs and bounded by the next one in between. "
           if "composition_pld_note" in plan.details else "")
    )
    labels = [c.label for c in curves.values()] + list(vlines) + list(hlines)
    ncol = 2 if max(map(len, labels)) <= 52 else 1
    return FigureData(
        name="plan", title=title, caption=caption, curves=curves,
        vlines=vlines, hlines=hlines, params={"delta": plan.delta},
        xlabel="epochs", xscale="log" if epochs[-1] / epochs[0] >= 20 else "linear",
        yscale=yscale, ylim=ylim, legend_loc="below", legend_ncol=ncol,
    )


def plan_figure(plan, path) -> Path:
    """Draw :func:`plan_figure_data` of ``plan`` into the file ``path``, in the
    format its suffix names (``.png``, ``.pdf`` or ``.svg``; any other suffix is
    a ValueError naming ``plot``, the ``--plot`` of ``noisysgd plan``)."""
    from .io import check_plot_suffix

    path = check_plot_suffix(path, "plot")
    return _draw(plan_figure_data(plan), path)


#: Paper name → function writing its figures into a directory.
PAPERS: dict[str, Callable[..., list[Path]]] = {
    "altschuler-talwar": altschuler_talwar_figures,
    "ye-shokri": ye_shokri_figures,
}


def write_figures(paper: str, out_dir, *, progress: bool = False) -> list[Path]:
    """Figures of ``paper`` (a key of :data:`PAPERS`, or ``"all"``) into ``out_dir``:
    each figure's ``<name>.png`` and ``<name>.json`` (its plotted data,
    :func:`figure_series`), in that order.  ``progress``: progress bars on stderr."""
    if paper == "all":
        names = list(PAPERS)
    elif paper in PAPERS:
        names = [paper]
    else:
        raise ValueError(f"paper must be one of {', '.join([*PAPERS, 'all'])}. Found {paper!r}.")
    paths: list[Path] = []
    for name in names:
        paths.extend(PAPERS[name](out_dir, progress=progress) if progress else PAPERS[name](out_dir))
    return paths
