"""Training on data 4x larger than the memory the job may use (issue 16).

Writes an uncompressed NPZ of float64 features (``--data-mib``, default 4 × ``--limit-mib``)
block by block, then runs ``noisysgd train DATA --workers 1`` (the data-parallel engine on one
process: X memory-mapped from the NPZ, each Poisson batch's rows read and augmented per step)
inside a Linux memory cgroup whose hard limit is ``--limit-mib`` — the kernel kills the job if
its memory (anonymous memory plus the page cache it has not given back) cannot be kept under it.
It runs the same command without ``--workers`` too (the single-process numpy engine), under the
same limit: since issue 28 §4 that engine reads the rows a batch at a time as well
(:mod:`noisysgd.train.rows`; before, it formed the clipped, augmented X̄ whole and was killed).

Needs root and a cgroup v1 memory controller at /sys/fs/cgroup/memory (as on this machine) or
cgroup v2 with the memory controller delegated; without either it says so and exits 0 (nothing
is measured).  Results: ``benchmarks/results/memory.json``.

    python benchmarks/memory.py                      # 640 MiB limit, 2560 MiB of data (~3 min)
    python benchmarks/memory.py --limit-mib 1024     # 4 GiB of data
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "memory.json"


def write_npz(path: Path, n: int, d: int, block: int = 1 << 16) -> None:
    """X (n × d float64, rows of norm ~1) and y (labels of a linear rule), as np.savez writes them
    (stored, uncompressed), without holding X in memory."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=d)
    tmp = path.with_suffix(".X.npy")
    X = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float64, shape=(n, d))
    y = np.empty(n, dtype=np.int64)
    for lo in range(0, n, block):
        hi = min(n, lo + block)
        B = rng.normal(size=(hi - lo, d)) / np.sqrt(d)
        X[lo:hi] = B
        y[lo:hi] = (B @ w + 0.3 * rng.normal(size=hi - lo) > 0)
    X.flush()
    del X
    ytmp = path.with_suffix(".y.npy")
    np.save(ytmp, y)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
        z.write(tmp, "X.npy")
        z.write(ytmp, "y.npy")
    tmp.unlink()
    ytmp.unlink()


class MemoryCgroup:
    """A cgroup with a hard memory limit (v1 memory controller, or v2), removed on exit."""

    def __init__(self, limit_bytes: int):
        self.limit = limit_bytes
        name = f"noisysgd-bench-{os.getpid()}"
        v1 = Path("/sys/fs/cgroup/memory")
        v2 = Path("/sys/fs/cgroup/unified")
        if (v1 / "memory.limit_in_bytes").exists():
            self.path, self.v = v1 / name, 1
        elif (v2 / "cgroup.controllers").exists() and "memory" in (v2 / "cgroup.subtree_control").read_text():
            self.path, self.v = v2 / name, 2
        else:
            raise OSError("no memory cgroup controller found")
        self.path.mkdir()
        if self.v == 1:
            (self.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
            swap = self.path / "memory.memsw.limit_in_bytes"
            if swap.exists():
                swap.write_text(str(limit_bytes))
        else:
            (self.path / "memory.max").write_text(str(limit_bytes))
            (self.path / "memory.swap.max").write_text("0")

    def enter(self) -> None:  # in the child, before exec
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def peak_bytes(self) -> int | None:
        f = self.path / ("memory.max_usage_in_bytes" if self.v == 1 else "memory.peak")
        return int(f.read_text()) if f.exists() else None

    def close(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def run_limited(argv, limit_bytes: int, cwd) -> dict:
    group = MemoryCgroup(limit_bytes)
    try:
        t = time.perf_counter()
        res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, preexec_fn=group.enter, timeout=1800)
        seconds = time.perf_counter() - t
        peak = group.peak_bytes()
    finally:
        group.close()
    return {"returncode": res.returncode, "killed": res.returncode in (-9, 137), "seconds": round(seconds, 1),
            "cgroup_peak_mib": None if peak is None else round(peak / 2**20, 1),
            "stdout_tail": res.stdout[-600:], "stderr_tail": res.stderr[-600:]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit-mib", type=int, default=640, help="the job's hard memory limit")
    ap.add_argument("--data-mib", type=int, help="size of the features (default 4 x the limit)")
    ap.add_argument("--d", type=int, default=200, help="features per row")
    ap.add_argument("--batch-size", type=int, default=2000)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    data_mib = args.data_mib or 4 * args.limit_mib
    n = int(data_mib * 2**20 // (8 * args.d))
    limit = args.limit_mib * 2**20
    try:
        MemoryCgroup(limit).close()
    except OSError as exc:
        print(f"benchmarks/memory.py: cannot set a memory limit here ({exc}); nothing measured. "
              "Run it as root on a machine with a memory cgroup controller.")
        return 0
    with tempfile.TemporaryDirectory(prefix="noisysgd-memory-") as tmp:
        data = Path(tmp) / "big.npz"
        t = time.perf_counter()
        write_npz(data, n, args.d)
        size_mib = data.stat().st_size / 2**20
        print(f"wrote {data.name}: n = {n:,} rows x d = {args.d} float64 = {size_mib:,.0f} MiB "
              f"({time.perf_counter() - t:.0f} s); the job's memory limit: {args.limit_mib} MiB "
              f"({size_mib / args.limit_mib:.1f}x smaller)")
        common = [str(data), "--target", "y", "--noise-multiplier", "4", "--batching", "poisson",
                  "--batch-size", str(args.batch_size), "--epochs", "1", "--alpha", "0.01", "--feature-clip", "1",
                  "--seed", "0", "--quiet", "--json"]
        lazy = run_limited([sys.executable, "-m", "noisysgd", "train", *common, "--workers", "1",
                            "--out", str(Path(tmp) / "lazy")], limit, tmp)
        print(f"  --workers 1 (memory-mapped): exit {lazy['returncode']}, {lazy['seconds']} s, cgroup peak "
              f"{lazy['cgroup_peak_mib']} MiB")
        metrics = None
        if lazy["returncode"] == 0:
            metrics = json.loads((Path(tmp) / "lazy" / "metrics.json").read_text())
            print(f"    trained {metrics['steps']} steps on {metrics['n']:,} rows, train accuracy "
                  f"{metrics['not_private']['train_accuracy']:.3f} (not private)")
        eager = run_limited([sys.executable, "-m", "noisysgd", "train", *common, "--out", str(Path(tmp) / "eager")],
                            limit, tmp)
        print(f"  in memory (no --workers):    exit {eager['returncode']}"
              f"{' (killed by the limit)' if eager['killed'] else ''}, {eager['seconds']} s, cgroup peak "
              f"{eager['cgroup_peak_mib']} MiB")
    result = {
        "limit_mib": args.limit_mib, "data_mib": round(size_mib, 1), "data_over_limit": round(size_mib / args.limit_mib, 2),
        "n": n, "d": args.d, "batch_size": args.batch_size, "batching": "poisson", "epochs": 1,
        "memory_mapped_workers_1": {k: v for k, v in lazy.items() if k not in ("stdout_tail",)},
        "in_memory": {k: v for k, v in eager.items() if k not in ("stdout_tail",)},
        "steps": None if metrics is None else metrics["steps"],
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count(),
                    "platform": platform.platform()},
        "command": "python benchmarks/memory.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0 if lazy["returncode"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
