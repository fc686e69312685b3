"""`noisysgd epsilon`: flags, JSON schema, agreement with the API, one-line errors with exit 2."""

import json
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import noisysgd
from noisysgd.cli import main

RUN_FLAGS = [
    "--n", "60000", "--batch-size", "256", "--epochs", "3", "--lr", "0.5",
    "--noise-multiplier", "1.0", "--lipschitz", "1.0", "--batching", "poisson",
]


def run_cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_matches_the_api(capsys):
    code, out, err = run_cli(capsys, "epsilon", *RUN_FLAGS, "--delta", "1e-5", "--json")
    assert code == 0
    data = json.loads(out)
    run = noisysgd.Run.from_epochs(epochs=3, n=60000, batch_size=256, batching="poisson", learning_rate=0.5,
                                   noise_multiplier=1.0, lipschitz=1.0)
    report = noisysgd.epsilon(run, delta=1e-5)
    assert set(data) >= {"delta", "adjacency", "epsilon", "analyses"}
    assert data["delta"] == 1e-5 and data["adjacency"] == "replace"
    assert data["epsilon"] == report.epsilon
    for name in ("composition", "composition-pld"):
        entry = data["analyses"][name]
        assert set(entry) >= {"applies", "reason", "sound", "epsilon", "order", "rdp"}
        assert entry["epsilon"] == report.results[name].epsilon
    comp = data["analyses"]["composition"]
    assert len(comp["rdp"]) == len(noisysgd.DEFAULT_ORDERS)
    assert comp["rdp"][format(comp["order"], ".12g")] == pytest.approx(
        float(report.results["composition"].rdp[list(noisysgd.DEFAULT_ORDERS).index(comp["order"])])
    )


def test_human_table(capsys):
    code, out, _ = run_cli(capsys, "epsilon", *RUN_FLAGS, "--delta", "1e-5", "--adjacency", "add-remove")
    assert code == 0
    assert "composition-pld" in out and "best sound epsilon" in out and "adjacency = add-remove" in out


def test_analysis_orders_and_conversion_flags(capsys):
    args = ["epsilon", *RUN_FLAGS, "--delta", "1e-5", "--analysis", "composition", "--orders", "2,4,8,16,32,64"]
    code, out, err = run_cli(capsys, *args, "--conversion", "classic", "--json")
    data = json.loads(out)
    assert list(data["analyses"]) == ["composition"]
    assert list(data["analyses"]["composition"]["rdp"]) == ["2", "4", "8", "16", "32", "64"]
    assert data["analyses"]["composition"]["conversion"] == "classic"
    _, out2, _ = run_cli(capsys, *args, "--json")
    assert json.loads(out2)["epsilon"] < data["epsilon"]  # improved beats classic


@pytest.mark.parametrize(
    "change,flag",
    [
        (["--n", "0"], "--n"),
        (["--n", "abc"], "--n"),
        (["--batch-size", "100000"], "--batch-size"),
        (["--batch-size", "0"], "--batch-size"),
        (["--lr", "-1"], "--lr"),
        (["--noise-multiplier", "nan"], "--noise-multiplier"),
        (["--noise-multiplier", "0"], "--noise-multiplier"),
        (["--lipschitz", "inf"], "--lipschitz"),
        (["--smoothness", "-2"], "--smoothness"),
        (["--strong-convexity", "-1"], "--strong-convexity"),
        (["--diameter", "0"], "--diameter"),
        (["--batching", "random"], "--batching"),
        (["--adjacency", "swap"], "--adjacency"),
        (["--delta", "1"], "--delta"),
        (["--delta", "-0.1"], "--delta"),
        (["--analysis", "magic"], "--analysis"),
        (["--orders", "0.5,2"], "--orders"),
        (["--orders", "2,x"], "--orders"),
        (["--conversion", "loose"], "--conversion"),
        (["--epochs", "0"], "--epochs"),
        (["--steps", "5"], "--steps"),  # together with --epochs
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_flag(capsys, change, flag):
    args = ["epsilon", *RUN_FLAGS, "--delta", "1e-5"]
    for i in range(0, len(change), 2):
        if change[i] in args and change[i] != "--steps":
            args[args.index(change[i]) + 1] = change[i + 1]
        else:
            args += change[i : i + 2]
    code, out, err = run_cli(capsys, *args)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and "Traceback" not in err


def test_missing_required_flag(capsys):
    code, _, err = run_cli(capsys, "epsilon", "--n", "10")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "required" in err


def test_help_has_examples(capsys):
    code, out, _ = run_cli(capsys, "epsilon", "--help")
    assert code == 0 and "examples:" in out and "--noise-multiplier" in out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(RUN_FLAGS + ["--delta", "1e-5", "nan", "-1", "--json", "x", "", "--steps", "0"]),
                max_size=14))
def test_fuzzed_arguments_never_crash(argv):
    code = main(["epsilon", *argv])
    assert code in (0, 2)


def test_console_script_is_installed():
    exe = shutil.which("noisysgd")
    assert exe is not None
    proc = subprocess.run([exe, "epsilon", *RUN_FLAGS, "--delta", "1e-5", "--analysis", "composition", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["analyses"]["composition"]["applies"] is True
    bad = subprocess.run([exe, "epsilon", *RUN_FLAGS, "--delta", "2"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--delta" in bad.stderr and "Traceback" not in bad.stderr
