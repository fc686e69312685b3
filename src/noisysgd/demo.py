"""``noisysgd demo``: what the defaults give you, then one run certified two ways, on data that ships with scikit-learn.

On the digits data (1,797 8×8 images, 10 classes; 297 held out for test), it
first fits NoisySGDClassifier(epsilon=...) with its defaults and prints
what a user gets: the regime the automatic configuration chose (hidden state
or DP-SGD's amplified composition), the certificate (ε, δ and its analysis)
and the test accuracy.  Then one fixed cyclic run (300 epochs of batches of
500) certified two ways at the same (ε, δ): hidden state vs composition,
as the noise each needs; beside it DP-SGD's regime for that run, and the run
without noise.

In detail (pixels divided by 16, their known range — no statistic of the
data is used):

(d) the defaults: ``NoisySGDClassifier(epsilon, delta, classes=range(10))``,
    everything else its default (the regime, batches, epochs, λ, step and
    clip searched; the rows centered on a private mean);
(a) the cyclic run with the noise calibrated by the best sound bound for the
    final model only (hidden state: here shifted interpolation, Ye–Shokri and
    composition, order by order);
(b) the same run with the noise calibrated by composition (RDP and PLD), as a
    standard DP-SGD library would certify it;
(p) DP-SGD's regime for it: the same batch size, steps and step size with
    Poisson batches, certified by (amplified) composition — where the run
    has batches smaller than the data;
(c) the cyclic run without noise (not private), for reference.

It prints a short summary and writes a report directory: ``report.md``,
``demo.json``, the certificate of every private row, and two plots (ε versus epochs by
analysis at the noise of (a); test accuracy of every row).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from pathlib import Path

import numpy as np

from . import __version__
from .io import atomic_directory, write_json
from .text import queries_text
from .planning import plan
from .figures import plan_figure

__all__ = ["CONFIG", "run_demo", "write_report", "table", "summary"]

#: The configuration of the fixed cyclic run compared two ways (see the module docstring);
#: the defaults' row (d) sets none of it.
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
COMPOSITION = ["composition", "composition-pld"]


def _data(seed: int):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = X / 16.0  # the pixel range is known to be [0, 16]: a data-independent scaling
    return train_test_split(X, y, test_size=297, random_state=seed, stratify=y)


@contextlib.contextmanager
def _quiet_near_chance():
    """No "barely better than predicting one class" warning for the rows meant to show it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*barely better than predicting one class", category=UserWarning)
        yield


def _run_of(clf) -> dict:
    """The shape of the run ``clf`` trained: what the rows are compared on."""
    run = clf.run_
    return {"batching": run.batching, "batch_size": int(run.batch_size), "steps": int(run.steps),
            "epochs": float(run.epochs), "learning_rate": float(run.learning_rate)}


def _row(key: str, method: str, regime, clf, Xte, yte) -> dict:
    rep = clf.privacy_report_
    return {"key": key, "method": method, "regime": regime, "certified_by": rep["best_analysis"],
            "noise_multiplier": float(clf.noise_multiplier_), "epsilon": float(clf.epsilon_),
            "delta": float(rep.get("delta_total", rep["delta"])), "test_accuracy": float(clf.score(Xte, yte)),
            "run": _run_of(clf)}


def run_demo(*, epsilon: float = 1.0, delta: float = 1e-5, seed: int = 0) -> dict:
    """Train (d), (a), (b), (p), (c) and return everything the report shows."""
    from .estimators import NoisySGDClassifier
    from .train import Softmax, sgd

    started = time.perf_counter()
    Xtr, Xte, ytr, yte = _data(seed)
    classes = list(range(10))  # digits' ten labels: public, declared (not read off the data)
    # (d) what a user gets: the defaults, nothing set but the target and the declared labels
    defaults = NoisySGDClassifier(epsilon=epsilon, delta=delta, classes=classes, random_state=seed).fit(Xtr, ytr)
    config = defaults.privacy_report_["config"]
    chosen = config["chosen"]
    clip = config.get("clip")

    common = {k: CONFIG[k] for k in ("batching", "batch_size", "epochs", "alpha", "feature_clip",
                                     "learning_rate", "multi_class")}
    common["classes"] = classes
    common["average"] = False  # (a), (b), (p) release the same output, the final iterate: only the bound differs
    # ... of the same run on the same rows: no range query, zeros as the start and no release check (the
    # defaults' class prior and check would replace a near-chance composition model by the prior)
    common["feature_range"], common["prior"] = None, None
    hidden = NoisySGDClassifier(epsilon=epsilon, delta=delta, random_state=seed, **common).fit(Xtr, ytr)
    with _quiet_near_chance():  # composition's model may be near chance: the table says so, no warning
        comp = NoisySGDClassifier(epsilon=epsilon, delta=delta, random_state=seed,
                                  analysis=COMPOSITION, **common).fit(Xtr, ytr)
    run = hidden.run_
    # (p) DP-SGD's regime for the same run: Poisson batches at rate b/n, the same steps and step size,
    # certified by composition (amplified by the sampling).  Only where the batches are smaller than n.
    poisson = None
    if run.batch_size < run.n:
        with _quiet_near_chance():
            poisson = NoisySGDClassifier(epsilon=epsilon, delta=delta, random_state=seed, analysis=COMPOSITION,
                                         **{**common, "batching": "poisson",
                                            "learning_rate": float(run.learning_rate)}).fit(Xtr, ytr)
    # (c) runs on the rows (a) trained on: clipped, minus (a)'s private mean, clipped to its R_c
    centered = hidden.center_ is not None
    from .preprocessing import center_rows

    def rows_of(X):
        return center_rows(X, hidden.center_, CONFIG["feature_clip"]) if centered else X

    plain = sgd(run, Softmax(10), rows_of(Xtr), ytr, feature_clip=hidden.feature_clip_,
                intercept_scaling=hidden.intercept_scaling_, random_state=seed)
    acc_plain = float(np.mean(plain.predict(rows_of(Xte)) == yte))
    # What the composition-calibrated model actually is: every analysis at its noise.
    from .accountant import epsilon as eps_report

    comp_all = eps_report(comp.run_, delta=comp.fit_.report.delta)
    actually = comp_all.epsilon
    query = comp.privacy_report_.get("preprocessing")
    if query is not None and actually is not None:  # the model with the mean its rows were centered on
        from .accountant import compose_query

        actually = compose_query({}, comp_all.epsilon, comp_all.delta, comp_all.run.adjacency, query,
                                 report=comp_all)[0]
    first = _row("defaults", f"NoisySGDClassifier(epsilon={epsilon:g}, delta={delta:g}), the defaults",
                 chosen["regime"], defaults, Xte, yte)
    first["clip_factor"] = None if clip is None else clip.get("clip_factor")
    first["average"] = defaults.privacy_report_["certificate"]["trainer_enforced"].get("release")
    first["guarantee"] = defaults.privacy_report_["certificate"]["guarantee"]
    rows = [
        first,
        _row("hidden_state", "cyclic, final model only (hidden state)", "hidden state", hidden, Xte, yte),
        _row("composition", "cyclic, every iterate (composition)", "composition", comp, Xte, yte),
    ]
    if poisson is not None:
        rows.append(_row("dp_sgd", "Poisson, every iterate (DP-SGD's regime)", "amplified composition",
                         poisson, Xte, yte))
    rows.append({"key": "no_noise", "method": "cyclic, no noise (not private)", "regime": None,
                 "certified_by": None, "noise_multiplier": 0.0, "epsilon": None, "delta": None,
                 "test_accuracy": acc_plain, "run": _run_of(hidden)})
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
    certificates = {"defaults": defaults.privacy_report_, "hidden_state": hidden.privacy_report_,
                    "composition": comp.privacy_report_}
    if poisson is not None:
        certificates["dp_sgd"] = poisson.privacy_report_
    return {
        "noisysgd_version": __version__,
        "epsilon": epsilon, "delta": delta, "seed": seed, "intercept_scaling": hidden.intercept_scaling_,
        "centered": centered, "feature_clip_after_centering": hidden.feature_clip_,
        "config": dict(CONFIG), "n_train": int(len(Xtr)), "n_test": int(len(Xte)),
        "defaults_config": {"regime": chosen["regime"], "explanation": config.get("explanation"),
                            "clip": clip},
        "defaults_queries": _queries(defaults.privacy_report_),
        "run": run.to_dict(),
        "rows": rows,
        "by_analysis": by_analysis,
        "composition_model_is_actually": actually,
        "certificates": certificates,
        "plan": curves,
        "seconds": time.perf_counter() - started,
    }


def _fmt(x, digits=4):
    if x is None:
        return "-"
    return f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def _shape(run: dict) -> str:
    """'Poisson batches of 256, 100 epochs (600 steps)'."""
    kind = {"poisson": "Poisson batches", "cyclic": "cyclic batches", "full": "full batches",
            "shuffle": "shuffled batches", "shuffle-once": "batches shuffled once",
            "sample": "sampled batches"}.get(run["batching"], f"{run['batching']} batches")
    size = "" if run["batching"] == "full" else f" of {run['batch_size']}"
    return f"{kind}{size}, {run['epochs']:g} epochs ({run['steps']} steps)"


def table(result: dict) -> str:
    """The printed table of the fixed run's rows (every row but the defaults')."""
    lines = []
    head = ["run", "certified by", "noise z", "epsilon", "test accuracy"]
    body = [[r["method"], r["certified_by"] or "-", _fmt(r["noise_multiplier"]),
             _fmt(r["epsilon"]), f"{r['test_accuracy']:.3f}"] for r in result["rows"][1:]]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in body]
    return "\n".join(lines)


#: The demo's table is narrow: the shorter names of :data:`noisysgd.text.QUERY_NAMES`.
_SHORT_NAMES = (("feature_range", "ranges"), ("center", "mean"), ("curvature", "curvature"),
                ("class_prior", "class prior"), ("release_check", "release check"))


def _queries(certificate: dict) -> str | None:
    """The private queries a certificate covers besides the model, in a few words."""
    return queries_text(certificate.get("preprocessing") or {}, _SHORT_NAMES)


def _rows(result: dict) -> dict:
    return {r["key"]: r for r in result["rows"]}


def _defaults_block(result: dict) -> list[str]:
    d = result["rows"][0]
    regime = d["regime"] + (" (DP-SGD's)" if d["regime"] == "amplified composition" else "")
    shape = _shape(d["run"])
    if d.get("clip_factor") is not None:
        shape += f", gradients clipped at {d['clip_factor']:g} L"
    released = "final model and " + result["defaults_queries"] if result.get("defaults_queries") else "final model"
    return [
        f"What you get: NoisySGDClassifier(epsilon={result['epsilon']:g}, delta={result['delta']:g}), "
        "every other parameter its default",
        f"  regime chosen  {regime}:",
        f"                 {shape}",
        f"  certificate    epsilon = {d['epsilon']:.5g} (target {result['epsilon']:g}), delta = {d['delta']:g}, "
        f"by {d['certified_by']}",
        f"                 ({released})",
        f"  test accuracy  {d['test_accuracy']:.3f}",
    ]


def _lesson(result: dict) -> list[str]:
    """What the rows say, from the numbers themselves (wrapped to 96 columns)."""
    import textwrap

    r = _rows(result)
    d, a, b, p = r["defaults"], r["hidden_state"], r["composition"], r.get("dp_sgd")
    text = (f"For this run hidden state needs {b['noise_multiplier'] / a['noise_multiplier']:.1f}x less noise "
            "than composition")
    if p is None:
        text += ". "
    elif p["noise_multiplier"] >= a["noise_multiplier"]:
        text += f", {p['noise_multiplier'] / a['noise_multiplier']:.1f}x less than DP-SGD's regime. "
    else:
        text += f"; DP-SGD's regime needs {a['noise_multiplier'] / p['noise_multiplier']:.1f}x less than hidden state. "
    if d["regime"] == "amplified composition":
        dr, ar = d["run"], a["run"]
        how = (f"{_shape(dr).split(',')[0]}, {dr['steps']} steps of size {dr['learning_rate']:.3g} (this run: "
               f"{ar['steps']} of {ar['learning_rate']:.3g})"
               + (", gradients clipped" if d.get("clip_factor") is not None else ""))
        if d["test_accuracy"] > a["test_accuracy"]:
            text += (f"The defaults do better ({d['test_accuracy']:.3f} against {a['test_accuracy']:.3f}) "
                     f"with a run shaped for composition: {how}. ")
        else:
            text += (f"The defaults' run, shaped for composition ({how}), reaches {d['test_accuracy']:.3f} "
                     f"against hidden state's {a['test_accuracy']:.3f}. ")
        text += "They score both regimes by one utility proxy and keep the better: here, DP-SGD's."
    else:
        text += (f"The defaults chose hidden state here ({_shape(d['run'])}, {d['test_accuracy']:.3f}): they "
                 "score both regimes by one utility proxy and keep the better.")
    return textwrap.wrap(text, width=96)


def summary(result: dict, out=None) -> str:
    """The text ``noisysgd demo`` prints."""
    cfg = result["config"]
    lines = [f"noisysgd demo: digits, {result['n_train']:,} training images ({result['n_test']} held out), "
             f"(epsilon, delta) = ({result['epsilon']:g}, {result['delta']:g})", ""]
    lines += _defaults_block(result)
    lines += ["",
              "The same cyclic run certified two ways: hidden state vs composition (noise needed for "
              "the same",
              f"epsilon), and DP-SGD's regime beside it; {cfg['epochs']} epochs of batches of "
              f"{cfg['batch_size']}, lambda = {cfg['alpha']:g}:",
              "", table(result), ""]
    lines += _lesson(result)
    if out is not None:
        lines.append(f"report: {out}/report.md ({result['seconds']:.1f} s)")
    return "\n".join(lines)


def _markdown(result: dict) -> str:
    cfg, run = result["config"], result["run"]
    d = result["rows"][0]
    r = _rows(result)
    md = [
        "# noisysgd demo",
        "",
        f"noisysgd {result['noisysgd_version']}; target (ε, δ) = ({result['epsilon']:g}, "
        f"{result['delta']:g}), replace-one adjacency; seed {result['seed']}; "
        f"{result['seconds']:.1f} s.  Data: {cfg['dataset']}.  Test accuracy is measured on the "
        "held-out images; nothing computed on the training data is reported.",
        "",
        "## What the defaults give you",
        "",
        f"`NoisySGDClassifier(epsilon={result['epsilon']:g}, delta={result['delta']:g}, "
        "classes=range(10))`, every other parameter its default (`\"auto\"`): the configuration "
        "searches a hidden-state regime (cyclic or full batches, last iterate, certified by a "
        "hidden-state analysis) and an amplified-composition regime (DP-SGD's Poisson batches, "
        "every iterate certified by composition), scores both by the same utility proxy and keeps "
        "the one whose proxy is smaller.",
        "",
        "| regime chosen | run | certified by | noise multiplier z | ε | δ | test accuracy |",
        "|---|---|---|---|---|---|---|",
        f"| {d['regime']} | {_shape(d['run'])}"
        + (f", gradients clipped at {d['clip_factor']:g} L" if d.get("clip_factor") is not None else "")
        + f" | {d['certified_by']} | {_fmt(d['noise_multiplier'])} | {d['epsilon']:.5g} | {d['delta']:g} | "
        f"{d['test_accuracy']:.3f} |",
        "",
        f"Certificate (`certificate_defaults.json`): {d['guarantee']}",
        "",
        f"The search's explanation: {result['defaults_config']['explanation']}",
        "",
        "## One cyclic run certified two ways, and DP-SGD's regime beside it",
        "",
        f"Softmax regression (multinomial logistic), features clipped to norm {cfg['feature_clip']:g}"
        + (f", centered on a differentially private mean (the estimator's default; its cost is in ε) and "
           f"clipped to norm {result['feature_clip_after_centering']:.3g}" if result.get("centered") else "")
        + f", plus a bias coordinate {result.get('intercept_scaling', 1.0):.3g} "
        f"(the estimator's default: a quarter of the clip), L2 regularization λ = {cfg['alpha']:g}.  "
        f"Run: {run['batching']} batches of {run['batch_size']} ({run['steps_per_epoch']} steps per "
        f"epoch), {cfg['epochs']} epochs = {run['steps']} steps, step size η = "
        f"{run['learning_rate']:.4g}, gradient norm bound L = {run['lipschitz']:.4g} (derived from the "
        f"feature clip and the bias coordinate: √(2(R² + s²))), smoothness M + λ = {run['smoothness']:.4g}, "
        "strong convexity λ.",
        "",
        "| run | regime | certified by | batches | steps | noise multiplier z | ε | test accuracy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"][1:]:
        md.append(f"| {row['method']} | {row['regime'] or '-'} | {row['certified_by'] or '-'} | "
                  f"{row['run']['batching']}, b = {row['run']['batch_size']} | {row['run']['steps']} | "
                  f"{_fmt(row['noise_multiplier'])} | {_fmt(row['epsilon'])} | {row['test_accuracy']:.3f} |")
    md += [
        "",
        "The cyclic rows train the same algorithm with the same hyperparameters; only the noise differs: "
        "the composition row is what a DP-SGD library that accounts every iterate would add for the "
        f"same (ε, δ). That model is in fact ({_fmt(result['composition_model_is_actually'])}, δ)-DP for "
        "its final " + ("iterate and its private mean. " if result.get("centered") else "iterate. ")
        + ("DP-SGD's regime keeps the batch size, the steps and the step size but draws Poisson batches "
           "at rate b/n, so composition is amplified by the sampling. " if "dp_sgd" in r else "")
        + "The hidden-state bound lets this run train long at no further privacy cost; the defaults' "
        "run above shows what a run shaped for its own regime does.",
        "",
        " ".join(_lesson(result)),
        "",
        "### ε of each analysis for the cyclic run, at the noise of hidden state and of composition",
        "",
        "| analysis | applies | sound | ε at z of hidden state | ε at z of composition | why not |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in result["by_analysis"].items():
        md.append(f"| {name} | {'yes' if row['applies'] else 'no'} | {'yes' if row['sound'] else 'NO'} | "
                  f"{_fmt(row['epsilon'])} | {_fmt(row['epsilon_at_composition_noise'])} | "
                  f"{(row['reason'] or '').replace('|', '/')} |")
    md += [
        "",
        "![ε versus epochs](epsilon_vs_epochs.png)",
        "",
        ("The curves are the cyclic run's training ε at the hidden-state row's noise; that row's ε is the "
         "total of the model and the private mean its rows were centered on (composed in GDP or RDP, as "
         "its certificate says)." if result.get("centered") else
         "The curves are the cyclic run's ε at the hidden-state row's noise."),
        "",
        "![test accuracy](accuracy.png)",
        "",
        "Certificates: `certificate_defaults.json`, `certificate_hidden_state.json`, "
        "`certificate_composition.json`" + (", `certificate_dp_sgd.json`." if "dp_sgd" in r else "."),
        "",
    ]
    return "\n".join(md)


_SHORT = {"defaults": "the defaults", "hidden_state": "cyclic: hidden state",
          "composition": "cyclic: composition", "dp_sgd": "Poisson: DP-SGD's regime",
          "no_noise": "cyclic: no noise"}
_COLOR = {"defaults": "C2", "hidden_state": "C0", "composition": "C3", "dp_sgd": "C1", "no_noise": "0.6"}


def _accuracy_plot(result: dict, path: Path) -> None:
    from .figures.draw import load_matplotlib

    Figure, FigureCanvasAgg = load_matplotlib()
    rows = result["rows"]
    height = 1.5 + 0.5 * len(rows)  # inches: 0.85 below the axes, 0.65 above
    fig = Figure(figsize=(7.5, height), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.3, 0.85 / height, 0.62, (height - 1.5) / height))
    labels = [_SHORT[r["key"]] + (f"\n({r['regime']})" if r["key"] == "defaults" else "") for r in rows]
    bars = ax.barh(labels[::-1], [r["test_accuracy"] for r in rows][::-1],
                   color=[_COLOR[r["key"]] for r in rows][::-1])
    for bar, row in zip(bars, rows[::-1]):
        note = ("not private" if row["epsilon"] is None else
                row["certified_by"] if row["key"] == "defaults" else f"z = {row['noise_multiplier']:.3g}")
        ax.text(row["test_accuracy"] + 0.01, bar.get_y() + bar.get_height() / 2,
                f"{row['test_accuracy']:.3f}  ({note})", va="center", fontsize=8)
    ax.axhline(len(rows) - 1.5, color="0.3", lw=0.8, ls="--")  # the defaults above, the fixed run below
    ax.set_xlim(0, 1.32)  # room for the notes right of the bars
    ax.set_xticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_xlabel("test accuracy (digits, 297 held-out images)")
    cfg = result["config"]
    ax.set_title(f"(ε, δ) = ({result['epsilon']:g}, {result['delta']:g}): the defaults; below, one run "
                 f"({cfg['epochs']} epochs, b = {cfg['batch_size']})\ncertified two ways, "
                 "DP-SGD's regime beside it, and without noise (z: noise for the same ε)", fontsize=9)
    fig.savefig(path, format="png")


def write_report(result: dict, out) -> Path:
    """Write the report directory (atomically; an earlier demo report there is replaced)."""
    data = {k: v for k, v in result.items() if k not in ("plan", "certificates")}
    data["plan"] = result["plan"].to_dict()
    with atomic_directory(out, replace_marker=MARKER) as tmp:
        write_json(tmp / MARKER, data)
        for name, cert in result["certificates"].items():
            write_json(tmp / f"certificate_{name}.json", cert)
        plan_figure(result["plan"], tmp / "epsilon_vs_epochs.png")
        _accuracy_plot(result, tmp / "accuracy.png")
        (tmp / "report.md").write_text(_markdown(result), encoding="utf-8")
    return Path(out)
