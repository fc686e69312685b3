"""``noisysgd figures``: a paper's figures recomputed from the library's bounds (PNG and JSON)."""

from __future__ import annotations

import sys

from .common import check_out_dir, progress_wanted

HELP = "draw a paper's figures from the library's bounds (PNG files)"
DESCRIPTION = (
    "Recompute a paper's figures from the bounds implemented here and write each as a PNG "
    "file and its plotted data as JSON into --out (created if missing); prints the paths "
    "written. `noisysgd figures --paper all --out docs/figures` regenerates the figures the "
    "docs show."
)

EXAMPLES = """\
examples:
  # Altschuler & Talwar's Figures 1, 2(a), 2(b) and the cross-over figure, as PNG files
  noisysgd figures --paper altschuler-talwar --out figures/

  # every paper's figures (needs matplotlib: pip install 'noisysgd[plot]')
  noisysgd figures --paper all --out figures/
"""


def add_arguments(f) -> None:
    from ..figures import PAPERS

    f.add_argument(
        "--paper",
        default="all",
        choices=[*PAPERS, "all"],
        help="whose figures (default: all)",
    )
    f.add_argument("--out", required=True, metavar="DIR", help="directory to write the PNG files into")
    f.set_defaults(handler=cmd_figures)


def cmd_figures(args) -> int:
    from ..figures import require_matplotlib, write_figures

    out = check_out_dir(args.out)
    try:
        require_matplotlib()
    except ImportError as exc:  # a missing optional dependency, not a usage mistake
        print(f"noisysgd figures: error: {exc}", file=sys.stderr)
        return 1
    try:
        out.mkdir(parents=True, exist_ok=True)
        paths = write_figures(args.paper, out, progress=progress_wanted(args))
    except OSError as exc:
        raise ValueError(
            f"out must be a writable directory. Writing into {args.out!r} failed: {exc}"
        ) from None
    for path in paths:
        print(path)
    return 0
