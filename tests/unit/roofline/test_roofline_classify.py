"""classify.py: grouping, verdicts (CONTRACTS.md / policy.yaml), notes, sig_id, select_top."""

from __future__ import annotations

import polars as pl
import pytest
from roofline_rows import MSTT_MATMULV2, VLLM_GMM, make_table, mm_row

from cannbot_prefetch import hardware
from cannbot_prefetch.roofline import Verdict, classify, select_top
from cannbot_prefetch.roofline.classify import FLAG_INCONSISTENT, JSON_KEYS

B2 = hardware.load("910B2")
B3 = hardware.load("910B3")
DECODE = ("16,5120;5120,5120", "16,5120")


def test_worked_example_is_memory_bound_with_the_reference_times():
    roof = classify(make_table([mm_row(*DECODE, dur=40.0)], counters=False), B2)
    (s,) = roof.signatures
    assert s.t_memory_us == pytest.approx(32.97, abs=0.01)
    assert s.t_compute_us == pytest.approx(2.37, abs=0.01)
    assert s.ai == pytest.approx(15.9, abs=0.01)
    assert s.ridge == pytest.approx(221.2, abs=0.1)
    assert s.verdict == Verdict.MEMORY
    assert s.measured_verdict is None
    assert s.flops == 838_860_800 and s.bytes == 52_756_480 and s.weight_bytes == 52_428_800
    s3 = classify(make_table([mm_row(*DECODE, dur=40.0)], counters=False), B3).signatures[0]
    assert s3.t_compute_us == pytest.approx(2.84, abs=0.01)


def test_latency_bound_when_roofline_time_under_30_percent_of_measured():
    # max(t) = 33 us; 33 < 0.3 * 120 -> latency-bound; at 100 us 33 >= 30 -> memory-bound
    slow = classify(make_table([mm_row(*DECODE, dur=120.0)], counters=False), B2).signatures[0]
    ok = classify(make_table([mm_row(*DECODE, dur=100.0)], counters=False), B2).signatures[0]
    assert slow.verdict == Verdict.LATENCY and ok.verdict == Verdict.MEMORY


def test_compute_bound_prefill():
    s = classify(make_table([mm_row("4096,5120;5120,5120", "4096,5120", dur=800.0)],
                            counters=False), B3).signatures[0]
    assert s.ai > s.ridge and s.verdict == Verdict.COMPUTE


def test_mstt_matmulv2_row_cube_busy_is_compute_bound_and_flagged_inconsistent():
    """mac 0.824 keeps the cube busy: compute-bound whatever MTE2 (0.964) shows (the advisor
    calls it "both", REFERENCE.md 4.3); its edited shapes are no evidence either way."""
    s = classify(make_table([MSTT_MATMULV2]), B3).signatures[0]
    assert s.mean_mac_ratio == pytest.approx(0.824) and s.mean_mte2_ratio == pytest.approx(0.964)
    assert s.measured_verdict == Verdict.COMPUTE and s.evidence == "cube"
    assert s.hbm_share is None      # analytic bytes of edited shapes: not used
    # 2*4096*81920*512 FLOP at 294.9 TFLOPS = 1165 us, measured 185.5 us: shapes inconsistent
    assert s.t_compute_us == pytest.approx(1165.1, abs=0.5)
    assert FLAG_INCONSISTENT in s.flags
    assert "faster than the compute roof" in s.note
    assert s.verdict == Verdict.COMPUTE


# DECODE on 910B2: AI 15.9 < ridge 221; analytic bytes 52.76 MB at 40 us = 1.32 TB/s, 82 % of
# 1.6 TB/s (at 80 us: 41 %). At the HBM roof with MTE2 busier than the cube: memory-bound even
# with a busy cube; below it a busy cube (mac >= 0.8) is compute-bound whatever MTE2 shows; a
# ratio within 0.05 of 0.8 is borderline; analytic bytes at the roof need a busy MTE2 to count.
@pytest.mark.parametrize("mac,mte2,dur,expected", [
    (0.824, 0.964, 40.0, Verdict.MEMORY), (0.824, 0.964, 80.0, Verdict.COMPUTE),
    (0.9, 0.5, 40.0, Verdict.COMPUTE), (0.85, 0.85, 40.0, Verdict.COMPUTE),
    (0.5, 0.79, 40.0, Verdict.BORDERLINE), (0.1, 0.8, 40.0, Verdict.MEMORY),
    (0.007, 0.44, 40.0, Verdict.LATENCY), (0.78, 0.95, 80.0, Verdict.BORDERLINE),
    (0.1, 0.95, 80.0, Verdict.MEMORY), (0.3, 0.6, 80.0, Verdict.LATENCY)])
def test_measured_verdict_rule(mac, mte2, dur, expected):
    row = mm_row(*DECODE, dur=dur, aic_mac_ratio=mac, aic_mte2_ratio=mte2)
    s = classify(make_table([row]), B2).signatures[0]
    assert s.measured_verdict == expected, s.evidence_why
    assert s.hbm_share == pytest.approx(52_756_480 / (dur * 1e-6) / 1.6e12)


def test_agreeing_verdicts_have_no_disagreement_note():
    row = mm_row(*DECODE, dur=40.0, aic_mac_ratio=0.1, aic_mte2_ratio=0.95)
    s = classify(make_table([row]), B2).signatures[0]
    assert s.verdict == s.measured_verdict == Verdict.MEMORY
    assert "counters say" not in s.note


def test_real_gmm_row_mix_aic_is_selected_and_latency_bound():
    roof = classify(make_table([VLLM_GMM]), B3)
    (s,) = roof.signatures
    assert s.family == "gmm" and s.type == "GroupedMatmul"
    assert s.t_memory_us == pytest.approx(1.65, abs=0.01)
    assert s.verdict == Verdict.LATENCY            # 1.65 us < 30% of 26.7 us
    assert s.measured_verdict == Verdict.LATENCY   # mac 0.007, mte2 0.44
    assert roof.table.df["sig_id"].to_list() == [0]


def test_grouping_sig_ids_and_order_preserved():
    rows = [
        dict(type="RmsNorm", name="RmsNorm_1", core="AI_VECTOR_CORE", dur_us=5.0, start_ns=0),
        mm_row(*DECODE, dur=40.0, start_ns=10_000),
        mm_row("16,5120;1024,5120", "16,1024", dur=10.0, start_ns=60_000),
        mm_row(*DECODE, dur=42.0, start_ns=80_000),
        dict(type="MemSet", name="MatMulV2_MemSet", core="AI_VECTOR_CORE", dur_us=1.0, start_ns=130_000),
        mm_row(*DECODE, dur=44.0, start_ns=140_000, name="aclnnMatmul_MatMulV2_MemSet"),
        dict(type="Conv2D", name="Conv2D_1", core="AI_CORE", dur_us=50.0, start_ns=190_000),
    ]
    roof = classify(make_table(rows, counters=False), B2)
    assert [s.count for s in roof.signatures] == [2, 1]
    big = roof.signatures[0]
    assert big.sig_id == 0 and big.total_us == pytest.approx(82.0) and big.mean_us == pytest.approx(41.0)
    assert big.input_shapes == DECODE[0] and big.dtypes == "BF16;BF16" and big.formats == "ND;ND"
    df = roof.table.df
    assert df.height == len(rows) and df["sig_id"].dtype == pl.Int64
    assert df["sig_id"].to_list() == [None, 0, 1, 0, None, None, None]
    assert df["name"].to_list() == [r["name"] for r in rows]   # input order kept
    assert big.samples == ("kernel_details.csv:3", "kernel_details.csv:5")


def test_dtype_and_format_split_signatures():
    rows = [mm_row(*DECODE), mm_row(*DECODE, dtypes="FLOAT16;FLOAT16"),
            mm_row(*DECODE, formats="ND;FRACTAL_NZ")]
    assert len(classify(make_table(rows, counters=False), B2).signatures) == 3


def test_share_uses_step_spans_when_steps_exist():
    rows = [mm_row(*DECODE, dur=40.0, start_ns=0, step=1),
            dict(type="Add", name="Add", dur_us=10.0, start_ns=90_000, step=1),       # step 1: 100 us
            mm_row(*DECODE, dur=40.0, start_ns=1_000_000, step=2),
            dict(type="Add", name="Add", dur_us=10.0, start_ns=1_190_000, step=2)]    # step 2: 200 us
    roof = classify(make_table(rows, counters=False), B2)
    assert roof.share_basis == "steps" and roof.step_time_us == pytest.approx(300.0)
    assert roof.signatures[0].share == pytest.approx(80.0 / 300.0)
    assert any("step span" in n for n in roof.notes)


def test_share_uses_timeline_without_steps():
    rows = [mm_row(*DECODE, dur=40.0, start_ns=0),
            dict(type="Add", name="Add", dur_us=10.0, start_ns=150_000)]
    roof = classify(make_table(rows, counters=False), B2)
    assert roof.share_basis == "timeline" and roof.step_time_us == pytest.approx(160.0)
    assert roof.signatures[0].share == pytest.approx(0.25)
    assert any("no Step Id" in n for n in roof.notes)


def test_level0_rows_are_recognised_by_name_without_a_verdict():
    rows = [dict(name="aclnnMatmul_MatMulV3Common_MatMulV3", dur_us=10.0, start_ns=0),
            dict(name="MatMul91", dur_us=12.0, start_ns=20_000),
            dict(name="aclnnAdd_AddAiCore_Add", dur_us=2.0, start_ns=40_000)]
    roof = classify(make_table(rows, counters=False), B3)
    assert sorted(s.type for s in roof.signatures) == ["MatMul", "MatMulV3"]
    assert all(s.verdict == Verdict.UNKNOWN and "no roofline" in s.note for s in roof.signatures)
    assert roof.table.df["sig_id"].null_count() == 1


def test_fp32_peak_assumption_is_noted():
    s = classify(make_table([mm_row("32,4096;4096,4096", "32,4096", dtypes="FLOAT;FLOAT")],
                            counters=False), B3).signatures[0]
    assert s.compute_dtype == "fp32" and "assumption" in s.note


def test_overrides_flow_into_times():
    base = classify(make_table([mm_row(*DECODE)], counters=False), B2).signatures[0]
    slow = classify(make_table([mm_row(*DECODE)], counters=False),
                    B2.with_overrides(hbm_bw_tbps=0.8)).signatures[0]
    assert slow.t_memory_us == pytest.approx(2 * base.t_memory_us)
    assert slow.ridge == pytest.approx(2 * base.ridge)


def test_select_top_memory_bound_by_total_time():
    rows = [mm_row(*DECODE, dur=40.0, start_ns=0),                                   # memory
            mm_row("16,5120;1024,5120", "16,1024", dur=8.0, start_ns=100_000),        # memory, small
            mm_row("16,5120;1024,5120", "16,1024", dur=8.0, start_ns=200_000),
            mm_row("4096,5120;5120,5120", "4096,5120", dur=800.0, start_ns=300_000),  # compute
            mm_row("16,5120;2048,5120", "16,2048", dur=500.0, start_ns=2_000_000,     # latency by shapes,
                   aic_mac_ratio=0.1, aic_mte2_ratio=0.9)]                            # memory by counters
    roof = classify(make_table(rows), B2)
    top = select_top(roof, 10)
    assert [s.input_shapes for s in top] == ["16,5120;2048,5120", DECODE[0], "16,5120;1024,5120"]
    assert [s.total_us for s in top] == sorted((s.total_us for s in top), reverse=True)
    assert len(select_top(roof, 1)) == 1
    assert "16,5120;2048,5120" not in [s.input_shapes for s in select_top(roof, 10, by="analytic")]
    assert [s.family for s in select_top(roof, 10, Verdict.COMPUTE)] == ["matmul"]
    with pytest.raises(ValueError):
        select_top(roof, 3, by="nonsense")


def test_json_has_exactly_the_contract_keys():
    s = classify(make_table([MSTT_MATMULV2]), B3).signatures[0]
    doc = s.to_json()
    assert tuple(doc) == JSON_KEYS
    assert doc["type"] == "MatMulV2" and doc["measured_verdict"] == "compute-bound"
    assert doc["evidence"] == "cube" and "mac 0.82 >= 0.8" in doc["evidence_why"]
    assert "weight_shape" in s.to_dict()


def test_empty_table():
    roof = classify(make_table([]), B3)
    assert roof.signatures == () and "sig_id" in roof.table.df.columns


def test_real_samples_classify(samples):
    from cannbot_prefetch.profiling.load import load_profile
    prof = load_profile(samples / "vllm-ascend-msprof-group" / "PROF_GROUP_20260823_165254")
    hw = hardware.resolve(None, prof.info)
    assert hw.name == "910B3"      # info.json: 20 cores @ 1800 MHz
    roof = classify(prof.table, hw)
    (gmm,) = [s for s in roof.signatures if s.family == "gmm"]
    assert gmm.flops == 2 * 512 * 16 * 2048 and gmm.measured_verdict == Verdict.LATENCY
