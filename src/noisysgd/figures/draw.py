"""Drawing the figures (matplotlib's Agg canvas, no pyplot, no global backend change;
imported only when a figure is drawn), their plotted data as JSON, and the writers
of each paper's figures (:data:`PAPERS`)."""

from __future__ import annotations

import io
import json
import math
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ._common import DELTA, MATPLOTLIB_MISSING, SERIES_DIGITS, FigureData, Stages
from .altschuler_talwar import altschuler_talwar_figure_data
from .plan import plan_figure_data
from .ye_shokri import ye_shokri_figure_data

__all__ = ["require_matplotlib", "figure_series", "write_series", "altschuler_talwar_figures",
           "ye_shokri_figures", "plan_figure", "write_figures", "PAPERS"]


def require_matplotlib() -> None:
    """Raise ``ImportError`` with an installation hint if matplotlib is missing."""
    load_matplotlib()


def load_matplotlib():
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
    Figure, FigureCanvasAgg = load_matplotlib()
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
    with Stages(len(data) - 1, "figures: drawing", progress) as stages:
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









def plan_figure(plan, path) -> Path:
    """Draw :func:`plan_figure_data` of ``plan`` into the file ``path``, in the
    format its suffix names (``.png``, ``.pdf`` or ``.svg``; any other suffix is
    a ValueError naming ``plot``, the ``--plot`` of ``noisysgd plan``)."""
    from ..io import check_plot_suffix

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
