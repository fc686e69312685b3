"""What a user sees: a CLI that answers at once, one line per warning, short
reprs, summaries equal to what the CLI prints, text wrapped to the terminal,
and an API that asks only for what it uses."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings

import pytest

import noisysgd
from noisysgd import Run
from noisysgd.cli import main
from noisysgd.cli.common import OneLineWarnings
from noisysgd.text import table

HEAVY = ("scipy", "sklearn", "dp_accounting", "matplotlib", "torch", "pandas")


def _loaded_after(code: str) -> set[str]:
    """Top-level modules (of HEAVY) imported by running ``code`` in a fresh interpreter."""
    probe = code + "\nimport sys, json; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1])) & set(HEAVY)


def test_import_and_help_load_nothing_heavy():
    assert _loaded_after("import noisysgd") == set()
    assert _loaded_after("import noisysgd; noisysgd.Run(n=10, batch_size=5, batching='sample', "
                         "steps=3, lipschitz=1.0)") == set()
    code = ("from noisysgd.cli import main\nimport contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    assert main(['--help']) == 0")
    assert _loaded_after(code) == set()


def test_the_console_script_freezes_its_imports_and_main_leaves_the_collector_alone(capsys):
    """console() (the ``noisysgd`` script, ``python -m noisysgd``) pauses the cyclic collector while
    the command's modules load and freezes them after; main(), called in a user's program, leaves the
    collector as it found it.  Each way the collector is on again when the command runs or returns."""
    import gc

    frozen = gc.get_freeze_count()
    assert main(["calibrate", "--n", "1000", "--batch-size", "10", "--epochs", "1", "--lipschitz", "1",
                 "--batching", "cyclic", "--epsilon", "1", "--delta", "1e-5", "--analysis",
                 "composition"]) == 0
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    capsys.readouterr()
    probe = ("import gc, sys\nfrom noisysgd import cli\nseen = []\nmain = cli.main\n"
             "def spy(argv=None):\n    seen.append(gc.isenabled())\n    return main(argv)\n"
             "cli.main = spy\nimport noisysgd.cli.calibrate as c\nhandler = c.cmd_calibrate\n"
             "def during(args):\n    seen.append(gc.isenabled())\n    return handler(args)\n"
             "c.cmd_calibrate = during\n"
             "sys.argv = ['noisysgd'] + sys.argv[1:]\nstatus = cli.console()\n"
             "print(status, seen, gc.isenabled(), gc.get_freeze_count() > 0)")
    args = ["calibrate", "--n", "1000", "--batch-size", "10", "--epochs", "1", "--lipschitz", "1",
            "--batching", "cyclic", "--epsilon", "1", "--delta", "1e-5", "--analysis", "composition"]
    out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "0 [False, True] True True", out.stdout
    out = subprocess.run([sys.executable, "-c", probe, "--help"], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "0 [False] True True", out.stdout
    out = subprocess.run([sys.executable, "-c", probe.replace("import gc, sys", "import gc, sys\ngc.disable()"),
                          *args], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "0 [False, False] False False", out.stdout


def test_one_epsilon_loads_only_what_it_uses():
    """A cyclic run (no PLD needed) computes its ε without scikit-learn, dp_accounting or matplotlib."""
    code = ("from noisysgd.cli import main\nimport contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['epsilon', '--n', '1000', '--batch-size', '10', '--epochs', '5', "
            "'--noise-multiplier', '2', '--lipschitz', '1', '--batching', 'cyclic', '--delta', '1e-5']) == 0")
    assert _loaded_after(code) <= {"scipy"}


def test_public_names_resolve_lazily():
    for name in noisysgd.__all__:
        assert getattr(noisysgd, name) is not None, name
    assert set(noisysgd.__all__) <= set(dir(noisysgd))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        noisysgd.nope  # noqa: B018


# ------------------------------------------------------------------ warnings


def test_warnings_are_one_line_once(capsys):
    with OneLineWarnings():
        for value in (1.5, 2.5, 3.25, 1e-7):
            warnings.warn(f"the optimal order {value} is at the edge\nof the grid", UserWarning)
        warnings.warn("something else", UserWarning)
        warnings.warn("the optimal order 9 is at the edge of the grid", RuntimeWarning)  # another kind
    err = capsys.readouterr().err.splitlines()
    assert err == ["noisysgd: warning: the optimal order 1.5 is at the edge of the grid",
                   "noisysgd: warning: something else",
                   "noisysgd: warning: the optimal order 9 is at the edge of the grid"]


def test_calibration_at_a_tiny_epsilon_warns_once_without_paths(capsys):
    """Before: one OrderGridWarning per noise level tried, with site-packages paths."""
    args = ["calibrate", "--n", "1000", "--batch-size", "50", "--epochs", "20", "--lipschitz", "1",
            "--batching", "sample", "--epsilon", "1e-3", "--delta", "1e-5", "--analysis", "composition"]
    assert main(args) == 0
    err = capsys.readouterr().err.splitlines()
    assert all(line.startswith("noisysgd: warning: ") for line in err), err
    assert len(err) == len(set(err)) <= 2, err
    assert not any(".py:" in line or "site-packages" in line for line in err)


def test_calibrate_raises_only_the_warnings_of_its_answer():
    run = Run(n=1000, batch_size=50, batching="sample", steps=400, lipschitz=1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal = noisysgd.calibrate(run, epsilon=1e-3, delta=1e-5, analyses="composition")
    again = noisysgd.epsilon(run.replace(noise_multiplier=cal.noise_multiplier), delta=1e-5,
                             analyses="composition")
    assert sorted(str(w.message) for w in caught) == sorted(again.results["composition"].warnings)


# ------------------------------------------------------------------ reprs and summaries

RUN = Run.from_epochs(epochs=10, n=60000, batch_size=256, batching="cyclic", learning_rate=0.05,
                      noise_multiplier=4.0, lipschitz=1.0, smoothness=1.25, strong_convexity=0.01)
FLAGS = ["--n", "60000", "--batch-size", "256", "--lr", "0.05", "--lipschitz", "1", "--smoothness",
         "1.25", "--strong-convexity", "0.01", "--batching", "cyclic", "--delta", "1e-5"]


def test_reprs_are_short():
    report = noisysgd.epsilon(RUN, delta=1e-5)
    cal = noisysgd.calibrate(RUN, epsilon=2.0, delta=1e-5)
    p = noisysgd.plan(RUN, delta=1e-5, epochs="1:50", epsilon=3.0)
    for obj in (report, cal, p, *report.results.values(), *p.curves.values()):
        assert len(repr(obj)) < 300, repr(obj)
    assert repr(report).startswith("EpsilonReport(epsilon=") and report.best.analysis in repr(report)
    assert f"noise_multiplier={cal.noise_multiplier:.4f}" in repr(cal)
    assert "budget=" in repr(p)


def test_summaries_are_what_the_cli_prints(capsys):
    report = noisysgd.epsilon(RUN, delta=1e-5)
    assert main(["epsilon", *FLAGS, "--epochs", "10", "--noise-multiplier", "4"]) == 0
    out = capsys.readouterr().out  # the summary, then the limit line
    assert out.startswith(report.summary() + "\nlimit: no sound analysis can certify less than")
    cal = noisysgd.calibrate(RUN.replace(noise_multiplier=None), epsilon=2.0, delta=1e-5)
    assert main(["calibrate", *FLAGS, "--epochs", "10", "--epsilon", "2"]) == 0
    assert capsys.readouterr().out.startswith(cal.summary() + "\nlimit: no sound analysis can meet this target")
    p = noisysgd.plan(RUN.replace(steps=None), delta=1e-5, epochs="1:50", epsilon=3.0)
    assert main(["plan", *FLAGS, "--noise-multiplier", "4", "--epochs", "1:50", "--epsilon", "3"]) == 0
    assert capsys.readouterr().out == p.summary() + "\n"


@pytest.mark.parametrize("columns", [80, 100, 120])
def test_epsilon_output_fits_the_terminal(monkeypatch, capsys, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["epsilon", "--n", "60000", "--batch-size", "256", "--epochs", "10", "--lr", "0.5",
                 "--noise-multiplier", "1", "--lipschitz", "1", "--batching", "poisson",
                 "--delta", "1e-5"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= columns
    assert "ye-shokri" in out and "not sound" in out


def test_table_wraps_only_the_last_column():
    rows = [["name", "value", "note"], ["a", "1", "word " * 30], ["bb", "22", ""]]
    lines = table(rows, width=50).splitlines()
    assert max(map(len, lines)) <= 50
    assert lines[0].startswith("name  value  note") and lines[2].startswith("a     1      word")
    assert all(line.startswith(" " * 13 + "word") for line in lines[3:-1])
    assert sum(line.count("word") for line in lines) == 30 and lines[-1].rstrip() == "bb    22"


# ------------------------------------------------------------------ ask only for what is used


def test_composition_needs_no_learning_rate(capsys):
    run = Run(n=60000, batch_size=256, batching="poisson", steps=2350, noise_multiplier=1.0, lipschitz=1.0)
    report = noisysgd.epsilon(run, delta=1e-5)
    with_lr = noisysgd.epsilon(run.replace(learning_rate=0.5), delta=1e-5)
    assert report.epsilon == with_lr.epsilon
    assert "needs the step size" in report.results["altschuler-talwar"].reason
    assert main(["epsilon", "--n", "60000", "--batch-size", "256", "--steps", "2350", "--noise-multiplier",
                 "1", "--lipschitz", "1", "--batching", "poisson", "--delta", "1e-5",
                 "--analysis", "composition"]) == 0
    assert "composition" in capsys.readouterr().out


def test_calibrate_and_plan_need_no_noise_or_steps():
    bare = RUN.replace(noise_multiplier=None)
    a = noisysgd.calibrate(bare, epsilon=2.0, delta=1e-5)
    b = noisysgd.calibrate(RUN, epsilon=2.0, delta=1e-5)
    assert a.noise_multiplier == pytest.approx(b.noise_multiplier, rel=1e-3)
    p = noisysgd.plan(RUN.replace(steps=None), delta=1e-5, epochs=[1, 10])
    q = noisysgd.plan(RUN, delta=1e-5, epochs=[1, 10])
    assert list(p.best_epsilon) == list(q.best_epsilon)
    budget = noisysgd.max_epochs(RUN.replace(steps=None), epsilon=3.0, delta=1e-5)
    assert budget.epochs is None or budget.epochs >= 1


def test_missing_values_are_named_where_they_are_needed():
    with pytest.raises(ValueError, match=r"noise_multiplier must be given to compute epsilon.*Found None"):
        noisysgd.epsilon(RUN.replace(noise_multiplier=None), delta=1e-5)
    with pytest.raises(ValueError, match=r"steps must be given to compute epsilon"):
        noisysgd.epsilon(RUN.replace(steps=None), delta=1e-5)
    with pytest.raises(ValueError, match=r"steps must be given to calibrate"):
        noisysgd.calibrate(RUN.replace(steps=None), epsilon=1.0, delta=1e-5)
    import numpy as np
    from noisysgd.train import BinaryLogistic, train

    X = np.zeros((20, 2)); y = np.arange(20) % 2
    run = Run(n=20, batch_size=20, batching="full", steps=3, noise_multiplier=1.0, lipschitz=1.0)
    with pytest.raises(ValueError, match=r"learning_rate must be given to train"):
        train(run, BinaryLogistic(), X, y, feature_clip=1.0)


def test_epsilon_prints_the_limit_line(capsys):
    from noisysgd.limits import limit_epsilon

    assert main(["epsilon", *FLAGS, "--epochs", "10", "--noise-multiplier", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["limit"]["epsilon"] == pytest.approx(limit_epsilon(RUN, 1e-5), rel=1e-12)
    assert out["limit"]["epsilon"] <= out["epsilon"]
    assert main(["epsilon", *FLAGS, "--epochs", "10", "--noise-multiplier", "4", "--diameter", "3"]) == 0
    assert "limit: n/a (" in capsys.readouterr().out


def test_an_explicit_schedule_fixes_the_steps():
    run = Run(n=100, batch_size=10, batching="sample", learning_rate=[0.1, 0.2, 0.3], lipschitz=1.0)
    assert run.steps == 3 and run.epochs == pytest.approx(0.3)
    assert math.isclose(run.max_learning_rate, 0.3)


def test_one_module_per_subcommand_and_the_listing_agrees():
    """`noisysgd X` lives in noisysgd/cli/X.py, whose HELP is the line `noisysgd --help` shows
    (the listing repeats them so that it imports no subcommand module)."""
    import importlib
    from pathlib import Path

    import noisysgd.cli as cli

    root = Path(cli.__file__).parent
    for name, line in cli.COMMANDS.items():
        module = importlib.import_module(f"noisysgd.cli.{name}")
        assert (root / f"{name}.py").exists() and module.HELP == line, name
        assert callable(module.add_arguments) and module.DESCRIPTION and module.EXAMPLES
    assert not list(Path(cli.__file__).parents[1].glob("*_cli.py"))


@pytest.mark.parametrize("columns", [None, "", "0", "-3", "abc", "40", "123"])
def test_help_width_is_shutils_without_importing_it(monkeypatch, columns):
    """The CLI's help formatter takes the width shutil.get_terminal_size() gives (argparse's own
    formatter imports shutil for it, ~3 ms of `noisysgd predict`'s start): the same columns under
    every COLUMNS setting, and the same help text as argparse's own formatter."""
    import argparse
    import shutil

    from noisysgd.cli.common import Parser, RawFormatter
    from noisysgd.text import terminal_columns, terminal_width

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.delenv("LINES", raising=False)
    assert terminal_columns() == shutil.get_terminal_size().columns
    assert terminal_width() == max(40, shutil.get_terminal_size((100, 24)).columns)
    words = " ".join(f"word{i}" for i in range(60))
    for ours, theirs in ((Parser, argparse.HelpFormatter), (RawFormatter, argparse.RawDescriptionHelpFormatter)):
        texts = []
        for kind in (ours, theirs):
            if kind is Parser:
                parser = Parser(prog="noisysgd x", description=words)
            else:
                parser = argparse.ArgumentParser(prog="noisysgd x", description=words, formatter_class=kind)
            parser.add_argument("--flag", help=words)
            texts.append(parser.format_help())
        assert texts[0] == texts[1]
