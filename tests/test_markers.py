"""The fast subset, ``pytest -m "not slow"``, covers every test module.

Each ``tests/test_*.py`` must define at least one test that is not marked slow:
a module whose every test is slow gets a cheaper variant (a smaller
parametrisation) left unmarked.  Checked on the source with ``ast`` (no
imports, a few milliseconds per module): a test counts as slow when it, its
class or its module (``pytestmark``) carries ``pytest.mark.slow``, or when one
of its ``parametrize`` lists is a literal list whose every value is a
``pytest.param(..., marks=pytest.mark.slow)``.  Lists built by code count as
fast here; the slow test at the bottom asks pytest's own collection instead.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

TESTS = pathlib.Path(__file__).resolve().parent
MODULES = sorted(TESTS.glob("test_*.py"))


def _is_slow_mark(node: ast.expr) -> bool:
    """``pytest.mark.slow`` or ``mark.slow``, called or not."""
    if isinstance(node, ast.Call):
        node = node.func
    if not (isinstance(node, ast.Attribute) and node.attr == "slow"):
        return False
    owner = node.value
    return (isinstance(owner, ast.Attribute) and owner.attr == "mark") or (
        isinstance(owner, ast.Name) and owner.id == "mark")


def _marks_slow(node: ast.expr) -> bool:
    """A ``marks=`` or ``pytestmark`` value: one mark, or a list or tuple of marks."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return any(_is_slow_mark(e) for e in node.elts)
    return _is_slow_mark(node)


def _is_slow_param(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "param"
            and any(k.arg == "marks" and _marks_slow(k.value) for k in node.keywords))


def _every_value_slow(decorator: ast.expr) -> bool:
    """A ``parametrize`` whose values are a literal list or tuple of slow ``pytest.param``s only."""
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == "parametrize"):
        return False
    values = decorator.args[1] if len(decorator.args) > 1 else next(
        (k.value for k in decorator.keywords if k.arg == "argvalues"), None)
    return isinstance(values, (ast.List, ast.Tuple)) and all(_is_slow_param(v) for v in values.elts)


def fast_tests(source: str) -> list[str]:
    """The names of the tests in ``source`` that ``-m "not slow"`` keeps."""
    tree = ast.parse(source)
    for stmt in tree.body:
        if (isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None
                and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                        for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]))
                and _marks_slow(stmt.value)):
            return []

    def fast(fn, outer=()) -> bool:
        return not any(_is_slow_mark(d) or _every_value_slow(d) for d in (*outer, *fn.decorator_list))

    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    names = []
    for stmt in tree.body:
        if isinstance(stmt, functions) and stmt.name.startswith("test") and fast(stmt):
            names.append(stmt.name)
        elif isinstance(stmt, ast.ClassDef) and stmt.name.startswith("Test"):
            names += [f"{stmt.name}::{f.name}" for f in stmt.body
                      if isinstance(f, functions) and f.name.startswith("test") and fast(f, stmt.decorator_list)]
    return names


def test_there_are_test_modules():
    assert len(MODULES) > 10 and pathlib.Path(__file__) in MODULES


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_every_module_has_a_test_outside_the_slow_marker(path):
    assert fast_tests(path.read_text(encoding="utf-8")), (
        f"{path.name}: every test is marked slow, so `pytest -m \"not slow\"` skips the module; "
        "leave its cheapest meaningful test (or a smaller parametrisation) unmarked")


def test_the_check_sees_each_way_of_marking_slow():
    head = "import pytest\nfrom pytest import mark\n"
    assert fast_tests(head + "def test_a(): pass\n") == ["test_a"]
    assert fast_tests(head + "def helper(): pass\n") == []
    assert fast_tests(head + "@pytest.mark.slow\ndef test_a(): pass\n") == []
    assert fast_tests(head + "@mark.slow\n@pytest.mark.parametrize('x', [1])\ndef test_a(x): pass\n") == []
    assert fast_tests(head + "@pytest.mark.slow()\ndef test_a(): pass\n@pytest.mark.skip\ndef test_b(): pass\n") == [
        "test_b"]
    assert fast_tests(head + "pytestmark = pytest.mark.slow\ndef test_a(): pass\n") == []
    assert fast_tests(head + "pytestmark = [pytest.mark.filterwarnings('x'), pytest.mark.slow]\n"
                             "def test_a(): pass\n") == []
    assert fast_tests(head + "@pytest.mark.slow\nclass TestA:\n    def test_a(self): pass\n") == []
    assert fast_tests(head + "class TestA:\n    @pytest.mark.slow\n    def test_a(self): pass\n"
                             "    def test_b(self): pass\n") == ["TestA::test_b"]
    every = "[pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=[pytest.mark.slow])]"
    assert fast_tests(head + f"@pytest.mark.parametrize('x', {every})\ndef test_a(x): pass\n") == []
    assert fast_tests(head + f"@pytest.mark.parametrize('y', [1, 2])\n@pytest.mark.parametrize('x', {every})\n"
                             "def test_a(x, y): pass\n") == []
    some = "[pytest.param(1, marks=pytest.mark.slow), 2]"
    assert fast_tests(head + f"@pytest.mark.parametrize('x', {some})\ndef test_a(x): pass\n") == ["test_a"]
    assert fast_tests(head + f"@pytest.mark.parametrize(argnames='x', argvalues={every})\n"
                             "def test_a(x): pass\n") == []


@pytest.mark.slow
def test_pytest_collects_a_fast_test_in_every_module():
    """The same, by pytest's own collection (which also sees parametrisations built by code)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "not slow",
         *(str(p) for p in MODULES)],
        cwd=TESTS.parent, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    collected = {line.split("::", 1)[0].rsplit("/", 1)[-1] for line in out.stdout.splitlines() if "::" in line}
    assert [p.name for p in MODULES if p.name not in collected] == []
