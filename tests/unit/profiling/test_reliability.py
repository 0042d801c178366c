"""Issue 11 D1/D2/D3/D11/D13 (reader side): each reproduced input gives a Profile, or one clear
InputError naming the file; never an internal error, never damage accepted without a count."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from cannbot_prefetch import analyze
from cannbot_prefetch.errors import InputError
from cannbot_prefetch.profiling.json_stream import TraceStream
from cannbot_prefetch.profiling.load import load_profile

from _profiling_helpers import LEVEL1_HEADER, level1_row, write_csv

REPO = Path(__file__).resolve().parents[3]
TINY = REPO / "examples/cpu-tiny-llama"
L1 = "msinsight/pytorch_text_level1/rank0_ascend_pt"
TV = "mstt/advisor_timeline_advice/trace_view.json"
DB = "msinsight/pytorch_db_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
H200 = REPO / "examples/h200-llama3.2-1b-cuda/trace.json.gz"


def _error(path: Path, match: str, **kw) -> InputError:
    with pytest.raises(InputError, match=match) as info:
        load_profile(path, **kw)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    return info.value


# ---------------------------------------------------------------- D1: --model-src on any sample

@pytest.mark.samples
@pytest.mark.parametrize("rel", [
    TV,                                                          # trace_view, no shapes
    f"{L1}/ASCEND_PROFILER_OUTPUT/trace_view.json",
    "msinsight/pytorch_text_level0/rank0_ascend_pt",             # Level0: no shapes column
    "msinsight/server_test_kernel_parse/op_summary_1.csv",
])
def test_model_src_on_profiles_without_shapes(samples, rel, tmp_path):
    try:
        doc = analyze(str(samples / rel), model_src=str(TINY / "model.py"),
                      model_config=str(TINY / "config.json"), out=str(tmp_path / "out")).to_json()
    except InputError as err:          # refusing is allowed; crashing (TypeError) is not
        assert str(err)
        return
    assert doc["profile"]["rows"] > 0


# ---------------------------------------------------------------- D2: numbers and structures

def test_absurd_durations_are_damaged_rows(tmp_path):
    rows = [level1_row(1, f"1736408883716{i:03d}.000", task=i) for i in range(40)]
    rows[3] = level1_row(1, "1736408883716903.000", dur="1e303", task=3)
    rows[7] = level1_row(1, "1736408883716907.000", dur="9e17", task=7)
    p = load_profile(write_csv(tmp_path / "kernel_details.csv", LEVEL1_HEADER, rows))
    assert p.info.rows == 38 and p.info.rows_skipped == 2
    assert any("1e303" in s for s in p.info.skipped_samples)
    everything = [level1_row(1, f"1736408883716{i:03d}.000", dur="1e303", task=i) for i in range(5)]
    _error(write_csv(tmp_path / "all.csv", LEVEL1_HEADER, everything), "no usable rows")


def test_start_time_too_large_for_ns_is_damage(tmp_path):
    rows = [level1_row(1, f"1736408883716{i:03d}.000", task=i) for i in range(40)]
    rows[0] = level1_row(1, "9223372036854775.000", task=0)     # x1000 leaves Int64
    p = load_profile(write_csv(tmp_path / "kernel_details.csv", LEVEL1_HEADER, rows))
    assert p.info.rows == 39 and p.info.rows_skipped == 1


@pytest.mark.samples
def test_trace_duration_overflowing_ns(samples, tmp_path):
    events = json.loads((samples / TV).read_text())
    for e in events:
        if e.get("ph") == "X":
            e["dur"] = 1e308                                  # finite, but x1000 is inf
    f = tmp_path / "trace_view.json"
    f.write_text(json.dumps(events))
    _error(f, "no usable rows")


def test_deeply_nested_json(tmp_path):
    f = tmp_path / "trace_view.json"
    f.write_text("[" * 100_000 + "]" * 100_000)
    _error(f, "nested too deeply")
    g = tmp_path / "deep.pt.trace.json"
    g.write_text('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    _error(g, "nested too deeply")


@pytest.mark.samples
def test_deeply_nested_metadata_is_ignored(samples, tmp_path):
    root = tmp_path / "rank0_ascend_pt"
    shutil.copytree(samples / L1, root)
    (root / "profiler_info_0.json").write_text("[" * 100_000 + "]" * 100_000)
    assert load_profile(root).info.rows > 100          # metadata damage never costs the kernels


@pytest.mark.samples
@pytest.mark.parametrize("damage", [
    "ALTER TABLE STRING_IDS RENAME TO S0; CREATE TABLE STRING_IDS (id, value); "
    "INSERT INTO STRING_IDS SELECT CASE WHEN id % 3 = 0 THEN 'text' ELSE id END, value FROM S0",
    "UPDATE STRING_IDS SET value = 42 WHERE rowid % 2 = 0",
    "UPDATE STRING_IDS SET value = x'ff00fe' WHERE rowid % 5 = 0",
    "UPDATE TASK SET startNs = 'soon' WHERE rowid % 7 = 0",
    "UPDATE TASK SET endNs = 9.5e18 WHERE rowid % 7 = 1",
    "UPDATE COMPUTE_TASK_INFO SET name = 'x' WHERE rowid % 4 = 0",
    "UPDATE TASK_PMU_INFO SET value = 'high' WHERE rowid % 3 = 0",
    "UPDATE TASK_PMU_INFO SET value = 9e999 WHERE rowid % 3 = 1",
    "UPDATE STEP_TIME SET startNs = 'x'",
    "UPDATE AICORE_FREQ SET freq = 'fast'",
])
def test_db_with_cells_of_the_wrong_type(samples, tmp_path, damage):
    path = tmp_path / "ascend_pytorch_profiler_0.db"
    shutil.copyfile(samples / DB, path)
    con = sqlite3.connect(path)
    con.executescript(damage)
    con.commit()
    con.close()
    try:
        p = load_profile(path)
    except InputError as err:
        assert str(path) in str(err) and "\n" not in str(err)
        return
    df = p.table.df
    assert df["start_ns"].null_count() == 0 and df["dur_us"].is_between(0, 86_400e6).all()
    if "TASK SET" in damage:
        assert p.info.rows_skipped > 0


def test_out_pointing_at_a_file(tmp_path):
    from cannbot_prefetch.pipeline import check_out_dir

    f = tmp_path / "plan.txt"
    f.write_text("x")
    with pytest.raises(InputError, match="is a file, not a folder"):
        check_out_dir(str(f))
    with pytest.raises(InputError, match="which is a file"):
        check_out_dir(str(f / "sub"))
    check_out_dir(str(tmp_path / "new" / "folder"))           # missing folders are fine


# ---------------------------------------------------------------- D3: damaged PyTorch traces

def _h200_events() -> dict:
    return json.loads(gzip.decompress(H200.read_bytes()))


@pytest.mark.parametrize("bad", [-5, "NaN", "Infinity", None, "soon"])
def test_damaged_torch_op_is_never_silent(tmp_path, bad):
    """One damaged aten::linear in a 4-step CUDA trace: its step is dropped and counted (here
    25% of the rows, so the whole trace is refused); never a spurious op or a lost step."""
    doc = _h200_events()
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == "aten::linear"]
    ops[10]["dur"] = bad
    text = json.dumps(doc).replace('"Infinity"', "Infinity").replace('"NaN"', "NaN")
    f = tmp_path / "trace.json"
    f.write_text(text)
    err = _error(f, "damaged")
    assert "step" in str(err) and "dropped" in str(err)


def test_damaged_device_kernel_costs_its_op(tmp_path):
    """A damaged CUDA kernel: the op it times is skipped and counted, the rest kept."""
    doc = _h200_events()
    events = doc["traceEvents"]
    base = load_profile(H200, include_warmup=True).info.rows
    kernel = next(e for e in events if e.get("cat") == "kernel")
    kernel["dur"] = -1
    f = tmp_path / "trace.json"
    f.write_text(json.dumps(doc))
    p = load_profile(f, include_warmup=True)
    assert p.info.rows == base - 1 and p.info.rows_skipped >= 1
    assert any("its op dropped" in s for s in p.info.skipped_samples)


def test_damaged_step_marker_drops_its_steps_ops(tmp_path):
    doc = _h200_events()
    marker = next(e for e in doc["traceEvents"] if e.get("name") == "ProfilerStep#3")
    marker["dur"] = "nan"
    f = tmp_path / "trace.json"
    f.write_text(json.dumps(doc))
    err = _error(f, "damaged")
    assert "step 3 dropped" in str(err)


# ---------------------------------------------------------------- D11: bounded time and memory

def test_cr_only_csv_reads_like_lf(tmp_path):
    rows = [level1_row(s, f"1736408883716{s}{k:02d}.000", task=k) for s in (1, 2, 3)
            for k in range(4)]
    lf = load_profile(write_csv(tmp_path / "lf.csv", LEVEL1_HEADER, rows))
    cr = load_profile(write_csv(tmp_path / "cr.csv", LEVEL1_HEADER, rows, eol="\r"))
    assert cr.info.rows == lf.info.rows == 8 and cr.info.rows_skipped == 0
    assert cr.table.df.drop("source").equals(lf.table.df.drop("source"))


def test_thousands_of_columns_refused_at_once(tmp_path):
    header = LEVEL1_HEADER + "".join(f",extra_{i}" for i in range(10_000))
    f = write_csv(tmp_path / "kernel_details.csv", header, [level1_row(1, "1.0")])
    _error(f, "columns in the header")


def test_endless_first_line_refused(tmp_path):
    f = tmp_path / "kernel_details.csv"
    f.write_bytes(b"Name" + b"x" * (1 << 17))
    _error(f, "no line end")


def test_gzip_bomb_refused_without_inflating_it(tmp_path):
    f = tmp_path / "trace.pt.trace.json.gz"
    zeros = b"\x20" * (1 << 20)                       # blanks: valid JSON whitespace, inflated
    with gzip.open(f, "wb", compresslevel=1) as fh:
        fh.write(b'{"traceEvents": [')
        for _ in range(64):
            fh.write(zeros)
    with pytest.raises(InputError, match="larger than 16 MB decompressed"):
        for _ in TraceStream(f, max_bytes=16_000_000).events():
            pass


def test_trace_size_cap(tmp_path, monkeypatch):
    from dataclasses import replace

    from cannbot_prefetch.policy import Policy

    pol = Policy.load()
    pol = replace(pol, profiling={**pol.profiling, "max_trace_mb": 0.001})
    f = tmp_path / "trace_view.json"
    f.write_text(json.dumps([{"ph": "X", "name": "k", "ts": "1", "dur": 1}] * 100))
    _error(f, "max_trace_mb", policy=pol)


# ---------------------------------------------------------------- D13: paths and encodings

def test_empty_profile_path_is_not_the_current_folder():
    with pytest.raises(InputError, match="path is empty"):
        load_profile("")


def test_bom_and_crlf_csv(tmp_path):
    rows = [level1_row(1, f"1736408883716{k:03d}.000", task=k) for k in range(5)]
    plain = load_profile(write_csv(tmp_path / "a.csv", LEVEL1_HEADER, rows))
    f = tmp_path / "b.csv"
    f.write_bytes(b"\xef\xbb\xbf" + (LEVEL1_HEADER + "\r\n" + "\r\n".join(rows) + "\r\n").encode())
    bom = load_profile(f)
    assert bom.table.df.drop("source").equals(plain.table.df.drop("source"))


@pytest.mark.samples
def test_bom_and_form_feeds_in_a_trace(samples, tmp_path):
    text = (samples / TV).read_text(encoding="utf-8")
    plain = load_profile(samples / TV).table.df
    f = tmp_path / "trace_view.json"
    f.write_bytes(b"\xef\xbb\xbf" + text.replace("},{", "},\f\n{", 50).encode("utf-8"))
    assert load_profile(f).table.df.drop("source").equals(plain.drop("source"))


@pytest.mark.samples
def test_bom_in_profiler_info(samples, tmp_path):
    root = tmp_path / "rank0_ascend_pt"
    shutil.copytree(samples / L1, root)
    info = root / "profiler_info_0.json"
    info.write_bytes(b"\xef\xbb\xbf" + info.read_bytes())
    p = load_profile(root)
    assert p.info.level == "Level1" and p.info.aic_metrics == "PipeUtilization"


@pytest.mark.samples
def test_streamed_trace_equals_json_load(samples):
    """The streaming reader sees exactly the events json.load sees, in order."""
    for rel in (TV, f"{L1}/ASCEND_PROFILER_OUTPUT/trace_view.json"):
        path = samples / rel
        streamed = list(TraceStream(path, 1 << 30).events())
        assert streamed == json.loads(path.read_text(), parse_float=str, parse_constant=str)
    doc = json.loads(gzip.decompress(H200.read_bytes()), parse_float=str, parse_constant=str)
    assert list(TraceStream(H200, 1 << 30).events()) == doc["traceEvents"]


@pytest.mark.samples
def test_stream_across_tiny_chunks(samples, monkeypatch):
    """Every value cut at every kind of place (inside strings, numbers, between events)."""
    import cannbot_prefetch.profiling.json_stream as js

    monkeypatch.setattr(js, "_CHUNK", 7)
    path = samples / TV
    assert list(TraceStream(path, 1 << 30).events()) == \
        json.loads(path.read_text(), parse_float=str, parse_constant=str)
