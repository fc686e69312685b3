"""The result tables docs/accuracy.md shows are the benchmark files' numbers (they cannot drift)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _benchmark(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tables_of_section_4a_are_the_benchmark_results():
    # benchmarks/tables.py, peer_diffprivlib.py --tables and peer_opacus.py --centered --tables write
    # the JSON files; the docs' table is rendered from them, row for row
    docs = (ROOT / "docs" / "accuracy.md").read_text().splitlines()
    lines = _benchmark("tables").markdown_table()
    assert len(lines) == 2 + 5 * 3
    missing = [line for line in lines if line not in docs]
    assert not missing, ("docs/accuracy.md §4a differs from benchmarks/results (re-render with "
                         "benchmarks/tables.py's markdown_table()): " + "\n".join(missing))


def test_tables_of_section_1_are_the_benchmark_results():
    # benchmarks/auto_config.py (and peer_opacus.py, peer_diffprivlib.py) write the JSON files
    docs = (ROOT / "docs" / "accuracy.md").read_text().splitlines()
    first, peers = _benchmark("auto_config").markdown_tables()
    assert len(first) == len(peers) == 2 + 3 * 3
    missing = [line for line in first + peers if line not in docs]
    assert not missing, ("docs/accuracy.md §1 differs from benchmarks/results (re-render with "
                         "benchmarks/auto_config.py's markdown_tables()): " + "\n".join(missing))


def test_the_query_cost_table_is_the_benchmark_result():
    # benchmarks/query_cost.py writes the JSON file (issue 27's third target)
    docs = (ROOT / "docs" / "accuracy.md").read_text().splitlines()
    lines = _benchmark("query_cost").markdown_table()
    assert len(lines) == 2 + 3
    missing = [line for line in lines if line not in docs]
    assert not missing, ("docs/accuracy.md §4 differs from benchmarks/results/query_cost.json (re-render with "
                         "benchmarks/query_cost.py's markdown_table()): " + "\n".join(missing))


def test_the_regularization_table_is_the_benchmark_result():
    # benchmarks/regularization.py writes the JSON file (issue 27 §2)
    docs = (ROOT / "docs" / "accuracy.md").read_text().splitlines()
    lines = _benchmark("regularization").markdown_table()
    assert len(lines) == 2 + 5 * 3
    missing = [line for line in lines if line not in docs]
    assert not missing, ("docs/accuracy.md §5 differs from benchmarks/results/regularization.json (re-render "
                         "with benchmarks/regularization.py's markdown_table()): " + "\n".join(missing))
