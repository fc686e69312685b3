"""Paper figures, recomputed from the library's own bounds.

``altschuler_talwar_figure_data()`` computes the curves (numpy only);
``altschuler_talwar_figures(out_dir)`` draws them as PNG files with
matplotlib's Agg canvas (no pyplot, no global backend change).  matplotlib is
an optional dependency: ``pip install 'noisysgd[plot]'``.

Every curve is a real bound at δ = 1e-5 (improved RDP → (ε, δ) conversion over
:data:`noisysgd.DEFAULT_ORDERS`): the Altschuler–Talwar curves come from
:meth:`AltschulerTalwar.rdp_over_steps`, the composition baselines from the
``composition`` and ``composition-pld`` analyses.

:data:`PAPERS` maps a paper's name to the function that writes its figures;
the ``noisysgd figures --paper`` choices are its keys plus ``all``.
"""

from __future__ import annotations

import textwrap
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .analyses import get_analysis
from .rdp import DEFAULT_ORDERS, OrderGridWarning, epsilon_from_rdp
from .run import Run

__all__ = [
    "Curve",
    "FigureData",
    "PAPERS",
    "MATPLOTLIB_MISSING",
    "require_matplotlib",
    "altschuler_talwar_figure_data",
    "altschuler_talwar_figures",
    "write_figures",
]

MATPLOTLIB_MISSING = "matplotlib is needed for figures: pip install 'noisysgd[plot]'"

#: δ of every figure.
DELTA = 1e-5


@dataclass(frozen=True)
class Curve:
    """One plotted line: ε (for ``delta``) at each number of steps."""

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
    vlines: dict[str, float]  # label → T
    xlim: tuple[float, float] | None = None
    params: dict = field(default_factory=dict)


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


def _run_caption(run: Run, delta: float, orders, *, extra: str = "", m: str | None = None) -> str:
    sigma = run.sigma("altschuler-talwar")
    parts = [
        f"n = {run.n}, b = {run.batch_size} ({run.batching}, q = b/n = {_fmt(run.sampling_rate)}),",
        f"η = {_fmt(run.learning_rate)}, z = {_fmt(run.noise_multiplier)} (σ = zL/b = {_fmt(sigma)}),",
        f"L = {_fmt(run.lipschitz)}, M = {_fmt(run.smoothness)}, m = {m or _fmt(run.strong_convexity)},",
        f"D = {_fmt(run.diameter)}, convex, adjacency = {run.adjacency}, δ = {_fmt(delta)},",
        f"improved RDP→(ε, δ) conversion over {len(orders)} orders in "
        f"[{_fmt(float(np.min(orders)))}, {_fmt(float(np.max(orders)))}].",
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
    """First T where ``lower`` is strictly (beyond ``rel``) below ``upper``; None if never."""
    below = np.flatnonzero(lower < upper * (1.0 - rel))
    return int(steps[below[0]]) if below.size else None


def altschuler_talwar_figure_data(
    *,
    delta: float = DELTA,
    orders=None,
    points: int = 200,
    max_steps: int = 10**7,
    pld_points: int = 12,
    pld: bool = True,
) -> dict[str, FigureData]:
    """The data of Altschuler & Talwar's Figures 1, 2(a), 2(b) and a cross-over figure.

    Keys: ``"fig1"`` (convex, ``sample`` batches), ``"fig2a"`` (``cyclic``
    batches, Theorem 5.8, at whole epochs), ``"fig2b"`` (m-strongly convex,
    η = 1/M, several m) and ``"crossover"`` (where the bound overtakes the
    composition baselines, RDP and PLD; ``pld=False`` leaves PLD out).  Each
    figure's curves share one log grid of about ``points`` step counts up to
    ``max_steps``.
    """
    orders = DEFAULT_ORDERS if orders is None else np.asarray(orders, dtype=float)
    base = Run(
        n=1000, batch_size=10, batching="sample", steps=1, learning_rate=0.5,
        noise_multiplier=3.0, lipschitz=1.0, smoothness=1.0, diameter=1.0, convex=True,
    )
    steps = _step_grid(1, max_steps, points)
    out: dict[str, FigureData] = {}

    # ---- Figure 1: convex, sampled batches.
    comp = _composition_eps(base, steps, orders, delta)
    at = _at_eps(base, steps, orders, delta)
    published = _at_eps(base, steps, orders, delta, "altschuler-talwar-sampled")
    t_bar = _burn_in(base)
    plateau = _plateau_start(steps, at)
    at_label = "Altschuler–Talwar, sound: last iterate only (worst-case batches)"
    published_label = "(B.2) as published: NOT sound (proof gap), for comparison"
    comp_label = "composition (RDP): every iterate released"
    fig1_curves = {
        "composition": Curve(comp_label, steps, comp, {"color": "C3", "ls": "--"}),
        "altschuler-talwar": Curve(at_label, steps, at, {"color": "C0", "lw": 2}),
        "altschuler-talwar-sampled": Curve(published_label, steps, published,
                                           {"color": "0.45", "ls": ":", "lw": 1.5}),
    }
    out["fig1"] = FigureData(
        name="altschuler-talwar-fig1",
        title="Altschuler & Talwar, Fig. 1: convex losses, sampled batches",
        caption=_run_caption(
            base, delta, orders,
            extra=(
                f"T̄ = Dn/(Lη) = {t_bar:g}; the sound bound is constant from T = {plateau:,}. "
                "The published (B.2) conditions on the noise as if batch membership were "
                "independent of it, which fails (see altschuler-talwar-sampled)."
            ),
        ),
        curves=fig1_curves,
        vlines={f"T̄ = Dn/(Lη) = {t_bar:g}": t_bar},
        params={"run": base, "delta": delta, "plateau": plateau},
    )

    # ---- Figure 2(a): cyclic batches, at whole epochs.
    cyc = base.replace(batching="cyclic")
    K = cyc.steps_per_epoch
    epochs = _step_grid(1, max(1, max_steps // K), points)
    csteps = epochs * K
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
                _composition_eps(cyc, csteps, orders, delta), {"color": "C3", "ls": "--"},
            ),
            "altschuler-talwar": Curve(
                "Altschuler–Talwar, Theorem 5.8 (5.6), cyclic", csteps,
                _at_eps(cyc, csteps, orders, delta), {"color": "C0", "lw": 2},
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
    plateaus = {}
    for i, m in enumerate((0.0, 1e-3, 1e-2, 1e-1)):
        eps = _at_eps(sc.replace(strong_convexity=m), steps, orders, delta)
        key = f"m={m:g}"
        plateaus[key] = _plateau_start(steps, eps)
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
                "m ∈ {0, 0.001, 0.01, 0.1} (contraction c = 1 − ηm); dots: where each bound "
                f"becomes constant ({plateau_text}). T̄ = Dn/(Lη) = {t_bar_sc:g} (convex)."
            ),
            m="see legend",
        ),
        curves=curves,
        vlines={f"T̄ = Dn/(Lη) = {t_bar_sc:g}": t_bar_sc},
        params={"run": sc, "delta": delta, "plateaus": plateaus},
    )

    # ---- Cross-over: where the bound overtakes composition (RDP and PLD).
    lo_i = int(np.searchsorted(steps, 30))
    hi_i = steps.size - 1
    view = slice(lo_i, hi_i + 1)
    cross_rdp = _first_below(steps, comp, at)
    cross_curves = {
        "composition": Curve(comp_label, steps[view], comp[view], {"color": "C3", "ls": "--"}),
        "altschuler-talwar": Curve(at_label, steps[view], at[view], {"color": "C0", "lw": 2}),
    }
    vlines = {f"T̄ = Dn/(Lη) = {t_bar:g}": t_bar}
    if cross_rdp is not None:
        vlines[f"A&T < composition RDP from T = {cross_rdp:,}"] = cross_rdp
    params = {"run": base, "delta": delta, "crossover_rdp": cross_rdp}
    if pld:
        pld_steps, pld_eps, cross_pld = _pld_crossover(base, steps, at, lo_i, hi_i, pld_points, delta)
        cross_curves["composition-pld"] = Curve(
            "composition (PLD, dp_accounting): every iterate released", pld_steps, pld_eps,
            {"color": "C1", "ls": "-.", "marker": "o", "ms": 4},
        )
        if cross_pld is not None:
            vlines[f"A&T < composition PLD from T = {cross_pld:,}"] = cross_pld
        params["crossover_pld"] = cross_pld
    out["crossover"] = FigureData(
        name="altschuler-talwar-crossover",
        title="Where the hidden-state bound overtakes composition (sampled batches)",
        caption=_run_caption(
            base, delta, orders,
            extra=(
                "Below the cross-over the sound A&T bound is the composition RDP bound (its "
                "composition branch), so the two lines coincide."
                + (
                    " PLD: dp_accounting's PLD accountant (pessimistic, value discretisation 1e-4) "
                    "at a few T (dots), plus a bisection on the grid for the cross-over."
                    if pld else ""
                )
            ),
        ),
        curves=cross_curves,
        vlines=vlines,
        xlim=(float(steps[lo_i]), float(steps[hi_i])),
        params=params,
    )
    return out


def _pld_crossover(run, steps, at, lo_i, hi_i, count, delta):
    """PLD ε at ``count`` grid points in [lo_i, hi_i], then a bisection over the
    grid between the two that bracket the first T where A&T is below PLD."""
    pld = get_analysis("composition-pld")
    cache: dict[int, float] = {}

    def eps(i: int) -> float:
        if i not in cache:
            cache[i] = pld.evaluate(run.replace(steps=int(steps[i])), delta=delta).epsilon
        return cache[i]

    idx = np.unique(np.round(np.geomspace(lo_i + 1, hi_i + 1, count)).astype(int) - 1)
    below = [i for i in idx if at[i] < eps(i) * (1 - 1e-9)]
    cross = None
    if below:
        hi = int(below[0])
        earlier = [i for i in idx if i < hi]
        lo = int(earlier[-1]) if earlier else None
        if lo is not None:  # at[lo] >= pld[lo]; PLD grows, A&T is constant past its plateau
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if at[mid] < eps(mid) * (1 - 1e-9):
                    hi = mid
                else:
                    lo = mid
        cross = int(steps[hi])
    order = sorted(cache)
    return steps[order], np.array([cache[i] for i in order]), cross


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


def _draw(data: FigureData, path: Path, *, plateau_dots: dict | None = None) -> Path:
    Figure, FigureCanvasAgg = _matplotlib()
    fig = Figure(figsize=(8.0, 6.2), dpi=120)
    FigureCanvasAgg(fig)
    caption = "\n".join(textwrap.wrap(data.caption, width=125))
    bottom = 0.13 + 0.022 * (caption.count("\n") + 1)  # tick labels + x label + caption
    ax = fig.add_axes((0.1, bottom, 0.86, 0.92 - bottom))
    for key, c in data.curves.items():
        eps = np.asarray(c.epsilon, dtype=float)
        ok = eps > 0  # log axes
        ax.plot(np.asarray(c.steps)[ok], eps[ok], label=c.label, **c.style)
        if plateau_dots and key in plateau_dots:
            t = plateau_dots[key]
            i = int(np.searchsorted(c.steps, t))
            ax.plot([t], [eps[i]], "o", color=c.style.get("color"), ms=6)
    line_styles = [":", "--", "-."]
    for j, (label, t) in enumerate(data.vlines.items()):
        ax.axvline(t, color="k" if j == 0 else "0.35", ls=line_styles[j % 3], lw=1, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    if data.xlim is not None:
        ax.set_xlim(*data.xlim)
    ax.set_xlabel("T (number of noisy gradient steps)")
    ax.set_ylabel(f"ε at δ = {data.params.get('delta', DELTA):g}")
    ax.set_title(data.title, fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    fig.text(0.03, 0.02, caption, ha="left", va="bottom", fontsize=7.5, family="sans-serif")
    fig.savefig(path, format="png")
    return path


def altschuler_talwar_figures(out_dir) -> list[Path]:
    """Write Altschuler & Talwar's Figures 1, 2(a), 2(b) and the cross-over
    figure as PNG files into ``out_dir`` (created if missing); return their paths."""
    require_matplotlib()  # fail before the computation if matplotlib is missing
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = altschuler_talwar_figure_data()
    paths = []
    for key, fig in data.items():
        dots = fig.params.get("plateaus") if key == "fig2b" else None
        paths.append(_draw(fig, out / f"{fig.name}.png", plateau_dots=dots))
    return paths


#: Paper name → function writing its figures into a directory.  Add Ye–Shokri here.
PAPERS: dict[str, Callable[[Path], list[Path]]] = {
    "altschuler-talwar": altschuler_talwar_figures,
}


def write_figures(paper: str, out_dir) -> list[Path]:
    """Figures of ``paper`` (a key of :data:`PAPERS`, or ``"all"``) into ``out_dir``."""
    if paper == "all":
        names = list(PAPERS)
    elif paper in PAPERS:
        names = [paper]
    else:
        raise ValueError(f"paper must be one of {', '.join([*PAPERS, 'all'])}. Found {paper!r}.")
    paths: list[Path] = []
    for name in names:
        paths.extend(PAPERS[name](out_dir))
    return paths
