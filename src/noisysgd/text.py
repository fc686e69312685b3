"""What the CLI prints, in one place: the tables of ``noisysgd epsilon``,
``calibrate`` and ``plan``, which the result objects also give as
``.summary()``, and the short reprs shown at the REPL.

Text is wrapped to the terminal width (``COLUMNS`` when set, as
:func:`shutil.get_terminal_size` reads it; 100 when there is no terminal).
"""

from __future__ import annotations

import math
import os
import re
import sys

__all__ = ["fmt", "table", "terminal_columns", "terminal_width", "fill", "epsilon_summary", "calibration_summary",
           "plan_summary", "short_repr", "queries_text", "QUERY_NAMES"]

#: The narrowest column a wrapped note is given before it moves under its row.
_MIN_NOTE = 24


def terminal_columns(fallback: int = 80) -> int:
    """``shutil.get_terminal_size((fallback, 24)).columns`` (the ``COLUMNS`` variable, else the
    terminal on stdout, else ``fallback``), without importing :mod:`shutil` (with :mod:`bz2`,
    :mod:`lzma` and :mod:`fnmatch`: ~3 ms of ``noisysgd predict``'s start)."""
    try:
        columns = int(os.environ.get("COLUMNS", 0))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else fallback


def terminal_width() -> int:
    """Columns of the terminal (``COLUMNS`` wins); 100 when there is none. At least 40."""
    return max(40, terminal_columns(100))


def fmt(value, digits: int = 4) -> str:
    """A number as the tables show it: fixed point, or scientific when tiny or huge."""
    if value is None:
        return "-"
    value = float(value)
    if math.isinf(value):
        return "inf"
    if math.isnan(value):
        return "nan"
    return f"{value:.{digits}g}" if abs(value) >= 1e4 or abs(value) < 1e-3 else f"{value:.{digits}f}"


def fill(text: str, *, indent: str = "", subsequent_indent: str = "    ", width: int | None = None) -> str:
    """``text`` wrapped to the terminal width, never inside ``name = value`` or ``37 epochs``."""
    import textwrap  # (here: noisysgd predict, which imports this module, wraps nothing)

    nbsp = "\u00a0"  # textwrap breaks at ASCII whitespace only
    kept = re.sub(r"(?<=\S) = (?=\S)", f"{nbsp}={nbsp}", text)
    kept = re.sub(r"(?<=\d) (?=(?:epochs?|steps?)\b)", nbsp, kept)
    return textwrap.fill(kept, width=width or terminal_width(), initial_indent=indent,
                         subsequent_indent=subsequent_indent, break_on_hyphens=False).replace(nbsp, " ")


def table(rows: list[list[str]], *, width: int | None = None) -> str:
    """Columns padded to their widest cell, a rule under the header; the last
    column (free text) wrapped to the width, continued under itself."""
    import textwrap

    width = width or terminal_width()
    ncol = len(rows[0])
    widths = [max(len(r[i]) for r in rows) for i in range(ncol)]
    lead = sum(widths[:-1]) + 2 * (ncol - 1)
    room = width - lead  # lead: the other columns and every two-space gap
    lines = []
    for k, r in enumerate(rows):
        head = "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths[:-1]))
        last = r[-1]
        if k == 0 and room < _MIN_NOTE:  # the notes go under their rows: no column for them
            lines.append(head.rstrip())
        elif k == 0 or len(last) <= room or not last:
            lines.append((head + "  " + last).rstrip() if ncol > 1 else last)
        elif room >= _MIN_NOTE:
            parts = textwrap.wrap(last, width=room, break_on_hyphens=False)
            lines.append(head + "  " + parts[0])
            lines.extend(" " * lead + p for p in parts[1:])
        else:  # too narrow for a column: the note goes under its row
            lines.append(head.rstrip())
            lines.extend(textwrap.wrap(last, width=width, initial_indent="    ",
                                       subsequent_indent="    ", break_on_hyphens=False))
        if k == 0:
            rule = widths[:-1] + ([min(widths[-1], room)] if room >= _MIN_NOTE else [])
            lines.append("  ".join("-" * w for w in rule))
    return "\n".join(lines)


def short_repr(obj, **fields) -> str:
    """``Name(a=1, b='x')`` for a result object, with numbers rounded for reading."""
    def show(v):
        if isinstance(v, float):
            return fmt(v)
        return repr(v)
    return f"{type(obj).__name__}(" + ", ".join(f"{k}={show(v)}" for k, v in fields.items()) + ")"


# ------------------------------------------------------------------ epsilon


def _run_line(run, *, with_z: bool = True) -> str:
    lr = "-" if run.learning_rate is None else (
        f"{run.max_learning_rate:g}" if isinstance(run.learning_rate, tuple)
        else f"{run.learning_rate:g}" + (f" * (t+1)^-{run.lr_decay:g}" if run.lr_decay else ""))
    length = "" if run.steps is None else f"{run.steps} steps ({run.epochs:.4g} epochs), "
    z = f"z = {run.noise_multiplier:g}, " if with_z and run.noise_multiplier is not None else ""
    return (f"run: n = {run.n}, batch size = {run.batch_size} ({run.batching}, q = {run.sampling_rate:.4g}), "
            f"{length}{z}L = {run.lipschitz:g}, lr = {lr}")


def epsilon_summary(report, *, width: int | None = None) -> str:
    """What ``noisysgd epsilon`` prints for ``report`` (an :class:`~noisysgd.EpsilonReport`)."""
    width = width or terminal_width()
    run = report.run
    out = [f"delta = {report.delta:g}, adjacency = {run.adjacency}, conversion = {report.conversion}",
           fill(_run_line(run), width=width), ""]
    rows = [["analysis", "applies", "sound", "epsilon", "order", "note"]]
    footnotes: list[str] = []
    for name, res in report.results.items():
        excluded = "" if report.include_unsound else ", excluded from the best bound"
        note = res.reason or ""
        if not res.sound:
            footnotes.append(f"[{len(footnotes) + 1}] {name} is not sound: {res.not_sound_reason}")
            note = f"NOT SOUND{excluded} [{len(footnotes)}]" + (f"; {note}" if note else "")
        if res.applies and res.mu is not None:
            note = f"mu = {fmt(res.mu)} (Gaussian DP, exact conversion)" + (f"; {note}" if note else "")
        rows.append([name, "yes" if res.applies else "no", "yes" if res.sound else "NO",
                     fmt(res.epsilon), fmt(res.order, 3) if res.order is not None else "-", note])
    if report.combined is not None:
        comb = report.combined
        rows.append([
            comb.analysis, "yes", "yes" if comb.sound else "NO", fmt(comb.epsilon),
            fmt(comb.order, 3) if comb.order is not None else "-",
            "smallest RDP of the above at each order"
            + (f" ({comb.details['at_optimal_order']['analysis']} at the optimal order)"
               if "at_optimal_order" in comb.details else ""),
        ])
    out.append(table(rows, width=width))
    out.extend(fill(line, width=width) for line in footnotes)
    out.append("")
    best = report.best
    if best is None:
        out.append("no sound analysis applies to this run")
    elif best.sound:
        out.append(f"best sound epsilon: {fmt(best.epsilon)} ({best.analysis})")
    else:
        out.append(f"best epsilon: {fmt(best.epsilon)} ({best.analysis}) -- NOT SOUND, not a guarantee "
                   "(--include-unsound; see the note above)")
    return "\n".join(out)


def calibration_summary(cal, *, width: int | None = None) -> str:
    """What ``noisysgd calibrate`` prints for ``cal`` (a :class:`~noisysgd.Calibration`)."""
    width = width or terminal_width()
    run = cal.report.run
    best = cal.report.best
    return "\n".join([
        f"target: epsilon = {cal.target_epsilon:g}, delta = {cal.delta:g}, adjacency = {run.adjacency}",
        fill(_run_line(run, with_z=False), width=width),
        f"noise multiplier z = {cal.noise_multiplier:.6g} (relative tolerance {cal.rel_tol:g})",
        fill(f"epsilon at that z: {fmt(cal.epsilon)} ({best.analysis}"
             + ("" if best.sound else ", NOT SOUND") + f"); {cal.evaluations} evaluations", width=width),
    ])


# ------------------------------------------------------------------ plan


def _pick_rows(epochs, count: int = 12) -> list[int]:
    """Indices of about ``count`` log-spaced epochs of the plan (first and last included)."""
    import numpy as np

    if epochs.size <= count:
        return list(range(epochs.size))
    targets = np.geomspace(epochs[0], epochs[-1], count)
    idx = {int(np.searchsorted(epochs, t)) for t in targets} | {0, epochs.size - 1}
    return sorted(min(i, epochs.size - 1) for i in idx)


def above(value: float, floor: float) -> str:
    """How far ``value`` lies above ``floor``: "2.6% above it" below twice it, else "3.6x it"."""
    r = value / floor
    return f"{100 * (r - 1):.2g}% above it" if r < 2 else f"{r:.3g}x it"


def plan_summary(p, *, width: int | None = None) -> str:
    """What ``noisysgd plan`` prints for ``p`` (a :class:`~noisysgd.Plan`)."""
    width = width or terminal_width()
    run = p.run
    shown = [name for name, c in p.curves.items() if c.applies]
    out = [f"delta = {p.delta:g}, adjacency = {run.adjacency}, conversion = {p.conversion}",
           fill(_run_line(run).replace("run: ", f"run ({run.steps_per_epoch} steps per epoch): "),
                width=width), ""]
    rows = [["epochs", *shown, "best"]]
    for i in _pick_rows(p.epochs):
        cells = []
        for name in shown:
            c = p.curves[name]
            cells.append(fmt(float(c.epsilon[i])) + ("" if c.exact[i] else "*"))
        rows.append([str(int(p.epochs[i])), *cells, fmt(float(p.best_epsilon[i]))])
    out.append(table(rows, width=max(width, 1000)))  # numbers only: never wrapped
    if any(not c.exact.all() for c in p.curves.values() if c.applies):
        out.append(fill("* upper bound: the value computed at the next larger epoch (the PLD is computed "
                        "at a few epochs; composition never lowers epsilon)", width=width))
    out.append("")
    rows = [["analysis", "sound", "crosses composition at", "plateau", "reached after"]]
    for name in shown:
        c = p.curves[name]
        if name in ("composition", "composition-pld"):
            continue
        rows.append([
            name, "yes" if c.sound else "NO",
            "-" if c.crossover_epoch is None else f"epoch {c.crossover_epoch}",
            "none (grows)" if c.limit is None else fmt(c.limit),
            "-" if c.plateau_epoch is None else f"{c.plateau_epoch} epochs",
        ])
    if len(rows) > 1:
        out.append(table(rows, width=width))
        out.append(fill("(cross-over: the first epoch of the range from which the bound stays below the "
                        "smaller of composition and composition-pld; plateau: the limit as epochs grow, "
                        "reached within 0.1%)", width=width))
    skipped = [n for n, c in p.curves.items() if not c.applies and (c.reason or "").startswith("not evaluated")]
    not_applying = [n for n, c in p.curves.items() if not c.applies and n not in skipped]
    if not_applying:
        out.append(fill("not applicable: " + "; ".join(not_applying) + " (noisysgd epsilon shows why)",
                        width=width))
    if skipped:
        out.append(fill("not evaluated (flagged not sound, never the best bound; --include-unsound computes "
                        "them): " + "; ".join(skipped), width=width))
    unsound = [n for n in shown if not p.curves[n].sound]
    if unsound:
        out.append(fill("NOT SOUND (shown for comparison, never the best bound"
                        + (" unless --include-unsound" if not p.include_unsound else "") + "): "
                        + ", ".join(unsound), width=width))
    last = p.best_analysis[-1]
    out.append("")
    out.append(f"best sound epsilon after {int(p.epochs[-1])} epochs: {fmt(float(p.best_epsilon[-1]))}"
               + (f" ({last})" if last else ""))
    if p.limit is not None:
        out.append(f"limit of the best bound as epochs grow: {fmt(p.limit)}")
    line = p.limit_line or {}
    if line.get("epsilon"):
        floor = line["epsilon"][-1]
        best = float(p.best_epsilon[-1])
        gap = f"; the best bound is {above(best, floor)}" if floor and math.isfinite(best) else ""
        out.append(fill(f"limit line: no sound analysis (but altschuler-talwar, which needs a projection) can "
                        f"certify less than epsilon = {fmt(floor)} after {line['epochs'][-1]} epochs (exact "
                        f"privacy of the run's linear + ridge instance, noisysgd.limits){gap}", width=width))
    elif line.get("reason"):
        out.append(fill(f"limit line: n/a ({line['reason']})", width=width))
    if p.budget is not None:
        b = p.budget
        if b.epochs is None:
            out.append(fill(f"budget epsilon = {b.target_epsilon:g}: unlimited epochs (the best bound "
                            f"plateaus at {fmt(b.limit_epsilon)}, within 0.1% after {b.plateau_epochs} "
                            "epochs)", width=width))
        else:
            out.append(f"budget epsilon = {b.target_epsilon:g}: at most {b.epochs} epochs")
    return "\n".join(out)


#: The private queries a certificate can cover besides the model, as :func:`queries_text` names them.
QUERY_NAMES = (("feature_range", "feature ranges"), ("center", "centering"), ("curvature", "curvature estimate"),
               ("class_prior", "class prior"), ("release_check", "release check"))


def queries_text(query: dict, names=QUERY_NAMES) -> str | None:
    """"its private feature ranges, centering and class prior": the queries ``query`` (a certificate's
    ``preprocessing``) holds, in a few words (``names``: (key, word) pairs), or None where it holds none.

    >>> queries_text({"center": "private", "class_prior": [0.5, 0.5]})
    'its private centering and class prior'
    """
    parts = [w for k, w in names if k in query]
    if not parts:
        return None
    return "its private " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0])
