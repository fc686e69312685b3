"""Checkpoints: a training ledger that never loses or double-counts privacy.

A checkpoint is one file holding everything needed to continue *the same*
run exactly where it stopped:

* the description of the run — the :class:`~noisysgd.Run` (n, b, batching,
  steps, step sizes, z, L, λ, D, …) and everything else the trainer was
  given that changes the algorithm: the loss, the feature clip, the target
  bound, the dtype, the start, the analyses the certificate rests on,
  ``secure_mode``, and (from :func:`~noisysgd.private_fit.fit_private`) the target
  (ε, δ) and the calibrated noise multiplier;
* a keyed fingerprint of the training data (below);
* the steps taken, and the ledger of the sessions that took them;
* the random state: the batch and noise generators' states (numpy's
  ``bit_generator.state``) and what the batch stream drew ahead — cyclic's
  fixed permutation, the current epoch's permutation under shuffle, the
  Poisson batch sizes not yet used — so that a resumed run is bit-identical
  to an uninterrupted one with the same seed;
* the current iterate W.

Resuming is refused, with an error naming what differs, when the
description or the data differ; it never re-calibrates the noise and never
resets the step count, so the certificate — computed once, for the one run
described — stays the certificate of the model the resumed run returns.  A
finished run's checkpoint cannot be continued into more steps: a longer run
is another run and needs its own certificate.

Writes are atomic: the file is written to a temporary file in the same
directory (mode 0600), flushed, ``fsync``-ed and renamed over the previous
checkpoint, and the directory is ``fsync``-ed; a SHA-256 of the contents at
the end of the file detects any other damage.  A process killed at any
moment leaves either the previous complete checkpoint or the new complete
one (temporary files it leaves behind are removed when the run resumes).
One process per checkpoint file.

**A checkpoint is as secret as the training data.**  The hidden-state
certificate covers the final model only and assumes the iterates are never
released; a checkpoint holds an iterate, the generator states (which fix all
the noise still to come) and the data fingerprint.  Never publish or share
it, keep it on storage you trust (encrypted), and delete it once training
has finished — :func:`~noisysgd.train.train` deletes it itself unless
``keep_checkpoint=True``; deletion unlinks the file and does not scrub the
disk.

The data fingerprint is BLAKE2b-256 keyed with 32 random bytes stored in the
checkpoint, over the shapes, dtypes and bytes of the validated features and
encoded labels.  It is not differentially private — whoever holds the file
(key included) can test a guess of the whole data set, e.g. every candidate
for the one example they do not know — which is acceptable only because the
file is secret anyway (its iterate and generator states reveal at least as
much).  The key makes fingerprints of the same data in two checkpoints
unlinkable and rules out precomputed tables; it is not a protection against
whoever holds the file.  Nothing released (model, certificate, metrics)
contains the fingerprint.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .leaks import TRAINER_FRAMES

__all__ = [
    "Checkpointing",
    "FORMAT",
    "SECRET_NOTICE",
    "CheckpointError",
    "Checkpoint",
    "read_checkpoint",
    "write_checkpoint",
    "data_fingerprint",
    "describe_differences",
]

#: The first line of every checkpoint file.
FORMAT = "noisysgd-checkpoint/1"

#: What every checkpoint file says about itself, in its header (and what the docs say).
SECRET_NOTICE = (
    "SECRET - a noisysgd training checkpoint. It holds a HIDDEN ITERATE of a differentially "
    "private training run (the model in the middle of training), the states of the random "
    "generators (which fix all the noise still to come) and a keyed fingerprint of the "
    "training data. The privacy certificate covers the final model only and assumes none of "
    "this is ever released: keep this file as secret as the training data itself, never "
    "publish or share it, and delete it once training has finished."
)

_TRAILER_LEN = len(b"sha256 ") + 64 + 1


@dataclass(frozen=True)
class Checkpointing:
    """Where and how the engine keeps its state (:func:`noisysgd.train.train`,
    :func:`~noisysgd.train.distributed.train_distributed`): the checkpoint file ``path``
    (None: no checkpoint), written atomically every ``every`` epochs (default 1) and at
    step 0; ``resume`` continues the run the file holds (a new run if there is no file
    yet); ``keep`` keeps the finished run's file instead of deleting it (for a caller that
    deletes it once it has stored the result); ``context``: JSON-ready facts about how the
    run was chosen, recorded and required to match on resume.  **The file holds a hidden
    iterate — which the certificate assumes is never released — the generator states and a
    keyed fingerprint of the data: keep it as secret as the training data.**

    ``every`` is not part of the run (a resumed run may use another value; with
    ``batching="full"`` an epoch is one step, and each checkpoint costs a write and an
    ``fsync``).  A file that already exists is refused unless ``resume``; a run stopped by
    an error or a signal leaves its last checkpoint (delete it if the run is abandoned).
    A resume must be of exactly the run written — the same run, loss, feature clip, target
    bound, dtype, start, analyses, secure mode and ``context`` — and of the same data (its
    keyed fingerprint), else :class:`CheckpointError` names what differs; an int seed must
    be the recorded one (None is accepted: the generators continue from the recorded
    states).  The result is bit-identical to the uninterrupted run with the same seed; in
    secure mode the steps after the resume draw fresh noise and batches (cyclic keeps its
    one order), so the result has the law of the uninterrupted run.  A finished run's
    checkpoint gives back its final model and cannot be continued into more steps.
    Validated by the engine (the messages name ``checkpoint``, ``checkpoint_every``,
    ``resume`` and ``keep_checkpoint``, as the estimators and ``noisysgd train`` call
    them)."""

    path: object = None
    every: int | None = None
    resume: bool = False
    keep: bool = False
    context: dict | None = None


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: damaged, of another format, or of a
    different run or data set (the message says what differs)."""


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint as read: the JSON header and the named arrays."""

    path: Path
    header: dict
    arrays: dict


# --------------------------------------------------------------------------- file format
#
#   noisysgd-checkpoint/1\n
#   # SECRET - ... (the notice, as comment lines)\n
#   header-bytes N\n  <N bytes of JSON>\n
#   array-bytes M\n   <M bytes: the arrays, back to back, as the header's "arrays" table says>\n
#   sha256 <64 hex digits of everything above>\n


def _notice_lines(width: int = 78) -> list[str]:
    lines, line = [], "#"
    for word in SECRET_NOTICE.split():
        if len(line) + 1 + len(word) > width:
            lines.append(line)
            line = "#"
        line += " " + word
    lines.append(line)
    return lines


def _encode(header: dict, arrays: dict) -> bytes:
    table, blobs, offset = [], [], 0
    for name, array in arrays.items():
        a = np.ascontiguousarray(array)
        if a.dtype.kind not in "fiu" or a.dtype.byteorder == ">":
            raise ValueError(f"checkpoint arrays must be little-endian numbers. Found {name}: {a.dtype}.")
        blob = a.tobytes()
        table.append({"name": name, "dtype": a.dtype.str, "shape": list(a.shape), "offset": offset,
                      "nbytes": len(blob)})
        blobs.append(blob)
        offset += len(blob)
    head = json.dumps({**header, "arrays": table}, indent=1, allow_nan=False).encode("utf-8")
    body = b"".join(blobs)
    text = "\n".join([FORMAT, *_notice_lines(), ""]).encode("ascii")
    content = (text + b"header-bytes %d\n" % len(head) + head + b"\n"
               + b"array-bytes %d\n" % len(body) + body + b"\n")
    return content + b"sha256 " + hashlib.sha256(content).hexdigest().encode("ascii") + b"\n"


def _decode(path: Path, data: bytes) -> Checkpoint:
    def bad(why):
        return CheckpointError(f"checkpoint {str(path)!r} is not a usable noisysgd checkpoint: {why}.")

    if not data.startswith(FORMAT.encode("ascii") + b"\n"):
        first = data.split(b"\n", 1)[0][:40]
        raise bad(f"it does not start with {FORMAT!r} (found {first!r})")
    if len(data) < _TRAILER_LEN or not data[-_TRAILER_LEN:].startswith(b"sha256 "):
        raise bad("it is truncated (no checksum at its end)")
    content, trailer = data[:-_TRAILER_LEN], data[-_TRAILER_LEN:]
    if not hmac.compare_digest(hashlib.sha256(content).hexdigest().encode("ascii"), trailer[7:-1]):
        raise bad("its checksum does not match its contents (damaged)")
    pos = 0
    while True:  # the magic line and the comment lines
        end = content.index(b"\n", pos)
        line = content[pos:end]
        pos = end + 1
        if line.startswith(b"header-bytes "):
            break
    n = int(line.split()[1])
    header = json.loads(content[pos:pos + n].decode("utf-8"))
    pos += n + 1
    end = content.index(b"\n", pos)
    m = int(content[pos:end].split()[1])
    body = content[end + 1:end + 1 + m]
    arrays = {}
    for entry in header.pop("arrays"):
        raw = body[entry["offset"]:entry["offset"] + entry["nbytes"]]
        arrays[entry["name"]] = np.frombuffer(raw, dtype=np.dtype(entry["dtype"])).reshape(entry["shape"]).copy()
    return Checkpoint(path, header, arrays)


def read_checkpoint(path) -> Checkpoint:
    """Read and verify (format, checksum) the checkpoint at ``path``.

    Raises :class:`CheckpointError` (a ``ValueError``) for a file that is not
    a complete noisysgd checkpoint.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {str(path)!r} does not exist.") from None
    except OSError as exc:
        raise CheckpointError(f"checkpoint {str(path)!r} cannot be read: {exc}.") from None
    return _decode(p, data)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # some file systems cannot sync a directory
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _temporary_prefix(path: Path) -> str:
    return f".{path.name}."


def write_checkpoint(path, header: dict, arrays: dict) -> None:
    """Write a checkpoint atomically: a temporary file in the same directory
    (mode 0600), flushed and ``fsync``-ed, renamed over ``path``, then the
    directory ``fsync``-ed.  A crash at any point leaves the previous file or
    the new one, complete."""
    p = Path(path)
    content = _encode(header, arrays)
    parent = p.absolute().parent
    fd, tmp = tempfile.mkstemp(prefix=_temporary_prefix(p), suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(parent)


def remove_temporaries(path) -> list[str]:
    """Remove the temporary files an interrupted :func:`write_checkpoint` of
    ``path`` left behind (they may hold secret state); returns their names."""
    p = Path(path)
    parent = p.absolute().parent
    prefix = _temporary_prefix(p)
    removed = []
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            if name.startswith(prefix) and name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    os.unlink(parent / name)
                    removed.append(name)
    return removed


def delete_checkpoint(path) -> bool:
    """Unlink the checkpoint (and stray temporary files); True if it existed.
    The directory is ``fsync``-ed.  This does not scrub the disk."""
    p = Path(path)
    remove_temporaries(p)
    try:
        os.unlink(p)
    except FileNotFoundError:
        return False
    _fsync_dir(p.absolute().parent)
    return True


# --------------------------------------------------------------------------- data fingerprint


def new_key() -> bytes:
    """32 random bytes from the OS: the key of a checkpoint's data fingerprint."""
    return secrets.token_bytes(32)


def data_fingerprint(X: np.ndarray, Y: np.ndarray, key: bytes) -> str:
    """BLAKE2b-256, keyed with ``key``, of the shapes, dtypes and bytes of the
    features and the encoded labels (module docstring: why keyed, and why
    the checkpoint must stay secret all the same).

    >>> k = bytes(32); X = np.eye(2); y = np.array([0.0, 1.0])
    >>> data_fingerprint(X, y, k) == data_fingerprint(X.copy(), y.copy(), k)
    True
    >>> data_fingerprint(X, y, k) == data_fingerprint(X, y[::-1].copy(), k)
    False
    """
    h = hashlib.blake2b(key=key, digest_size=32, person=b"noisysgd-data")
    for a in (X, Y):
        blocks = getattr(a, "blocks", None)  # rows described, not formed (.rows.CenteredRows)
        if blocks is not None:
            h.update(f"{a.dtype.str}{tuple(a.shape)};".encode("ascii"))
            for block in blocks():  # the same bytes as the formed rows, a block at a time
                h.update(memoryview(np.ascontiguousarray(block)).cast("B"))
            continue
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape};".encode("ascii"))
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


# --------------------------------------------------------------------------- descriptions


def plain(value):
    """``value`` as JSON would give it back (tuples become lists, numpy scalars numbers)."""
    return json.loads(json.dumps(value, allow_nan=False, default=_json_default))


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def describe_differences(recorded, given, prefix: str = "") -> list[tuple[str, object, object]]:
    """(name, in the checkpoint, now) for every leaf where two JSON-ready
    descriptions differ; dict keys joined with dots.

    >>> describe_differences({"run": {"steps": 10, "n": 5}}, {"run": {"steps": 20, "n": 5}})
    [('run.steps', 10, 20)]
    """
    if isinstance(recorded, dict) and isinstance(given, dict):
        out = []
        for key in list(recorded) + [k for k in given if k not in recorded]:
            name = f"{prefix}.{key}" if prefix else str(key)
            out += describe_differences(recorded.get(key, _MISSING), given.get(key, _MISSING), name)
        return out
    if type(recorded) is not type(given) and not (_number(recorded) and _number(given)):
        return [(prefix, recorded, given)]
    return [] if recorded == given else [(prefix, recorded, given)]


class _Missing:
    def __repr__(self):
        return "(absent)"


_MISSING = _Missing()


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def format_differences(diffs) -> str:
    return "; ".join(f"{name}: {_show(old)} in the checkpoint, {_show(new)} now" for name, old, new in diffs)


def exists_error(path) -> CheckpointError:
    """The error for a checkpoint file found where a new run was asked for."""
    return CheckpointError(
        f"checkpoint {str(path)!r} already exists (a run in progress, or a finished one that was kept): "
        "pass resume=True (noisysgd train --resume) to continue the run it holds, or delete it to start "
        "a new run."
    )


def mismatch_error(path, diffs, *, finished: bool, steps, steps_now) -> CheckpointError:
    """The error for a checkpoint of another run (``diffs`` from :func:`describe_differences`)."""
    names = {name for name, _, _ in diffs}
    if finished and "run.steps" in names:
        return CheckpointError(
            f"checkpoint {str(path)!r} holds a finished run of {steps} steps; it cannot be resumed into a "
            f"run of {steps_now} steps. A longer run is a different run, with a different privacy cost, "
            "and needs its own certificate: start it afresh (without this checkpoint) and calibrate it "
            "for its whole length."
        )
    hint = ""
    if "run.steps" in names:
        hint = (" The number of steps is part of the run the certificate is for: a checkpoint continues "
                "only that run.")
    return CheckpointError(
        f"checkpoint {str(path)!r} was written for a different run, so it is not resumed (a resumed run "
        f"must be exactly the run its certificate is for): {format_differences(diffs)}.{hint} Resume "
        "with the settings it was written with, or start a new run with another checkpoint path."
    )


def now() -> float:
    return time.time()


# --------------------------------------------------------------------------- the ledger of one run


@dataclass
class ResumeState:
    """What a checkpoint gives back to the engine to continue its run."""

    step: int
    W: np.ndarray
    noise_state: dict | None
    batch_meta: dict
    batch_arrays: dict
    history: list
    init_kind: str
    finished: bool


class Ledger:
    """The checkpoint file of one run, as the engine uses it: opened (and, on
    resume, checked against the run and the data) before anything is computed,
    written every ``every_steps`` steps, deleted or finalized at the end."""

    def __init__(self, path: Path, *, every_steps: int, keep: bool, description: dict, data: dict,
                 key: bytes, random_state, sessions: list, resumed: ResumeState | None):
        self.path = path
        self.every_steps = every_steps
        self.keep = keep
        self.description = description
        self.data = data
        self.key = key
        self.random_state = random_state
        self.sessions = sessions
        self.resumed = resumed
        self.writes = 0

    @classmethod
    def open(cls, path, *, resume: bool, description: dict, X, Y, random_state, every_steps: int,
             keep: bool) -> "Ledger":
        """A ledger for a new run (no file at ``path``), or for the run the
        file at ``path`` holds (``resume=True``), refused with a
        :class:`CheckpointError` naming what differs if it is not this run on
        this data."""
        p = Path(path)
        description = plain(description)
        data = {"n": int(X.shape[0]), "n_features": int(X.shape[1]), "labels": [np.asarray(Y).dtype.str,
                                                                                 list(np.shape(Y))]}
        seed = random_state if isinstance(random_state, int) else None
        remove_temporaries(p)  # of a write that died: they may hold secret state
        if not p.exists():
            key = new_key()
            data["fingerprint"] = data_fingerprint(X, Y, key)
            return cls(p, every_steps=every_steps, keep=keep, description=description, data=data, key=key,
                       random_state=seed, sessions=[[0, 0]], resumed=None)
        if not resume:
            raise exists_error(path)
        ck = read_checkpoint(p)
        h = ck.header
        recorded = h.get("description", {})
        progress = h.get("progress", {})
        step, total = int(progress.get("step", -1)), recorded.get("run", {}).get("steps")
        finished = bool(progress.get("finished"))
        diffs = describe_differences(recorded, description)
        if diffs:
            raise mismatch_error(path, diffs, finished=finished, steps=total,
                                 steps_now=description.get("run", {}).get("steps"))
        rec_data = h.get("data", {})
        shape_diffs = [(k, rec_data.get(k), data[k]) for k in ("n", "n_features", "labels")
                       if plain(rec_data.get(k)) != plain(data[k])]
        if shape_diffs:
            raise CheckpointError(
                f"checkpoint {str(path)!r} was written on other training data, so it is not resumed: "
                f"{format_differences(shape_diffs)}."
            )
        key = bytes.fromhex(rec_data["key"])
        digest = data_fingerprint(X, Y, key)
        if not hmac.compare_digest(digest, rec_data.get("fingerprint", "")):
            raise CheckpointError(
                f"checkpoint {str(path)!r} was written on other training data, so it is not resumed: same "
                "shape, but the keyed fingerprint of the features and labels differs (different values, "
                "order, or label coding)."
            )
        rec_seed = h.get("random_state")
        if seed is not None and seed != rec_seed:
            raise CheckpointError(
                f"checkpoint {str(path)!r} was written for a different run, so it is not resumed: "
                f"random_state: {rec_seed!r} in the checkpoint, {seed!r} now (give the same seed, or none: "
                "the generators continue from the states the checkpoint holds)."
            )
        if h.get("numpy_version") != np.__version__:
            import warnings

            warnings.warn(
                f"checkpoint {str(path)!r} was written with numpy {h.get('numpy_version')}, this is numpy "
                f"{np.__version__}: the resumed run follows the same algorithm, but is bit-identical to an "
                "uninterrupted one only with the same numpy", RuntimeWarning,
                stacklevel=4 + TRAINER_FRAMES,  # (the caller of train, past takes_declarations' frame)
            )
        rng = h.get("rng", {})
        batch_arrays = {k.split(".", 1)[1]: v for k, v in ck.arrays.items() if k.startswith("batches.")}
        resumed = ResumeState(step=step, W=ck.arrays["W"], noise_state=rng.get("noise"),
                              batch_meta=rng.get("batches"), batch_arrays=batch_arrays,
                              history=list(h.get("history", [])), init_kind=h.get("init", ""),
                              finished=finished)
        data["fingerprint"] = digest
        sessions = [list(s) for s in progress.get("sessions", [])] + [[step, step]]
        return cls(p, every_steps=every_steps, keep=keep, description=recorded, data=data, key=key,
                   random_state=rec_seed, sessions=sessions, resumed=resumed)

    def save(self, step: int, W, stream, noise_rng, history, init_kind: str) -> None:
        """Write the state after ``step`` steps (atomically; see :func:`write_checkpoint`)."""
        from .. import __version__

        meta, arrays = stream.state()
        if meta["step"] != step:
            raise RuntimeError(f"the batch stream is at step {meta['step']}, the engine at {step}")
        self.sessions[-1][1] = step
        total = int(self.description["run"]["steps"])
        noise_state = noise_rng.bit_generator.state if isinstance(noise_rng, np.random.Generator) else None
        header = {
            "format": FORMAT,
            "notice": SECRET_NOTICE,
            "noisysgd_version": __version__,
            "numpy_version": np.__version__,
            "written_at": now(),
            "description": self.description,
            "random_state": self.random_state,
            "data": {**self.data, "key": self.key.hex(),
                     "fingerprint_algorithm": "BLAKE2b-256 keyed with 'key' (random, 32 bytes)"},
            "progress": {"step": step, "steps": total, "finished": step >= total,
                         "sessions": self.sessions},
            "rng": {"source": "numpy" if noise_state is not None else "os.urandom",
                    "noise": noise_state, "batches": meta},
            "history": history,
            "init": init_kind,
        }
        payload = {"W": np.asarray(W)}
        payload.update({f"batches.{k}": v for k, v in arrays.items()})
        write_checkpoint(self.path, plain(header), payload)
        self.writes += 1

    def summary(self) -> dict:
        """What the result's ``enforced["checkpoint"]`` says (the sessions that ran the steps)."""
        return {"sessions": [list(s) for s in self.sessions],
                "resumed_at_step": None if self.resumed is None else self.resumed.step}
