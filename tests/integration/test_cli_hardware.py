"""`cannbot prefetch hardware list | show | calibrate` through Typer's CliRunner."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from cannbot_prefetch import hardware
from cannbot_prefetch.hardware import calibration as _calibrate
from cannbot_prefetch.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def user_dir(tmp_path, monkeypatch):
    d = tmp_path / "user-hw"
    monkeypatch.setenv(hardware.USER_DIR_ENV, str(d))
    return d


def test_list_json():
    res = runner.invoke(app, ["prefetch", "hardware", "list", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    names = {p["name"]: p for p in doc["hardware"]}
    assert {"910B3", "910B4", "Ascend910_9392", "H200"} <= set(names)
    assert names["910B4"]["l2_bytes"] == 96 * 1024 * 1024
    assert names["910B2"]["peaks_tflops"]["bf16"] == pytest.approx(353.8944)


def test_list_human_shows_every_part():
    res = runner.invoke(app, ["prefetch", "hardware", "list"], env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    for name in ("910B1", "910B3", "310P3", "Ascend910_9382", "A100-80G"):
        assert name in res.stdout
    assert "294.9" in res.stdout and "hardware show NAME" in res.stdout


def test_show_prints_numbers_with_sources():
    res = runner.invoke(app, ["prefetch", "hardware", "show", "ascend910b3"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "910B3" in out and "294.912 TFLOPS" in out and "1.6 TB/s" in out
    assert "docs/sources.md, Hardware" in out and "ASSUMPTION" in out and "192 MiB" in out


def test_show_json():
    res = runner.invoke(app, ["prefetch", "hardware", "show", "910B4", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["name"] == "910B4" and doc["hbm_bw_tbps"] == 0.8
    assert doc["sources"]["hbm_bw_tbps"].startswith("docs/sources.md")


def test_show_unknown_is_exit_2_with_one_line():
    res = runner.invoke(app, ["prefetch", "hardware", "show", "910C"])
    assert res.exit_code == 2
    assert "unknown hardware '910C'" in res.stderr and "910B3" in res.stderr
    assert "Traceback" not in res.output


def test_show_lang_zh():
    res = runner.invoke(app, ["prefetch", "hardware", "show", "910B3", "--lang", "zh"],
                        env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "出处" in res.stdout
    bad = runner.invoke(app, ["prefetch", "hardware", "show", "910B3", "--lang", "fr"])
    assert bad.exit_code == 2


@pytest.fixture
def fixed_rates(monkeypatch):
    """Fixed measured rates: these tests are about what calibrate writes and prints, not about
    how fast or loaded this machine is (tests/unit/test_hardware.py covers the measurement)."""
    def backend(budget_s, lim):
        r = _calibrate.Rate
        return ({"fp32": r(0.4e12, 0.35e12, 5, "fp32 1024x1024")}, r(30e9, 28e9, 5, "128 MiB copy"),
                "fixed mm", "fixed copy")
    monkeypatch.setattr(_calibrate, "_torch_backend", backend)
    monkeypatch.setattr(_calibrate, "_numpy_backend", backend)


def test_calibrate_out_json(tmp_path, fixed_rates, user_dir):
    out = tmp_path / "cal" / "mycpu.yaml"
    res = runner.invoke(app, ["prefetch", "hardware", "calibrate", "--out", str(out),
                              "--seconds", "0.3", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["name"] == "cpu" and doc["measured"] is True and doc["path"] == str(out)
    on_disk = yaml.safe_load(out.read_text())
    assert on_disk["peaks_tflops"]["fp32"] > 0
    assert on_disk["sources"]["hbm_bw_tbps"].startswith("measured on this host")
    assert not (user_dir / "cpu.yaml").exists()


def test_calibrate_out_file_hint_names_the_file_and_works(tmp_path, fixed_rates, user_dir):
    out = tmp_path / "cal" / "mycpu.yaml"
    res = runner.invoke(app, ["prefetch", "hardware", "calibrate", "--out", str(out)],
                        env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    assert f"--hardware {out}" in " ".join(res.stdout.split())
    shown = runner.invoke(app, ["prefetch", "hardware", "show", str(out), "--json"])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["peaks_tflops"]["fp32"] == 0.4


def test_calibrate_default_then_show_cpu(fixed_rates, user_dir):
    res = runner.invoke(app, ["prefetch", "hardware", "calibrate", "--seconds", "0.3"],
                        env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert (user_dir / "cpu.yaml").is_file() and "--hardware cpu" in res.stdout
    listed = json.loads(runner.invoke(app, ["prefetch", "hardware", "list", "--json"]).stdout)
    assert any(p["name"] == "cpu" and p["measured"] for p in listed["hardware"])
    shown = runner.invoke(app, ["prefetch", "hardware", "show", "cpu"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "measured on this host" in shown.stdout


def test_calibrate_without_backends_exits_2(monkeypatch):
    monkeypatch.setattr(_calibrate, "_importable", lambda module: False)
    res = runner.invoke(app, ["prefetch", "hardware", "calibrate", "--seconds", "0.2"])
    assert res.exit_code == 2 and "pip install 'cannbot-prefetch[torch]'" in res.stderr
