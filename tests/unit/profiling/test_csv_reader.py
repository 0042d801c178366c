"""The CSV path on small synthetic files in the real header: steps, MemSet, CRLF, aliases."""

from __future__ import annotations

import polars as pl

from cannbot_prefetch.profiling.load import load_profile
from cannbot_prefetch.profiling.table import REPORT_ONLY

from _profiling_helpers import LEVEL1_HEADER, level1_row, write_csv


def test_default_excludes_warmup_step(level1_csv):
    p = load_profile(level1_csv)
    assert p.info.steps_available == (10, 11, 12)
    assert p.info.steps == (11, 12) and p.info.warmup_excluded == (10,)
    assert p.info.rows == 8                                  # 2 steps x 4, MemSet dropped
    assert any("warm-up" in n for n in p.info.notes)
    assert any("3 MemSet" in n for n in p.info.notes)


def test_step_and_range_and_warmup(level1_csv):
    assert load_profile(level1_csv, step=10).info.rows == 4
    assert load_profile(level1_csv, steps=(10, 11)).info.steps == (10, 11)
    assert load_profile(level1_csv, steps=(12, 11)).info.steps == (11, 12)
    p = load_profile(level1_csv, include_warmup=True)
    assert p.info.steps == (10, 11, 12) and p.info.warmup_excluded == () and p.info.rows == 12


def test_values_normalized(level1_csv):
    df = load_profile(level1_csv, step=10).table.df.sort("start_ns")
    assert df["start_ns"].to_list() == [1736408883716197000, 1736408883716297111,
                                        1736408883716397222, 1736408883716497333]
    row = df.row(0, named=True)
    assert row["input_shapes"] == "32,4096;4096,4096" and row["output_shapes"] == "32,4096"
    assert row["input_dtypes"] == "BF16;BF16" and row["input_formats"] == "ND;ND"
    assert row["context_id"] is None and row["block_dim"] == 20 and row["step"] == 10
    assert row["aic_mte2_time_us"] == 9.0 and row["cube_utilization_pct"] == 20.5
    assert row["row"] == 2 and row["source"] == "kernel_details.csv"


def test_crlf_and_msprof_aliases_and_column_order(tmp_path):
    header = ("Device_id,Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us),"
              "Task Wait Time(us),Block Num,Input Shapes,aic_mte2_ratio")
    rows = ['0,aclnnGroupedMatmulV5_GroupedMatmul_GroupedMatmul,GroupedMatmul,MIX_AIC,'
            '1787504007019867.535\t,26.661,13221.44,20,"""512,16;8,2048,16;;;;;;8""",0.44',
            '0,hcom_allReduce_,hcom_allReduce_,HCCL,1787504007019900.1,5.0,0,0,N/A,N/A']
    f = write_csv(tmp_path / "op_summary_20260101.csv", header, rows, eol="\r\n")
    p = load_profile(f)
    df = p.table.df.sort("start_ns")
    assert p.info.layout == "op_summary_csv" and p.info.aic_metrics == "PipeUtilization"
    gmm, hccl = df.row(0, named=True), df.row(1, named=True)
    assert gmm["input_shapes"] == "512,16;8,2048,16;;;;;;8" and gmm["core"] == "MIX_AIC"
    assert gmm["start_ns"] == 1787504007019867535 and gmm["device"] == 0
    assert hccl["input_shapes"] is None and hccl["aic_mte2_ratio"] is None
    assert hccl["start_ns"] == 1787504007019900100
    # same file with columns shuffled: matched by name, same result
    cols = header.split(",")
    order = list(reversed(range(len(cols))))
    import csv
    import io
    recs = list(csv.reader(io.StringIO("\n".join(rows))))
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow([cols[i] for i in order])
    for r in recs:
        w.writerow([r[i] for i in order])
    g = tmp_path / "shuffled" / "op_summary_2.csv"
    g.parent.mkdir()
    g.write_text(out.getvalue())
    df2 = load_profile(g).table.df.sort("start_ns")
    assert df2.select(df.columns[2:]).equals(df.select(df.columns[2:]))


def test_unknown_text_column_is_kept_not_counted_bad(tmp_path):
    header = LEVEL1_HEADER + ",Op Attr"
    rows = [level1_row(1, f"1736408883716{k:03d}.5", task=k) + ",transpose_b:true" for k in range(5)]
    p = load_profile(write_csv(tmp_path / "kernel_details.csv", header, rows))
    assert p.info.rows == 5 and p.info.rows_skipped == 0
    assert p.table.df["op_attr"].to_list() == ["transpose_b:true"] * 5


def test_level0_inferred_without_profiler_info(tmp_path):
    header = "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim"
    rows = ["50,aclnnAddmm_MatMulCommon_MatMulV2,N/A,N/A,1736405443881410.320\t,50.6,0,0",
            "50,hcom_allReduce__1,N/A,N/A,1736405443881510.320\t,10,0,0"]
    p = load_profile(write_csv(tmp_path / "kernel_details.csv", header, rows))
    assert p.info.level == "Level0" and p.table.df["type"].null_count() == 2
    assert any("Level1 + PipeUtilization" in n for n in p.info.notes)


def test_msprof_slices_concatenated(tmp_path):
    out = tmp_path / "PROF_000001_20260101000000000_ABC" / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    header = "Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us),aic_mte2_ratio"
    write_csv(out / "op_summary_slice_1_20260101.csv", header,
              ["b,MatMulV3,AI_CORE,200.000,1,0.9"])
    write_csv(out / "op_summary_slice_0_20260101.csv", header,
              ["a,MatMulV3,AI_CORE,100.000,1,0.9"])
    p = load_profile(tmp_path)
    assert p.info.layout == "msprof" and p.info.rows == 2
    assert p.table.df["name"].to_list() == ["a", "b"]
    assert [f.rsplit("/", 1)[-1] for f in p.info.files] == ["op_summary_slice_0_20260101.csv",
                                                           "op_summary_slice_1_20260101.csv"]


def test_old_msprof_layout(tmp_path):
    summ = tmp_path / "PROF_000001_X" / "device_0" / "summary"
    summ.mkdir(parents=True)
    write_csv(summ / "op_summary_0_1.csv", "Op Name,OP Type,Task Type,Task Start Time(us),"
              "Task Duration(us),Input Shapes", ['MatMul91,MatMul,AI_CORE,1699529622790614.8,3,'
                                                 '"""16,1024;1024,1024"""'])
    (tmp_path / "PROF_000001_X" / "device_0" / "info.json.0").write_text(json.dumps(
        {"DeviceInfo": [{"ai_core_num": 24, "aiv_num": 48, "aic_frequency": "1650"}]}))
    p = load_profile(tmp_path / "PROF_000001_X")
    assert p.info.layout == "msprof_old" and p.info.rows == 1
    assert (p.info.cube_cores, p.info.vector_cores, p.info.freq_mhz) == (24, 48, 1650.0)
    assert p.info.level == "Level1"
    assert p.table.df["start_ns"][0] == 1699529622790614800


def test_profiler_info_metadata(tmp_path):
    pt = tmp_path / "llama_123_456_ascend_pt"
    (pt / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    write_csv(pt / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", LEVEL1_HEADER,
              [level1_row(3, "1736408883716197.363\t")])
    (pt / "profiler_info_5.json").write_text(json.dumps({"config": {"experimental_config": {
        "_profiler_level": "Level1", "_aic_metrics": "ACL_AICORE_MEMORY_BANDWIDTH"}},
        "rank_id": 5}))
    p = load_profile(pt)
    assert p.info.rank == 5 and p.info.level == "Level1" and p.info.aic_metrics == "Memory"


import json  # noqa: E402  (used by the layout tests above)

_ = pl


def test_analysis_counters_only(level1_csv):
    full = load_profile(level1_csv)
    lean = load_profile(level1_csv, counters="analysis")
    assert "aic_total_cycles" in full.table.df.columns
    # counters nothing in the analysis reads are not parsed
    for col in ("aic_total_cycles", "aic_mte2_time_us", "aicore_time_us"):
        assert col in full.table.df.columns and col not in lean.table.df.columns
    for col in ("aic_mte2_ratio", "aic_mac_ratio",
                "start_ns", "input_shapes", "stack"):
        assert col in lean.table.df.columns
    # report-only base columns keep the schema, as nulls
    for col in REPORT_ONLY:
        assert full.table.df[col].null_count() < full.table.df.height
        assert lean.table.df[col].null_count() == lean.table.df.height
    shared = [c for c in lean.table.df.columns if c not in REPORT_ONLY]
    assert lean.table.df.select(shared).equals(full.table.df.select(shared))
    assert lean.info.aic_metrics == "PipeUtilization"


def test_utf8_bom_and_quoted_header(tmp_path):
    header = '\ufeff"Step Id",Name,Type,Accelerator Core,"Start Time(us)",Duration(us)'
    rows = ["7,aclnnMm_MatMulCommon_MatMulV3,MatMulV3,AI_CORE,1736408883716197.363\t,12.5"]
    p = load_profile(write_csv(tmp_path / "kernel_details.csv", header, rows))
    row = p.table.df.row(0, named=True)
    assert row["step"] == 7 and row["start_ns"] == 1736408883716197363 and row["dur_us"] == 12.5


def test_exact_duplicates_found_when_start_times_are_out_of_order():
    """Ties are looked for by sorted diff when the column is sorted, else by counting distinct
    values: both must find an exact duplicate anywhere, keep the first, and keep rows that
    only share a start time (or share a missing one)."""
    from cannbot_prefetch.profiling.csv_reader import _drop_duplicates

    frame = pl.DataFrame({"row": [2, 3, 4, 5, 6, 7], "start_ns": [30, 10, 30, 20, None, None],
                          "name": ["a", "b", "a", "c", "x", "y"],
                          "__bad": [False] * 4 + [True] * 2})
    kept, dropped = _drop_duplicates(frame)
    assert dropped == 1 and kept["row"].to_list() == [2, 3, 5, 6, 7]
    tied_only = frame.with_columns(pl.Series("name", ["a", "b", "z", "c", "x", "y"]))
    assert _drop_duplicates(tied_only)[1] == 0
    assert _drop_duplicates(tied_only.sort("start_ns", nulls_last=True))[1] == 0
    assert _drop_duplicates(frame.sort("start_ns", nulls_last=True))[1] == 1
