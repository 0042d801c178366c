"""Every real sample in ../shared/profiling-samples loads, with the values the files hold."""

from __future__ import annotations

import polars as pl
import pytest

from cannbot_prefetch.profiling.companions import read_l2_cache, read_step_times
from cannbot_prefetch.profiling.load import load_profile

pytestmark = pytest.mark.samples

MSI = "msinsight"
L1 = f"{MSI}/pytorch_text_level1"
GROUP = "vllm-ascend-msprof-group"


def _mm(profile, type_="MatMulV2") -> pl.DataFrame:
    return profile.table.df.filter(pl.col("type") == type_)


def test_level1_ranks_folder(samples):
    p = load_profile(samples / L1)
    info = p.info
    assert (info.layout, info.level, info.aic_metrics) == ("ascend_pt", "Level1", "PipeUtilization")
    assert info.rank == 0 and info.ranks == (0, 1)
    assert info.rows == 180 and info.rows_skipped == 0          # 191 rows - 11 MemSet
    assert any("MemSet" in n for n in info.notes)
    mm = _mm(p)
    assert mm.height == 8 and _mm(p, "MatMulV3").height == 1
    first = mm.sort("start_ns").row(0, named=True)
    assert first["start_ns"] == 1736408883716197363               # "1736408883716197.363\t"
    assert first["input_shapes"] == "32,9216;4096,9216;4096"
    assert first["input_formats"] == "ND;ND;ND" and first["input_dtypes"] == "FLOAT;FLOAT;FLOAT"
    assert first["output_shapes"] == "32,4096"
    assert first["core"] == "AI_CORE" and first["step"] == 50
    assert 0.0 <= first["aic_mte2_ratio"] <= 1.0 and first["aic_mte2_time_us"] > 0
    assert p.table.df["start_ns"].dtype == pl.Int64
    # stacks borrowed from trace_view.json beside kernel_details (matched on start_ns)
    assert first["stack"].startswith("/home/") and "linear.py(114): forward" in first["stack"]
    assert set(p.extras) >= {"root", "trace_view", "step_trace_time", "l2_cache"}


def test_rank_choice(samples):
    p = load_profile(samples / L1, rank=1)
    assert p.info.rank == 1 and p.info.ranks == (0, 1)
    assert p.table.df.sort("start_ns")["start_ns"][0] == 1736408883709301270
    from cannbot_prefetch.errors import InputError
    with pytest.raises(InputError, match="rank 7 not found; ranks here: 0, 1"):
        load_profile(samples / L1, rank=7)


def test_level0_is_loaded_and_explained(samples):
    p = load_profile(samples / f"{MSI}/pytorch_text_level0")
    assert p.info.level == "Level0" and not p.info.has_shapes
    assert p.info.rows == 180
    assert p.table.df["type"].null_count() == p.info.rows
    note = " ".join(p.info.notes)
    assert "ProfilerLevel.Level1" in note and "AiCMetrics.PipeUtilization" in note
    assert "record_shapes=True" in note and "with_stack=True" in note
    names = p.table.df["name"].to_list()
    assert "aclnnAddmm_MatMulCommon_MatMulV2" in names


def test_level2(samples):
    p = load_profile(samples / f"{MSI}/pytorch_text_level2")
    assert p.info.level == "Level2" and p.info.aic_metrics == "PipeUtilization"
    assert _mm(p).height == 8


def test_db_export(samples):
    p = load_profile(samples / f"{MSI}/pytorch_db_level1")
    info = p.info
    assert info.layout == "ascend_pt_db" and info.level == "Level1"
    assert info.soc == "Ascend910B" and info.freq_mhz == 1800.0 and info.rank == 0
    assert info.rows == 180 and info.steps == (50,)
    mm = _mm(p).sort("start_ns")
    assert mm.height == 8
    row = mm.row(0, named=True)
    assert row["input_shapes"] == "32,9216;4096,9216;4096" and row["output_shapes"] == "32,4096"
    assert row["start_ns"] == 1736410576415142217
    assert row["dur_us"] == pytest.approx(358.247)
    assert row["aicore_time_us"] == pytest.approx(345.51125)      # aic_total_time ns -> us
    assert row["aic_mte2_ratio"] == pytest.approx(0.98434867, rel=1e-6)
    assert (p.table.df["core"] == "HCCL").sum() == 4               # COMMUNICATION_OP rows
    # stacks via TASK.connectionId -> PYTORCH_API -> PYTORCH_CALLCHAINS, innermost first
    assert row["launch_op"] == "aclnnAddmm"
    assert row["stack"].split(";")[0].endswith("torch/nn/modules/linear.py(114): forward")
    assert p.table.df["stack"].is_not_null().sum() == 71


def test_db_file_directly(samples):
    db = samples / f"{MSI}/pytorch_db_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
    p = load_profile(db)
    assert p.info.layout == "ascend_pt_db" and p.info.level == "Level1" and p.info.rows == 180


def test_trace_view_with_stacks(samples):
    tv = samples / f"{L1}/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
    p = load_profile(tv)
    assert p.info.layout == "trace_view"
    df = p.table.df
    mm = df.filter(pl.col("type") == "MatMulV2").sort("start_ns")
    assert mm.height >= 8
    row = mm.row(0, named=True)
    assert row["start_ns"] == 1736408883716197363 and row["core"] == "AI_CORE"
    assert row["launch_op"] == "aclnnAddmm"
    assert "torch/nn/modules/linear.py(114): forward" in row["stack"]
    assert "\r" not in row["stack"]
    assert row["step"] == 50                                   # ProfilerStep#50 encloses the launch
    hccl = df.filter(pl.col("core") == "HCCL")                 # "Group 0 Communication" ops
    assert hccl.height == 4 and set(hccl["type"]) == {"hcom_allReduce_"}
    assert hccl["stream"].null_count() == 4
    assert df["stack"].is_not_null().sum() >= 70


@pytest.mark.parametrize("rel", [f"{L1}/rank0_ascend_pt", f"{MSI}/pytorch_db_level1",
                                 f"{L1}/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"])
def test_each_distinct_stack_is_held_once(samples, rel):
    """A call stack (~1 KB) repeats every layer and step: the table holds each distinct one
    once (categorical), whichever reader attached it (kernel table + trace_view, DB, trace)."""
    df = load_profile(samples / rel).table.df
    stacks = df["stack"]
    assert stacks.dtype == pl.Categorical and stacks.is_not_null().sum() > 0
    texts = stacks.drop_nulls().cast(pl.Utf8)
    distinct = texts.unique()
    assert distinct.len() < texts.len()                 # they repeat
    # the column holds a code per row and the distinct texts, not a text per row
    assert stacks.estimated_size() < texts.estimated_size() / 2


def test_old_trace_view_stream_id(samples):
    p = load_profile(samples / "mstt/advisor_timeline_advice")
    df = p.table.df
    assert p.info.layout == "trace_view" and df.height == 255
    assert df.filter(pl.col("name").str.contains("MatMulV2")).height > 0
    assert df["stream"].drop_nulls().len() == df.height             # from "Stream Id"
    assert not df["name"].str.ends_with("_MemSet").any()
    assert df["launch_op"].is_not_null().sum() > 0


def test_mstt_pipe_duplicates_and_quoted_tab_times(samples):
    p = load_profile(samples / "mstt/advisor_compute_advice_pipe/kernel_details.csv")
    assert p.info.rows == 26 and any("3 exact duplicate" in n for n in p.info.notes)
    assert p.info.aic_metrics == "PipeUtilization"
    first = p.table.df.filter(pl.col("type") == "MatMulV2").sort("row").row(0, named=True)
    assert first["start_ns"] == 1736413971558972912                # '"1736413971558972.912\t"'
    assert first["input_shapes"] == "81920,4096;8192,512" and first["input_dtypes"] == "BF16;BF16"
    # 8 MatMulV3 rows in the file, 3 of them exact duplicates of others
    assert _mm(p).height == 4 and _mm(p, "MatMulV3").height == 5


def test_mstt_arith_2023(samples):
    p = load_profile(samples / "mstt/advisor_backend_compute_advice_arith/kernel_details.csv")
    assert p.info.aic_metrics == "ArithmeticUtilization" and p.info.rows == 507
    df = p.table.df
    row = df.sort("row").row(0, named=True)
    assert row["start_ns"] == 1699529622790614800 and row["input_formats"] == "ND"
    assert row["input_dtypes"] == "FLOAT16"
    assert df.filter(pl.col("type") == "MatMul").height == 9
    assert df.filter(pl.col("type") == "BatchMatMul").height == 4
    hccl = df.filter(pl.col("core") == "HCCL")
    assert hccl.height > 0 and hccl["stream"].null_count() == hccl.height


def test_hand_edited_op_summary_skips_the_shifted_row(samples):
    for path in (samples / f"{MSI}/server_test_kernel_parse/op_summary_1.csv",
                 samples / f"{MSI}/server_test_rank_0"):
        p = load_profile(path)
        assert p.info.rows_skipped == 1 and p.info.rows == 18
        assert p.info.skipped_samples[0].endswith(":17: 31 fields, header has 32")
        assert p.info.aic_metrics == "MemoryL0"
        assert p.table.df.filter(pl.col("name") == "FlashAttentionScore").height == 3


def test_msprof_group_picks_pipeutilization(samples):
    p = load_profile(samples / GROUP)
    info = p.info
    assert info.layout == "msprof_group" and info.run == "PipeUtilization"
    assert set(info.runs) == {"ArithmeticUtilization", "L2Cache", "Memory", "MemoryL0", "MemoryUB",
                              "PipeUtilization", "ResourceConflictRatio"}
    assert info.aic_metrics == "PipeUtilization" and info.level == "Level1"
    assert (info.cube_cores, info.vector_cores, info.freq_mhz) == (20, 40, 1800.0)  # from PROF_Memory
    gmm = p.table.df.filter(pl.col("type") == "GroupedMatmul").row(0, named=True)
    assert gmm["core"] == "MIX_AIC" and gmm["device"] == 0
    assert gmm["input_shapes"] == "512,16;8,2048,16;;;;;;8"
    assert gmm["input_formats"] == "ND;NCL;ND;ND;ND;ND;ND;ND" and gmm["input_dtypes"].startswith("BF16;BF16")
    assert gmm["output_shapes"] == "512,2048"
    assert gmm["start_ns"] == 1787504007019867535
    assert gmm["block_dim"] == 20 and gmm["wait_us"] == pytest.approx(13221.44)
    assert gmm["aic_mte2_ratio"] == pytest.approx(0.44)


@pytest.mark.parametrize("run, metrics, column", [
    ("Memory", "Memory", "aic_main_mem_read_bw_gbps"),
    ("ArithmeticUtilization", "ArithmeticUtilization", "aic_mac_fp16_ratio"),
    ("L2Cache", "L2Cache", "aic_r0_read_cache_hit"),
    ("memoryub", "MemoryUB", "aiv_ub_read_bw_vector_gbps"),
])
def test_msprof_group_run_choice(samples, run, metrics, column):
    p = load_profile(samples / GROUP, run=run)
    assert p.info.aic_metrics == metrics and column in p.table.df.columns
    assert p.info.rows == 3 and p.info.cube_cores == 20


def test_msprof_group_unknown_run(samples):
    from cannbot_prefetch.errors import InputError
    with pytest.raises(InputError, match="runs here: .*PipeUtilization"):
        load_profile(samples / GROUP, run="Nope")


def test_single_msprof_run_folder(samples):
    run = next((samples / GROUP).glob("PROF_GROUP_*/PROF_PipeUtilization"))
    p = load_profile(run)
    assert p.info.layout == "msprof" and p.info.rows == 3
    csv = next(run.glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv"))
    p2 = load_profile(csv)
    assert p2.info.layout == "op_summary_csv" and p2.info.aic_metrics == "PipeUtilization"


def test_companions(samples):
    root = samples / f"{L1}/rank0_ascend_pt"
    steps = read_step_times(root)
    assert steps is not None and steps["step"].to_list() == [50]
    assert steps["computing"][0] == pytest.approx(8873.756)
    assert "communication_not_overlapped" in steps.columns
    l2 = read_l2_cache(root)
    assert l2 is not None and l2.row(0, named=True)["task_id"] == 11052
    assert l2["hit_rate"].null_count() > 0 and l2["victim_rate"][0] == pytest.approx(0.23264)
    assert read_step_times(samples / GROUP) is None


@pytest.mark.parametrize("rel", [
    f"{MSI}/pytorch_text_level0", f"{L1}", f"{MSI}/pytorch_text_level2", f"{MSI}/pytorch_db_level1",
    f"{MSI}/server_test_kernel_parse/op_summary_1.csv", f"{MSI}/server_test_rank_0",
    "mstt/advisor_compute_advice_pipe", "mstt/advisor_backend_compute_advice_arith",
    "mstt/advisor_timeline_advice", GROUP,
])
def test_every_sample_loads(samples, rel):
    p = load_profile(samples / rel)
    df = p.table.df
    assert df.height == p.info.rows > 0
    assert df["start_ns"].null_count() == 0 and df["dur_us"].min() >= 0
    assert df["name"].null_count() == 0
    assert not df["name"].str.ends_with("_MemSet").any()


@pytest.mark.parametrize("rel, match", [
    ("mstt/cluster_analysis_output/cluster_step_trace_time.csv", "required column"),
    (f"{L1}/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/op_statistic.csv", "required column"),
    (f"{MSI}/pytorch_db_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/analysis.db",
     "not a torch_npu profiler DB"),
    (f"{L1}/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json", "not a Chrome trace"),
    (MSI, "separate profiles found here"),
])
def test_files_that_are_not_kernel_tables(samples, rel, match):
    from cannbot_prefetch.errors import InputError
    with pytest.raises(InputError, match=match) as info:
        load_profile(samples / rel)
    assert str(samples / rel) in str(info.value)
