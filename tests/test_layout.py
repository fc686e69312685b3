"""The house rules of ARCHITECTURE.md, checked on the source: imports run downward through
the layers, and no module, function or parameter list grows past its limit."""

from __future__ import annotations

import ast
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "noisysgd"

#: ARCHITECTURE.md's layers, bottom to top: a room imports only from lower layers.
LAYERS = [
    {"run", "text", "progress", "io", "rowmaps", "quadrature", "__version__"},
    {"rdp", "gdp", "pld", "limits", "noise_search"},
    {"analyses"},
    {"accountant", "planning"},
    {"train"},
    {"preprocessing", "private_fit", "model", "params"},
    {"config", "audit", "figures", "curvature", "scalers", "prior"},
    {"pipeline"},
    {"estimators", "tuning", "demo"},
    {"cli"},
    {"__main__"},
]
LEVEL = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}
#: Rooms within one layer that may import each other, and in which direction.
SIDEWAYS = {("gdp", "rdp"), ("limits", "rdp"), ("planning", "accountant"), ("model", "preprocessing"), ("demo", "estimators"),
            ("tuning", "estimators"),
            ("curvature", "config")}


def _module(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports():
    """(importing room, imported room, file, line) for every relative import between rooms."""
    for path in sorted(SRC.rglob("*.py")):
        module = _module(path)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                targets = ([".".join(base + [node.module])] if node.module
                           else [".".join(base + [a.name]) for a in node.names])
                for target in targets:
                    if _room(target) != _room(module):
                        yield _room(module), _room(target), path.name, node.lineno


def test_every_room_has_a_layer():
    rooms = {_room(_module(p)) for p in SRC.rglob("*.py")} - {"__init__"}
    assert rooms <= set(LEVEL), sorted(rooms - set(LEVEL))


def test_imports_run_downward():
    wrong = [f"{src} ({path}:{line}) imports {dst}" for src, dst, path, line in _imports()
             if LEVEL[dst] > LEVEL[src] or (LEVEL[dst] == LEVEL[src] and (src, dst) not in SIDEWAYS)]
    assert not wrong, wrong


def test_text_imports_nothing_of_the_library():
    assert not [dst for src, dst, *_ in _imports() if src == "text"]


def _functions():
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path, node


@pytest.mark.parametrize("limit", [900])
def test_no_module_over_900_lines(limit):
    long = {str(p.relative_to(SRC)): n for p in SRC.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > limit}
    assert not long, long


def test_no_function_over_120_lines_or_15_parameters():
    long, wide = [], []
    for path, node in _functions():
        where = f"{path.relative_to(SRC)}:{node.name}"
        if node.end_lineno - node.lineno + 1 > 120:
            long.append(where)
        a = node.args
        count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
        if count > 15 and not (path.name == "estimators.py" and node.name == "__init__"):
            wide.append(where)
    assert not long and not wide, (long, wide)


def test_no_command_line_module_at_the_package_root():
    assert not list(SRC.glob("*_cli.py")) and (SRC / "cli" / "common.py").exists()


def _module_graph() -> dict:
    """Module → the modules of the package it imports (relative imports, at any depth: a function's
    lazy import counts too, since it closes the same circle when it runs)."""
    mods = {_module(p): p for p in SRC.rglob("*.py")}
    graph = {m: set() for m in mods}
    for m, path in mods.items():
        package = m if path.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.level):
                continue
            base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
            if node.module:
                target = ".".join(base + [node.module])
                targets = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods] or [target]
            else:
                targets = [".".join(base + [a.name]) for a in node.names]
            for t in targets:
                while t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in mods and t != m:
                    graph[m].add(t)
    return graph


def test_no_import_cycle():
    """No module imports, directly or through others, a module that imports it back (the CLI's train and
    train_workers did: what they share lives in cli/training.py)."""
    graph = _module_graph()
    cycles, state = [], {}

    def visit(m, path):
        state[m] = "open"
        for t in sorted(graph[m]):
            if state.get(t) == "open":
                cycles.append(path[path.index(t):] + [t])
            elif t not in state:
                visit(t, path + [t])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, cycles
    assert "noisysgd.cli.training" in graph["noisysgd.cli.train_workers"]  # (the graph sees lazy imports)


def test_no_private_name_imported_from_another_module():
    """A name that another module needs is public in the module that owns it (no ``from .x import _y``)."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                found += [f"{path.relative_to(SRC)}: from {'.' * node.level}{node.module or ''} import {a.name}"
                          for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert not found, found


def test_no_issue_numbers_inside_the_package():
    """'issue 24' means nothing to someone who installed the package: the source points to docs
    sections, the CHANGELOG or the papers instead."""
    import re

    found = [f"{p.relative_to(SRC)}:{i}" for p in sorted(SRC.rglob("*.py"))
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\bissues? \d+", line, flags=re.IGNORECASE)]
    assert not found, found
