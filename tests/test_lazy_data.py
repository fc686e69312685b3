"""Data larger than memory: NPZ features are memory-mapped, not read, and checked a block at a time."""

from __future__ import annotations

import numpy as np
import pytest

from noisysgd.io import load_table, npz_memmap
from noisysgd.train.losses import all_finite


@pytest.fixture
def arrays():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 6))
    return X, (X[:, 0] > 0).astype(int)


def test_uncompressed_npz_is_memory_mapped(tmp_path, arrays):
    X, y = arrays
    np.savez(tmp_path / "plain.npz", X=X, y=y)
    np.savez(tmp_path / "f32.npz", X=X.astype(np.float32), y=y)
    for name, dtype in (("plain", np.float64), ("f32", np.float32)):
        t = load_table(tmp_path / f"{name}.npz", target="y")
        assert isinstance(t.X, np.memmap) and t.X.dtype == dtype and str(t.X.filename).endswith(f"{name}.npz")
        np.testing.assert_array_equal(np.asarray(t.X), X.astype(dtype))
        np.testing.assert_array_equal(t.y, y)


@pytest.mark.parametrize("how", ["compressed", "fortran", "int"])
def test_other_npz_members_are_read_into_memory(tmp_path, arrays, how):
    X, y = arrays
    path = tmp_path / "a.npz"
    if how == "compressed":
        np.savez_compressed(path, X=X, y=y)
    elif how == "fortran":
        np.savez(path, X=np.asfortranarray(X), y=y)
    else:
        X = np.round(X * 10).astype(np.int64)
        np.savez(path, X=X, y=y)
    assert npz_memmap(path) is None
    t = load_table(path, target="y")
    assert not isinstance(t.X, np.memmap)
    np.testing.assert_array_equal(t.X, X.astype(float))


def test_a_bad_cell_is_named_from_a_memory_mapped_file(tmp_path, arrays):
    X, y = arrays
    X = X.copy()
    X[257, 4] = np.inf
    np.savez(tmp_path / "bad.npz", X=X, y=y)
    with pytest.raises(ValueError, match=r"Found inf at row 257, column 4"):
        load_table(tmp_path / "bad.npz", target="y")


def test_all_finite_checks_every_block(monkeypatch):
    import noisysgd.train.losses as losses

    monkeypatch.setattr(losses, "_CHECK_ROWS", 7)
    X = np.zeros((50, 3))
    assert all_finite(X)
    for i in (0, 6, 7, 49):
        Z = X.copy()
        Z[i, 2] = np.nan
        assert not all_finite(Z), i


def test_ranks_keep_their_shard_memory_mapped(tmp_path, arrays):
    """`noisysgd train --workers K` / torchrun: a rank holding one shard (or its block of one
    file) keeps X memory-mapped, so the engine reads a batch of rows at a time."""
    from noisysgd.cli.train_workers import _read_rank_rows

    X, y = arrays
    np.savez(tmp_path / "all.npz", X=X, y=y)
    shards = tmp_path / "shards"
    shards.mkdir()
    np.savez(shards / "p0.npz", X=X[:100], y=y[:100])
    np.savez(shards / "p1.npz", X=X[100:], y=y[100:])
    for path in (tmp_path / "all.npz", shards):
        for rank in (0, 1):
            Xr, yr, offset, n, _, _ = _read_rank_rows(str(path), "y", rank, 2)
            assert isinstance(Xr, np.memmap) and n == 300
            np.testing.assert_array_equal(np.asarray(Xr), X[offset:offset + Xr.shape[0]])
            np.testing.assert_array_equal(yr, y[offset:offset + Xr.shape[0]])


def test_memory_mapped_npz_trains_the_same_model(tmp_path, arrays):
    """The distributed engine on one process, X memory-mapped from an NPZ, equals train() on the array."""
    pytest.importorskip("torch")
    from noisysgd import Run
    from noisysgd.train import BinaryLogistic, train
    from noisysgd.train.distributed import train_distributed

    X, y = arrays
    np.savez(tmp_path / "a.npz", X=X, y=y)
    Xm = load_table(tmp_path / "a.npz", target="y").X
    run = Run(n=300, batch_size=30, batching="shuffle", steps=40, learning_rate=0.5, noise_multiplier=2.0,
              lipschitz=np.sqrt(2.0), smoothness=0.51, strong_convexity=0.01, convex=True)
    a = train(run, BinaryLogistic(), X, y, feature_clip=1.0, random_state=3).coef
    b = train_distributed(run, BinaryLogistic(), Xm, y, feature_clip=1.0, random_state=3).coef
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-12)


# ------------------------------------------------------------------ Parquet, a row group at a time


def _parquet(path, X, y, *, row_group_size=64, names=None):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    names = names or [f"f{j}" for j in range(X.shape[1])]
    cols = {nm: X[:, j] for j, nm in enumerate(names)}
    cols["label"] = y
    pq.write_table(pa.table(cols), path, row_group_size=row_group_size)
    return names


@pytest.mark.parametrize("spill", [False, True])
def test_parquet_is_read_a_row_group_at_a_time(tmp_path, arrays, monkeypatch, spill):
    import noisysgd.io as nio

    X, y = arrays
    labels = np.where(y == 1, "yes", "no")
    names = _parquet(tmp_path / "a.parquet", X, labels)
    if spill:  # features larger than the threshold go to an anonymous memory-mapped file
        monkeypatch.setattr(nio, "_PARQUET_SPILL_BYTES", 0)
    t = load_table(tmp_path / "a.parquet", target="label")
    assert isinstance(t.X, np.memmap) == spill and t.feature_names == names
    np.testing.assert_array_equal(np.asarray(t.X), X)
    assert list(t.y) == list(labels)
    _parquet(tmp_path / "b.parquet", X, y)  # numeric labels: every column is a feature when no target is named
    features_only = load_table(tmp_path / "b.parquet", target=None)
    assert features_only.y is None and features_only.feature_names == names + ["label"]
    np.testing.assert_array_equal(np.asarray(features_only.X)[:, -1], y)


def test_parquet_bad_cells_and_columns_are_named(tmp_path, arrays):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    X, y = arrays
    X = X.copy()
    X[200, 2] = np.nan
    _parquet(tmp_path / "nan.parquet", X, y)
    with pytest.raises(ValueError, match=r"Found nan \(or a missing value\) in row 200, column 'f2'"):
        load_table(tmp_path / "nan.parquet", target="label")
    pq.write_table(pa.table({"a": [1.0, 2.0], "b": ["x", "y"], "label": [0, 1]}), tmp_path / "text.parquet")
    with pytest.raises(ValueError, match="Found column 'b' of type string"):
        load_table(tmp_path / "text.parquet", target="label")
    with pytest.raises(ValueError, match="target must be a column of text.parquet"):
        load_table(tmp_path / "text.parquet", target="nope")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(ValueError, match="must be a readable Parquet file"):
        load_table(tmp_path / "junk.parquet", target="label")


@pytest.mark.slow
def test_cli_trains_the_same_model_from_parquet_and_csv(tmp_path, arrays):
    import csv
    import json

    from noisysgd.cli import main

    X, y = arrays
    names = _parquet(tmp_path / "d.parquet", X, y)
    with open(tmp_path / "d.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(names + ["label"])
        w.writerows([[repr(float(v)) for v in x] + [int(t)] for x, t in zip(X, y)])
    flags = ["--target", "label", "--epsilon", "2", "--seed", "4", "--quiet"]
    assert main(["train", str(tmp_path / "d.parquet"), *flags, "--out", str(tmp_path / "p")]) == 0
    assert main(["train", str(tmp_path / "d.csv"), *flags, "--out", str(tmp_path / "c")]) == 0
    a = json.loads((tmp_path / "p" / "model.json").read_text())["coef"]
    b = json.loads((tmp_path / "c" / "model.json").read_text())["coef"]
    np.testing.assert_array_equal(a, b)


def test_ranks_read_their_parquet_shards(tmp_path, arrays):
    from noisysgd.cli.train_workers import _read_rank_rows

    X, y = arrays
    shards = tmp_path / "shards"
    shards.mkdir()
    _parquet(shards / "p0.parquet", X[:120], y[:120])
    _parquet(shards / "p1.parquet", X[120:], y[120:])
    for rank in (0, 1):
        Xr, yr, offset, n, names, _ = _read_rank_rows(str(shards), "label", rank, 2)
        assert n == 300 and offset == (0 if rank == 0 else 120) and names[0] == "f0"
        np.testing.assert_array_equal(np.asarray(Xr), X[offset:offset + Xr.shape[0]])
        np.testing.assert_array_equal(yr, y[offset:offset + Xr.shape[0]])


@pytest.mark.slow
def test_single_process_cli_hints_only_where_a_flag_copies_big_mapped_data(tmp_path, arrays, monkeypatch, capsys):
    """The engine reads a memory-mapped X a batch at a time (noisysgd.train.rows): no hint for a plain
    run; --holdout copies the training rows, and the one line says so."""
    import noisysgd.cli.train as tc
    from noisysgd.cli import main

    X, y = arrays
    np.savez(tmp_path / "a.npz", X=X, y=y)
    monkeypatch.setattr(tc, "_LAZY_HINT_BYTES", 1)
    common = ["train", str(tmp_path / "a.npz"), "--target", "y", "--classes", "0,1", "--epsilon", "2", "--seed", "0",
              "--quiet", "--center", "none"]
    assert main([*common, "--out", str(tmp_path / "o")]) == 0
    assert "memory-mapped" not in capsys.readouterr().err
    assert main([*common, "--holdout", "0.2", "--out", str(tmp_path / "h")]) == 0
    err = capsys.readouterr().err
    assert "but --holdout copies its rows into memory" in err and len(err.strip().splitlines()) == 1


def test_memory_mapping_refused_by_an_address_space_limit_is_a_clear_error(tmp_path, monkeypatch, capsys):
    """Under an address-space limit (prlimit --as) the map of X fails with ENOMEM: the reader
    says so, instead of silently reading all of X into memory and dying (issue 28).  The
    limit is real (a subprocess under RLIMIT_AS); the command line's one line is checked with
    the same error raised in process."""
    import errno
    import subprocess
    import sys

    pytest.importorskip("resource")
    if not sys.platform.startswith("linux"):
        pytest.skip("RLIMIT_AS is a Linux address-space limit")
    X = np.zeros((200_000, 64))  # 97.7 MiB, stored uncompressed: memory-mappable
    path = tmp_path / "big.npz"
    np.savez(path, X=X, y=np.zeros(X.shape[0]))
    code = (
        "import resource, sys\n"
        "from noisysgd.io import load_table\n"
        "size = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        "resource.setrlimit(resource.RLIMIT_AS, (size + (48 << 20), resource.RLIM_INFINITY))\n"
        "try:\n"
        f"    load_table({str(path)!r}, target='y')\n"
        "except OSError as exc:\n"
        "    print(exc); sys.exit(7)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 7, proc.stderr
    assert "X of big.npz could not be memory-mapped" in proc.stdout and "ulimit -v" in proc.stdout

    import noisysgd.io as nio
    from noisysgd.cli import main

    def refused(*args, **kwargs):
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    monkeypatch.setattr(nio.np, "memmap", refused)
    assert main(["train", str(path), "--target", "y", "--out", str(tmp_path / "o"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "noisysgd train: error: data: X of big.npz could not be memory-mapped" in err
    assert not (tmp_path / "o").exists()
