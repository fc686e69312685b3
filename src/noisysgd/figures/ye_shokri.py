"""Ye & Shokri's Figures 1, 2(a), 2(b) and the cross-over figure: their data (numpy only).

As in the paper, every curve of Figures 1 and 2 is the *RDP* ε at a fixed order
α ∈ {10, 15} (no (ε, δ) conversion) against the number of epochs K, at the setting of
their figures (n = 50, b = 2, η = 0.02, λ = 1, β = 4, S_g = 4, σ² = 4): Theorem 3.3
(first and last batch of a fixed order), Theorem 2.1 (``ye-shokri-naive``), Theorem 4.2
(shuffle and partition; on this library's per-epoch reshuffling it is the flagged, not
sound ``ye-shokri-reshuffle``), Theorem 4.3 (sampling without replacement) and the
``composition`` analysis.  The curves of each figure are a table (:data:`_YS_CURVES`).
"""

from __future__ import annotations

import math

import numpy as np

from ..analyses import get_analysis
from ..rdp import DEFAULT_ORDERS
from ..run import Run, noise_multiplier_from_sigma
from ._common import (DELTA, SILENT, Curve, FigureData, crossover_curves, first_below, fmt, orders_text,
                      plan_text, FigureSetting, Stages)

__all__ = ["ye_shokri_figure_data"]


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
    alphas = ", ".join(fmt(a) for a in orders)
    return " ".join([
        f"Setting (Ye & Shokri's convention, from their captions): α ∈ {{{alphas}}}, "
        f"n = {run.n}, b = {run.batch_size} (n/b = {run.steps_per_epoch} steps per epoch), "
        f"η = {fmt(run.learning_rate)}, λ = {fmt(run.strong_convexity)}, "
        f"β = {fmt(run.smoothness)}, S_g = {fmt(run.sensitivity)}, "
        f"σ² = {fmt(round(sigma * sigma, 12))} (each step adds √(2ησ²)·N(0, I)).",
        f"Library: adjacency = {run.adjacency} (S_g = 2L, L = {fmt(run.lipschitz)}), "
        f"m = λ, M = β, z = {fmt(run.noise_multiplier)} (noise std zL/b = "
        f"{fmt(run.noise_multiplier * run.lipschitz / run.batch_size)} on the mean gradient; "
        f"noise/sensitivity z/2 = {fmt(nu)}, so one use of the differing example costs "
        f"ρ(α) = α/(2·{fmt(nu)}²) = α/{fmt(2 * nu * nu)}).",
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
            stages=SILENT) -> np.ndarray:
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
               stages=SILENT) -> tuple[dict[str, Curve], dict[str, np.ndarray]]:
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
    with Stages(5 + 4 * crossover, "figures: ye-shokri", progress) as stages:
        return _ye_shokri_figure_data(orders=orders, max_epochs=max_epochs, crossover=crossover,
                                      crossover_epochs=crossover_epochs, delta=delta, stages=stages)

def _ye_shokri_figure_data(*, orders, max_epochs, crossover, crossover_epochs, delta,
                           stages) -> dict[str, FigureData]:
    """Figures 1, 2(a), 2(b) on the paper's setting, then the cross-over."""
    orders = np.asarray(orders, dtype=float)
    epochs = np.arange(1, int(max_epochs) + 1, dtype=np.int64)
    figures = _YsFigures(orders, epochs, stages)
    out: dict[str, FigureData] = {}
    out["fig1"], last = figures.fig1()
    out["fig2a"] = figures.fig2a(last)
    out["fig2b"] = figures.fig2b()
    if crossover:
        out["crossover"] = _ye_shokri_crossover(figures.samp, figures.cyc, delta=delta, max_epochs=crossover_epochs,
                                                stages=stages)
    return out


class _YsFigures:
    """Ye & Shokri's three figures on one setting: the runs, the orders, the epochs and a
    cache of the RDP curves the figures share."""

    axes = dict(xlabel="K (epochs)", ylabel="RDP ε at order α", xscale="log", yscale="log")

    def __init__(self, orders, epochs, stages):
        self.orders, self.epochs, self.stages = orders, epochs, stages
        self.alphas = [float(a) for a in orders]
        self.cyc = _ye_shokri_run("cyclic")
        self.shuf = _ye_shokri_run("shuffle")
        self.samp = _ye_shokri_run("sample")
        self.cache: dict = {}

    def _curves(self, fig: str):
        return _ys_curves(fig, self.alphas, self.epochs, self.orders, self.cache, self.stages)

    def fig1(self):
        """Figure 1: fixed order; (figure, the last batch's RDP, which Figure 2(a) quotes)."""
        alphas, epochs, orders, cyc = self.alphas, self.epochs, self.orders, self.cyc
        curves, rdp = self._curves("fig1")
        first, last, naive = rdp["first-batch"], rdp["last-batch"], rdp["naive"]
        # Theorem 2.1 tends to 4ρ(α)/(ηλ), ρ(α) = α/(2ν²).
        naive_limit = 4.0 / (2.0 * cyc.noise_to_sensitivity**2 * cyc.learning_rate * cyc.strong_convexity)
        conv = "; ".join(
            f"α = {a:g}: first batch {first[-1, i]:.5f}, last batch {last[-1, i]:.5f}, "
            f"naive {naive[-1, i]:.4g} (→ 4ρ/(ηλ) = {a * naive_limit:g})"
            for i, a in enumerate(alphas)
        )
        figure = FigureData(
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
            ylim=(1e-4, 40.0), legend_loc="lower right", legend_ncol=1, **self.axes,
        )
        return figure, last

    def fig2a(self, last) -> FigureData:
        """Figure 2(a): shuffle and partition (bold: NOT sound for reshuffling)."""
        alphas, epochs, orders = self.alphas, self.epochs, self.orders
        curves, rdp = self._curves("fig2a")
        thm42, sampled = rdp["thm4.2"], rdp["composition-sampled"]
        cross_42 = {a: first_below(epochs, sampled[:, i], thm42[:, i]) for i, a in enumerate(alphas)}
        conv = "; ".join(
            f"α = {a:g}: Theorem 4.2 {thm42[-1, i]:.6f} (K = 1: {thm42[0, i]:.6f}), last batch "
            f"{last[-1, i]:.5f}; below the sampled-Gaussian line from K = {cross_42[a]}"
            for i, a in enumerate(alphas)
        )
        return FigureData(
            name="ye-shokri-fig2a",
            title="Ye & Shokri, Fig. 2(a): shuffle and partition (bold: NOT sound for reshuffling)",
            caption=_ys_caption(self.shuf, epochs, orders, (
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
            params={"run": self.shuf, "orders": orders, "epochs": epochs, "crossover_sampled": cross_42},
            ylim=(1e-3, 200.0), legend_loc="below", legend_ncol=2, **self.axes,
        )

    def fig2b(self) -> FigureData:
        """Figure 2(b): sampling without replacement (fixed-size batches)."""
        alphas, epochs, orders = self.alphas, self.epochs, self.orders
        curves, rdp = self._curves("fig2b")
        thm43, comp_sampled = rdp["thm4.3"], rdp["composition"]
        cross_43 = {}
        vlines, vstyles = {}, {}
        for i, a in enumerate(alphas):
            k = first_below(epochs, comp_sampled[:, i], thm43[:, i])
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
        return FigureData(
            name="ye-shokri-fig2b",
            title="Ye & Shokri, Fig. 2(b): sampling without replacement (fixed-size batches)",
            caption=_ys_caption(self.samp, epochs, orders, (
                "Bold: Theorem 4.3 (recursion over every step). Thin: composition, the sampled "
                "Gaussian (Mironov et al.) with q = b/n over K·n/b steps (the library's composition "
                f"for sample batches). {conv}."
            )),
            curves=curves,
            vlines=vlines,
            vline_styles=vstyles,
            params={"run": self.samp, "orders": orders, "epochs": epochs, "crossover": cross_43},
            legend_loc="upper left", legend_ncol=1, **self.axes,
        )


def _ye_shokri_crossover(samp: Run, cyc: Run, *, delta: float, max_epochs: int, stages=SILENT) -> FigureData:
    """ε at δ against epochs for the figures' setting, sample and cyclic batches,
    against composition (RDP and PLD): noisysgd.plan's curves and numbers."""
    orders = DEFAULT_ORDERS
    epochs = np.arange(1, int(max_epochs) + 1, dtype=np.int64)
    settings = [
        FigureSetting(key="sample/", run=samp, analysis="ye-shokri",
                 label="sample: Theorem 4.3 (ye-shokri)", short="sample: Thm 4.3", prefix="sample: ",
                 colors=("C0", "C0", "C0")),
        FigureSetting(key="cyclic/", run=cyc, analysis="ye-shokri",
                 label="cyclic: Theorem 3.3, worst position (ye-shokri)", short="cyclic: Thm 3.3",
                 prefix="cyclic: ", colors=("C2", "C2", "C2")),
    ]
    curves, vlines, vstyles, dots, info = crossover_curves(
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
         f"({samp.steps_per_epoch} steps per epoch), η = {fmt(samp.learning_rate)}, "
         f"λ = {fmt(samp.strong_convexity)}, β = {fmt(samp.smoothness)}, S_g = {fmt(samp.sensitivity)}, "
         f"σ² = {fmt(round(sigma * sigma, 12))}; library: adjacency = {samp.adjacency}, "
         f"L = {fmt(samp.lipschitz)}, m = λ, M = β, z = {fmt(samp.noise_multiplier)} "
         f"(noise/sensitivity {fmt(nu)})."),
        f"y: ε at δ = {fmt(delta)}, {orders_text(orders)[:-1]}; x: every epoch 1..{int(epochs[-1])}.",
        ("Blue: sample batches, Theorem 4.3 (6), against composition over every step (sampled Gaussian, "
         "q = b/n). Green: cyclic batches, Theorem 3.3 (3) at the worst position (last batch), against "
         "one Gaussian mechanism per epoch. Shuffled batches are left out: ye-shokri refuses them "
         "(Theorem 4.2 covers one partition reused every epoch; see ye-shokri-reshuffle)."),
        f"{numbers('sample')}; {numbers('cyclic')}.",
        ("Thin dashed lines with dots: the limit line, the exact privacy of the run's linear + ridge "
         "instance (noisysgd.limits): no sound analysis in its class can certify less."),
        plan_text(True, "for sample batches at the marked epochs, bisected around the cross-over; "
                         "for cyclic batches the exact Gaussian curve"),
    ])
    return FigureData(
        name="ye-shokri-crossover",
        title="Ye & Shokri: where the sound bound overtakes composition (ε at δ = "
              f"{fmt(delta)})",
        caption=caption,
        curves=curves, vlines=vlines, vline_styles=vstyles, dots=dots,
        params={"delta": delta, "settings": settings_info, "epochs": epochs},
        xlabel="epochs", ylabel=f"ε at δ = {fmt(delta)}", legend_loc="below", legend_ncol=2,
    )
