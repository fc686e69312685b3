"""The README's examples run, and print what the README says they print.

Every ```console block's ``$ noisysgd ...`` command is run (in a temporary
directory, with COLUMNS=100) and its output compared with the block: text
exactly (spaces collapsed), numbers to a relative 1e-3 (a printed ε may move
in its last digit with the platform's floating point); a line ``...`` stands
for any number of lines; times like ``(0.6 s)`` are not compared.  A block
preceded by ``<!-- readme-check: abs=X -->`` compares its numbers to ±X (the
demo's test accuracies, which a different BLAS can move by one image).
Every ```python block runs (with ``X_train``, ``y_train`` from digits).

To regenerate the outputs after a change::

    python tests/test_readme.py --update      # rewrites the blocks without "..."
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import shlex
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_TIME = re.compile(r"\(\d+(?:\.\d+)? s\)")
COLUMNS = "100"


def _blocks(kind: str):
    """(line number, marker, text) of every ```kind block of the README."""
    lines = README.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() == f"```{kind}":
            start = i + 1
            j = start
            while lines[j].strip() != "```":
                j += 1
            marker = lines[i - 1].strip() if i > 0 and lines[i - 1].startswith("<!-- readme-check") else ""
            out.append((start + 1, marker, "\n".join(lines[start:j])))
            i = j
        i += 1
    return out


def _split(block: str) -> tuple[list[str], list[str]]:
    """The command (continuation lines joined) and the expected output lines."""
    lines = block.splitlines()
    assert lines[0].startswith("$ "), lines[0]
    cmd = lines[0][2:]
    k = 1
    while cmd.endswith("\\"):
        cmd = cmd[:-1] + " " + lines[k].strip()
        k += 1
    return shlex.split(cmd), lines[k:]


def _write_data(path: Path, *, seed: int = 0, rows: int = 400) -> None:
    """A small CSV with a 'label' column for the README's `noisysgd train data.csv` example."""
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, 5))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    rows = ["a,b,c,d,e,label"] + [",".join(f"{v:.5f}" for v in x) + f",{t}" for x, t in zip(X, y)]
    path.write_text("\n".join(rows) + "\n")


def _run(argv: list[str], cwd: Path) -> tuple[int, str]:
    from noisysgd.cli import main

    assert argv[0] == "noisysgd"
    if "data.csv" in argv:
        _write_data(cwd / "data.csv")
    if "new.csv" in argv:  # new rows of the same distribution, for `noisysgd predict`
        _write_data(cwd / "new.csv", seed=1, rows=200)
    if argv[1] == "predict" and "model/" in argv:  # the model the README's `noisysgd train` example writes
        _write_data(cwd / "data.csv")
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["train", str(cwd / "data.csv"), "--target", "label", "--classes", "0,1", "--epsilon", "1",
                         "--delta", "1e-5",
                         "--feature-clip", "2", "--holdout", "0.2", "--seed", "0", "--out", str(cwd / "model"),
                         "--quiet"]) == 0
    old, old_cols = os.getcwd(), os.environ.get("COLUMNS")
    os.chdir(cwd)
    os.environ["COLUMNS"] = COLUMNS
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            status = main(argv[1:])
    finally:
        os.chdir(old)
        if old_cols is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old_cols
    return status, buf.getvalue()


def _same_line(expected: str, actual: str, abs_tol: float) -> bool:
    e, a = _TIME.sub("(T)", expected), _TIME.sub("(T)", actual)
    if _NUMBER.sub("#", " ".join(e.split())) != _NUMBER.sub("#", " ".join(a.split())):
        return False
    for x, y in zip(_NUMBER.findall(e), _NUMBER.findall(a)):
        fx, fy = float(x), float(y)
        if not math.isclose(fx, fy, rel_tol=1e-3, abs_tol=abs_tol):
            return False
    return True


def _matches(expected: list[str], actual: list[str], abs_tol: float) -> bool:
    """``expected`` (with ``...`` wildcard lines) against ``actual``, line by line."""
    if not expected:
        return not actual
    if expected[0].strip() == "...":
        return any(_matches(expected[1:], actual[k:], abs_tol) for k in range(len(actual) + 1))
    return bool(actual) and _same_line(expected[0], actual[0], abs_tol) and _matches(
        expected[1:], actual[1:], abs_tol)


def _abs_tol(marker: str) -> float:
    m = re.search(r"abs=([0-9.eE+-]+)", marker)
    return float(m.group(1)) if m else 1e-12


CONSOLE = _blocks("console")
PYTHON = _blocks("python")


def test_the_readme_has_examples():
    assert len(CONSOLE) >= 6 and len(PYTHON) >= 2


@pytest.mark.parametrize("line,marker,block", CONSOLE, ids=[f"line{c[0]}" for c in CONSOLE])
def test_console_example(line, marker, block, tmp_path):
    argv, expected = _split(block)
    status, out = _run(argv, tmp_path)
    assert status == 0, out
    actual = out.rstrip("\n").splitlines() if out.strip() else []
    if not expected:  # a command shown without its output: it must run
        return
    assert _matches(expected, actual, _abs_tol(marker)), (
        f"README.md line {line}: `{' '.join(argv)}` now prints:\n{out}\n"
        "(python tests/test_readme.py --update rewrites the blocks without '...')")


@pytest.mark.parametrize("line,marker,block", PYTHON, ids=[f"line{c[0]}" for c in PYTHON])
def test_python_example(line, marker, block, capsys):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    namespace = {"X_train": X[:600] / 16.0, "y_train": y[:600]}
    exec(compile(block, f"README.md:{line}", "exec"), namespace)
    assert capsys.readouterr().out.strip()  # every example prints something


def _update() -> None:
    import tempfile

    text = README.read_text(encoding="utf-8")
    for line, _, block in CONSOLE:
        argv, expected = _split(block)
        if not expected:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            status, out = _run(argv, Path(tmp))
        if status != 0:
            sys.exit(f"README.md line {line}: `{' '.join(argv)}` exited with {status}")
        if any(e.strip() == "..." for e in expected):
            print(f"README.md line {line} elides lines ('...'); check it by hand. Output:\n{out}")
            continue
        head = block.splitlines()[: len(block.splitlines()) - len(expected)]
        text = text.replace(block, "\n".join(head + out.rstrip("\n").splitlines()), 1)
    README.write_text(text, encoding="utf-8")
    print("README.md updated")


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        _update()
    else:
        sys.exit("usage: python tests/test_readme.py --update")
