"""Training speed: noisysgd's trainer against plain SGD and Opacus DP-SGD, side by side.

The same work for every method, in one run: a linear softmax model (d = 784
features + bias, k = 10 classes) on the same synthetic data (n = 60,000),
batch size b = 256, the same number of epochs, learning rate, clip norm
L = 1 and noise multiplier z = 1 where they apply; float32 and float64.

* ``noisysgd train``: :func:`noisysgd.train.train` (numpy), Poisson batches
  (each example with probability b/n, the step divides by b), closed-form
  per-example clipping of the softmax derivative, Gaussian noise.
* ``noisysgd sgd``: :func:`noisysgd.train.sgd` — the same code path and
  batches, no clipping, no noise.
* ``numpy loop``: plain minibatch SGD written out here in numpy (a fresh
  permutation per epoch cut into batches of b; gather, forward matmul,
  softmax derivative, backward matmul, update) — the floor.
* ``opacus engine``: ``opacus.PrivacyEngine.make_private`` on a
  ``torch.nn.Linear`` with cross-entropy and ``torch.optim.SGD`` — per-sample
  gradients by hooks, flat clipping at L, noise z·L, Poisson sampling by its
  DPDataLoader (sample rate 1/len(loader), ⌈n/b⌉ steps per epoch), the
  loader yielding batches from a ``TensorDataset`` as Opacus does.
* ``opacus direct``: the same ``GradSampleModule`` + ``DPOptimizer``
  (expected batch size b), batches drawn by Opacus' own Poisson sampler
  (``UniformWithReplacementSampler``, rate b/n) but gathered by indexing the
  data tensors instead of the per-example collate — Opacus' fastest fair form.
* ``noisysgd torch``: :func:`noisysgd.train.torch_backend.train_torch` (and
  ``sgd_torch``, its noise-free twin) on the CPU, and on CUDA when present.

Throughput is in examples per second: (steps × b) / seconds, with steps × b
the expected number of examples the batches hold.  ``loop`` is the step loop
alone (noisysgd: the time spent in its core, ``noisy_sgd_core`` /
``noisy_sgd_core_torch``, which draws the batches and the noise as it goes —
measured by wrapping the core; Opacus: the epochs, after wrapping the model);
``end-to-end`` is the whole call, with noisysgd's one-off setup (validation,
feature clipping, label encoding, copies).  Each time is the best of
``--repeats``, after one untimed warm-up call.  The
final training accuracy of each method is printed as a sanity check that all
train the same model.

Threads: ``--threads N`` (default 1) sets OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS and MKL_NUM_THREADS before numpy and torch load, calls
``torch.set_num_threads(N)`` and caps every BLAS/OpenMP pool with
threadpoolctl; the pools found are printed, with the load average before and
after (on a small or shared machine, several pools of spinning threads —
OpenBLAS for numpy, OpenMP for torch — slow each other down by large,
erratic factors: compare at N > 1 only on an otherwise idle machine with at
least N free cores).

Targets (issue): noisysgd within 1.5x of plain SGD (the numpy loop), and at
least 5x faster than Opacus.

Not a test: run it by hand after installing the test extras::

    python benchmarks/train_speed.py [--epochs 3] [--threads 1] [--json benchmarks/results/train_speed.json]

(It replaces ``benchmarks/train_epoch_cost.py``, whose noisy-vs-plain-vs-loop
comparison is the numpy part here.)
"""

from __future__ import annotations

import os
import sys


def _threads_from_argv(argv) -> int:
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if arg.startswith("--threads="):
            return int(arg.split("=", 1)[1])
    return 1


# before numpy / torch are imported: their thread pools read these at load time
_THREADS = _threads_from_argv(sys.argv[1:])
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(_THREADS)

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import noisysgd  # noqa: E402
from noisysgd.train import BinaryLogistic, Softmax, augment, sgd, train  # noqa: E402

N, D, K, B = 60_000, 784, 10, 256
LR, CLIP, Z, FEATURE_CLIP = 2.0, 1.0, 1.0, 2.0


def make_data(seed=0):
    """Features of norm ≈ 1 (below the fixed feature clip R = 2), labels from a
    noisy linear teacher: a learnable problem, so accuracies mean something."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)) / math.sqrt(D)
    teacher = rng.normal(size=(D, K)) * 6.0
    y = np.argmax(X @ teacher + rng.gumbel(size=(N, K)), axis=1)
    return X, y


def per_second(examples, seconds):
    """examples / seconds; NaN when timing noise left no time (loop time = total − setup ≤ 0)."""
    return examples / seconds if seconds > 0 else float("nan")


def _finite(value):
    """NaN/inf as null, for strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def best_of(fn, repeats):
    best, out = math.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def accuracy_numpy(W, X, y):
    scores = augment(X, FEATURE_CLIP) @ W
    predicted = np.argmax(scores, axis=1) if scores.ndim == 2 else (scores >= 0).astype(int)
    return float(np.mean(predicted == y))


# --------------------------------------------------------------------------- methods
# Each returns (seconds for the whole call, seconds of setup, examples, accuracy).


class _CoreTimer:
    """Wraps the step loops of both engines (looked up as module globals at call
    time) and records how long the last call spent in them."""

    def __enter__(self):
        from noisysgd.train import engine

        self.patched = [(engine, "noisy_sgd_core", engine.noisy_sgd_core)]
        try:
            from noisysgd.train import torch_backend

            self.patched.append((torch_backend, "noisy_sgd_core_torch", torch_backend.noisy_sgd_core_torch))
        except ImportError:
            pass
        for module, name, core in self.patched:
            setattr(module, name, self._wrap(core, torch_core=name.endswith("torch")))
        return self

    def _wrap(self, core, *, torch_core):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            out = core(*args, **kwargs)
            if torch_core and out[0].is_cuda:
                import torch

                torch.cuda.synchronize()
            self.seconds = time.perf_counter() - t0
            return out
        return timed

    def __exit__(self, *exc):
        for module, name, core in self.patched:
            setattr(module, name, core)


def noisysgd_method(fn, run, X, y, dtype, repeats, *, loss=None, **kw):
    """(end-to-end seconds, setup seconds = end-to-end − loop, examples, accuracy), each the best of ``repeats``."""
    loss = Softmax(K) if loss is None else loss
    call = lambda: fn(run, loss, X, y, feature_clip=FEATURE_CLIP, random_state=0, dtype=dtype, **kw)  # noqa: E731
    call()  # warm-up, not timed
    totals, loops = [], []
    with _CoreTimer() as timer:
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = call()
            totals.append(time.perf_counter() - t0)
            loops.append(timer.seconds)
    acc = accuracy_numpy(result.coef.astype(np.float64), X, y)
    return min(totals), min(totals) - min(loops), run.steps * run.batch_size, acc


def numpy_loop(X, y, dtype, epochs, repeats, *, b=B, lr=LR):
    """Plain minibatch SGD: softmax (y class indices) or binary logistic (y in {0, 1})."""
    Xbar = augment(X, FEATURE_CLIP, dtype=dtype)  # setup, not timed (as noisysgd's loop time)
    n, d1 = Xbar.shape
    per_epoch = n // b
    classes = int(y.max()) + 1
    binary = classes == 2
    signs = (2.0 * y - 1.0).astype(dtype)

    def loop():
        rng = np.random.default_rng(0)
        W = np.zeros(d1 if binary else (d1, classes), dtype=dtype)
        rows = np.arange(b)
        for _ in range(epochs):
            perm = rng.permutation(n)
            for j in range(per_epoch):
                idx = perm[j * b:(j + 1) * b]
                Xb = Xbar[idx]
                S = Xb @ W
                if binary:  # −y·σ(−y·s)
                    yb = signs[idx]
                    S = -yb / (1.0 + np.exp(yb * S))
                else:  # softmax(s) − e_y
                    S -= S.max(axis=1, keepdims=True)
                    np.exp(S, out=S)
                    S /= S.sum(axis=1, keepdims=True)
                    S[rows, y[idx]] -= 1.0
                W -= (lr / b) * (Xb.T @ S)
        return W

    total, W = best_of(loop, repeats)
    return total, 0.0, epochs * per_epoch * b, accuracy_numpy(W.astype(np.float64), X, y)


def opacus_method(X, y, dtype, epochs, repeats, *, direct):
    import torch
    from opacus import GradSampleModule, PrivacyEngine
    from opacus.optimizers import DPOptimizer
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler

    tdt = torch.float32 if dtype == np.float32 else torch.float64
    Xt = torch.as_tensor(augment(X, FEATURE_CLIP, dtype=dtype)[:, :-1])  # the same clipped features
    yt = torch.as_tensor(y, dtype=torch.long)
    criterion = torch.nn.CrossEntropyLoss()
    steps_per_epoch = math.ceil(N / B)
    timings = []
    for _ in range(repeats):
        torch.manual_seed(0)
        t0 = time.perf_counter()
        model = torch.nn.Linear(D, K).to(tdt)
        torch.nn.init.zeros_(model.weight)
        torch.nn.init.zeros_(model.bias)
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)
        if direct:
            model = GradSampleModule(model, loss_reduction="mean")
            optimizer = DPOptimizer(optimizer, noise_multiplier=Z, max_grad_norm=CLIP, expected_batch_size=B,
                                    loss_reduction="mean")
            sampler = UniformWithReplacementSampler(num_samples=N, sample_rate=B / N, steps=steps_per_epoch,
                                                    generator=torch.Generator().manual_seed(0))
            batches = lambda sampler=sampler: ((Xt[i], yt[i]) for i in map(torch.as_tensor, sampler))  # noqa: E731
        else:
            loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(Xt, yt), batch_size=B)
            engine = PrivacyEngine(accountant="rdp")
            model, optimizer, loader = engine.make_private(
                module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=Z,
                max_grad_norm=CLIP, poisson_sampling=True)
            batches = lambda loader=loader: iter(loader)  # noqa: E731
        t1 = time.perf_counter()
        steps = 0
        for _ in range(epochs):
            for xb, yb in batches():
                optimizer.zero_grad(set_to_none=True)
                criterion(model(xb), yb).backward()
                optimizer.step()
                steps += 1
        t2 = time.perf_counter()
        timings.append((t2 - t0, t1 - t0))
    total, setup = min(timings)
    with torch.no_grad():
        acc = float((model(Xt).argmax(1) == yt).double().mean())
    return total, setup, steps * B, acc


SMALL_MODELS = [  # (name, n, d, b), binary logistic
    ("binary logistic d=100, b=256, n=60000", 60_000, 100, 256),
    ("binary logistic d=20, b=64, n=20000", 20_000, 20, 64),
]


def small_models(a, have_torch):
    """Loop throughput of noisysgd train / sgd / the numpy loop (/ the torch backend) on small models."""
    out = []
    print()
    print(f"{'small model':<40}{'dtype':<9}{'train ex/s':>12}{'sgd ex/s':>12}{'loop ex/s':>12}{'torch ex/s':>12}"
          f"{'train/loop time':>17}")
    for name, n, d, b in SMALL_MODELS:
        rng = np.random.default_rng(1)
        X = rng.normal(size=(n, d)) / math.sqrt(d)
        y = (X @ rng.normal(size=d) * 6.0 + rng.logistic(size=n) > 0).astype(int)
        run = noisysgd.Run.from_epochs(epochs=a.epochs, n=n, batch_size=b, batching="poisson", learning_rate=LR,
                                       noise_multiplier=Z, lipschitz=CLIP)
        for dname in a.dtypes.split(","):
            dtype = np.dtype(dname)
            speed = {}
            for method, fn in [("train", train), ("sgd", sgd)]:
                total, setup, examples, _ = noisysgd_method(fn, run, X, y, dtype, a.repeats, loss=BinaryLogistic())
                speed[method] = per_second(examples, total - setup)
            total, _, examples, _ = numpy_loop(X, y, dtype, a.epochs, a.repeats, b=b)
            speed["numpy loop"] = examples / total
            if have_torch:
                import torch

                from noisysgd.train.torch_backend import train_torch

                tdt = torch.float32 if dtype == np.float32 else torch.float64
                total, setup, examples, _ = noisysgd_method(train_torch, run, X, y, tdt, a.repeats,
                                                            loss=BinaryLogistic(), device="cpu")
                speed["torch cpu"] = per_second(examples, total - setup)
            ratio = speed["numpy loop"] / speed["train"]
            print(f"{name:<40}{dname:<9}{speed['train']:>12,.0f}{speed['sgd']:>12,.0f}{speed['numpy loop']:>12,.0f}"
                  f"{speed.get('torch cpu', float('nan')):>12,.0f}{ratio:>17.2f}", flush=True)
            out.append({"model": name, "dtype": dname, "loop_examples_per_s": speed, "train_vs_numpy_loop": ratio})
    return out


# --------------------------------------------------------------------------- main


def machine(threads):
    info = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "load_average_1min_before": round(os.getloadavg()[0], 2),
        "numpy": np.__version__,
        "noisysgd": getattr(noisysgd, "__version__", "?"),
    }
    for name in ("torch", "opacus"):
        try:
            info[name] = __import__(name).__version__
        except ImportError:
            info[name] = None
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
        info["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        pass
    try:
        from threadpoolctl import threadpool_info

        info["thread_pools"] = sorted({f"{p['internal_api']}={p['num_threads']}" for p in threadpool_info()})
    except ImportError:
        pass
    return info


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=_THREADS,
                   help="threads for numpy's BLAS, OpenMP and torch (default 1)")
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--skip-opacus-engine", action="store_true", help="skip the (slow) PrivacyEngine loader path")
    p.add_argument("--small-models", action="store_true",
                   help="also time binary logistic models (d=100, b=256; d=20, b=64), where the fixed cost of a "
                        "step weighs most: noisysgd train, sgd, the numpy loop and the torch backend")
    p.add_argument("--json", help="write the results to this JSON file")
    a = p.parse_args(argv)
    if a.threads != _THREADS:
        p.error("--threads must be given on the command line (it is read before numpy loads)")

    try:
        import torch
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(a.threads)
        threadpool_limits(a.threads)
        from noisysgd.train.torch_backend import sgd_torch, train_torch
        have_torch = True
    except ImportError:
        have_torch = False
    try:
        import opacus
        have_opacus = have_torch and bool(opacus.__version__)
    except ImportError:
        have_opacus = False

    X, y = make_data()
    run = noisysgd.Run.from_epochs(epochs=a.epochs, n=N, batch_size=B, batching="poisson", learning_rate=LR,
                                   noise_multiplier=Z, lipschitz=CLIP)
    info = machine(a.threads)
    print(f"machine: {info['platform']}, {info['processor']}, {info['cpu_count']} CPUs; Python {info['python']}, "
          f"numpy {info['numpy']}, torch {info.get('torch')}, opacus {info.get('opacus')}")
    print(f"threads: {a.threads} (OMP/OPENBLAS/MKL_NUM_THREADS, torch.set_num_threads, threadpoolctl); "
          f"pools: {', '.join(info.get('thread_pools', []))}; CUDA: {info.get('cuda')}")
    print(f"work: softmax d={D}, k={K}, n={N}, b={B}, {a.epochs} epochs ({run.steps} Poisson steps, "
          f"q={run.sampling_rate:.6f}), lr={LR}, clip L={CLIP}, z={Z}; best of {a.repeats}")

    rows = []
    for dname in a.dtypes.split(","):
        dtype = np.dtype(dname)
        # (name, function, positional arguments, keyword arguments)
        methods = [
            ("noisysgd train", noisysgd_method, (train, run, X, y, dtype, a.repeats), {}),
            ("noisysgd sgd", noisysgd_method, (sgd, run, X, y, dtype, a.repeats), {}),
            ("numpy loop", numpy_loop, (X, y, dtype, a.epochs, a.repeats), {}),
        ]
        if have_torch:
            tdt = torch.float32 if dtype == np.float32 else torch.float64
            methods += [
                ("noisysgd torch cpu", noisysgd_method, (train_torch, run, X, y, tdt, a.repeats), {"device": "cpu"}),
                ("noisysgd torch cpu sgd", noisysgd_method, (sgd_torch, run, X, y, tdt, a.repeats),
                 {"device": "cpu"}),
            ]
            if torch.cuda.is_available():
                methods.append(("noisysgd torch cuda", noisysgd_method, (train_torch, run, X, y, tdt, a.repeats),
                                {"device": "cuda"}))
        if have_opacus:
            methods.append(("opacus direct", opacus_method, (X, y, dtype, a.epochs, a.repeats), {"direct": True}))
            if not a.skip_opacus_engine:
                methods.append(("opacus engine", opacus_method, (X, y, dtype, a.epochs, a.repeats),
                                {"direct": False}))
        for name, fn, args, kwargs in methods:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                total, setup, examples, acc = fn(*args, **kwargs)
            rows.append({"method": name, "dtype": dtype.name, "seconds": total, "setup_seconds": setup,
                         "examples": examples, "loop_examples_per_s": per_second(examples, total - setup),
                         "end_to_end_examples_per_s": examples / total, "train_accuracy": acc})
            r = rows[-1]
            print(f"  [{dtype.name}] {name:<24} loop {r['loop_examples_per_s']:>12,.0f} ex/s   "
                  f"end-to-end {r['end_to_end_examples_per_s']:>12,.0f} ex/s   "
                  f"({total:.3f} s, setup {setup:.3f} s)   accuracy {acc:.3f}", flush=True)

    print()
    print(f"{'method':<26}{'dtype':<9}{'loop ex/s':>14}{'end-to-end ex/s':>17}{'s':>9}{'acc':>7}"
          f"{'train time / this':>19}")
    speed = {(r["method"], r["dtype"]): r["loop_examples_per_s"] for r in rows}
    for r in rows:
        ours = speed[("noisysgd train", r["dtype"])]
        print(f"{r['method']:<26}{r['dtype']:<9}{r['loop_examples_per_s']:>14,.0f}"
              f"{r['end_to_end_examples_per_s']:>17,.0f}{r['seconds']:>9.3f}{r['train_accuracy']:>7.3f}"
              f"{r['loop_examples_per_s'] / ours:>19.2f}")
    ratios = {}
    print()
    for dname in a.dtypes.split(","):
        ours = speed[("noisysgd train", dname)]
        ratio = {
            "train_vs_numpy_loop": speed[("numpy loop", dname)] / ours,
            "train_vs_noisysgd_sgd": speed[("noisysgd sgd", dname)] / ours,
        }
        opacus = [speed[(m, dname)] for m in ("opacus direct", "opacus engine") if (m, dname) in speed]
        if opacus:
            ratio["opacus_fastest_vs_train"] = ours / max(opacus)
        if ("noisysgd torch cpu", dname) in speed:
            ratio["torch_cpu_vs_train"] = ours / speed[("noisysgd torch cpu", dname)]
        if ("noisysgd torch cuda", dname) in speed:
            ratio["train_vs_torch_cuda"] = speed[("noisysgd torch cuda", dname)] / ours
        ratios[dname] = ratio
        met = lambda ok: "met" if ok else "NOT met"  # noqa: E731
        line = (f"[{dname}] noisysgd train takes {ratio['train_vs_numpy_loop']:.2f}x the time of the plain numpy "
                f"loop (target <= 1.5x: {met(ratio['train_vs_numpy_loop'] <= 1.5)}), "
                f"{ratio['train_vs_noisysgd_sgd']:.2f}x that of noisysgd sgd")
        if opacus:
            line += (f"; {ratio['opacus_fastest_vs_train']:.1f}x faster than the fastest Opacus "
                     f"(target >= 5x: {met(ratio['opacus_fastest_vs_train'] >= 5)})")
        if "torch_cpu_vs_train" in ratio:
            line += f"; the torch backend on the CPU takes {ratio['torch_cpu_vs_train']:.2f}x numpy's time"
        print(line)

    small = small_models(a, have_torch) if a.small_models else []
    info["load_average_1min_after"] = round(os.getloadavg()[0], 2)
    print(f"load average (1 min): {info['load_average_1min_before']} before, "
          f"{info['load_average_1min_after']} after")
    if a.json:
        out = {
            "benchmark": "train_speed",
            "machine": info,
            "work": {"model": "linear softmax", "n": N, "d": D, "k": K, "batch_size": B, "epochs": a.epochs,
                     "steps": run.steps, "batching": "poisson", "learning_rate": LR, "clip_norm": CLIP,
                     "noise_multiplier": Z, "feature_clip": FEATURE_CLIP, "repeats": a.repeats},
            "results": rows,
            "ratios": ratios,
            "small_models": small,
            "targets": {"train_vs_numpy_loop_at_most": 1.5, "opacus_fastest_vs_train_at_least": 5.0},
        }
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(_finite(out), indent=2, allow_nan=False) + "\n")
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
