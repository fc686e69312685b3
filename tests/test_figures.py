"""`noisysgd figures` and noisysgd.figures: the PNG files, the error paths, the plotted bounds,
the committed figures in docs/figures (their data equal what the code computes), and
`noisysgd plan --plot`."""

import json
import math
import os
import re
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import noisysgd
from noisysgd.cli import build_parser, main
from noisysgd.planning import PLATEAU_RTOL
from noisysgd.figures.ye_shokri import _YS_CURVES
from noisysgd.figures import (
    MATPLOTLIB_MISSING,
    PAPERS,
    SERIES_DIGITS,
    altschuler_talwar_figure_data,
    altschuler_talwar_figures,
    figure_series,
    plan_figure,
    plan_figure_data,
    write_figures,
    ye_shokri_figure_data,
    ye_shokri_figures,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
AT_ORDER = ("altschuler-talwar-fig1.png", "altschuler-talwar-fig2a.png",
            "altschuler-talwar-fig2b.png", "altschuler-talwar-crossover.png")
AT_FILES = {
    "altschuler-talwar-fig1.png",
    "altschuler-talwar-fig2a.png",
    "altschuler-talwar-fig2b.png",
    "altschuler-talwar-crossover.png",
}
REL = 1e-9


def _json(png: str) -> str:
    return png[:-4] + ".json"


@pytest.fixture(scope="module")
def data():  # (seconds: the tests that use it are marked slow)
    return altschuler_talwar_figure_data()


def run_cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- CLI


@pytest.mark.slow
def test_cli_writes_the_png_files(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out_dir = tmp_path / "new" / "figs"  # created, parents included
    code, out, err = run_cli(capsys, "figures", "--paper", "altschuler-talwar", "--out", str(out_dir))
    assert code == 0, err
    assert {p.name for p in out_dir.iterdir()} == AT_FILES | {_json(n) for n in AT_FILES}
    assert out.split() == [str(out_dir / f) for name in AT_ORDER for f in (name, _json(name))]
    for name in AT_FILES:
        content = (out_dir / name).read_bytes()
        assert len(content) > 10_000 and content.startswith(PNG_SIGNATURE)
        assert json.loads((out_dir / _json(name)).read_text(encoding="utf-8"))["name"] == name[:-4]


def test_paper_choices_include_all():
    parser = build_parser()
    for paper in [*PAPERS, "all"]:
        assert parser.parse_args(["figures", "--paper", paper, "--out", "x"]).paper == paper
    assert parser.parse_args(["figures", "--out", "x"]).paper == "all"


def test_help_shows_an_example(capsys):
    code, out, _ = run_cli(capsys, "figures", "--help")
    assert code == 0
    assert "noisysgd figures --paper altschuler-talwar --out" in out


def _assert_one_line_about_out(code, out, err):
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("noisysgd figures: error: --out:")


def test_out_is_a_file(tmp_path, capsys):
    target = tmp_path / "a-file"
    target.write_text("not a directory")
    args = ["figures", "--paper", "altschuler-talwar", "--out", str(target)]
    _assert_one_line_about_out(*run_cli(capsys, *args))
    _assert_one_line_about_out(*run_cli(capsys, "figures", "--out", str(target / "below")))
    assert target.read_text() == "not a directory"


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a non-root POSIX user")
def test_out_not_writable(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        _assert_one_line_about_out(*run_cli(capsys, "figures", "--out", str(locked)))
        _assert_one_line_about_out(*run_cli(capsys, "figures", "--out", str(locked / "sub")))
    finally:
        locked.chmod(0o700)


def test_without_matplotlib(tmp_path, capsys, monkeypatch):
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'noisysgd\[plot\]'"):
        altschuler_talwar_figures(tmp_path / "py")
    code, out, err = run_cli(capsys, "figures", "--out", str(tmp_path / "cli"))
    assert code == 1 and out == ""
    assert err == f"noisysgd figures: error: {MATPLOTLIB_MISSING}\n"
    assert not (tmp_path / "cli").exists() and not (tmp_path / "py").exists()


# --------------------------------------------------------------------------- the plotted data


def _hidden_state_curves(data):
    """(figure, A&T curve, its composition baseline on the same steps)."""
    for fig_key in ("fig1", "fig2a", "fig2b"):
        fig = data[fig_key]
        comp = fig.curves["composition"]
        for key, curve in fig.curves.items():
            if key == "composition" or not np.array_equal(curve.steps, comp.steps):
                continue
            yield f"{fig_key}/{key}", curve, comp


@pytest.mark.slow
def test_every_figure_has_its_curves(data):
    assert set(data) == {"fig1", "fig2a", "fig2b", "crossover"}
    names = sorted(name for name, _, _ in _hidden_state_curves(data))
    assert names == ["fig1/altschuler-talwar", "fig1/altschuler-talwar-sampled", "fig2a/altschuler-talwar",
                     "fig2b/m=0", "fig2b/m=0.001", "fig2b/m=0.01", "fig2b/m=0.1"]
    fig1 = data["fig1"].curves["altschuler-talwar"]
    assert fig1.steps[0] == 1 and fig1.steps[-1] == 10**7 and 150 <= fig1.steps.size <= 200
    for fig in data.values():
        run = fig.params["run"]
        for text in (f"n = {run.n}", f"b = {run.batch_size}", f"η = {run.learning_rate:g}",
                     f"z = {run.noise_multiplier:g}", "L = 1", "M = 1", "D = 1", "δ = 1e-05", run.batching):
            assert text in fig.caption, (fig.name, text)


@pytest.mark.slow
def test_hidden_state_bound_is_monotone_below_composition_and_plateaus(data):
    for name, at, comp in _hidden_state_curves(data):
        eps, base = at.epsilon, comp.epsilon
        assert np.all(np.isfinite(eps)) and np.all(eps > 0), name
        assert np.all(np.diff(eps) >= -REL * eps[1:]), f"{name}: not non-decreasing in T"
        assert np.all(eps <= base * (1 + REL)), f"{name}: above composition"
        tail = eps[-5:]
        assert np.ptp(tail) <= REL * tail[-1], f"{name}: not constant at the end"
        # composition keeps growing past the plateau, and ends far above the bound
        assert np.all(np.diff(base[-5:]) > 0), name
        assert base[-1] > 10 * eps[-1], name


@pytest.mark.slow
def test_plateau_starts_after_burn_in_for_convex_sampled_batches(data):
    """The published (B.2) flattens around T̄ (the paper's Figure 1); the sound bound
    flattens later and higher, where composition reaches the worst-case-batch bound."""
    fig = data["fig1"]
    t_bar = next(iter(fig.vlines.values()))
    assert t_bar == 2000.0  # Dn/(Lη) = 1·1000/(1·0.5)
    published = fig.curves["altschuler-talwar-sampled"]
    flat = np.flatnonzero(np.abs(published.epsilon - published.epsilon[-1]) <= REL * published.epsilon[-1])
    assert t_bar / 10 < published.steps[flat[0]] < 10 * t_bar
    sound = fig.curves["altschuler-talwar"]
    flat_sound = np.flatnonzero(np.abs(sound.epsilon - sound.epsilon[-1]) <= REL * sound.epsilon[-1])
    assert sound.steps[flat_sound[0]] > published.steps[flat[0]]
    assert np.all(sound.epsilon >= published.epsilon * (1 - REL))


@pytest.mark.slow
def test_strong_convexity_brings_the_plateau_earlier_and_lower(data):
    fig = data["fig2b"]
    plateaus = fig.params["plateaus"]
    keys = ["m=0", "m=0.001", "m=0.01", "m=0.1"]
    starts = [plateaus[k] for k in keys]
    finals = [fig.curves[k].epsilon[-1] for k in keys]
    assert starts == sorted(starts, reverse=True) and starts[-1] < starts[0]
    assert finals == sorted(finals, reverse=True) and finals[-1] < finals[0]


def _plan_agrees(fig_params, analysis, *, epochs=None, pld=True):
    """noisysgd.plan of the figure's run, on the figure's epochs (or ``epochs``)."""
    names = ["composition", "composition-pld", analysis] if pld else ["composition", analysis]
    return noisysgd.plan(fig_params["run"], delta=1e-5, analyses=names,
                         epochs=fig_params["epochs"] if epochs is None else epochs)


def _check_crossover_setting(fig, info, prefix=""):
    """The figure's curves and numbers for one run are plan's, and say what they claim."""
    analysis = info["analysis"]
    ep = info["epochs"]
    hidden = fig.curves[prefix + analysis]
    comp = fig.curves[prefix + "composition"]
    pld = fig.curves[prefix + "composition-pld"]
    assert np.array_equal(hidden.steps, ep) and np.array_equal(comp.steps, ep)
    # the figure's numbers are what noisysgd.plan reports for the same run and epochs
    both = _plan_agrees(info, analysis)
    rdp = _plan_agrees(info, analysis, pld=False)
    c = both.curves[analysis]
    assert info["crossover"] is not None and info["crossover"] == c.crossover_epoch
    assert info["crossover_rdp"] is not None and info["crossover_rdp"] == rdp.curves[analysis].crossover_epoch
    assert info["limit"] == c.limit and info["plateau_epoch"] == c.plateau_epoch
    np.testing.assert_array_equal(hidden.epsilon, c.epsilon)
    np.testing.assert_array_equal(comp.epsilon, both.curves["composition"].epsilon)
    exact = both.curves["composition-pld"].exact
    np.testing.assert_array_equal(pld.steps, ep[exact])
    np.testing.assert_array_equal(pld.epsilon, both.curves["composition-pld"].epsilon[exact])
    # ... exact to the epoch: plan on the two epochs around each cross-over agrees
    for key, pld_too in (("crossover", True), ("crossover_rdp", False)):
        e = info[key]
        if e > 1:
            around = _plan_agrees(info, analysis, epochs=[e - 1, e], pld=pld_too)
            assert around.curves[analysis].crossover_epoch == e, key
    # composition grows; PLD is the tighter composition bound
    for curve in (comp, pld):
        assert np.all(np.diff(curve.epsilon) >= 0) and curve.epsilon[-1] > 2 * curve.epsilon[0]
    idx = np.searchsorted(ep, pld.steps)
    assert np.all(pld.epsilon <= comp.epsilon[idx] * (1 + REL))
    # below both composition bounds exactly from the cross-over on (where PLD was computed)
    e = info["crossover"]
    below = hidden.epsilon[idx] < np.minimum(pld.epsilon, comp.epsilon[idx])
    np.testing.assert_array_equal(below, pld.steps >= e)
    assert np.all(hidden.epsilon[ep >= info["crossover_rdp"]] < comp.epsilon[ep >= info["crossover_rdp"]])
    # the hidden-state bound plateaus: within 0.1% of its limit from the plateau epoch on,
    # equal to it at the end, never above it
    eps, limit = hidden.epsilon, info["limit"]
    assert np.all(np.diff(eps) >= -REL * eps[1:])
    tail = eps[ep >= info["plateau_epoch"]]
    assert tail.size and np.all(tail >= limit * (1 - PLATEAU_RTOL)) and np.all(tail <= limit * (1 + REL))
    assert eps[ep < info["plateau_epoch"]].max(initial=0) < limit * (1 - PLATEAU_RTOL)
    assert eps[-1] == pytest.approx(limit, rel=REL)
    assert fig.dots[prefix + analysis] == (info["plateau_epoch"], eps[ep == info["plateau_epoch"]][0])
    # every cross-over is drawn, at its epoch
    for x in {info["crossover"], info["crossover_rdp"]}:
        assert any(v == x and f"epoch {x:,}" in label for label, v in fig.vlines.items())


@pytest.mark.slow
def test_altschuler_talwar_crossover_is_plans(data):
    fig = data["crossover"]
    p = fig.params
    _check_crossover_setting(fig, p)
    assert (p["crossover_rdp"], p["crossover"]) == (3494, 3819)
    assert p["limit"] == pytest.approx(29.678513550445, rel=1e-9) and p["plateau_epoch"] == 3489
    at, comp = fig.curves["altschuler-talwar"], fig.curves["composition"]
    ep = at.steps
    # below its cross-over with RDP the sound bound *is* composition RDP (its composition
    # branch), and from it on it is its limit: the kink of Figure 1
    before = ep < p["crossover_rdp"]
    np.testing.assert_allclose(at.epsilon[before], comp.epsilon[before], rtol=REL)
    assert np.all(at.epsilon[~before] == p["limit"])
    assert ep[0] == 1 and ep[-1] == 20_000
    for text in ("3,494", "3,819", "29.6785", "T = 100·epochs"):
        assert text in fig.caption, text
    assert "epoch 3,494 (T = 349,400;" in data["fig1"].caption
    lo, hi = fig.inset["xlim"]
    assert lo < p["crossover_rdp"] and p["crossover"] < hi


@pytest.mark.slow
def test_altschuler_talwar_crossover_without_pld_is_plans_rdp_crossover():
    data = altschuler_talwar_figure_data(points=20, max_steps=10**4, pld=False, crossover_epochs=5000,
                                         crossover_points=30)
    fig = data["crossover"]
    assert fig.params["crossover_rdp"] == 3494 and fig.params["crossover"] is None
    assert "composition-pld" not in fig.curves
    rdp = _plan_agrees(fig.params, "altschuler-talwar", pld=False)
    assert rdp.curves["altschuler-talwar"].crossover_epoch == 3494


# --------------------------------------------------------------------------- Ye & Shokri

YS_FILES = ("ye-shokri-fig1.png", "ye-shokri-fig2a.png", "ye-shokri-fig2b.png", "ye-shokri-crossover.png")
YS_PAPER = ("fig1", "fig2a", "fig2b")  # the paper's RDP figures
ALPHAS = (10.0, 15.0)


@pytest.fixture(scope="module")
def ys():
    return ye_shokri_figure_data()


def _c(fig, name, alpha):
    return fig.curves[f"{name}/α={alpha:g}"]


def _at(curve, k):
    i = int(np.searchsorted(curve.steps, k))
    assert curve.steps[i] == k
    return float(curve.epsilon[i])


@pytest.mark.slow
def test_ye_shokri_cli_writes_the_png_files(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    code, out, err = run_cli(capsys, "figures", "--paper", "ye-shokri", "--out", str(tmp_path))
    assert code == 0, err
    assert out.split() == [str(tmp_path / f) for name in YS_FILES for f in (name, _json(name))]
    assert {p.name for p in tmp_path.iterdir()} == {f for n in YS_FILES for f in (n, _json(n))}
    for name in YS_FILES:
        content = (tmp_path / name).read_bytes()
        assert len(content) > 10_000 and content.startswith(PNG_SIGNATURE)


def test_all_includes_ye_shokri(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    called = []
    for name in list(PAPERS):
        monkeypatch.setitem(PAPERS, name, lambda out, name=name: called.append(name) or [])
    code, _, err = run_cli(capsys, "figures", "--paper", "all", "--out", str(tmp_path))
    assert code == 0, err
    assert called == ["altschuler-talwar", "ye-shokri"]


@pytest.mark.slow
def test_ye_shokri_figures_have_their_curves_and_captions(ys):
    assert set(ys) == {*YS_PAPER, "crossover"}
    kinds = {
        "fig1": {"first-batch", "last-batch", "naive"},
        "fig2a": {"thm4.2", "last-batch", "composition", "composition-sampled"},
        "fig2b": {"thm4.3", "composition"},
    }
    for key in YS_PAPER:
        fig = ys[key]
        assert set(fig.curves) == {f"{k}/α={a:g}" for k in kinds[key] for a in ALPHAS}
        for curve in fig.curves.values():
            assert np.array_equal(curve.steps, np.arange(1, 1001))
            assert np.all(np.isfinite(curve.epsilon)) and np.all(curve.epsilon > 0)
        assert fig.xlabel == "K (epochs)" and "RDP ε" in fig.ylabel
        for text in ("α ∈ {10, 15}", "n = 50", "b = 2", "η = 0.02", "λ = 1", "β = 4", "S_g = 4",
                     "σ² = 4", "z = 20", "K = 1..1000", "not (ε, δ)"):
            assert text in fig.caption, (key, text)
    assert "Balle" in ys["fig1"].caption and "Left out" in ys["fig1"].caption
    assert "one per epoch" in ys["fig1"].caption
    assert "NOT a valid bound for shuffle" in ys["fig2a"].caption
    for a in ALPHAS:
        assert "NOT valid" in _c(ys["fig2a"], "composition-sampled", a).label
        assert "NOT" not in _c(ys["fig2a"], "composition", a).label


def test_theorem_4_2_curve_passes_through_published_values(ys):
    # Issue 4: the authors' code gives 0.007373 (K = 1), 0.014470 (K = 5), 0.015459 (converged).
    curve = _c(ys["fig2a"], "thm4.2", 10)
    assert _at(curve, 1) == pytest.approx(0.007373, abs=5e-7)
    assert _at(curve, 5) == pytest.approx(0.014470, abs=5e-7)
    assert curve.epsilon[-1] == pytest.approx(0.015459, abs=5e-7)
    assert np.ptp(curve.epsilon[-500:]) <= 1e-12  # converged well before K = 1000


def test_closed_forms_at_the_figure_setting(ys):
    # ρ(α) = α/200: the last batch after one epoch pays exactly one use (ε₀¹ = ρ), the
    # sound composition for shuffled batches pays ρ per epoch, and Theorem 2.1 is
    # 4ρ/(ηλ)·(1 − e^{−ληK/2}) = α·(1 − e^{−K/100}).
    fig1, fig2a, fig2b = ys["fig1"], ys["fig2a"], ys["fig2b"]
    k = np.arange(1, 1001)
    for a in ALPHAS:
        rho = a / 200
        assert _at(_c(fig1, "last-batch", a), 1) == pytest.approx(rho, rel=1e-12)
        np.testing.assert_allclose(_c(fig1, "naive", a).epsilon, a * -np.expm1(-k / 100), rtol=1e-12)
        np.testing.assert_allclose(_c(fig2a, "composition", a).epsilon, rho * k, rtol=1e-12)
        np.testing.assert_array_equal(_c(fig2a, "last-batch", a).epsilon, _c(fig1, "last-batch", a).epsilon)
        # the paper's composition ≈ (b/n)·ρ·K (their caption), same on both panels
        sampled = _c(fig2b, "composition", a).epsilon
        np.testing.assert_array_equal(_c(fig2a, "composition-sampled", a).epsilon, sampled)
        np.testing.assert_allclose(sampled, 0.04 * rho * k, rtol=0.02)


def test_ye_shokri_curves_are_ordered_as_in_the_paper(ys):
    fig1, fig2a = ys["fig1"], ys["fig2a"]
    for a in ALPHAS:
        first, last, naive = (_c(fig1, n, a).epsilon for n in ("first-batch", "last-batch", "naive"))
        assert np.all(first < last)
        assert np.all(naive > last)
        assert naive[-1] > 100 * last[-1]  # the naive baseline converges to a huge constant
        thm42 = _c(fig2a, "thm4.2", a).epsilon
        assert np.all(thm42 <= _c(fig2a, "last-batch", a).epsilon * (1 + REL))
        assert np.all(thm42 <= _c(fig2a, "composition", a).epsilon)  # the sound composition
        # the invalid sampled-Gaussian line starts below Theorem 4.2 and crosses it
        sampled = _c(fig2a, "composition-sampled", a).epsilon
        k = fig2a.params["crossover_sampled"][a]
        assert k == 8 and sampled[0] < thm42[0]
        assert np.all(thm42[k - 1:] < sampled[k - 1:]) and np.all(thm42[:k - 1] >= sampled[:k - 1])
    # the larger order costs more
    for fig in (ys[k] for k in YS_PAPER):
        for name in {key.split("/")[0] for key in fig.curves}:
            assert np.all(_c(fig, name, 15).epsilon > _c(fig, name, 10).epsilon)


def test_theorem_4_3_crosses_composition(ys):
    fig = ys["fig2b"]
    expected = {10.0: 34, 15.0: 48}
    for a in ALPHAS:
        thm, comp = _c(fig, "thm4.3", a).epsilon, _c(fig, "composition", a).epsilon
        k = fig.params["crossover"][a]
        assert k == expected[a]
        assert np.all(thm[:k - 1] >= comp[:k - 1]) and np.all(thm[k - 1:] < comp[k - 1:])
        assert comp[-1] > 10 * thm[-1]
        assert any(str(k) in label for label in fig.vlines)
    # converged values (the recursion's fixed point)
    assert _c(fig, "thm4.3", 10).epsilon[-1] == pytest.approx(0.0672406, rel=1e-5)
    assert _c(fig, "thm4.3", 15).epsilon[-1] == pytest.approx(0.1453135, rel=1e-5)


def test_every_ye_shokri_curve_is_non_decreasing_in_epochs(ys):
    for key, fig in ys.items():
        for name, curve in fig.curves.items():
            eps = curve.epsilon
            # the limit line is a lower bound on a lattice shared by its epochs: where the lattice
            # law stops changing (the oldest steps round to 0) it may dip by its float noise
            rel = 1e-7 if name.endswith("limit line") else REL
            assert np.all(np.diff(eps) >= -rel * eps[1:]), f"{key}/{name}"


# --------------------------------------------------------------------------- Ye & Shokri: composition
# grows, hidden state plateaus, the cross-over figure is plan's


def test_ye_shokri_curves_follow_the_table(ys):
    for key in YS_PAPER:
        rows = _YS_CURVES[key]
        expected = [f"{name}/α={a:g}" for a in ALPHAS for name, *_ in rows]
        assert list(ys[key].curves) == expected  # legend order: by order, then the table's
        for name, label, _, _, style in rows:
            for i, a in enumerate(ALPHAS):
                c = _c(ys[key], name, a)
                assert c.label == f"α = {a:g}: {label}"
                assert c.style == {"color": ("C0", "C1")[i], **style}


def test_figure_2a_says_its_bold_curve_is_the_flagged_reshuffle_variant(ys):
    fig = ys["fig2a"]
    for a in ALPHAS:
        label = _c(fig, "thm4.2", a).label
        assert "ye-shokri-reshuffle" in label and "NOT sound" in label
        assert _c(fig, "thm4.2", a).style["lw"] == max(c.style["lw"] for c in fig.curves.values())
    for text in ("ye-shokri-reshuffle", "NOT sound", "one random partition drawn once",
                 "fresh permutation every epoch", "ye-shokri refuses shuffle"):
        assert text in fig.caption, text
    assert "NOT sound" in fig.title


def test_ye_shokri_composition_is_linear_in_rdp(ys):
    """Composition at a fixed order: K times one epoch's RDP, for every composition curve."""
    k = np.arange(1, 1001)
    for key in YS_PAPER:
        for name, curve in ys[key].curves.items():
            if not name.startswith("composition"):
                continue
            eps = curve.epsilon
            np.testing.assert_allclose(eps, eps[0] * k, rtol=1e-9, err_msg=f"{key}/{name}")


def test_ye_shokri_hidden_state_curves_plateau(ys):
    """Theorems 3.3, 4.2 and 4.3 reach their limit within the plotted epochs and stay
    there; Theorem 2.1 approaches its limit α·(1 − e^(−K/100)) → α from below."""
    for key, names in (("fig1", ("first-batch", "last-batch")), ("fig2a", ("thm4.2",)),
                       ("fig2b", ("thm4.3",))):
        for name in names:
            for a in ALPHAS:
                eps = _c(ys[key], name, a).epsilon
                flat = np.flatnonzero(np.abs(eps - eps[-1]) > 1e-12 * eps[-1])
                start = flat[-1] + 2 if flat.size else 1  # the first epoch at the limit
                assert start <= 100, (key, name, a, start)
                assert np.all(eps[:start - 1] < eps[-1]), (key, name, a)
    for a in ALPHAS:
        naive = _c(ys["fig1"], "naive", a).epsilon
        assert np.all(naive < a) and naive[-1] > a * (1 - 1e-4)


@pytest.mark.slow
def test_ye_shokri_crossover_is_plans(ys):
    fig = ys["crossover"]
    settings = fig.params["settings"]
    assert set(settings) == {"sample", "cyclic"}
    for name, info in settings.items():
        assert info["analysis"] == "ye-shokri" and info["run"].batching == name
        _check_crossover_setting(fig, info, prefix=f"{name}/")
        assert np.array_equal(info["epochs"], np.arange(1, 1001))
        # an independent plan over every epoch to 200 reports the same numbers
        p = noisysgd.plan(info["run"], delta=1e-5, epochs="1:200",
                          analyses=["composition", "composition-pld", "ye-shokri"])
        c = p.curves["ye-shokri"]
        assert (c.crossover_epoch, c.limit, c.plateau_epoch) == (
            info["crossover"], info["limit"], info["plateau_epoch"])
    s, c = settings["sample"], settings["cyclic"]
    assert (s["crossover_rdp"], s["crossover"], s["plateau_epoch"]) == (76, 89, 7)
    assert (c["crossover_rdp"], c["crossover"], c["plateau_epoch"]) == (2, 2, 10)
    assert s["limit"] == pytest.approx(0.684825, rel=1e-5) and c["limit"] == pytest.approx(0.406907, rel=1e-5)
    # the runs are the paper figures' runs
    assert s["run"] == ys["fig2b"].params["run"] and c["run"] == ys["fig1"].params["run"]
    for text in ("n = 50", "b = 2", "η = 0.02", "λ = 1", "β = 4", "S_g = 4", "σ² = 4", "z = 20",
                 "L = 2", "δ = 1e-05", "169 orders", "every epoch 1..1000", "from epoch 89",
                 "RDP alone: 76", "0.6848", "0.4069", "Theorem 4.3", "Theorem 3.3",
                 "ye-shokri-reshuffle"):
        assert text in fig.caption, text
    assert fig.legend_loc == "below"


# --------------------------------------------------------------------------- every PNG


@pytest.mark.slow
def test_all_writes_every_png(tmp_path, capsys, monkeypatch):
    """--paper all through the CLI, at a lower resolution (the defaults are covered above)."""
    pytest.importorskip("matplotlib")
    monkeypatch.setitem(PAPERS, "altschuler-talwar", partial(
        altschuler_talwar_figures, points=30, pld=False, crossover_epochs=5000, crossover_points=30))
    monkeypatch.setitem(PAPERS, "ye-shokri", partial(ye_shokri_figures, max_epochs=100, crossover_epochs=120))
    code, out, err = run_cli(capsys, "figures", "--paper", "all", "--out", str(tmp_path))
    assert code == 0, err
    names = [*AT_ORDER, *YS_FILES]
    assert out.split() == [str(tmp_path / f) for n in names for f in (n, _json(n))]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*names, *map(_json, names)])
    for n in names:
        content = (tmp_path / n).read_bytes()
        assert len(content) > 10_000 and content.startswith(PNG_SIGNATURE), n


@pytest.mark.slow
def test_ye_shokri_knobs_shrink_the_grids_not_the_numbers():
    ys = ye_shokri_figure_data(max_epochs=10, crossover_epochs=120)
    assert all(c.steps[-1] == 10 for k in YS_PAPER for c in ys[k].curves.values())
    assert all(c.steps[-1] == 120 for c in ys["crossover"].curves.values() if c.steps.size > 20)
    assert ys["crossover"].params["settings"]["sample"]["crossover"] == 89
    assert "crossover" not in ye_shokri_figure_data(max_epochs=5, crossover=False)


# --------------------------------------------------------------------------- the committed figures (docs/figures)

DOCS = Path(__file__).resolve().parents[1] / "docs"
FIGURES = DOCS / "figures"
REGENERATE = "noisysgd figures --paper all --out docs/figures"
#: Relative tolerance between a committed value (SERIES_DIGITS significant digits) and
#: the value computed now: rounding moves a value by at most half a unit in its last
#: kept digit, 0.5·10^(1−digits) relative; twice that leaves room for any CPU/BLAS
#: difference (~1e-12) and still catches a change in the 5th significant digit.
SERIES_RTOL = 10.0 ** (1 - SERIES_DIGITS)
#: composition-pld's ε can move by a few PLD discretisation intervals with the FFT's
#: rounding (see tests/test_contract.py, test_pld_wobble_in_the_noise_is_bounded):
#: the same absolute slack as there.
PLD_ATOL = 20 * noisysgd.analyses.ANALYSES["composition-pld"].value_discretization_interval
COMMITTED = [("altschuler-talwar", k) for k in ("fig1", "fig2a", "fig2b", "crossover")] + [
    ("ye-shokri", k) for k in ("fig1", "fig2a", "fig2b", "crossover")]


def _close(committed, computed, *, atol: float, what: str) -> None:
    assert len(committed) == len(computed), what
    for i, (a, b) in enumerate(zip(committed, computed)):
        if b is None or a is None:  # not finite
            assert a is None and b is None, (what, i, a, b)
        else:
            assert abs(a - b) <= SERIES_RTOL * abs(b) + atol, (
                f"{what}[{i}]: committed {a!r}, computed now {b!r}; regenerate with `{REGENERATE}`")


@pytest.mark.parametrize("paper, key", [pytest.param(*c, marks=pytest.mark.slow) if c[0] == "altschuler-talwar" else c
                                        for c in COMMITTED])  # (the `data` fixture takes seconds)
def test_committed_figure_data_is_what_the_code_computes(request, paper, key):
    """docs/figures/<name>.json (written with the PNG by `noisysgd figures`) equals the
    figure the code computes today: every text exactly, every x exactly, every y to
    SERIES_RTOL.  The fixtures are the full figures, as `noisysgd figures` draws them."""
    fig = request.getfixturevalue("data" if paper == "altschuler-talwar" else "ys")[key]
    now = figure_series(fig, digits=None)
    committed = json.loads((FIGURES / f"{fig.name}.json").read_text(encoding="utf-8"))
    assert committed["digits"] == SERIES_DIGITS
    for field in ("name", "title", "xlabel", "ylabel", "caption"):
        assert committed[field] == now[field], f"{fig.name}: {field} changed; regenerate with `{REGENERATE}`"
    assert list(committed["curves"]) == list(now["curves"]), fig.name
    for k, curve in now["curves"].items():
        c = committed["curves"][k]
        assert c["label"] == curve["label"], (fig.name, k)
        assert c["x"] == curve["x"], (fig.name, k)
        atol = PLD_ATOL if k.endswith("composition-pld") else 0.0
        _close(c["y"], curve["y"], atol=atol, what=f"{fig.name}/{k}")
    for kind in ("vlines", "hlines"):
        assert list(committed[kind]) == list(now[kind]), (fig.name, kind)
        _close(list(committed[kind].values()), list(now[kind].values()), atol=0.0, what=f"{fig.name} {kind}")
    assert list(committed["dots"]) == list(now["dots"]), fig.name
    for k, xy in now["dots"].items():
        _close(committed["dots"][k], xy, atol=0.0, what=f"{fig.name} dot {k}")


def test_docs_show_exactly_the_committed_figures():
    """Every image docs/figures.md shows is committed (a PNG of at most 150 KB with its
    data file), and every committed figure is shown; they are the papers' figures."""
    shown = re.findall(r"!\[[^\]]*\]\(figures/([^)]+)\)", (DOCS / "figures.md").read_text(encoding="utf-8"))
    assert len(shown) == len(set(shown)) == 8
    assert set(shown) == {*AT_FILES, *YS_FILES}
    on_disk = {p.name for p in FIGURES.iterdir()}
    assert on_disk == {f for n in shown for f in (n, _json(n))}
    for name in shown:
        content = (FIGURES / name).read_bytes()
        assert content.startswith(PNG_SIGNATURE) and 10_000 < len(content) <= 150_000, (name, len(content))
    assert REGENERATE in (DOCS / "figures.md").read_text(encoding="utf-8")


def test_gitignore_keeps_the_committed_figures():
    """`*.png` is ignored except docs/figures/*.png."""
    lines = (DOCS.parent / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "*.png" in lines and "!/docs/figures/*.png" in lines
    assert lines.index("!/docs/figures/*.png") > lines.index("*.png")


def test_figure_series_rounds_to_significant_digits_and_keeps_integers():
    fig = noisysgd.figures.FigureData(
        name="t", title="t", caption="c",
        curves={"a": noisysgd.figures.Curve("a", np.array([1, 10, 2**40]),
                                          np.array([math.pi, 123456789.0, math.inf]))},
        vlines={"v": 2.5}, dots={"a": (10.0, 1 / 3)})
    s = figure_series(fig, digits=3)
    assert s["curves"]["a"] == {"label": "a", "x": [1, 10, 2**40], "y": [3.14, 123456789, None]}
    assert s["vlines"] == {"v": 2.5} and s["dots"] == {"a": [10, 0.333]}
    assert figure_series(fig, digits=None)["curves"]["a"]["y"][0] == math.pi
    json.dumps(s, allow_nan=False)  # valid JSON


# --------------------------------------------------------------------------- progress


@pytest.mark.slow
def test_progress_goes_to_stderr_only_when_asked(capsys):
    quiet = ye_shokri_figure_data(max_epochs=10, crossover=False)
    out, err = capsys.readouterr()
    assert out == "" and err == ""
    loud = ye_shokri_figure_data(max_epochs=10, crossover=False, progress=True)
    out, err = capsys.readouterr()
    assert out == "" and "figures: ye-shokri" in err
    assert all(figure_series(quiet[k], None) == figure_series(loud[k], None) for k in quiet)
    altschuler_talwar_figure_data(points=8, max_steps=10**3, crossover=False, progress=True)
    out, err = capsys.readouterr()
    assert out == "" and "figures: altschuler-talwar" in err


def test_write_figures_passes_progress_on(tmp_path, monkeypatch):
    called = []
    for name in list(PAPERS):
        monkeypatch.setitem(PAPERS, name, lambda out, name=name, **kw: called.append((name, kw)) or [])
    write_figures("all", tmp_path, progress=True)
    assert called == [("altschuler-talwar", {"progress": True}), ("ye-shokri", {"progress": True})]
    with pytest.raises(ValueError, match=r"paper must be one of .* Found 'nope'"):
        write_figures("nope", tmp_path)


# --------------------------------------------------------------------------- noisysgd plan --plot

#: The README's plan example (cyclic batches): plateaus 1.61 (shifted-interpolation),
#: 1.75 (order-wise-minimum), 1.76 (ye-shokri), budget 1.7; ye-shokri-naive → 816.
README_RUN = dict(n=60000, batch_size=256, batching="cyclic", steps=1, learning_rate=0.05,
                  noise_multiplier=5.0, lipschitz=1.0, smoothness=1.25, strong_convexity=0.01)


@pytest.fixture(scope="module")
def readme_plan():
    return noisysgd.plan(noisysgd.Run(**README_RUN), delta=1e-5, epochs="1:1000:log25", epsilon=1.7)


def test_plan_plot_axis_covers_the_curves_that_matter(readme_plan):
    p = readme_plan
    fig = plan_figure_data(p)
    lo, hi = fig.ylim
    limits = {k: p.curves[k].limit for k in ("shifted-interpolation", "order-wise-minimum", "ye-shokri")}
    assert [round(v, 2) for v in limits.values()] == [1.61, 1.75, 1.76]
    # every sound hidden-state bound near the best, the best and the budget are inside ...
    for k in ("shifted-interpolation", "order-wise-minimum", "ye-shokri", "best"):
        eps = fig.curves[k].epsilon
        assert lo < eps.min() and eps.max() < hi, k
    assert lo < 1.7 < hi
    # ... and spread over the axis, not squeezed into a band: on a linear axis the
    # plateaus 1.61 and 1.76 are over a third of its height apart
    assert fig.yscale == "linear"
    assert (limits["ye-shokri"] - limits["shifted-interpolation"]) / (hi - lo) > 1 / 3
    # the curves that blow the range are cut, and say so
    naive = fig.curves["ye-shokri-naive"]
    assert naive.epsilon.min() > hi and "[off the axes: above ε" in naive.label
    for k in ("composition", "composition-pld"):
        assert fig.curves[k].epsilon.max() > hi and "[above the axes from epoch 2]" in fig.curves[k].label
    assert "cut curves say so" in fig.title
    for k in ("shifted-interpolation", "ye-shokri", "best"):
        assert "axes" not in fig.curves[k].label
    # the data are still the plan's, uncut
    np.testing.assert_array_equal(naive.epsilon, p.curves["ye-shokri-naive"].epsilon)
    assert fig.legend_loc == "below"  # outside the axes: it covers no curve


@pytest.mark.slow
def test_plan_plot_log_axis_when_the_range_is_wide():
    """Sampled batches: the best bound grows from 0.32 to 4.5 over 200 epochs (log axis),
    ye-shokri's plateau 4.99 is kept, ye-shokri-naive (39 after one epoch) is cut."""
    run = noisysgd.Run(n=2000, batch_size=32, batching="sample", steps=1, learning_rate=0.5,
                       noise_multiplier=4.0, lipschitz=1.0, smoothness=1.0, strong_convexity=0.01)
    p = noisysgd.plan(run, delta=1e-5, epochs=[1, 10, 100, 200], epsilon=1.7,
                      analyses=["composition", "ye-shokri", "ye-shokri-naive"])
    fig = plan_figure_data(p)
    lo, hi = fig.ylim
    assert fig.yscale == "log"
    assert lo < p.best_epsilon.min() and max(p.best_epsilon.max(), p.curves["ye-shokri"].limit, 1.7) < hi
    assert hi < 10 < p.curves["ye-shokri-naive"].epsilon.min()
    assert "off the axes" in fig.curves["ye-shokri-naive"].label


@pytest.mark.parametrize("suffix, magic", [(".png", PNG_SIGNATURE), (".PDF", b"%PDF-"), (".svg", b"<?xml")])
def test_plan_plot_format_follows_the_suffix(tmp_path, readme_plan, suffix, magic):
    pytest.importorskip("matplotlib")
    path = plan_figure(readme_plan, tmp_path / f"curve{suffix}")
    content = path.read_bytes()
    assert content.startswith(magic) and len(content) > 5_000
    if suffix == ".svg":
        assert b"<svg" in content[:2000]


def test_plan_plot_refuses_an_unknown_suffix(tmp_path, readme_plan, capsys):
    with pytest.raises(ValueError, match=r"^plot must end in \.png, \.pdf, \.svg .*Found '.*curve\.jpg'"):
        plan_figure(readme_plan, tmp_path / "curve.jpg")
    assert not (tmp_path / "curve.jpg").exists()
    code = main(["plan", "--n", "1000", "--batch-size", "10", "--batching", "cyclic", "--lr", "0.1",
                 "--noise-multiplier", "3", "--lipschitz", "1", "--smoothness", "1", "--delta", "1e-5",
                 "--epochs", "1:3", "--plot", str(tmp_path / "curve.jpg")])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--plot" in err and "curve.jpg" in err and "Traceback" not in err
