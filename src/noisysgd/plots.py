"""Paper figures, recomputed from the library's own bounds.

``altschuler_talwar_figure_data()`` and ``ye_shokri_figure_data()`` compute
the curves (numpy only); ``altschuler_talwar_figures(out_dir)`` and
``ye_shokri_figures(out_dir)`` draw them as PNG files with matplotlib's Agg
canvas (no pyplot, no global backend change).  matplotlib is an optional
dependency: ``pip install 'noisysgd[plot]'``.

Altschuler & Talwar: every curve is a real bound at δ = 1e-5 (improved RDP →
(ε, δ) conversion over :data:`noisysgd.DEFAULT_ORDERS`) against the number of
steps T: the Altschuler–Talwar curves come from
:meth:`AltschulerTalwar.rdp_over_steps`, the composition baselines from the
``composition`` and ``composition-pld`` analyses.

Ye & Shokri: as in the paper, every curve is the *RDP* ε at a fixed order
α ∈ {10, 15} (no (ε, δ) conversion) against the number of epochs K, at the
setting of their Figures 1 and 2 (n = 50, b = 2, η = 0.02, λ = 1, β = 4,
S_g = 4, σ² = 4): Theorem 3.3 (first and last batch of a fixed order),
Theorem 2.1 (``ye-shokri-naive``), Theorem 4.2 (shuffle and partition),
Theorem 4.3 (sampling without replacement) and the ``composition`` analysis.
The paper's Balle et al. + composition curve (Figure 1) is not reproduced;
its sampled-Gaussian composition for *shuffled* batches (Figure 2(a)) is drawn
but labelled as not valid there (the library composes one Gaussian mechanism
per epoch for shuffled batches).

:data:`PAPERS` maps a paper's name to the function that writes its figures;
the ``noisysgd figures --paper`` choices are its keys plus ``all``.
"""

from __future__ import annotations

import math
import textwrap
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .analyses import get_analysis
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
]

MATPLOTLIB_MISSING = "matplotlib is needed for figures: pip install 'noisysgd[plot]'"

#: δ of every figure.
DELTA = 1e-5


@dataclass(frozen=True)
class Curve:
    """One plotted line: ``epsilon`` (the y values) at each of ``steps`` (the x values).

    Altschuler & Talwar: ε at δ against the number of steps T.  Ye & Shokri:
    the RDP ε at one order α against the number of epochs K.
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
    legend_loc: str = "upper left"
    legend_ncol: int = 1
    vline_styles: dict[str, dict] = field(default_factory=dict)  # label → plot style
    hlines: dict[str, float] = field(default_factory=dict)  # label → y


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


# --------------------------------------------------------------------------- Ye & Shokri

#: Ye & Shokri's Figures 1 and 2 (from their captions), in the paper's convention.
_YS_SETTING = {"n": 50, "b": 2, "eta": 0.02, "lambda": 1.0, "beta": 4.0, "S_g": 4.0, "sigma2": 4.0}
_YS_ORDERS = (10.0, 15.0)
_YS_COLORS = ("C0", "C1", "C2", "C4")  # one per order


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


def ye_shokri_figure_data(*, orders=_YS_ORDERS, max_epochs: int = 1000) -> dict[str, FigureData]:
    """The data of Ye & Shokri's Figures 1, 2(a) and 2(b) (numpy only).

    Keys ``"fig1"`` (fixed order: Theorem 3.3 for the first and the last batch,
    Theorem 2.1), ``"fig2a"`` (shuffle and partition: Theorem 4.2, Theorem 3.3
    last batch, composition) and ``"fig2b"`` (sampling without replacement:
    Theorem 4.3, composition).  Every curve is the RDP ε at one order α of
    ``orders`` after K = 1, …, ``max_epochs`` whole epochs; curve keys are
    ``"<bound>/α=<α>"``.  ``params`` holds the runs, the orders and the epochs
    where the hidden-state bounds cross composition.
    """
    orders = np.asarray(orders, dtype=float)
    alphas = [float(a) for a in orders]
    epochs = np.arange(1, int(max_epochs) + 1, dtype=np.int64)
    ys = get_analysis("ye-shokri")
    cyc = _ye_shokri_run("cyclic")
    shuf = _ye_shokri_run("shuffle")
    samp = _ye_shokri_run("sample")
    l = cyc.steps_per_epoch

    # Theorem 3.3 by position; the last batch is also what rdp_over_epochs gives for cyclic.
    positions = [ys.rdp_per_position(cyc.replace(steps=int(k) * l), orders) for k in epochs]
    first = np.array([p[0] for p in positions])
    last = np.array([p[-1] for p in positions])
    naive = _per_epoch("ye-shokri-naive", cyc, epochs, orders)  # K = uses = epochs
    # Theorem 4.2 as the paper plots it; on reshuffled epochs it is the flagged
    # ye-shokri-reshuffle (proved for one partition reused every epoch).
    thm42 = get_analysis("ye-shokri-reshuffle").rdp_over_epochs(shuf, epochs, orders)
    thm43 = ys.rdp_over_epochs(samp, epochs, orders)
    comp_shuffle = _per_epoch("composition", shuf, epochs, orders)  # one Gaussian per epoch
    # The sampled Gaussian (q = b/n) over K·n/b steps: the composition analysis on a
    # ``sample`` run (valid there; the paper's baseline, not valid for shuffled batches).
    comp_sampled = _per_epoch("composition", samp, epochs, orders)

    def key(name, a):
        return f"{name}/α={a:g}"

    out: dict[str, FigureData] = {}
    axes = dict(xlabel="K (epochs)", ylabel="RDP ε at order α", xscale="log", yscale="log")

    # ---- Figure 1: fixed order.
    curves = {}
    for i, a in enumerate(alphas):
        c = _YS_COLORS[i % len(_YS_COLORS)]
        curves[key("naive", a)] = Curve(
            f"α = {a:g}: Theorem 2.1 (naive baseline)", epochs, naive[:, i], {"color": c, "lw": 1})
        curves[key("last-batch", a)] = Curve(
            f"α = {a:g}: Theorem 3.3, last batch (j₀ = n/b − 1)", epochs, last[:, i],
            {"color": c, "lw": 2.2, "ls": "--"})
        curves[key("first-batch", a)] = Curve(
            f"α = {a:g}: Theorem 3.3, first batch (j₀ = 0)", epochs, first[:, i], {"color": c, "lw": 2.2})
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
    curves = {}
    cross_42 = {}
    for i, a in enumerate(alphas):
        c = _YS_COLORS[i % len(_YS_COLORS)]
        curves[key("composition", a)] = Curve(
            f"α = {a:g}: composition, one Gaussian per epoch", epochs,
            comp_shuffle[:, i], {"color": c, "lw": 1})
        curves[key("composition-sampled", a)] = Curve(
            f"α = {a:g}: sampled-Gaussian comp., NOT valid here",
            epochs, comp_sampled[:, i], {"color": c, "lw": 1, "ls": ":"})
        curves[key("last-batch", a)] = Curve(
            f"α = {a:g}: Theorem 3.3, last batch", epochs, last[:, i],
            {"color": c, "lw": 1.2, "ls": "--"})
        curves[key("thm4.2", a)] = Curve(
            f"α = {a:g}: Theorem 4.2", epochs, thm42[:, i],
            {"color": c, "lw": 2.5})
        cross_42[a] = _first_below(epochs, comp_sampled[:, i], thm42[:, i])
    conv = "; ".join(
        f"α = {a:g}: Theorem 4.2 {thm42[-1, i]:.6f} (K = 1: {thm42[0, i]:.6f}), last batch "
        f"{last[-1, i]:.5f}; below the sampled-Gaussian line from K = {cross_42[a]}"
        for i, a in enumerate(alphas)
    )
    out["fig2a"] = FigureData(
        name="ye-shokri-fig2a",
        title="Ye & Shokri, Fig. 2(a): shuffle and partition",
        caption=_ys_caption(shuf, epochs, orders, (
            "Bold: Theorem 4.2. Thin dashed: Theorem 3.3 for the last batch (the worst fixed "
            "order). Thin solid: this library's composition for shuffled batches, one Gaussian "
            "mechanism per epoch, K·ρ(α) (an example's batches are not independent samples, so "
            "no amplification by sampling). Dotted: the paper's composition baseline, the "
            "sampled Gaussian (Mironov et al.) with q = b/n over K·n/b steps, ≈ (b/n)·ρ(α)·K: "
            "NOT a valid bound for shuffle and partition in this library's view, drawn only to "
            f"compare with the paper. At K = {int(epochs[-1])}: {conv}."
        )),
        curves=curves,
        vlines={},
        params={"run": shuf, "orders": orders, "epochs": epochs, "crossover_sampled": cross_42},
        ylim=(1e-5, 200.0), legend_loc="lower right", legend_ncol=2, **axes,
    )

    # ---- Figure 2(b): sampling without replacement.
    curves = {}
    cross_43 = {}
    vlines, vstyles = {}, {}
    for i, a in enumerate(alphas):
        c = _YS_COLORS[i % len(_YS_COLORS)]
        curves[key("composition", a)] = Curve(
            f"α = {a:g}: composition (sampled Gaussian, q = b/n)", epochs, comp_sampled[:, i],
            {"color": c, "lw": 1})
        curves[key("thm4.3", a)] = Curve(
            f"α = {a:g}: Theorem 4.3", epochs, thm43[:, i],
            {"color": c, "lw": 2.5})
        k = _first_below(epochs, comp_sampled[:, i], thm43[:, i])
        cross_43[a] = k
        if k is not None:
            label = f"α = {a:g}: Theorem 4.3 < composition from K = {k}"
            vlines[label] = float(k)
            vstyles[label] = {"color": c, "ls": "-.", "lw": 1}
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
    return out


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
    ax = fig.add_axes((0.12, bottom, 0.84, 0.92 - bottom))
    log_y = data.yscale == "log"
    for key, c in data.curves.items():
        eps = np.asarray(c.epsilon, dtype=float)
        ok = eps > 0 if log_y else np.isfinite(eps)
        ax.plot(np.asarray(c.steps)[ok], eps[ok], label=c.label, **c.style)
        if plateau_dots and key in plateau_dots:
            t = plateau_dots[key]
            i = int(np.searchsorted(c.steps, t))
            ax.plot([t], [eps[i]], "o", color=c.style.get("color"), ms=6)
    line_styles = [":", "--", "-."]
    for j, (label, t) in enumerate(data.vlines.items()):
        style = {"color": "k" if j == 0 else "0.35", "ls": line_styles[j % 3], "lw": 1}
        style.update(data.vline_styles.get(label, {}))
        ax.axvline(t, label=label, **style)
    for label, y in data.hlines.items():
        ax.axhline(y, label=label, color="0.25", ls="-.", lw=1)
    ax.set_xscale(data.xscale)
    ax.set_yscale(data.yscale)
    if data.xlim is not None:
        ax.set_xlim(*data.xlim)
    if data.ylim is not None:
        ax.set_ylim(*data.ylim)
    ax.set_xlabel(data.xlabel or "T (number of noisy gradient steps)")
    ax.set_ylabel(data.ylabel or f"ε at δ = {data.params.get('delta', DELTA):g}")
    ax.set_title(data.title, fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc=data.legend_loc, ncol=data.legend_ncol, fontsize=8, framealpha=0.9)
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


def ye_shokri_figures(out_dir) -> list[Path]:
    """Write Ye & Shokri's Figures 1, 2(a) and 2(b) as PNG files into ``out_dir``
    (created if missing); return their paths."""
    require_matplotlib()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [_draw(fig, out / f"{fig.name}.png") for fig in ye_shokri_figure_data().values()]


def plan_figure_data(plan) -> FigureData:
    """ε versus epochs of a :class:`~noisysgd.planning.Plan`: every applicable
    analysis (flagged ones dotted), the best sound bound in bold, each
    cross-over with composition, and the budget if one was given."""
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
    by_epoch: dict[int, list[str]] = {}
    for name, c in plan.curves.items():
        if c.crossover_epoch is not None and c.crossover_epoch > epochs[0] and c.sound:
            by_epoch.setdefault(c.crossover_epoch, []).append(name)
    vlines = {f"{', '.join(names)} < composition from epoch {e}": e for e, names in by_epoch.items()}
    hlines = {}
    if plan.budget is not None:
        b = plan.budget
        allowed = "unlimited epochs" if b.epochs is None else f"{b.epochs} epochs"
        hlines[f"budget ε = {b.target_epsilon:g} ({allowed})"] = b.target_epsilon
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
    return FigureData(
        name="plan", title="ε versus epochs, by analysis", caption=caption, curves=curves,
        vlines=vlines, hlines=hlines, params={"delta": plan.delta},
        xlabel="epochs", xscale="log" if epochs[-1] / epochs[0] >= 20 else "linear",
        legend_loc="upper left", legend_ncol=1,
    )


def plan_figure(plan, path) -> Path:
    """Draw :func:`plan_figure_data` of ``plan`` into the PNG file ``path``."""
    return _draw(plan_figure_data(plan), Path(path))


#: Paper name → function writing its figures into a directory.
PAPERS: dict[str, Callable[[Path], list[Path]]] = {
    "altschuler-talwar": altschuler_talwar_figures,
    "ye-shokri": ye_shokri_figures,
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
