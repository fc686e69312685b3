"""diffprivlib's LogisticRegression for run.py, in diffprivlib's own environment (.venv-diffprivlib).

    .venv-diffprivlib/bin/python benchmarks/raw_tables/dpl_worker.py DIR

DIR holds ``jobs.json`` (a list of {"key", "split", "epsilon", "seed", "variant"}) and one
``.npz`` per split (X_tr, y_tr as integer codes, X_te).  Writes ``DIR/out.npz`` (one prediction
array per key) and ``DIR/out.json`` (fit seconds per key, versions).

Variants:
* ``data_norm``: ``data_norm`` = the largest row norm of the training split (read off the data:
  not private as run; R's documentation gives no public bound on these columns);
* ``clip1``: rows clipped to norm 1 and ``data_norm=1`` (a data-independent bound: private as run).
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np


def _clip_rows(X, R=1.0):
    norms = np.linalg.norm(X, axis=1)
    return X * (R / np.maximum(norms, R))[:, None]


def main(argv=None) -> int:
    import diffprivlib
    import sklearn
    from diffprivlib.models import LogisticRegression

    folder = Path((sys.argv[1:] if argv is None else argv)[0])
    jobs = json.loads((folder / "jobs.json").read_text())
    splits: dict = {}
    preds, meta = {}, {"diffprivlib": diffprivlib.__version__, "scikit-learn": sklearn.__version__,
                       "numpy": np.__version__, "fit_s": {}, "data_norm": {}}
    for job in jobs:
        if job["split"] not in splits:
            with np.load(folder / job["split"]) as z:
                splits[job["split"]] = {k: z[k] for k in z.files}
        s = splits[job["split"]]
        X_tr, X_te = s["X_tr"], s["X_te"]
        if job["variant"] == "data_norm":
            norm = float(np.linalg.norm(X_tr, axis=1).max())
        elif job["variant"] == "clip1":
            X_tr, X_te, norm = _clip_rows(X_tr), _clip_rows(X_te), 1.0
        else:
            raise ValueError(job["variant"])
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # convergence warnings of the perturbed objective
            clf = LogisticRegression(epsilon=job["epsilon"], data_norm=norm,
                                     random_state=job["seed"]).fit(X_tr, s["y_tr"])
        meta["fit_s"][job["key"]] = time.perf_counter() - t0
        meta["data_norm"][job["key"]] = norm
        preds[job["key"]] = clf.predict(X_te).astype(np.int64)
    np.savez(folder / "out.npz", **preds)
    (folder / "out.json").write_text(json.dumps(meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
