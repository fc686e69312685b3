"""Paper figures, recomputed from the library's own bounds: one module per paper
(:mod:`~noisysgd.figures.altschuler_talwar`, :mod:`~noisysgd.figures.ye_shokri`: the
data, numpy only), the plan figure's data (:mod:`~noisysgd.figures.plan`), what they
share (:mod:`~noisysgd.figures._common`) and one module that draws
(:mod:`~noisysgd.figures.draw`).

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

from ._common import DELTA, MATPLOTLIB_MISSING, SERIES_DIGITS, Curve, FigureData
from .altschuler_talwar import altschuler_talwar_figure_data
from .draw import (PAPERS, load_matplotlib, altschuler_talwar_figures, figure_series, plan_figure,
                   require_matplotlib, write_figures, write_series, ye_shokri_figures)
from .plan import plan_figure_data
from .ye_shokri import ye_shokri_figure_data

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
    "DELTA",
]
