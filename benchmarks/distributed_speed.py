"""Examples/s of data-parallel Noisy-SGD on 1 vs K gloo processes, side by side in one run.

Same run for every line (cyclic batches of b, logistic loss, d features),
the same seed: the single-process numpy engine (noisysgd.train.train), then
train_distributed on 1, 2, … K local processes (launch_local: gloo on
127.0.0.1).  Each process times only its own training call (not the spawn,
the imports, nor the data generation); the job's time is the slowest rank's.
Not a test: run it by hand::

    python benchmarks/distributed_speed.py [--n 200000] [--d 100] [--batch 2000] [--steps 300] [--workers 2]

The printed ratio K-process / 1-process examples/s is what docs/scaling.md
quotes.

``--rss N1,N2,…`` measures memory instead: for each n it writes the data set
as one ``.npy`` file (in blocks), and a fresh process trains on it memory-mapped
(``np.load(mmap_mode="r")``: train_distributed then reads the rows of each
batch from the file and never forms X̄ whole), sampling its anonymous resident
memory (``RssAnon``: what cannot be paged out) every 5 ms; file pages
(``RssFile``) are the page cache, which the kernel reclaims under pressure.  On a machine with fewer free cores than processes it measures
contention, not scaling: say how many cores were free.

``--cli`` times whole ``noisysgd train`` commands instead (spawn, imports, reading, calibration,
training, outputs: the wall time a user waits), ``--workers 1`` against ``--workers 2`` side by
side, ``--pairs`` times each (alternating), on two data sets it writes:

* ``poisson_default``: a CSV of ``--cli-n`` × ``--cli-d`` with the default configuration
  (``--epsilon 1``: Poisson batches, many small steps), where a collective per step costs more
  than the step's arithmetic and ``--engine auto`` trains in one process;
* ``compute_bound``: an uncompressed NPZ of ``--big-n`` × ``--big-d`` (memory-mapped by the
  ranks) with ``--noise-multiplier 2 --batching poisson --batch-size 8000 --center none --epochs
  --big-epochs`` (30: the run docs/scaling.md measured at 1.89× on two workers), where ``auto``
  keeps the data-parallel engine.

Each line records the engine metrics.json says ran; the results go to
``benchmarks/results/distributed_speed.json`` (``--out``)::

    python benchmarks/distributed_speed.py --cli [--cli-n 20000] [--big-n 100000] [--pairs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np


BLOCK = 10_000  # rows generated per seed: a rank makes only the blocks of its own rows


def _rows(lo, hi, d):
    """Rows lo..hi−1 of the synthetic data set (the same whoever generates them)."""
    w = np.random.default_rng(10**6).normal(size=d)
    parts = []
    for blk in range(lo // BLOCK, (hi - 1) // BLOCK + 1):
        Xb = np.random.default_rng(blk).normal(size=(BLOCK, d)) / np.sqrt(d)
        a, b = max(lo, blk * BLOCK) - blk * BLOCK, min(hi, (blk + 1) * BLOCK) - blk * BLOCK
        parts.append(Xb[a:b])
    X = np.concatenate(parts)
    return X, (X @ w > 0).astype(int)


def _problem(n, d, batch, steps, lo=0, hi=None):
    import noisysgd
    from noisysgd.train import BinaryLogistic

    X, y = _rows(lo, n if hi is None else hi, d)
    c = BinaryLogistic().constants(feature_clip=1.0, clip_norm=1.0)
    run = noisysgd.Run(n=n, batch_size=batch, batching="cyclic", steps=steps, learning_rate=1.0,
                       noise_multiplier=1.0, lipschitz=c.lipschitz, strong_convexity=0.01,
                       smoothness=c.smoothness + 0.01)
    return run, BinaryLogistic(), X, y


def _rank(rank, world, outdir, n, d, batch, steps):
    from noisysgd.train.distributed import train_distributed

    lo, hi = rank * n // world, (rank + 1) * n // world
    run, loss, X, y = _problem(n, d, batch, steps, lo, hi)  # this rank's rows only
    t = time.perf_counter()
    res = train_distributed(run, loss, X, y, rows=lo, feature_clip=1.0, random_state=0)
    seconds = time.perf_counter() - t
    import torch
    import torch.distributed as dist

    g = torch.zeros(d + 1, dtype=torch.float64)  # the communication alone: one all_reduce per step
    dist.barrier()
    t = time.perf_counter()
    for _ in range(steps):
        dist.all_reduce(g)
    comm = time.perf_counter() - t
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump({"seconds": seconds, "comm": comm, "coef": res.coef.tolist(), "rss_mib": _peak_rss_mib()}, f)


def _peak_rss_mib():
    import resource
    import sys

    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib / 1024 if sys.platform != "darwin" else kib / 2**20


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _rss_child(path, n, d, batch, steps):
    """Train on the memory-mapped file, print peak RssAnon / VmHWM (MiB) as JSON."""
    import threading

    from noisysgd.train.distributed import train_distributed

    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _status_kib("RssAnon"))
            time.sleep(0.005)

    import torch  # noqa: F401 - the baseline, before the data

    base = _status_kib("RssAnon")
    X = np.load(path, mmap_mode="r")
    y = (np.asarray(X[:, 0]) > 0).astype(int)  # n labels in memory (O(n), like the norms)
    run, loss, _, _ = _problem(BLOCK, d, batch, steps)
    run = run.replace(n=n, batching="poisson")
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    t = time.perf_counter()
    train_distributed(run, loss, X, y, feature_clip=1.0, random_state=0)
    seconds = time.perf_counter() - t
    done.set()
    th.join()
    print(json.dumps({"n": n, "file_mib": os.path.getsize(path) / 2**20, "anon_base_mib": base / 1024,
                      "anon_peak_mib": peak[0] / 1024, "vmhwm_mib": _status_kib("VmHWM") / 1024,
                      "seconds": seconds}))


def _rss(ns, d, batch, steps):
    import subprocess
    import sys

    print(f"d = {d}, b = {batch}, {steps} poisson steps, X memory-mapped from one .npy file per n")
    print(f"{'n':>10}{'file MiB':>10}{'RssAnon before MiB':>20}{'peak RssAnon MiB':>18}{'peak - before':>15}"
          f"{'VmHWM MiB':>11}{'seconds':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in ns:
            path = os.path.join(tmp, f"X{n}.npy")
            out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, d))
            for start in range(0, n, BLOCK):
                out[start:start + BLOCK] = _rows(start, min(n, start + BLOCK), d)[0]
            out.flush()
            del out
            res = subprocess.run([sys.executable, __file__, "--rss-child", path, str(n), str(d), str(batch),
                                  str(steps)], capture_output=True, text=True, check=True)
            r = json.loads(res.stdout.strip().splitlines()[-1])
            print(f"{n:>10}{r['file_mib']:10.0f}{r['anon_base_mib']:20.0f}{r['anon_peak_mib']:18.0f}"
                  f"{r['anon_peak_mib'] - r['anon_base_mib']:15.0f}{r['vmhwm_mib']:11.0f}{r['seconds']:9.2f}")
            os.remove(path)
    return 0


def _cli_run(data, flags, workers, out):
    """One ``noisysgd train`` command: (wall seconds, its metrics.json, the engine line on stderr)."""
    import shutil
    import subprocess
    import sys

    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "noisysgd", "train", data, "--target", "y", "--classes", "0,1", "--seed", "0",
           "--quiet", *flags, "--workers", str(workers), "--out", out]
    t = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr[-2000:]}")
    with open(os.path.join(out, "metrics.json")) as f:
        metrics = json.load(f)
    line = next((ln for ln in res.stderr.splitlines() if "engine:" in ln), None)
    return seconds, metrics, line


def _cli(args) -> int:
    import platform

    cases = {}
    with tempfile.TemporaryDirectory() as tmp:
        wanted = args.cases.split(",")
        csv = os.path.join(tmp, "default.csv")
        if "poisson_default" in wanted:
            X, y = _rows(0, args.cli_n, args.cli_d)
            np.savetxt(csv, np.column_stack([X, y]), delimiter=",", fmt="%.8g", comments="",
                       header=",".join([f"x{i}" for i in range(args.cli_d)] + ["y"]))
            del X, y
        npz = os.path.join(tmp, "big.npz")
        if "compute_bound" in wanted:
            Xb, yb = _rows(0, args.big_n, args.big_d)
            np.savez(npz, X=Xb, y=yb)  # uncompressed: every rank memory-maps it
            del Xb, yb
        plan = {
            "poisson_default": (csv, [], f"{args.cli_n} x {args.cli_d} CSV, default configuration (epsilon 1)"),
            "compute_bound": (npz, ["--noise-multiplier", "2", "--batching", "poisson", "--batch-size", "8000",
                                    "--center", "none", "--epochs", str(args.big_epochs)],
                              f"{args.big_n} x {args.big_d} NPZ, poisson b=8000, {args.big_epochs} epochs"),
        }
        print(f"{os.cpu_count()} CPU(s) visible; load average before: {os.getloadavg()[0]:.2f}")
        for name, (data, flags, what) in plan.items():
            if name not in wanted:
                continue
            runs = {1: [], 2: []}
            for pair in range(args.pairs):
                for k in ((1, 2) if pair % 2 == 0 else (2, 1)):
                    seconds, metrics, line = _cli_run(data, flags, k, os.path.join(tmp, f"out{k}"))
                    runs[k].append({"seconds": round(seconds, 2), "train_seconds": round(metrics["wall_seconds"], 2),
                                    "steps": metrics["steps"], "engine": metrics.get("engine"),
                                    "backend": metrics.get("backend"), "stderr_engine_line": line})
            med = {k: float(np.median([r["seconds"] for r in v])) for k, v in runs.items()}
            cases[name] = {"data": what, "flags": flags, "workers_1": runs[1], "workers_2": runs[2],
                           "median_seconds": {"workers_1": med[1], "workers_2": med[2]},
                           "speedup_workers_2": round(med[1] / med[2], 2)}
            engine = runs[2][-1]["engine"] or {}
            print(f"{name:<16} {what}: --workers 1 {med[1]:6.2f} s, --workers 2 {med[2]:6.2f} s "
                  f"(engine {engine.get('chosen', '?')}), speed-up {med[1] / med[2]:.2f}x, "
                  f"{runs[2][-1]['steps']} steps")
    result = {"cases": cases, "pairs": args.pairs, "load_average_after": round(os.getloadavg()[0], 2),
              "machine": {"python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count(),
                          "platform": platform.platform()},
              "command": "python benchmarks/distributed_speed.py --cli " + " ".join(
                  f"--{k.replace('_', '-')} {v}" for k, v in (("cli_n", args.cli_n), ("cli_d", args.cli_d),
                                                               ("big_n", args.big_n), ("big_d", args.big_d),
                                                               ("big_epochs", args.big_epochs),
                                                               ("pairs", args.pairs), ("cases", args.cases)))}
    with open(args.out, "w") as f:
        f.write(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


def main(argv=None) -> int:
    import sys

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--rss-child"]:
        path, n, d, batch, steps = argv[1], *map(int, argv[2:6])
        _rss_child(path, n, d, batch, steps)
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=200_000)
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--batch", type=int, default=2000)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rss", metavar="N1,N2,...", help="memory of memory-mapped training for these n instead")
    p.add_argument("--cli", action="store_true", help="time whole noisysgd train commands instead (docstring)")
    p.add_argument("--cli-n", type=int, default=20_000)
    p.add_argument("--cli-d", type=int, default=50)
    p.add_argument("--big-n", type=int, default=100_000)
    p.add_argument("--big-d", type=int, default=1000)
    p.add_argument("--big-epochs", type=int, default=30)
    p.add_argument("--pairs", type=int, default=1)
    p.add_argument("--cases", default="poisson_default,compute_bound")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                 "distributed_speed.json"))
    args = p.parse_args(argv)
    if args.cli:
        return _cli(args)
    if args.rss:
        return _rss([int(v) for v in args.rss.split(",")], args.d, args.batch, args.steps)
    from noisysgd.train import train
    from noisysgd.train.distributed import launch_local

    run, loss, X, y = _problem(args.n, args.d, args.batch, args.steps)
    examples = args.steps * args.batch
    t = time.perf_counter()
    ref = train(run, loss, X, y, feature_clip=1.0, random_state=0).coef
    base = time.perf_counter() - t
    print(f"n = {args.n}, d = {args.d}, b = {args.batch}, {args.steps} steps ({examples} examples), "
          f"{os.cpu_count()} CPU(s) visible, OMP_NUM_THREADS=1 in the workers")
    print(f"data: {args.n * (args.d + 1) * 8 / 2**20:.0f} MiB of float64 features; peak RSS per rank below "
          "includes torch (~300 MiB)")
    print(f"{'engine':<38}{'seconds':>9}{'examples/s':>12}{'vs 1 proc':>11}{'all_reduce ms/step':>20}"
          f"{'max |coef - train|':>20}{'peak RSS/rank MiB':>19}")
    print(f"{'train (numpy, 1 process)':<38}{base:9.2f}{examples / base:12.0f}{'':>11}{'':>20}{0.0:20.1e}")
    one = None
    for k in range(1, args.workers + 1):
        with tempfile.TemporaryDirectory() as tmp:
            codes = launch_local(_rank, k, (tmp, args.n, args.d, args.batch, args.steps), timeout=600)
            if codes != [0] * k:
                print(f"{k} process(es): failed, exit codes {codes}")
                return 1
            ranks = [json.load(open(os.path.join(tmp, f"rank{r}.json"))) for r in range(k)]
        seconds = max(r["seconds"] for r in ranks)
        err = float(np.max(np.abs(np.asarray(ranks[0]["coef"]) - ref)))
        one = seconds if k == 1 else one
        comm = max(r["comm"] for r in ranks) / args.steps * 1e3
        print(f"{f'train_distributed, {k} gloo process(es)':<38}{seconds:9.2f}{examples / seconds:12.0f}"
              f"{one / seconds:11.2f}{comm:20.3f}{err:20.1e}{max(r['rss_mib'] for r in ranks):19.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
