"""Unusable input -> InputError naming the file; recoverable damage -> skipped and counted."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from cannbot_prefetch.errors import InputError
from cannbot_prefetch.profiling.load import load_profile

from _profiling_helpers import LEVEL1_HEADER, level1_row, write_csv


def _raises(path: Path, match: str, **kw) -> InputError:
    with pytest.raises(InputError, match=match) as info:
        load_profile(path, **kw)
    assert str(path) in str(info.value)
    return info.value


def test_missing_path(tmp_path):
    _raises(tmp_path / "nope", "no such file or directory")


def test_empty_file(tmp_path):
    f = tmp_path / "kernel_details.csv"
    f.write_bytes(b"")
    _raises(f, "empty file")


def test_header_only(tmp_path):
    f = write_csv(tmp_path / "kernel_details.csv", LEVEL1_HEADER, [])
    _raises(f, "header only")


def test_missing_required_columns(tmp_path):
    f = write_csv(tmp_path / "kernel_details.csv", "Step Id,Name,Type\n1", ["1,a,b"])
    err = _raises(f, "required column")
    assert "Start Time(us)" in str(err) and "Duration(us)" in str(err)


def test_not_a_csv_at_all(tmp_path):
    f = tmp_path / "kernel_details.csv"
    f.write_bytes(b"\x00\x01\x02binary\xff\xfe\n\x00\x00")
    _raises(f, "required column|empty")


def test_directory_without_profile(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "notes.txt").write_text("hello")
    _raises(tmp_path, "no profile found")


def test_json_that_is_not_a_trace(tmp_path):
    f = tmp_path / "trace_view.json"
    f.write_text(json.dumps({"hello": [1, 2]}))
    _raises(f, "not a Chrome trace")
    f.write_text("{not json")
    _raises(f, "not valid JSON")
    f.write_text(json.dumps([{"ph": "M", "name": "process_name"}]))
    _raises(f, "no complete")


def test_corrupt_db(tmp_path):
    f = tmp_path / "ascend_pytorch_profiler_0.db"
    f.write_bytes(b"this is not sqlite" * 100)
    _raises(f, "database")


def test_db_without_profiler_tables(tmp_path):
    f = tmp_path / "ascend_pytorch_profiler_0.db"
    con = sqlite3.connect(f)
    con.execute("CREATE TABLE other (x INTEGER)")
    con.commit()
    con.close()
    _raises(f, "not a torch_npu profiler DB")


def test_few_damaged_rows_are_skipped_and_counted(tmp_path):
    rows = [level1_row(1, f"1736408883716{k:03d}.5\t", task=k) for k in range(40)]
    rows[5] = rows[5].replace(",10.5,", ",abc,")                     # non-numeric duration
    rows[9] = rows[9].replace("1736408883716009.5\t", "yesterday")   # unparseable start
    rows[20] = rows[20][: len(rows[20]) // 2]                        # truncated row
    f = write_csv(tmp_path / "kernel_details.csv", LEVEL1_HEADER, rows)
    p = load_profile(f)
    assert p.info.rows_skipped == 3 and p.info.rows == 37
    lines = [s.split(":")[1] for s in p.info.skipped_samples]
    assert lines == ["7", "11", "22"]                                # header is line 1
    assert "Duration(us)" in p.info.skipped_samples[0] or "fields" in p.info.skipped_samples[0]


def test_non_numeric_counter_is_counted(tmp_path):
    rows = [level1_row(1, f"1736408883716{k:03d}.5\t", task=k) for k in range(30)]
    rows[3] = rows[3].replace(",0.9,", ",garbage,")
    f = write_csv(tmp_path / "kernel_details.csv", LEVEL1_HEADER, rows)
    p = load_profile(f)
    assert p.info.rows_skipped == 1 and p.info.rows == 29
    assert p.info.skipped_samples[0].startswith("kernel_details.csv:5: bad aic_mte2_ratio")


def test_too_many_bad_rows_is_fatal(tmp_path):
    rows = [level1_row(1, f"1736408883716{k:03d}.5\t", task=k) for k in range(10)]
    rows[1] = rows[1].replace(",10.5,", ",x,")
    rows[2] = rows[2].replace(",10.5,", ",y,")
    f = write_csv(tmp_path / "kernel_details.csv", LEVEL1_HEADER, rows)
    err = _raises(f, r"2 of 10 rows damaged \(20% > 10% allowed\)")
    assert "kernel_details.csv:3" in str(err)


def test_all_rows_bad(tmp_path):
    f = write_csv(tmp_path / "kernel_details.csv", LEVEL1_HEADER,
                  [level1_row(1, "N/A"), level1_row(1, "soon")])
    _raises(f, "no usable rows")


def test_stray_quote_falls_back_and_counts(tmp_path):
    rows = [level1_row(1, f"1736408883716{k:03d}.5\t", task=k) for k in range(30)]
    rows[29] = rows[29].replace('"""32,4096;4096,4096"""', '"32,4096')    # unterminated quote
    f = write_csv(tmp_path / "kernel_details.csv", LEVEL1_HEADER, rows)
    p = load_profile(f)
    assert p.info.rows == 29 and p.info.rows_skipped == 1


def test_step_selection_errors_name_available_steps(level1_csv):
    with pytest.raises(InputError, match="step 99 not in profile; steps available: 10, 11, 12"):
        load_profile(level1_csv, step=99)
    with pytest.raises(InputError, match="steps available: 10, 11, 12"):
        load_profile(level1_csv, steps=(20, 30))


def test_trace_with_absurd_numbers(tmp_path):
    hw = {"ph": "M", "name": "process_name", "pid": 9, "args": {"name": "Ascend Hardware"}}
    ok = {"ph": "X", "pid": 9, "tid": 2, "name": "aclnnMm_MatMulCommon_MatMulV3",
          "ts": "1736408883716197.363", "dur": 5.5, "args": {"Task Id": "9" * 40}}
    bad = dict(ok, ts="1e400")
    f = tmp_path / "trace_view.json"
    f.write_text(json.dumps([hw, ok, bad] + [dict(ok, ts=f"17364088837162{k:02d}.5")
                                             for k in range(20)]))
    p = load_profile(f)
    assert p.info.rows == 21 and p.info.rows_skipped == 1
    assert p.table.df["task_id"].null_count() == 21 and p.table.df["type"][0] == "MatMulV3"


def test_infinite_and_nan_numbers_are_damage(tmp_path):
    rows = [level1_row(1, f"1736408883716{k:03d}.5\t", task=k) for k in range(30)]
    rows[4] = rows[4].replace(",10.5,", ",1e400,")          # duration overflows to inf
    rows[8] = rows[8].replace(",0.9,", ",nan,")             # counter NaN
    p = load_profile(write_csv(tmp_path / "kernel_details.csv", LEVEL1_HEADER, rows))
    assert p.info.rows_skipped == 2 and p.info.rows == 28
    assert [s.split(":")[1] for s in p.info.skipped_samples] == ["6", "10"]
    assert p.table.df["dur_us"].is_finite().all()
