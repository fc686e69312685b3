"""Opacus DP-SGD on the same linear models as ``auto_config.py`` (issue 15's peer table).

The same data sets (digits, breast_cancer, make_classification(20000, 50)), splits (80/20
stratified, seeds 0, 1, 2) and feature map (rows clipped to norm 1, a bias): a
``torch.nn.Linear`` trained by Opacus with Poisson sampling, per-example clipping at C = 1
(ghost clipping), plain SGD.  The noise multiplier is calibrated for **replace adjacency**
(the adjacency of every noisysgd row) by noisysgd's ``composition-pld`` (dp_accounting's
PLD of the Poisson-subsampled Gaussian, every iterate released), at δ = min(1e-5, 1/(10n)).

Opacus has no default learning rate, batch size or epoch count.  Its row is therefore an
**ORACLE**: a grid (batch size {64, 256}, epochs {10, 30}, learning rate {0.5, 2, 8}) at ε = 1,
the best configuration *selected on test accuracy* (tuning not accounted), then that
configuration at ε = 0.5 and 3.  It is the strongest baseline one can build here, not what a
user would get without tuning; noisysgd's "auto" rows look at no data at all.

    python benchmarks/peer_opacus.py       # ~4 min on 2 cores; writes benchmarks/results/peer_opacus.json
    python benchmarks/peer_opacus.py --centered   # the same, on rows centered on noisysgd's private
                                                  # mean (same query and seed), charged to Opacus too:
                                                  # benchmarks/results/peer_opacus_centered.json
    python benchmarks/peer_opacus.py --centered --adjacency add-remove
        # both under add/remove (Opacus' own adjacency; the training set's size declared public),
        # with noisysgd's defaults (adjacency="add-remove", public_n) on the same splits beside the
        # oracle: benchmarks/results/peer_opacus_centered_add_remove.json (issue 26 §4)
    python benchmarks/peer_opacus.py --centered --fashion DIR [--scatter]
        # Fashion-MNIST pixels (or ScatterNet features), seed 0, FASHION_GRID, the defaults beside
        # the oracle: benchmarks/results/peer_opacus_centered_fashion_{pixels,scatter}.json
    python benchmarks/peer_opacus.py --centered --tables
        # benchmarks/tables.py's five tables, splits and encoding (issue 27 §6), the defaults beside
        # the oracle: benchmarks/results/peer_opacus_centered_tables.json (~15 min)
    python benchmarks/peer_opacus.py --centered --clip 0.3 [--adjacency add-remove]
        # the oracle with Opacus' max_grad_norm C = 0.3 and the learning rates divided by C (the
        # noise per step of the C = 1 grid), as clip_norm="auto" clips below the gradients' scale:
        # benchmarks/results/peer_opacus_centered[_add_remove]_clip0.3.json
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import time
import warnings
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "peer_opacus.json"
SEEDS = (0, 1, 2)
GRID = {"batch_size": (64, 256), "epochs": (10, 30), "lr": (0.5, 2.0, 8.0)}
#: Fashion-MNIST's grid, around Opacus' best rows of docs/results.md (lr 16, b = 2000, 30 epochs).
FASHION_GRID = {"batch_size": (256, 2000), "epochs": (30,), "lr": (2.0, 8.0, 16.0)}


def _clip_rows(X, R=1.0):
    norms = np.linalg.norm(X, axis=1)
    return (X * (R / np.maximum(norms, R))[:, None]).astype(np.float32)


@functools.lru_cache(maxsize=None)
def _z_with_query(n, b, steps, epsilon, delta, mu_q, adjacency="replace"):
    """The smallest z (to 0.5 %) whose Poisson run composed with the μ_q-GDP mean query in one PLD
    (what noisysgd certifies for its own composition runs) meets ``epsilon`` at the total ``delta``."""
    import noisysgd
    from noisysgd.analyses.composition import epsilon_with_gaussian_query

    run = noisysgd.Run(n=n, batch_size=b, batching="poisson", steps=steps, learning_rate=1.0,
                       noise_multiplier=1.0, lipschitz=1.0, adjacency=adjacency)
    lo = noisysgd.calibrate(run, epsilon=epsilon, delta=delta, analyses=["composition-pld"],
                            rel_tol=1e-3).noise_multiplier  # the run alone: a lower bound
    hi = lo * 1.5
    while epsilon_with_gaussian_query(run.replace(noise_multiplier=hi), delta, mu_q) > epsilon:
        lo, hi = hi, hi * 1.5
    while hi / lo > 1.005:
        mid = (lo * hi) ** 0.5
        if epsilon_with_gaussian_query(run.replace(noise_multiplier=mid), delta, mu_q) > epsilon:
            lo = mid
        else:
            hi = mid
    return hi


def _fit(Xtr, ytr, Xte, yte, *, k, batch_size, epochs, lr, epsilon, seed, centered=False, adjacency="replace",
         grad_clip=1.0):
    import torch
    from opacus import PrivacyEngine

    import noisysgd
    from noisysgd.preprocessing import center_rows, private_center_within
    from noisysgd.private_fit import default_delta

    torch.manual_seed(seed)
    n = len(Xtr)
    delta = default_delta(n)
    b = min(batch_size, n)
    steps = epochs * max(1, round(n / b))
    if centered:
        # the very mean NoisySGDClassifier(epsilon, random_state=seed) releases (same query, same
        # seed), charged to this run too: the PLD of the run and the query meets (epsilon, delta)
        center, clip, query, _, _ = private_center_within(Xtr, epsilon, delta, radius=1.0, adjacency=adjacency,
                                                          seed=seed)

        def features(X):
            return X if center is None else _clip_rows(center_rows(X, center, 1.0), clip)

        Xtr, Xte = features(Xtr), features(Xte)
        z = _z_with_query(n, b, steps, epsilon, delta, query["mu"], adjacency)
    else:
        run = noisysgd.Run(n=n, batch_size=b, batching="poisson", steps=steps, learning_rate=lr,
                           noise_multiplier=1.0, lipschitz=1.0, adjacency=adjacency)
        z = noisysgd.calibrate(run, epsilon=epsilon, delta=delta, analyses=["composition-pld"],
                               rel_tol=1e-3).noise_multiplier
    ds = torch.utils.data.TensorDataset(torch.from_numpy(_clip_rows(Xtr)), torch.from_numpy(ytr.astype(np.int64)))
    loader = torch.utils.data.DataLoader(ds, batch_size=b)
    model = torch.nn.Linear(Xtr.shape[1], k)
    torch.nn.init.zeros_(model.weight)
    torch.nn.init.zeros_(model.bias)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    engine = PrivacyEngine(accountant="prv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, opt, lossf, loader = engine.make_private(
            module=model, optimizer=opt, criterion=torch.nn.CrossEntropyLoss(), data_loader=loader,
            noise_multiplier=z, max_grad_norm=grad_clip, poisson_sampling=True, grad_sample_mode="ghost",
            noise_generator=torch.Generator().manual_seed(seed + 1))
    done = 0
    while done < steps:
        for xb, yb in loader:
            if done == steps:
                break
            opt.zero_grad(set_to_none=True)
            if len(xb):
                lossf(model(xb), yb).backward()
            else:  # an empty Poisson batch: the noise step still happens in DP-SGD
                (model(torch.zeros(1, Xtr.shape[1])).sum() * 0.0).backward()
            opt.step()
            done += 1
    W = model._module.weight.detach().numpy()
    bias = model._module.bias.detach().numpy()
    pred = np.argmax(_clip_rows(Xte) @ W.T + bias, axis=1)
    return float(np.mean(pred == yte)), z


def _defaults(splits, k, adjacency, seeds=SEEDS) -> dict:
    """noisysgd's defaults on the same splits: NoisySGDClassifier(epsilon, classes declared,
    random_state=seed), under add/remove with public_n = the training rows."""
    import sys

    from noisysgd import NoisySGDClassifier

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from auto_config import released

    extra = {"adjacency": "add-remove", "public_n": None} if adjacency == "add-remove" else {}
    rows = {}
    for eps in (0.5, 1.0, 3.0):
        accs, chosen = [], []
        for s, (Xtr, Xte, ytr, yte) in zip(seeds, splits):
            clf = NoisySGDClassifier(epsilon=eps, classes=list(range(k)), random_state=s,
                                     **{**extra, **({"public_n": len(Xtr)} if extra else {})}).fit(Xtr, ytr)
            accs.append(float(clf.score(Xte, yte)))
            cfg = clf.privacy_report_["config"]
            chosen.append({**{key: cfg["chosen"].get(key) for key in ("regime", "batching", "batch_size", "epochs")},
                           "alpha": clf.run_.strong_convexity, "learning_rate": clf.run_.learning_rate,  # as trained
                           "clip_factor": (cfg.get("clip") or {}).get("clip_factor"),
                           "curvature_ratio": cfg["assumptions"].get("curvature_ratio"), **released(clf)})
        rows[f"{eps:g}"] = {"mean": float(np.mean(accs)), "std": float(np.std(accs, ddof=1)) if len(accs) > 1 else 0.0,
                            "seeds": accs, "chosen": chosen}
        print(f"  noisysgd defaults ({adjacency}) eps {eps:g}: {np.mean(accs):.3f} ± {rows[f'{eps:g}']['std']:.3f}",
              flush=True)
    return rows


def _fashion_split(path):
    """[(X_train, X_test, y_train, y_test)]: Fashion-MNIST's raw pixels (0–255), its own split."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fashion_mnist.data import load_images

    d = load_images(path)
    return [(d["train_images"].reshape(60000, -1).astype(np.float64),
             d["test_images"].reshape(10000, -1).astype(np.float64), d["train_labels"], d["test_labels"])]


def _scatter_split(path):
    """[(X_train, X_test, y_train, y_test)]: Fashion-MNIST's ScatterNet features (d = 3,969, norm 1;
    benchmarks/fashion_mnist, cached on disk), the same 50,000 training rows as auto_config.py's
    fashion_scatter and the 10,000 test images."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fashion_mnist.data import features

    f = features("scatter", data_path=path, threads=2, log=lambda *a: None)
    (Xtr, ytr), (Xte, yte) = f["train"], f["test"]
    return [(Xtr.astype(np.float64), Xte.astype(np.float64), ytr, yte)]


def _fair():
    """statsmodels' fair table as numbers: affairs > 0 (32 % positive); the occupation codes 1–6 of
    both spouses one-hot encoded with their categories declared (a fixed map of each row)."""
    import statsmodels.api as sm

    d = sm.datasets.fair.load_pandas().data
    cols = [c for c in d.columns if c not in ("affairs", "occupation", "occupation_husb")]
    onehot = [(d[c].to_numpy()[:, None] == np.arange(1, 7)).astype(float) for c in ("occupation", "occupation_husb")]
    return np.hstack([d[cols].to_numpy(dtype=float), *onehot]), (d["affairs"] > 0).astype(int).to_numpy()


def _tables():
    """benchmarks/tables.py's tables as numbers: its declared one-hot map applied to every row (a
    fixed map: the categories are declared, nothing is learnt from the rows)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from tables import _encoder, tables

    return {name: (_encoder(cats).fit(X).transform(X).astype(float), np.asarray(y))
            for name, X, y, cats in tables()}


def main(argv=None) -> int:
    import torch
    from sklearn.datasets import load_breast_cancer, load_digits, make_classification
    from sklearn.model_selection import train_test_split

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--centered", action="store_true",
                    help="center the rows on the private mean noisysgd's defaults release (same query and "
                         "seed), charged to Opacus' budget: the like-for-like row of issue 26 §4")
    ap.add_argument("--adjacency", choices=("replace", "add-remove"), default="replace",
                    help="the adjacency both are calibrated for; add-remove also runs noisysgd's defaults")
    ap.add_argument("--held-out", action="store_true",
                    help="statsmodels' fair table instead (affairs > 0; occupation codes one-hot encoded with "
                         "their categories declared), a data set the automatic configuration was not designed "
                         "on, with noisysgd's defaults beside the oracle (issue 26 §4); needs statsmodels")
    ap.add_argument("--tables", action="store_true",
                    help="benchmarks/tables.py's five tables (statsmodels' fair, randhie, anes96; mixed-units "
                         "make_classification; raw breast_cancer), its 75/25 splits and declared one-hot map, "
                         "with noisysgd's defaults beside the oracle (issue 27 §6); needs statsmodels")
    ap.add_argument("--fashion", metavar="DIR", default=None,
                    help="Fashion-MNIST's raw pixels instead (IDX files in DIR, e.g. Debian's dataset-fashion-mnist; "
                         "its own 60,000/10,000 split), seed 0 only, the grid narrowed to FASHION_GRID (~15 min)")
    ap.add_argument("--scatter", action="store_true",
                    help="with --fashion: its ScatterNet features (needs kymatio; computed once and cached) "
                         "instead of the pixels")
    ap.add_argument("--clip", type=float, default=1.0,
                    help="Opacus' max_grad_norm C (default 1: the rows' norm bound); below 1 the learning-rate grid "
                         "is divided by C (the same noise per step) and the JSON file gets the suffix _clip<C>: an "
                         "oracle that also clips below the gradients' scale, as clip_norm='auto' does")
    ap.add_argument("--defaults-only", action="store_true",
                    help="keep the oracle rows of the existing JSON file and re-run only noisysgd's defaults "
                         "beside them (after a change of the defaults; the same splits and seeds)")
    args = ap.parse_args(argv)
    out_path = OUT.with_name("peer_opacus_centered.json") if args.centered else OUT
    if args.fashion:
        out_path = out_path.with_name(out_path.stem + ("_fashion_scatter.json" if args.scatter
                                                       else "_fashion_pixels.json"))
    if args.adjacency == "add-remove":
        out_path = out_path.with_name(out_path.stem + "_add_remove.json")
    if args.held_out:
        out_path = out_path.with_name(out_path.stem + "_held_out.json")
    if args.tables:
        out_path = out_path.with_name(out_path.stem + "_tables.json")
    if args.clip != 1.0:
        out_path = out_path.with_name(out_path.stem + f"_clip{args.clip:g}.json")
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # Opacus' secure-RNG notice and torch's backward-hook notices, per fit
    grid_spec, seeds = (FASHION_GRID, (0,)) if args.fashion else (GRID, SEEDS)
    data = {"fashion_scatter" if args.scatter else "fashion_pixels": None} if args.fashion else {"fair": _fair()} if args.held_out else _tables() if args.tables else {
        "digits": load_digits(return_X_y=True),
        "breast_cancer": load_breast_cancer(return_X_y=True),
        "synthetic": make_classification(n_samples=20000, n_features=50, random_state=0),
    }
    out = {"grid": GRID, "seeds": list(SEEDS), "datasets": {}}
    if args.defaults_only:
        out = json.loads(out_path.read_text())
    t0 = time.perf_counter()
    for name, Xy in data.items():
        X, y = Xy if Xy is not None else (None, None)
        if name in ("fashion_pixels", "fashion_scatter"):
            splits, k = (_scatter_split if args.scatter else _fashion_split)(args.fashion), 10
        else:
            k = int(np.max(y)) + 1
            splits = [train_test_split(X, y, test_size=0.25 if args.tables else 0.2, random_state=s, stratify=y)
                      for s in seeds]

        def score(cfg, eps):
            res = [_fit(Xtr, ytr, Xte, yte, k=k, epsilon=eps, seed=s, centered=args.centered, grad_clip=args.clip,
                        adjacency=args.adjacency, **cfg)
                   for s, (Xtr, Xte, ytr, yte) in zip(seeds, splits)]
            accs = [a for a, _ in res]
            return {"mean": float(np.mean(accs)), "std": float(np.std(accs, ddof=1)) if len(accs) > 1 else 0.0,
                    "seeds": accs,
                    "noise_multiplier": res[0][1]}

        if args.defaults_only:
            out["datasets"][name]["noisysgd_defaults"] = _defaults(splits, k, args.adjacency, seeds)
            out_path.write_text(json.dumps(out, indent=1) + "\n")
            continue
        grid = []
        for b, e, lr in itertools.product(grid_spec["batch_size"], grid_spec["epochs"],
                                          [lr / args.clip for lr in grid_spec["lr"]]):
            cfg = {"batch_size": b, "epochs": e, "lr": lr}
            grid.append({"config": cfg, **score(cfg, 1.0)})
            print(f"{name} eps 1 {cfg}: {grid[-1]['mean']:.3f} ({time.perf_counter() - t0:.0f} s)", flush=True)
        best = max(grid, key=lambda r: r["mean"])
        rows = {"1": best}
        for eps in (0.5, 3.0):
            rows[f"{eps:g}"] = {"config": best["config"], **score(best["config"], eps)}
        for eps, r in sorted(rows.items(), key=lambda kv: float(kv[0])):
            print(f"{name} ORACLE eps {eps}: {r['mean']:.3f} ± {r['std']:.3f}  {r['config']}", flush=True)
        out["datasets"][name] = {"oracle": rows, "grid_at_eps_1": grid}
        if (args.adjacency == "add-remove" or args.held_out or args.fashion or args.tables) and args.clip == 1.0:
            out["datasets"][name]["noisysgd_defaults"] = _defaults(splits, k, args.adjacency, seeds)
        out["centered"], out["adjacency"] = args.centered, args.adjacency
        out_path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
