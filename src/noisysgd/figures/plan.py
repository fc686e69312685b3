"""The plan figure's data (:func:`plan_figure_data`): ε against epochs under every
analysis of a :class:`~noisysgd.Plan`, with its cross-overs, plateaus and budget.  numpy
only; :func:`noisysgd.figures.plan_figure` draws it."""

from __future__ import annotations

import numpy as np

from ..planning import BASELINES
from ._common import Curve, FigureData, fmt

__all__ = ["plan_figure_data"]


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
        return f" [off the axes: above ε = {fmt(float(f'{top:.3g}'))}]"
    if np.all(under):
        return f" [off the axes: below ε = {fmt(float(f'{bottom:.3g}'))}]"
    notes = []
    if above.any():
        i = int(np.argmax(above))
        notes.append(f"above the axes from epoch {int(steps[i]):,}" if not above[:i].any() or i == 0
                     else "partly above the axes")
    if under.any():
        notes.append("partly below the axes")
    return f" [{'; '.join(notes)}]" if notes else ""


def _plan_curves(plan) -> dict[str, Curve]:
    """The plan figure's curves: every applicable analysis (composition dashed,
    flagged ones dotted grey), the best sound bound and the limit line if any."""
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
    return curves


def _plan_caption(plan) -> str:
    """The plan figure's caption: the run, δ and the conversion."""
    run = plan.run
    return (
        f"n = {run.n}, b = {run.batch_size} ({run.batching}, {run.steps_per_epoch} steps per epoch), "
        f"η = {fmt(run.learning_rate)}" + (f"·(t+1)^-{fmt(run.lr_decay)}" if run.lr_decay else "")
        + f", z = {fmt(run.noise_multiplier)}, L = {fmt(run.lipschitz)}, "
        f"M = {fmt(run.smoothness) if run.smoothness else '-'}, m = {fmt(run.strong_convexity)}, "
        f"D = {fmt(run.diameter) if run.diameter else '-'}, adjacency = {run.adjacency}, "
        f"δ = {fmt(plan.delta)}, {plan.details.get('conversion', 'improved')} RDP conversion. "
        "Composition: every iterate released; the others: the final model only. "
        + ("composition-pld is computed at a few epochs and bounded by the next one in between. "
           if "composition_pld_note" in plan.details else "")
    )


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
    epochs = plan.epochs
    curves = _plan_curves(plan)
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
    caption = _plan_caption(plan)
    labels = [c.label for c in curves.values()] + list(vlines) + list(hlines)
    ncol = 2 if max(map(len, labels)) <= 52 else 1
    return FigureData(
        name="plan", title=title, caption=caption, curves=curves,
        vlines=vlines, hlines=hlines, params={"delta": plan.delta},
        xlabel="epochs", xscale="log" if epochs[-1] / epochs[0] >= 20 else "linear",
        yscale=yscale, ylim=ylim, legend_loc="below", legend_ncol=ncol,
    )
