"""The ``noisysgd`` command line: ``build_parser()`` and ``main(argv) -> int``.

One module per subcommand — ``noisysgd plan`` lives in :mod:`noisysgd.cli.plan` —
each with ``HELP`` (its line in ``noisysgd --help``), ``DESCRIPTION`` and
``EXAMPLES`` (its ``--help``), ``add_arguments(parser)`` and the handler it
registers; what they share is in :mod:`noisysgd.cli.common`.

User mistakes exit with status 2 and one line on stderr naming the flag; they
never print a traceback.  Heavy modules (numpy, scipy, scikit-learn,
dp_accounting, matplotlib) are imported where they are used: ``noisysgd --help``
imports no subcommand module, and a command builds only its own parser
(benchmarks/cli_startup.py measures it).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys

from .common import RAW, OneLineWarnings, Parser, UsageError, flag_for, one_line

__all__ = ["build_parser", "console", "main", "UsageError"]

#: Every command: its line in ``noisysgd --help`` (the modules' ``HELP``, repeated here so
#: that the listing imports none of them; tests/test_cli_ux.py checks they agree).
COMMANDS = {
    "epsilon": "privacy (epsilon) of a Noisy-SGD run under each analysis",
    "calibrate": "the smallest noise multiplier that meets a target (epsilon, delta)",
    "plan": "epsilon versus epochs under every analysis; cross-overs, plateaus, epoch budgets",
    "train": "train a private linear model on a CSV/NPZ/Parquet file; write model, certificate, metrics",
    "tune": "private hyperparameter selection; the certificate covers the whole tuning",
    "predict": "predictions of a model written by train/tune on a CSV/NPZ/Parquet file",
    "demo": "the defaults' private model on digits, then one run certified by hidden state and by composition",
    "audit": "empirical privacy audit: a lower bound on epsilon from many runs, beside the certified one",
    "figures": "draw a paper's figures from the library's bounds (PNG files)",
}


class _Version(argparse.Action):
    """--version, reading the installed version only when asked."""

    def __call__(self, parser, namespace, values, option_string=None):
        from .. import __version__

        print(f"noisysgd {__version__}")
        parser.exit()


#: Set by :func:`console` while a command's modules are still to be imported.
_STARTUP = {"collector_paused": False}


def command_module(name: str):
    """The module of subcommand ``name`` (imported on first use)."""
    module = importlib.import_module(f"{__name__}.{name}")
    _startup_done()
    return module


def _startup_done() -> None:
    """After :func:`console`'s imports: what they loaded frozen (``gc.freeze``: the collector's later
    passes, and the one at the interpreter's exit, skip it), the collector on again."""
    if _STARTUP["collector_paused"]:
        try:
            gc.freeze()
        finally:  # (on before the flag drops: an interrupt between them cannot leave it off)
            gc.enable()
            _STARTUP["collector_paused"] = False


def console() -> int:
    """The ``noisysgd`` console script (and ``python -m noisysgd``): :func:`main` in a process of its
    own.  The cyclic garbage collector is paused while the command's modules are imported (numpy,
    ...: objects that live until the process exits, none of them garbage), and what they loaded is
    then frozen (``gc.freeze``), so neither the collector's passes while the command runs nor its
    pass at the interpreter's exit walk them again.  ``noisysgd predict`` of 4,000 rows: about 10 ms
    of ~105 (benchmarks/cli_startup.py).  :func:`main` itself, called in a program of the user's,
    leaves the collector alone."""
    if gc.isenabled():
        gc.disable()
        _STARTUP["collector_paused"] = True
    try:
        return main()
    finally:
        _startup_done()  # (no command module was imported: --help, a usage error)


def _command_in(argv: list[str]) -> str | None:
    """The command named on the command line (the first word that is not an option:
    the top-level parser has no option that takes a value)."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``noisysgd`` parser.  With ``only`` a command's name, just that command's parser is
    built (a command imports only what it needs; the other commands, which its command line
    cannot name, get no parser: ~0.5 ms each); ``only=""`` lists the commands with their help
    line without building any (``noisysgd --help`` imports nothing heavy)."""
    parser = Parser(
        prog="noisysgd",
        description="Noisy-SGD with hidden-state differential privacy accounting.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name, line in COMMANDS.items():
        if only is None or only == name:
            module = command_module(name)
            module.add_arguments(sub.add_parser(name, help=module.HELP, description=module.DESCRIPTION,
                                                epilog=module.EXAMPLES, formatter_class=RAW))
        elif only not in COMMANDS:
            sub.add_parser(name, help=line, add_help=False)
    for action in sub._choices_actions:  # one listing, whoever built the parser
        action.help = COMMANDS[action.dest]
    # every command takes --quiet: no progress bars (they are shown on a terminal only)
    for name, sp in sub.choices.items():
        if (only is None or only == name) and not any("--quiet" in a.option_strings for a in sp._actions):
            sp.add_argument("--quiet", "-q", action="store_true",
                            help="no progress bars (shown only when stderr is a terminal)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``noisysgd`` console script; returns the exit status."""
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(only=_command_in(argv) or "")
    args = None
    try:
        args = parser.parse_args(argv)
        with OneLineWarnings():
            return args.handler(args)
    except UsageError as exc:
        print(one_line(str(exc)), file=sys.stderr)
        return 2
    except ValueError as exc:
        message = str(exc)
        flag = flag_for(message)
        prefix = f"{flag}: " if flag else ""
        prog = " ".join(filter(None, ["noisysgd", getattr(args, "command", None)]))
        print(one_line(f"{prog}: error: {prefix}{message}"), file=sys.stderr)
        return 2
    except OSError as exc:  # the environment, not the command line: one line, status 1
        prog = " ".join(filter(None, ["noisysgd", getattr(args, "command", None)]))
        print(one_line(f"{prog}: error: {exc}"), file=sys.stderr)
        return 1
    except SystemExit as exc:  # --help and --version
        return int(exc.code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
