"""hardware/: shipped profiles, aliases, detection, overrides, JSON, user profiles, calibrate."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from cannbot_prefetch import hardware
from cannbot_prefetch.hardware import calibration as _calibrate
from cannbot_prefetch.policy import Policy
from cannbot_prefetch.errors import InputError
from cannbot_prefetch.profiling.table import ProfileInfo

ASCEND = ["910B1", "910B2", "910B3", "910B4", "Ascend910_9382", "Ascend910_9392", "310P3"]
ALL = ASCEND + ["910A", "H100", "H200", "A100-80G"]


@pytest.fixture(autouse=True)
def no_user_profiles(tmp_path, monkeypatch):
    """Keep the developer's ~/.config out of the tests."""
    monkeypatch.setenv(hardware.USER_DIR_ENV, str(tmp_path / "user-hw"))


def info(**kw):
    return ProfileInfo(path="p", layout="kernel_csv", **kw)


def test_every_part_ships():
    assert sorted(hardware.known_names()) == sorted(ALL)


@pytest.mark.parametrize("name", ALL)
def test_every_number_has_a_source(name):
    p = hardware.load(name)
    for f in ("cube_cores", "vector_cores", "freq_mhz", "hbm_bw_tbps", "l2_bytes", "hbm_bytes",
              "cmo_bw_gbps"):
        assert p.sources.get(f), f"{name}: {f} has no source"
    for key in p.peaks_tflops:
        assert p.sources.get(f"peaks_tflops.{key}"), f"{name}: peak {key} has no source"
    assert not p.measured


@pytest.mark.parametrize("name", ASCEND)
def test_ascend_peaks_recomputed_from_cores_and_mhz(name):
    p = hardware.load(name)
    fp16 = 2 * 16 * 16 * 16 * p.cube_cores * p.freq_mhz * 1e6 / 1e12
    int8 = 2 * 16 * 32 * 16 * p.cube_cores * p.freq_mhz * 1e6 / 1e12
    assert p.peaks_tflops["fp16"] == pytest.approx(fp16, rel=1e-4)
    assert p.peaks_tflops["bf16"] == pytest.approx(fp16, rel=1e-4)
    assert p.peaks_tflops["int8"] == pytest.approx(int8, rel=1e-4)
    assert "ASSUMPTION" in p.sources["peaks_tflops.fp32"]
    assert p.cmo_bw_gbps == 285


def test_a1_profile_is_the_published_ascend_910():
    """Issue 31 (d): Ascend 910 (A1) -- 32 AI Cores, 256 TFLOPS fp16 / 512 TOPS int8 as Huawei
    published them (not the ini formula: no A1 ini value is public); no bf16 on A1: fp16 stands in
    and says so; the assumed numbers say ASSUMPTION."""
    p = hardware.load("Ascend910A")
    assert (p.name, p.cube_cores, p.peaks_tflops["fp16"], p.peaks_tflops["int8"]) == \
        ("910A", 32, 256.0, 512.0)
    assert p.ridge("fp16") == pytest.approx(256e12 / 1.2e12)
    key, note = p.peak_basis("bf16")
    assert key == "fp16" and "fp16" in note
    for f in ("hbm_bw_tbps", "l2_bytes", "freq_mhz", "peaks_tflops.fp32"):
        assert "ASSUMPTION" in p.sources[f], f


@pytest.mark.parametrize("name,tflops,bw,l2_mib,ridge", [
    ("910B1", 363.7, 1.6, 192, None), ("910B2", 353.9, 1.6, 192, 221),
    ("910B3", 294.9, 1.6, 192, 184), ("910B4", 245.8, 0.8, 96, 307),
    ("Ascend910_9382", 353.9, 1.6, 192, None), ("Ascend910_9392", 363.7, 1.6, 192, None),
    ("310P3", 69.5, 0.204, 16, None), ("H100", 989.4, 3.35, 50, None), ("H200", 989.4, 4.8, 50, None),
    ("A100-80G", 312, 2.04, 40, None)])
def test_reference_table_values(name, tflops, bw, l2_mib, ridge):
    p = hardware.load(name)
    assert p.peak_for("BF16") == pytest.approx(tflops, abs=0.06)
    assert p.hbm_bw_tbps == bw
    assert p.l2_bytes == l2_mib * 1024 * 1024
    if ridge:
        assert p.ridge("bf16") == pytest.approx(ridge, abs=0.5)


@pytest.mark.parametrize("alias,name", [
    ("910B3", "910B3"), ("Ascend910B3", "910B3"), ("ascend910b3", "910B3"), ("ASCEND910B3", "910B3"),
    ("910b4", "910B4"), ("Ascend910_9392", "Ascend910_9392"), ("ascend910_9382", "Ascend910_9382"),
    ("Ascend910-9382", "Ascend910_9382"), ("a100", "A100-80G"), ("h200", "H200"), ("310p", "310P3")])
def test_alias_resolution_is_case_insensitive(alias, name):
    assert hardware.load(alias).name == name


def test_unknown_name_lists_known_ones():
    with pytest.raises(InputError) as err:
        hardware.load("910C")
    assert "910B3" in str(err.value) and "H100" in str(err.value)
    with pytest.raises(InputError, match="calibrate"):
        hardware.load("cpu")


@pytest.mark.parametrize("cores,mhz,name", [(20, 1800, "910B3"), (20, 1500, "910B4"),
                                            (24, 1800, "910B2"), (24, 1850, "910B1"),
                                            (8, 1060, "310P3"), (20, 1800.0, "910B3")])
def test_detect_from_cores_and_mhz(cores, mhz, name):
    p = hardware.resolve(None, info(cube_cores=cores, freq_mhz=mhz))
    assert p.name == name and not hardware.is_assumed(p)
    assert f"{cores} cube cores" in p.detected_from


def test_detect_from_soc_name_beats_cores():
    p = hardware.resolve(None, info(soc="Ascend910_9392", cube_cores=20, freq_mhz=1800))
    assert p.name == "Ascend910_9392" and "SoC" in p.detected_from


def test_explicit_name_wins():
    p = hardware.resolve("910b4", info(soc="Ascend910B3", cube_cores=20, freq_mhz=1800))
    assert p.name == "910B4" and p.detected_from == "--hardware 910b4"


@pytest.mark.parametrize("kw", [{"soc": "Ascend910B"}, {"cube_cores": 16, "freq_mhz": 1000}])
def test_fallback_is_910b3_and_says_it_is_assumed(kw):
    p = hardware.resolve(None, info(**kw))
    assert p.name == "910B3" and hardware.is_assumed(p)
    assert p.detected_from.startswith("assumed 910B3")


def test_no_profile_names_the_default_not_a_profile():
    # manual mode (issue 10 item 13): there is no profile that could "name no part"
    p = hardware.resolve(None, None)
    assert p.name == "910B3" and hardware.is_assumed(p)
    assert p.detected_from.startswith("default 910B3") and "profile names no part" not in p.detected_from


def test_overrides_are_recorded_and_original_untouched():
    base = hardware.load("910B3")
    p = base.with_overrides(hbm_bw_tbps=1.2, peaks={"BF16": 250.0, "fp32": 100.0}, cmo_bw_gbps=200)
    assert p.hbm_bw_tbps == 1.2 and p.peaks_tflops["bf16"] == 250.0 and p.cmo_bw_gbps == 200
    assert p.overrides == {"hbm_bw_tbps": 1.2, "peaks_tflops.bf16": 250.0,
                           "peaks_tflops.fp32": 100.0, "cmo_bw_gbps": 200.0}
    assert "user override" in p.sources["hbm_bw_tbps"] and "1.6" in p.sources["hbm_bw_tbps"]
    assert p.ridge("bf16") == pytest.approx(250e12 / 1.2e12)
    assert base.hbm_bw_tbps == 1.6 and base.overrides == {} and base.peaks_tflops["bf16"] == 294.912
    assert base.with_overrides() is base
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.hbm_bw_tbps = 2.0  # type: ignore[misc]


@pytest.mark.parametrize("kw", [{"hbm_bw_tbps": 0}, {"hbm_bw_tbps": -1}, {"peaks": {"bf16": 0}},
                                {"cmo_bw_gbps": -5}])
def test_bad_overrides_are_input_errors(kw):
    with pytest.raises(InputError):
        hardware.load("910B3").with_overrides(**kw)


def test_peak_fallbacks():
    p = hardware.load("910B3")
    assert p.peak_for("INT4") == p.peaks_tflops["int8"]
    key, note = p.peak_basis("HIFLOAT8")
    assert key == "fp16" and "no fp8 peak" in note
    assert p.peak_for("DT_BF16") == p.peak_for("c10::BFloat16") == 294.912
    assert p.peak_basis("FLOAT") == ("fp32", None)
    assert hardware.load("H100").peak_for("FLOAT8_E4M3FN") == 1979


def test_to_json_contract_keys():
    doc = hardware.resolve("910B3").with_overrides(hbm_bw_tbps=1.0).to_json()
    for key in ("name", "detected_from", "peaks", "hbm_bw", "l2_bytes", "overrides", "sources"):
        assert key in doc
    assert doc["hbm_bw"] == 1.0 and doc["overrides"] == {"hbm_bw_tbps": 1.0}
    assert doc["peaks"]["bf16"] == 294.912 and doc["l2_bytes"] == 192 * 1024 * 1024


def test_user_profile_is_listed_and_replaces_a_shipped_one(tmp_path, monkeypatch):
    d = tmp_path / "hw"
    d.mkdir()
    doc = yaml.safe_load((hardware.configs_dir() / "hardware" / "910B3.yaml").read_text())
    doc["hbm_bw_tbps"] = 1.15
    (d / "910B3.yaml").write_text(yaml.safe_dump(doc))
    (d / "lab.yaml").write_text(yaml.safe_dump({"name": "lab-part", "aliases": ["lab"],
                                                "peaks_tflops": {"bf16": 100}, "hbm_bw_tbps": 1.0}))
    monkeypatch.setenv(hardware.USER_DIR_ENV, str(d))
    assert hardware.load("910b3").hbm_bw_tbps == 1.15
    assert hardware.load("LAB").name == "lab-part"
    assert hardware.load("lab").cmo_bw_gbps == 285      # policy default when a profile has none
    assert hardware.known_names().count("910B3") == 1


def test_broken_user_profile_names_the_file(tmp_path, monkeypatch):
    d = tmp_path / "hw"
    d.mkdir()
    (d / "bad.yaml").write_text("name: x\npeaks_tflops: {bf16: 100}\n")   # no bandwidth
    monkeypatch.setenv(hardware.USER_DIR_ENV, str(d))
    with pytest.raises(InputError) as err:
        hardware.available()
    assert "bad.yaml" in str(err.value)


def _fixed_backend(fp32=0.4e12, bf16=2.0e12, copy=30e9, median_share=0.9):
    """A calibration backend with fixed rates: tests of what calibrate writes must not depend on
    how fast or how loaded this machine is."""
    def backend(budget_s, lim):
        rates = {k: _calibrate.Rate(v, v * median_share, 7, f"{k} 1024x1024")
                 for k, v in (("fp32", fp32), ("bf16", bf16)) if v is not None}
        return rates, _calibrate.Rate(copy, copy * median_share, 9, "128 MiB copy"), \
            "fixed: repeated mm", "fixed: repeated copies"
    return backend


@pytest.mark.parametrize("method", ["numpy", "torch"])
def test_calibrate_writes_a_measured_cpu_profile(tmp_path, monkeypatch, method):
    pytest.importorskip(method)
    monkeypatch.setattr(_calibrate, f"_{method}_backend", _fixed_backend())
    p = hardware.calibrate(tmp_path / "out", seconds=0.3, method=method)
    path = tmp_path / "out" / "cpu.yaml"
    assert path.is_file() and p.path == str(path)
    doc = yaml.safe_load(path.read_text())
    assert doc["name"] == "cpu" and doc["measured"] is True
    assert p.measured and p.name == "cpu"
    assert p.peaks_tflops == {"fp32": 0.4, "bf16": 2.0} and p.hbm_bw_tbps == 0.03
    for key in p.peaks_tflops:
        assert p.sources[f"peaks_tflops.{key}"].startswith("measured on this host")
        assert "best of 7 runs" in p.sources[f"peaks_tflops.{key}"]
        assert "busy" not in p.sources[f"peaks_tflops.{key}"]
    assert "measured on this host" in p.sources["hbm_bw_tbps"]
    monkeypatch.setenv(hardware.USER_DIR_ENV, str(tmp_path / "out"))
    assert hardware.load("CPU").measured
    assert hardware.resolve("cpu").ridge("FLOAT") == pytest.approx(0.4e12 / 0.03e12)


@pytest.mark.parametrize("rates, what", [
    (dict(fp32=1.5e8), "fp32 GEMM at 0.00015 TFLOPS"),        # the loaded-CI value seen in issue 9
    (dict(bf16=5e17), "bf16 GEMM at 5e+05 TFLOPS"),
    (dict(copy=2e5), "memory bandwidth 2e-07 TB/s"),
])
def test_calibrate_refuses_implausible_rates_and_writes_nothing(tmp_path, monkeypatch, rates, what):
    monkeypatch.setattr(_calibrate, "_torch_backend", _fixed_backend(**rates))
    monkeypatch.setattr(_calibrate, "_importable", lambda module: module == "torch")
    with pytest.raises(InputError) as err:
        hardware.calibrate(tmp_path, seconds=0.3)
    assert what in str(err.value) and "outside the plausible" in str(err.value)
    assert "--hardware" in str(err.value)                     # the hint says what to do instead
    assert not list(tmp_path.iterdir())


def test_calibrate_says_when_the_host_was_busy(tmp_path, monkeypatch):
    monkeypatch.setattr(_calibrate, "_torch_backend", _fixed_backend(median_share=0.25))
    monkeypatch.setattr(_calibrate, "_importable", lambda module: module == "torch")
    p = hardware.calibrate(tmp_path, seconds=0.3)
    assert "host was busy (median run 4.0x slower than the best)" in p.sources["peaks_tflops.fp32"]


def test_rate_is_best_of_runs_with_the_median_kept():
    # clock reads: the deadline, then (start, end) per run and one check after the third run on
    ticks = iter([0.0, 0.0, 0.5, 0.5, 0.6, 0.6, 0.9, 0.9, 0.9, 1.4, 1.4])
    r = _calibrate._rate(lambda: None, work=1.0, budget_s=1.0, min_reps=3, size="x",
                         clock=lambda: next(ticks))
    # runs of 0.5, 0.1, 0.3, 0.5 s; the deadline (t=1.0) has passed after the fourth
    assert r.runs == 4 and r.best == pytest.approx(10.0) and r.median == pytest.approx(1 / 0.3)
    assert r.busy(2.0) and not r.busy(3.1)            # 10 / 3.33 = 3x


def test_matmul_sizes_start_large_enough_to_time_the_multiplier():
    sizes = []
    ticks = iter(range(0, 10_000))

    def make(n):
        sizes.append(n)
        return lambda: None
    r = _calibrate._matmul_rate(make, budget_s=0.01, label="fp32",
                                lim=Policy.load()["calibration"],
                                clock=lambda: next(ticks) * 1e-4)
    assert sizes[0] >= 512 and r.size.startswith("fp32 ")
    assert sizes == sorted(sizes) and sizes[-1] <= 2048 and r.runs >= 3


def test_calibrate_for_real_gives_plausible_numbers_or_a_clear_refusal(tmp_path):
    """The one test that really times this host: on a loaded machine the numbers may be refused,
    which is the right answer too; either way nothing absurd is written."""
    pytest.importorskip("numpy")
    try:
        p = hardware.calibrate(tmp_path, seconds=0.5, method="numpy")
    except InputError as exc:
        assert "outside the plausible" in str(exc) and not (tmp_path / "cpu.yaml").exists()
        return
    assert 0.001 <= p.peaks_tflops["fp32"] <= 2000 and 0.001 <= p.hbm_bw_tbps <= 20


def test_calibrate_default_goes_to_the_user_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(_calibrate, "_numpy_backend", _fixed_backend(bf16=None))
    monkeypatch.setattr(_calibrate, "_importable", lambda module: module == "numpy")
    monkeypatch.setenv(hardware.USER_DIR_ENV, str(tmp_path / "u"))
    hardware.calibrate(seconds=0.2, method="numpy")
    assert (tmp_path / "u" / "cpu.yaml").is_file()
    assert "cpu" in hardware.known_names()


def test_hardware_from_a_yaml_file(tmp_path, monkeypatch):
    monkeypatch.setattr(_calibrate, "_torch_backend", _fixed_backend())
    monkeypatch.setattr(_calibrate, "_importable", lambda module: module == "torch")
    p = hardware.calibrate(tmp_path / "elsewhere" / "mycpu.yaml", seconds=0.2)
    assert hardware.load(p.path).peaks_tflops["fp32"] == 0.4
    assert hardware.resolve(p.path).name == "cpu"
    with pytest.raises(InputError, match="not found"):
        hardware.load(str(tmp_path / "missing.yaml"))


def test_calibrate_without_torch_or_numpy_gives_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setattr(_calibrate, "_importable", lambda module: False)
    with pytest.raises(InputError) as err:
        hardware.calibrate(tmp_path, seconds=0.2)
    assert "pip install 'cannbot-prefetch[torch]'" in str(err.value)
    assert not (tmp_path / "cpu.yaml").exists()


def test_parse_peak_overrides():
    assert hardware.parse_peak_overrides(["BF16=280", "fp32=100.5"]) == {"bf16": 280.0, "fp32": 100.5}
    assert hardware.parse_peak_overrides(None) == {}
    for bad in (["bf16"], ["bf16=abc"], ["=3"], ["bf16=0"], ["bf16=-1"]):
        with pytest.raises(InputError, match="DTYPE=TFLOPS"):
            hardware.parse_peak_overrides(bad)


def test_unparseable_user_yaml_names_the_file_and_line(tmp_path, monkeypatch):
    d = tmp_path / "hw"
    d.mkdir()
    (d / "broken.yaml").write_text("name: x\npeaks_tflops: {bf16: [\n")
    monkeypatch.setenv(hardware.USER_DIR_ENV, str(d))
    with pytest.raises(InputError) as err:
        hardware.load("910B3")
    assert "broken.yaml" in str(err.value) and "line" in str(err.value)


def test_unmatched_profile_says_unknown_not_none():
    """A profile with a frequency but no core count: the assumption names what is unknown."""
    from types import SimpleNamespace

    from cannbot_prefetch.hardware import resolve

    hw = resolve(None, SimpleNamespace(soc=None, cube_cores=None, freq_mhz=1800.0))
    assert "None" not in hw.detected_from
    assert "unknown cube cores @ 1800 MHz match no part" in hw.detected_from



def test_calibrate_leaves_out_a_bf16_peak_slower_than_fp32(tmp_path, monkeypatch):
    """A CPU without native bf16 GEMMs (issue 9: bf16 at 0.0007 TFLOPS next to fp32 at 0.4):
    the bf16 peak is not written (calibration does not fail on it), the source says why and to
    profile in float32; a bf16 op is then costed at the fp32 peak, saying so."""
    monkeypatch.setattr(_calibrate, "_torch_backend", _fixed_backend(fp32=0.4e12, bf16=7e8))
    monkeypatch.setattr(_calibrate, "_importable", lambda module: module == "torch")
    p = hardware.calibrate(tmp_path, seconds=0.3)
    assert p.peaks_tflops == {"fp32": 0.4}
    why = p.sources["peaks_tflops.bf16"]
    assert why.startswith("not written: bf16 GEMMs ran at 0.0007 TFLOPS, slower than fp32 (0.4)")
    assert "Profile the model in float32" in why
    key, note = p.peak_basis("DT_BF16")
    assert key == "fp32" and "no bf16 peak" in note


def test_hardware_show_lists_a_peak_left_out_with_its_reason(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from cannbot_prefetch.cli import app

    monkeypatch.setattr(_calibrate, "_torch_backend", _fixed_backend(fp32=0.4e12, bf16=7e8))
    monkeypatch.setattr(_calibrate, "_importable", lambda module: module == "torch")
    p = hardware.calibrate(tmp_path, seconds=0.3)
    res = CliRunner().invoke(app, ["prefetch", "hardware", "show", p.path])
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.stdout.splitlines() if "peaks_tflops.bf16" in ln)
    assert "not written" in line


def test_a_part_named_like_its_file_is_read_alone(monkeypatch):
    """`--hardware 910B3` reads configs/hardware/910B3.yaml only (no user profiles to replace
    it: the autouse fixture points the user folder at an empty path); an alias no file is named
    after still scans every profile and finds its part."""
    from cannbot_prefetch.hardware import profiles

    read = []
    real = profiles._read_yaml
    monkeypatch.setattr(profiles, "_read_yaml", lambda p: read.append(p.name) or real(p))
    assert hardware.load("910b3").name == "910B3" and read == ["910B3.yaml"]
    read.clear()
    shipped = len(list((profiles.configs_dir() / "hardware").glob("*.yaml")))
    alias = next(a for p in hardware.available() for a in p.aliases
                 if not (profiles.configs_dir() / "hardware" / f"{a}.yaml").exists())
    read.clear()
    assert hardware.load(alias).matches(alias) and len(read) == shipped
