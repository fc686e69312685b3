"""`noisysgd plan` end to end, for every batching (issue 28 §1: ≤ 2 s for 100 epochs at
n = 60,000; the issue's own `sample` run ≤ 10 s and ≤ 2 GiB).

Each row is the whole command as a user runs it (a fresh process: imports, every analysis of
the best bound, cross-overs, plateaus, the limit line, the table), wall time and peak resident
memory (the child's own ``ru_maxrss``), best of ``--repeats`` for the time, the largest peak.  No peer plans over epochs, so no ratio.  Not a test::

    python benchmarks/plan_speed.py [--repeats 3] [--json benchmarks/results/plan_speed.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

COMMON = ["--lr", "0.1", "--noise-multiplier", "2", "--lipschitz", "1", "--smoothness", "1",
          "--strong-convexity", "0.01", "--delta", "1e-5"]
#: (label, arguments): the n = 60,000 runs of the target, then the issue's own `sample` run.
RUNS = [(f"n=60000 b=100 {b} epochs 1:100",
         ["--n", "60000", "--batch-size", "60000" if b == "full" else "100", "--batching", b, "--epochs", "1:100"])
        for b in ("poisson", "sample", "shuffle", "shuffle-once", "cyclic", "full")]
RUNS.append(("issue: n=10000 b=100 sample epochs 1:50",
             ["--n", "10000", "--batch-size", "100", "--batching", "sample", "--epochs", "1:50"]))


def _one(args) -> tuple[float, float]:
    """(seconds, peak resident MiB) of one `noisysgd plan` process (its own rusage, os.wait4)."""
    t = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "noisysgd", "plan", *args, *COMMON], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - t
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"noisysgd plan {' '.join(args)} failed ({child.returncode})")
    return seconds, usage.ru_maxrss / 1024.0   # KiB on Linux


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    out = {"machine": f"{platform.machine()}, Python {platform.python_version()}", "repeats": a.repeats,
           "rows": {}}
    for label, args in RUNS:
        runs = [_one(args) for _ in range(a.repeats)]
        best = min(s for s, _ in runs)
        peak = max(m for _, m in runs)
        print(f"{label:<42} {best:6.2f} s   peak resident {peak:6.0f} MiB")
        out["rows"][label] = {"seconds": best, "peak_resident_mib": peak}
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
