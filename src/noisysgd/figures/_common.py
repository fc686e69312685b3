"""What the figures of every paper share: the figure data (:class:`FigureData`,
:class:`Curve`), the progress stages, the step grids, ε curves of a run, captions,
and the cross-over curves drawn from :func:`noisysgd.plan`.  numpy only."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..analyses import get_analysis
from ..planning import BASELINES, plan
from ..rdp import OrderGridWarning, epsilon_from_rdp
from ..run import Run


MATPLOTLIB_MISSING = "matplotlib is needed for figures: pip install 'noisysgd[plot]'"

#: δ of every figure.
DELTA = 1e-5

#: Significant digits of the plotted values in a figure's data file (``<name>.json``).
SERIES_DIGITS = 6

class Stages:
    """Progress over a figure's computation: a bar on stderr (:func:`noisysgd.progress.bar`,
    tqdm, removed when done) with ``progress``, else nothing.  ``tick(text)`` ends
    one stage and names the next (the first call only names it); ``more(k)`` adds
    stages found on the way."""

    def __init__(self, total: int, desc: str, progress: bool):
        from ..progress import bar

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

SILENT = Stages(0, "", False)

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

def step_grid(lo: int, hi: int, points: int) -> np.ndarray:
    return np.unique(np.round(np.geomspace(lo, hi, points)).astype(np.int64))

def _eps_rows(rdp_rows, orders, delta) -> np.ndarray:
    # The order grid's edge can be optimal at tiny T; the plotted value
    # is still a valid upper bound, so the edge warning is not repeated 1000 times.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrderGridWarning)
        return np.array([epsilon_from_rdp(orders, row, delta).epsilon for row in rdp_rows])

def composition_eps(run: Run, steps: np.ndarray, orders, delta) -> np.ndarray:
    comp = get_analysis("composition")
    if run.batching in ("poisson", "sample"):
        # T sampled-Gaussian steps: RDP is T times one step's.
        per_step = comp.rdp(run.replace(steps=1), orders)
        rows = steps[:, None].astype(float) * per_step[None, :]
    else:
        rows = np.array([comp.rdp(run.replace(steps=int(t)), orders) for t in steps])
    return _eps_rows(rows, orders, delta)

def at_eps(run: Run, steps: np.ndarray, orders, delta, name: str = "altschuler-talwar") -> np.ndarray:
    rows = get_analysis(name).rdp_over_steps(run, steps, orders)
    return _eps_rows(rows, orders, delta)

def fmt(x: float) -> str:
    return f"{x:g}"

def orders_text(orders) -> str:
    return (f"improved RDP→(ε, δ) conversion over {len(orders)} orders in "
            f"[{fmt(float(np.min(orders)))}, {fmt(float(np.max(orders)))}].")

def run_caption(run: Run, delta: float, orders, *, extra: str = "", m: str | None = None) -> str:
    sigma = run.sigma("altschuler-talwar")
    parts = [
        f"n = {run.n}, b = {run.batch_size} ({run.batching}, q = b/n = {fmt(run.sampling_rate)}),",
        f"η = {fmt(run.learning_rate)}, z = {fmt(run.noise_multiplier)} (σ = zL/b = {fmt(sigma)}),",
        f"L = {fmt(run.lipschitz)}, M = {fmt(run.smoothness)}, m = {m or fmt(run.strong_convexity)},",
        f"D = {fmt(run.diameter)}, convex, adjacency = {run.adjacency}, δ = {fmt(delta)},",
        orders_text(orders),
    ]
    return " ".join(parts) + (f" {extra}" if extra else "")

def burn_in(run: Run) -> float:
    """T̄ = Dn/(Lη) (Theorem 3.1, up to constants)."""
    return run.diameter * run.n / (run.lipschitz * run.learning_rate)

def plateau_start(steps: np.ndarray, eps: np.ndarray, rel: float = 1e-9) -> int:
    """First T from which the curve equals its last value within ``rel``."""
    final = eps[-1]
    off = np.flatnonzero(np.abs(eps - final) > rel * abs(final))
    return int(steps[0] if off.size == 0 else steps[min(off[-1] + 1, steps.size - 1)])

def first_below(steps, upper, lower, rel: float = 1e-9):
    """First x where ``lower`` is strictly (beyond ``rel``) below ``upper``; None if never."""
    below = np.flatnonzero(lower < upper * (1.0 - rel))
    return int(steps[below[0]]) if below.size else None

@dataclass(frozen=True)
class FigureSetting:
    """One run of a cross-over figure: a hidden-state analysis against composition."""

    key: str  # prefix of its curve keys ("" for a figure of one run)
    run: Run
    analysis: str  # the hidden-state analysis
    label: str  # legend label of its curve (the limit is appended)
    short: str  # its name in the cross-over lines' labels
    prefix: str  # legend prefix of its baselines ("" for one run)
    colors: tuple[str, str, str]  # the bound, composition (RDP), composition-pld
    steps_note: Callable[[int], str] = lambda e: ""  # e.g. " (T = 349,400)"

def _crossover_plans(s: FigureSetting, *, delta, epochs: np.ndarray, orders, pld: bool, stages=SILENT):
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

def crossover_curves(settings: list[FigureSetting], *, delta, epochs, orders, pld: bool, stages=SILENT):
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

def plan_text(pld: bool, pld_note: str = "at the marked epochs, bisected around the cross-over") -> str:
    return (
        "Curves and numbers are noisysgd.plan's: the cross-over is the first epoch from which the bound "
        "stays below "
        + ("the smaller of composition and composition-pld (dashed line: composition RDP alone)"
           if pld else "composition RDP")
        + "; the limit is ε after unlimited epochs, the dot the first epoch within 0.1% of it."
        + (f" composition-pld: dp_accounting's PLD (pessimistic, discretisation 1e-4) {pld_note}."
           if pld else "")
    )

def zoom_window(curves: dict[str, Curve], xs, *, pad: float = 0.25) -> dict | None:
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
