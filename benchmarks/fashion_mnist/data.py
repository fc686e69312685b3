"""Fashion-MNIST: the IDX files, a fixed validation split, and the two feature sets.

Data: Debian's ``dataset-fashion-mnist`` package (MIT licence; ``apt-get
install -y dataset-fashion-mnist``) puts the four IDX files, gzipped, under
``/usr/share/datasets/fashion-mnist/``; ``--data-dir`` or ``FASHION_MNIST_DIR``
point elsewhere.  Nothing is downloaded.

Split: the 60,000 training images are permuted once with a fixed seed
(``SPLIT_SEED``); the last 10,000 are the validation split (used for tuning
only), the first 50,000 the private training set.  The 10,000 test images
are touched once per reported row.

Features, all data-independent (per-example operations and fixed constants):

* ``pixels``: the 784 pixel values divided by 255.
* ``scatter``: a ScatterNet (kymatio, J = 2, L = 8 angles, order 2, as
  Tramèr & Boneh 2021) on the image divided by 255: 81 channels of 7 × 7 =
  3,969 features; then *per-example* group normalisation (27 groups of 3
  channels, each group of one example centred and scaled by its own mean and
  standard deviation, no learned affine parameters — the statistics of
  torch's GroupNorm, which are per example) and a fixed scale 1/√3969, so
  every example has norm 1 (up to GroupNorm's ε).  Tramèr & Boneh's own
  variants (GroupNorm with learned affine parameters trained under DP, or a
  privately estimated data normalisation) are not used: the first is a
  reparametrisation a linear model does not need, the second would cost
  privacy budget.

The ScatterNet takes a few minutes on one CPU core: the raw scattering
coefficients (float32, ~1.1 GB) are cached under ``--cache-dir``
(``NOISYSGD_CACHE`` or ``~/.cache/noisysgd``)``/fashion_mnist/`` and reused.
Never commit them.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import struct
import time
from pathlib import Path

import numpy as np

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
SPLIT_SEED = 20240607
N_VALIDATION = 10_000
FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}
SCATTER_GROUPS = 27


def data_dir(path=None) -> Path:
    return Path(path or os.environ.get("FASHION_MNIST_DIR") or DEFAULT_DATA_DIR)


def cache_dir(path=None) -> Path:
    root = path or os.environ.get("NOISYSGD_CACHE") or (Path.home() / ".cache" / "noisysgd")
    out = Path(root) / "fashion_mnist"
    out.mkdir(parents=True, exist_ok=True)
    return out


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (optionally gzipped): magic 0x0000 0x08 (uint8) ndim, big-endian dims."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file (magic {raw[:4].hex()})")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {data.size} bytes of data for dims {dims}")
    return data.reshape(dims)


def load_images(data_path=None) -> dict:
    """uint8 images (n, 28, 28) and int labels for train (60,000) and test (10,000)."""
    d = data_dir(data_path)
    missing = [name for name in FILES.values() if not (d / name).exists()]
    if missing:
        raise FileNotFoundError(
            f"Fashion-MNIST not found in {d} (missing {', '.join(missing)}): "
            "apt-get install -y dataset-fashion-mnist, or pass --data-dir / FASHION_MNIST_DIR"
        )
    out = {key: read_idx(d / name) for key, name in FILES.items()}
    for part in ("train", "test"):
        out[f"{part}_labels"] = out[f"{part}_labels"].astype(np.int64)
    assert out["train_images"].shape == (60_000, 28, 28), out["train_images"].shape
    assert out["test_images"].shape == (10_000, 28, 28), out["test_images"].shape
    return out


def split_indices(n_train: int = 60_000) -> tuple[np.ndarray, np.ndarray]:
    """(private training indices, validation indices) into the 60,000 training images."""
    perm = np.random.default_rng(SPLIT_SEED).permutation(n_train)
    return np.sort(perm[:-N_VALIDATION]), np.sort(perm[-N_VALIDATION:])


def _scatter_raw(images: np.ndarray, *, threads: int, chunk: int = 1000, log=print) -> np.ndarray:
    import torch
    from kymatio.scattering2d.frontend.torch_frontend import ScatteringTorch2D  # not kymatio.torch

    torch.set_num_threads(threads)
    S = ScatteringTorch2D(J=2, shape=(28, 28))
    out = np.empty((images.shape[0], 81, 7, 7), dtype=np.float32)
    t0 = time.perf_counter()
    with torch.no_grad():
        for start in range(0, images.shape[0], chunk):
            x = torch.from_numpy(images[start:start + chunk].astype(np.float32) / 255.0)
            out[start:start + chunk] = S(x).numpy()
            if log and (start // chunk) % 10 == 9:
                log(f"  scatternet: {start + chunk}/{images.shape[0]} images, "
                    f"{time.perf_counter() - t0:.0f} s")
    return out


def _fingerprint(images: np.ndarray) -> str:
    return hashlib.sha256(images.tobytes()).hexdigest()[:16]


def scatter_coefficients(images: np.ndarray, name: str, *, cache=None, threads: int = 1,
                         log=print) -> np.ndarray:
    """Raw ScatterNet coefficients (n, 81, 7, 7), float32, cached on disk."""
    path = cache_dir(cache) / f"scatter_J2_{name}_{_fingerprint(images)}.npy"
    if path.exists():
        return np.load(path)
    if log:
        log(f"computing ScatterNet features for {images.shape[0]} {name} images "
            f"(cached in {path})")
    coef = _scatter_raw(images, threads=threads, log=log)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, coef)
    os.replace(tmp, path)
    return coef


def group_normalize(coef: np.ndarray, groups: int = SCATTER_GROUPS, eps: float = 1e-12) -> np.ndarray:
    """Per-example group normalisation of (n, C, h, w) coefficients, flattened and
    scaled by the fixed 1/√(C·h·w): every example ends with norm ≤ 1 (= 1 up to ε).

    Each group of C/groups channels of *one* example is centred and scaled by
    that example's own mean and variance over the group (torch's GroupNorm
    statistics, no affine parameters): no statistic of other examples enters.
    """
    n, C, h, w = coef.shape
    g = coef.reshape(n, groups, -1).astype(np.float64)
    g -= g.mean(axis=2, keepdims=True)
    g /= np.sqrt(g.var(axis=2, keepdims=True) + eps)
    return (g.reshape(n, C * h * w) / np.sqrt(C * h * w)).astype(np.float32)


def features(kind: str, *, data_path=None, cache=None, threads: int = 1, log=print) -> dict:
    """``{"train": (X, y), "val": (X, y), "test": (X, y)}``, X float32 (n, d).

    ``kind``: ``pixels`` (d = 784, values in [0, 1]) or ``scatter`` (d = 3,969,
    per-example group-normalised, norm 1).
    """
    imgs = load_images(data_path)
    tr, va = split_indices(imgs["train_images"].shape[0])
    if kind == "pixels":
        Xall = imgs["train_images"].reshape(60_000, -1).astype(np.float32) / 255.0
        Xtest = imgs["test_images"].reshape(10_000, -1).astype(np.float32) / 255.0
    elif kind == "scatter":
        Xall = group_normalize(scatter_coefficients(imgs["train_images"], "train", cache=cache,
                                                    threads=threads, log=log))
        Xtest = group_normalize(scatter_coefficients(imgs["test_images"], "test", cache=cache,
                                                     threads=threads, log=log))
    else:
        raise ValueError(f"features must be 'pixels' or 'scatter'. Found {kind!r}.")
    yall, ytest = imgs["train_labels"], imgs["test_labels"]
    return {"train": (Xall[tr], yall[tr]), "val": (Xall[va], yall[va]), "test": (Xtest, ytest)}


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="Compute and cache the Fashion-MNIST features.")
    ap.add_argument("--features", choices=["pixels", "scatter"], default="scatter")
    ap.add_argument("--data-dir")
    ap.add_argument("--cache-dir")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    t = time.perf_counter()
    f = features(a.features, data_path=a.data_dir, cache=a.cache_dir, threads=a.threads)
    for part, (X, y) in f.items():
        norms = np.linalg.norm(X, axis=1)
        print(f"{part}: X {X.shape} {X.dtype}, norms min {norms.min():.4f} median "
              f"{np.median(norms):.4f} max {norms.max():.4f}, classes {np.bincount(y).tolist()}")
    print(f"{time.perf_counter() - t:.1f} s")
