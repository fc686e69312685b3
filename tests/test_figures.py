"""`noisysgd figures` and noisysgd.plots: the PNG files, the error paths, and the plotted bounds."""

import os
import sys

import numpy as np
import pytest

from noisysgd.cli import build_parser, main
from noisysgd.plots import (
    MATPLOTLIB_MISSING,
    PAPERS,
    altschuler_talwar_figure_data,
    altschuler_talwar_figures,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
AT_FILES = {
    "altschuler-talwar-fig1.png",
    "altschuler-talwar-fig2a.png",
    "altschuler-talwar-fig2b.png",
    "altschuler-talwar-crossover.png",
}
REL = 1e-9


@pytest.fixture(scope="module")
def data():
    return altschuler_talwar_figure_data()


def run_cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- CLI


def test_cli_writes_the_png_files(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out_dir = tmp_path / "new" / "figs"  # created, parents included
    code, out, err = run_cli(capsys, "figures", "--paper", "altschuler-talwar", "--out", str(out_dir))
    assert code == 0, err
    assert {p.name for p in out_dir.iterdir()} == AT_FILES
    assert out.split() == [str(out_dir / name) for name in (
        "altschuler-talwar-fig1.png", "altschuler-talwar-fig2a.png",
        "altschuler-talwar-fig2b.png", "altschuler-talwar-crossover.png",
    )]
    for name in AT_FILES:
        content = (out_dir / name).read_bytes()
        assert len(content) > 10_000 and content.startswith(PNG_SIGNATURE)


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


def test_strong_convexity_brings_the_plateau_earlier_and_lower(data):
    fig = data["fig2b"]
    plateaus = fig.params["plateaus"]
    keys = ["m=0", "m=0.001", "m=0.01", "m=0.1"]
    starts = [plateaus[k] for k in keys]
    finals = [fig.curves[k].epsilon[-1] for k in keys]
    assert starts == sorted(starts, reverse=True) and starts[-1] < starts[0]
    assert finals == sorted(finals, reverse=True) and finals[-1] < finals[0]


def test_crossover_with_rdp_and_pld_composition(data):
    fig = data["crossover"]
    at, comp, pld = (fig.curves[k] for k in ("altschuler-talwar", "composition", "composition-pld"))
    assert 10 <= pld.steps.size <= 20
    # PLD composition is tighter than RDP composition at every T where it was computed
    idx = np.searchsorted(comp.steps, pld.steps)
    assert np.array_equal(comp.steps[idx], pld.steps)
    assert np.all(pld.epsilon <= comp.epsilon[idx] * (1 + REL))
    # the bound equals RDP composition before the cross-over and is below it after
    t_rdp, t_pld = fig.params["crossover_rdp"], fig.params["crossover_pld"]
    before = at.steps < t_rdp
    assert np.allclose(at.epsilon[before], comp.epsilon[before], rtol=REL)
    assert np.all(at.epsilon[at.steps >= t_rdp] < comp.epsilon[at.steps >= t_rdp])
    # ... and overtakes the tighter PLD baseline later, exactly at the reported grid point
    assert t_rdp <= t_pld
    for t, e in zip(pld.steps, pld.epsilon):
        a = at.epsilon[np.searchsorted(at.steps, t)]
        assert (a < e * (1 - REL)) == (t >= t_pld), t
