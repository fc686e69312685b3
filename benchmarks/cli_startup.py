"""How fast the CLI answers: `noisysgd --help`, one `noisysgd epsilon`, and `noisysgd predict`
of a 4,000-row CSV file, each timed as a fresh process beside `python -c pass` (the
interpreter's own start) and `python -c "import numpy"` (the floor for any numerical
command), interleaved in one run; then `noisysgd train` of a 1,000-row CSV file end to end.

Not a test: run it by hand after installing the package::

    python benchmarks/cli_startup.py [--repeat 15] [--train-repeat 5] [--json]

Targets: help and one epsilon "well under half a second" (issue 14); predict at most 1.5 times
`python -c "import numpy"`, and train of 1,000 rows at most 1.5 s (issue 42 §3).  Reported as
medians and as ratios to `python -c pass` and to `python -c "import numpy"`; results in
benchmarks/results/cli_startup.json with --json.

predict is timed twice: as the installed console script (the `noisysgd` beside this
interpreter, what a user types: its 6-line script imports `noisysgd.cli` and calls `main`), and
as `python -m noisysgd predict`, which also runs runpy and importlib.util (~3 ms).  The predict
target is judged on the console script's row; where no console script is installed (a source
tree run without `pip install`), that row runs `python -m noisysgd` too, and the output and the
JSON ("predict_command") say so.  The other commands run as `python -m noisysgd`.

The files are generated into a temporary directory (20 numeric features and a binary label,
fixed seed); the model that predict reads is trained once, untimed.  The commands run as an
installed package does, with their modules' bytecode compiled once (pip compiles it at
install) into a temporary cache (PYTHONPYCACHEPREFIX), whatever PYTHONDONTWRITEBYTECODE says;
--no-bytecode-cache runs them in the caller's environment as it is.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CLI = [sys.executable, "-m", "noisysgd"]
#: the console script pip installs beside the interpreter (``noisysgd.exe`` in Scripts\ on Windows)
SCRIPT = shutil.which("noisysgd", path=os.path.dirname(sys.executable))
NUMPY = "python -c 'import numpy'"
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    NUMPY: [sys.executable, "-c", "import numpy"],
    "noisysgd --help": [*CLI, "--help"],
    "noisysgd epsilon --help": [*CLI, "epsilon", "--help"],
    # a cyclic strongly convex run: every analysis but the PLD (no sampled batches)
    "noisysgd epsilon (cyclic, every analysis)": [
        *CLI, "epsilon", "--n", "60000", "--batch-size", "256", "--epochs", "10", "--lr", "0.05",
        "--noise-multiplier", "4", "--lipschitz", "1", "--smoothness", "1.25", "--strong-convexity",
        "0.01", "--batching", "cyclic", "--delta", "1e-5"],
    "noisysgd epsilon (poisson, composition)": [
        *CLI, "epsilon", "--n", "60000", "--batch-size", "256", "--epochs", "10",
        "--noise-multiplier", "1", "--lipschitz", "1", "--batching", "poisson", "--delta", "1e-5",
        "--analysis", "composition"],
}
PREDICT = "noisysgd predict (4,000-row CSV, 20 features)"  # the console script: the target's row
PREDICT_M = "python -m noisysgd predict (4,000-row CSV, 20 features)"
TRAIN = "noisysgd train (1,000-row CSV, 20 features, end to end)"
#: the targets of issue 42 §3
PREDICT_TARGET_RATIO_TO_NUMPY = 1.5
TRAIN_TARGET_S = 1.5


def _write_data(path: Path, n: int, seed: int, d: int = 20) -> None:
    """``n`` rows of ``d`` standard normal features and a binary label of a noisy linear rule."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X @ np.linspace(1.0, -1.0, d) + rng.normal(size=n) > 0).astype(int)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow([f"x{j}" for j in range(d)] + ["label"])
        w.writerows([*map(repr, row.tolist()), label] for row, label in zip(X, y))


def _time(cmd: list[str], env) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def _row(t: list[float], base: float, numpy_base: float) -> dict:
    median = statistics.median(t)
    return {"median_s": median, "min_s": min(t), "ratio_to_python": median / base,
            "ratio_to_numpy": median / numpy_base}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--train-repeat", type=int, default=5, help="runs of noisysgd train (default 5)")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="run the commands in this environment as it is (no temporary bytecode cache)")
    parser.add_argument("--json", action="store_true", help="also write benchmarks/results/cli_startup.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="noisysgd-cli-startup-") as tmp:
        work = Path(tmp)
        env = None
        if not args.no_bytecode_cache:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        _write_data(work / "train.csv", 1000, seed=0)
        _write_data(work / "predict.csv", 4000, seed=1)
        subprocess.run([*CLI, "train", str(work / "train.csv"), "--target", "label", "--out", str(work / "model"),
                        "--quiet"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        predict_args = ["predict", str(work / "model"), str(work / "predict.csv"),
                        "--out", str(work / "predictions.csv")]
        commands = {**COMMANDS, PREDICT: [*([SCRIPT] if SCRIPT else CLI), *predict_args],
                    PREDICT_M: [*CLI, *predict_args]}
        for cmd in commands.values():  # warm the file cache (and the bytecode cache)
            _time(cmd, env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeat):  # interleaved, so that load on the machine hits every command alike
            for name, cmd in commands.items():
                times[name].append(_time(cmd, env))
        train_times = [_time([*CLI, "train", str(work / "train.csv"), "--target", "label",
                              "--out", str(work / f"trained-{i}")], env) for i in range(args.train_repeat)]
    base = statistics.median(times["python -c pass"])
    numpy_base = statistics.median(times[NUMPY])
    rows = {name: _row(t, base, numpy_base) for name, t in times.items()}
    rows[TRAIN] = {**_row(train_times, base, numpy_base), "repeat": args.train_repeat}
    width = max(map(len, rows))
    print(f"{'command':<{width}}  median (s)  min (s)  x python -c pass  x import numpy")
    for name, r in rows.items():
        print(f"{name:<{width}}  {r['median_s']:10.3f}  {r['min_s']:7.3f}  {r['ratio_to_python']:16.1f}"
              f"  {r['ratio_to_numpy']:14.2f}")
    predict_ok = rows[PREDICT]["ratio_to_numpy"] <= PREDICT_TARGET_RATIO_TO_NUMPY
    train_ok = rows[TRAIN]["median_s"] <= TRAIN_TARGET_S
    how = (f"the console script {SCRIPT}" if SCRIPT
           else "python -m noisysgd: no console script beside this interpreter (pip install the package)")
    print(f"predict: {rows[PREDICT]['ratio_to_numpy']:.2f} x import numpy as {how} (target <= "
          f"{PREDICT_TARGET_RATIO_TO_NUMPY}: {'met' if predict_ok else 'NOT met'}), "
          f"{rows[PREDICT_M]['ratio_to_numpy']:.2f} x as python -m noisysgd; train: "
          f"{rows[TRAIN]['median_s']:.2f} s (target <= {TRAIN_TARGET_S} s: {'met' if train_ok else 'NOT met'})")
    if args.json:
        out = Path(__file__).parent / "results" / "cli_startup.json"
        out.write_text(json.dumps({
            "repeat": args.repeat, "train_repeat": args.train_repeat, "python": platform.python_version(),
            "machine": platform.machine(), "cpus": os.cpu_count(),
            "bytecode": ("the caller's environment" if args.no_bytecode_cache
                         else "compiled once into a temporary PYTHONPYCACHEPREFIX (as installed)"),
            "targets": {"predict_ratio_to_numpy": PREDICT_TARGET_RATIO_TO_NUMPY, "train_s": TRAIN_TARGET_S},
            "predict_command": ("the console script (what a user types); the target is judged on its row" if SCRIPT
                                else "python -m noisysgd: no console script was installed beside the interpreter"),
            "met": {"predict": predict_ok, "train": train_ok},
            "results": rows}, indent=2) + "\n")
        print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
