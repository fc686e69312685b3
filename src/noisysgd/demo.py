"""``noisysgd demo``: the same private model, certified two ways, on data that ships with scikit-learn.

On the digits data (1,797 8×8 images, 10 classes; pixels divided by 16, their
known range — no statistic of the data is used), one Noisy-SGD configuration
is trained three times at the same (ε, δ):

(a) with the noise calibrated by the best sound bound for the final model
    only (hidden state: here shifted interpolation, Ye–Shokri and composition,
    order by order);
(b) with the noise calibrated by composition (RDP and PLD), as a standard
    DP-SGD library would certify the same run;
(c) without noise (the same algorithm, not private), for reference.

It prints a table and writes a report directory: ``report.md``, ``demo.json``,
the two certificates, and two plots (ε versus epochs by analysis at the noise
of (a); test accuracy of the three).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from . import __version__
from .io import atomic_directory, write_json
from .planning import plan
from .figures import plan_figure

__all__ = ["CONFIG", "run_demo", "write_report", "table"]

#: The configuration of the demo's runs (see the module docstring).
CONFIG = {
    "dataset": "scikit-learn digits, pixels / 16, 1,500 training and 297 test images (stratified)",
    "batching": "cyclic",
    "batch_size": 500,
    "epochs": 300,
    "alpha": 0.1,
    "feature_clip": 2.0,
    "learning_rate": "auto",
    "multi_class": "softmax",
}
#: Report files, and the marker that lets a later demo replace an earlier report.
MARKER = "demo.json"


def _data(seed: int):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = X / 16.0  # the pixel range is known to be [0, 16]: a data-independent scaling
    return train_test_split(X, y, test_size=297, random_state=seed, stratify=y)


def run_demo(*, epsilon: float = 1.0, delta: float = 1e-5, seed: int = 0) -> dict:
    """Train (a), (b), (c) and return everything the report shows."""
    from .estimators import NoisySGDClassifier
    from .train import Softmax, sgd

    started = time.perf_counter()
    Xtr, Xte, ytr, yte = _data(seed)
    common = {k: CONFIG[k] for k in ("batching", "batch_size", "epochs", "alpha", "feature_clip",
                                     "learning_rate", "multi_class")}
    common["classes"] = list(range(10))  # digits' ten labels: public, declared (not read off the data)
    common["average"] = False  # (a) and (b) release the same output, the final iterate: only the bound differs
    hidden = NoisySGDClassifier(epsilon=epsilon, delta=delta, random_state=seed, **common).fit(Xtr, ytr)
    comp = NoisySGDClassifier(epsilon=epsilon, delta=delta, random_state=seed,
                              analysis=["composition", "composition-pld"], **common).fit(Xtr, ytr)
    run = hidden.run_
    # (c) runs on the rows (a) trained on: clipped, minus (a)'s private mean, clipped to its R_c
    centered = hidden.center_ is not None
    from .preprocessing import center_rows

    def rows(X):
        return center_rows(X, hidden.center_, CONFIG["feature_clip"]) if centered else X

    plain = sgd(run, Softmax(10), rows(Xtr), ytr, feature_clip=hidden.feature_clip_,
                intercept_scaling=hidden.intercept_scaling_, random_state=seed)
    acc_plain = float(np.mean(plain.predict(rows(Xte)) == yte))
    # What the composition-calibrated model actually is: every analysis at its noise.
    from .accountant import epsilon as eps_report

    comp_all = eps_report(comp.run_, delta=comp.fit_.report.delta)
    actually = comp_all.epsilon
    query = comp.privacy_report_.get("preprocessing")
    if query is not None and actually is not None:  # the model with the mean its rows were centered on
        from .accountant import compose_query

        actually = compose_query({}, comp_all.epsilon, comp_all.delta, comp_all.run.adjacency, query,
                                       report=comp_all)[0]
    rows = [
        {"method": "(a) Noisy-SGD, noise for the best sound bound (final model only)",
         "certified_by": hidden.privacy_report_["best_analysis"],
         "noise_multiplier": hidden.noise_multiplier_, "epsilon": hidden.epsilon_,
         "test_accuracy": float(hidden.score(Xte, yte))},
        {"method": "(b) the same run, noise for composition (every iterate released)",
         "certified_by": comp.privacy_report_["best_analysis"],
         "noise_multiplier": comp.noise_multiplier_, "epsilon": comp.epsilon_,
         "test_accuracy": float(comp.score(Xte, yte))},
        {"method": "(c) the same run without noise (not private)", "certified_by": None,
         "noise_multiplier": 0.0, "epsilon": None, "test_accuracy": acc_plain},
    ]
    by_analysis = {
        name: {"applies": r.applies, "sound": r.sound, "epsilon": r.epsilon, "reason": r.reason,
               "epsilon_at_composition_noise": comp_all.results[name].epsilon}
        for name, r in hidden.fit_.report.results.items()
    }
    by_analysis["order-wise-minimum"] = {
        "applies": True, "sound": True,
        "epsilon": None if hidden.fit_.report.combined is None else hidden.fit_.report.combined.epsilon,
        "reason": None,
        "epsilon_at_composition_noise": None if comp_all.combined is None else comp_all.combined.epsilon,
    }
    curves = plan(run, delta=hidden.fit_.report.delta, epochs=f"1:{CONFIG['epochs']}")  # the training's own δ
    return {
        "noisysgd_version": __version__,
        "epsilon": epsilon, "delta": delta, "seed": seed, "intercept_scaling": hidden.intercept_scaling_,
        "centered": centered, "feature_clip_after_centering": hidden.feature_clip_,
        "config": dict(CONFIG), "n_train": int(len(Xtr)), "n_test": int(len(Xte)),
        "run": run.to_dict(),
        "rows": rows,
        "by_analysis": by_analysis,
        "composition_model_is_actually": actually,
        "certificates": {"hidden_state": hidden.privacy_report_, "composition": comp.privacy_report_},
        "plan": curves,
        "seconds": time.perf_counter() - started,
    }


def _fmt(x, digits=4):
    if x is None:
        return "-"
    return f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def table(result: dict) -> str:
    """The printed table."""
    lines = []
    head = ["method", "certified by", "noise z", "epsilon", "test accuracy"]
    body = [[r["method"], r["certified_by"] or "-", _fmt(r["noise_multiplier"]),
             _fmt(r["epsilon"]), f"{r['test_accuracy']:.3f}"] for r in result["rows"]]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in body]
    return "\n".join(lines)


def _markdown(result: dict) -> str:
    cfg, run = result["config"], result["run"]
    md = [
        "# noisysgd demo",
        "",
        f"noisysgd {result['noisysgd_version']}; target (ε, δ) = ({result['epsilon']:g}, "
        f"{result['delta']:g}), replace-one adjacency; seed {result['seed']}; "
        f"{result['seconds']:.1f} s.",
        "",
        f"Data: {cfg['dataset']}. Model: softmax regression (multinomial logistic), features clipped "
        f"to norm {cfg['feature_clip']:g}"
        + (f", centered on a differentially private mean (the estimator's default; its cost is in ε) and "
           f"clipped to norm {result['feature_clip_after_centering']:.3g}" if result.get("centered") else "")
        + f", plus a bias coordinate {result.get('intercept_scaling', 1.0):.3g} "
        f"(the estimator's default: a quarter of the clip), L2 regularization λ = {cfg['alpha']:g}.",
        f"Run: {run['batching']} batches of {run['batch_size']} ({run['steps_per_epoch']} steps per "
        f"epoch), {cfg['epochs']} epochs = {run['steps']} steps, step size η = "
        f"{run['learning_rate']:.4g}, gradient norm bound L = {run['lipschitz']:.4g} (derived from the "
        f"feature clip and the bias coordinate: √(2(R² + s²))), smoothness M + λ = {run['smoothness']:.4g}, "
        "strong convexity λ.",
        "",
        "| method | certified by | noise multiplier z | ε | test accuracy |",
        "|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        md.append(f"| {r['method']} | {r['certified_by'] or '-'} | {_fmt(r['noise_multiplier'])} | "
                  f"{_fmt(r['epsilon'])} | {r['test_accuracy']:.3f} |")
    md += [
        "",
        "(a) and (b) train the same algorithm with the same hyperparameters; only the noise differs: "
        "(b) is what a DP-SGD library that accounts every iterate would add for the same (ε, δ). The "
        f"model (b) is in fact ({_fmt(result['composition_model_is_actually'])}, δ)-DP for its final "
        + ("iterate and its private mean. " if result.get("centered") else "iterate. ")
        + "Composition would do better with far fewer epochs; the hidden-state bound lets "
        "training run long at no further privacy cost.",
        "",
        "## ε of each analysis at the noise of (a) and of (b)",
        "",
        "| analysis | applies | sound | ε at z of (a) | ε at z of (b) | why not |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in result["by_analysis"].items():
        md.append(f"| {name} | {'yes' if r['applies'] else 'no'} | {'yes' if r['sound'] else 'NO'} | "
                  f"{_fmt(r['epsilon'])} | {_fmt(r['epsilon_at_composition_noise'])} | "
                  f"{(r['reason'] or '').replace('|', '/')} |")
    md += [
        "",
        "![ε versus epochs](epsilon_vs_epochs.png)",
        "",
        ("The curves are the training's own ε; (a)'s ε is the total of the model and the private mean "
         "its rows were centered on (composed in GDP or RDP, as its certificate says)."
         if result.get("centered") else ""),
        "",
        "![test accuracy](accuracy.png)",
        "",
        "Certificates: `certificate_hidden_state.json`, `certificate_composition.json`. Test accuracy "
        "is measured on held-out images; nothing computed on the training data is reported.",
        "",
    ]
    return "\n".join(md)


def _accuracy_plot(result: dict, path: Path) -> None:
    from .figures.draw import _matplotlib

    Figure, FigureCanvasAgg = _matplotlib()
    fig = Figure(figsize=(7.5, 3.8), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.32, 0.2, 0.63, 0.68))
    labels = ["(a) hidden state", "(b) composition", "(c) no noise"]
    values = [r["test_accuracy"] for r in result["rows"]]
    bars = ax.barh(labels[::-1], values[::-1], color=["0.6", "C3", "C0"])
    for bar, v in zip(bars, values[::-1]):
        ax.text(v + 0.01, bar.get_y() + bar.get_height() / 2, f"{v:.3f}", va="center", fontsize=9)
    ax.set_xlim(0, 1.08)
    ax.set_xlabel("test accuracy (digits)")
    ax.set_title(f"Same run at (ε, δ) = ({result['epsilon']:g}, {result['delta']:g}): "
                 f"z = {result['rows'][0]['noise_multiplier']:.3g} vs "
                 f"{result['rows'][1]['noise_multiplier']:.3g}", fontsize=10)
    fig.savefig(path, format="png")


def write_report(result: dict, out) -> Path:
    """Write the report directory (atomically; an earlier demo report there is replaced)."""
    data = {k: v for k, v in result.items() if k not in ("plan", "certificates")}
    data["plan"] = result["plan"].to_dict()
    with atomic_directory(out, replace_marker=MARKER) as tmp:
        write_json(tmp / MARKER, data)
        write_json(tmp / "certificate_hidden_state.json", result["certificates"]["hidden_state"])
        write_json(tmp / "certificate_composition.json", result["certificates"]["composition"])
        plan_figure(result["plan"], tmp / "epsilon_vs_epochs.png")
        _accuracy_plot(result, tmp / "accuracy.png")
        (tmp / "report.md").write_text(_markdown(result), encoding="utf-8")
    return Path(out)
