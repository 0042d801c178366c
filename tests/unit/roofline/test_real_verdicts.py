"""Issue 31 (a): the verdict agrees with physics on REAL GEMMs (../shared/profiling-samples, never
copied into the repo; skipped when absent).

msinsight-st-qwen3-train rank 0 is a real Qwen3-0.6B training run (BF16, M = 4096, PipeUtilization
counters). Its GEMMs have arithmetic intensity far above the ridge and keep the cube busy, while
MTE2 (which also moves L2 hits and overlaps the cube) reads >= 0.8: the old counter rule called 6
of them memory-bound. The intensity, the shapes' bytes per mean time (HBM share) and the counters
are worked out here from the CSV rows with the test's own arithmetic, not the tool's."""

from __future__ import annotations

import csv
from collections import defaultdict

import pytest

from cannbot_prefetch import analyze

QWEN3 = "msinsight-st-qwen3-train"
KERNELS = f"{QWEN3}/rank_0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
# 910B3 (the tool's assumption here; the profile names no part): bf16 2*16^3*20*1800 MHz =
# 294.912 TFLOPS, HBM 1.6 TB/s (REFERENCE.md 4.1) -> ridge 184.32 FLOP/B.
PEAK, HBM = 294.912e12, 1.6e12
RIDGE = PEAK / HBM


def _dims(text: str) -> list[list[int]]:
    return [[int(d) for d in part.split(",")] for part in text.strip('"').split(";")]


def _gemms(path) -> dict[str, dict]:
    """Per MatMul signature (type + input shapes, step 14 and later: the tool drops step 13 as
    warm-up): AI, mean us, mean mac / mte2, from the CSV by plain arithmetic (BF16, 2 B)."""
    rows = defaultdict(list)
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r["Type"].startswith("MatMul"):
                rows[(r["Type"], r["Input Shapes"].strip('"'), r["Output Shapes"].strip('"'))].append(r)
    out = {}
    for (typ, ins, outs), rs in rows.items():
        (x1, x2), (y,) = _dims(ins), _dims(outs)
        m, n = y[-2], y[-1]
        k = x1[0] * x1[1] // m
        flops = 2 * m * n * k
        nbytes = 2 * (x1[0] * x1[1] + x2[0] * x2[1] + m * n)
        mean = sum(float(r["Duration(us)"]) for r in rs) / len(rs)
        out[f"{typ} {ins}"] = dict(
            ai=flops / nbytes, share=nbytes / (mean * 1e-6) / HBM,
            mac=sum(float(r["aic_mac_ratio"]) for r in rs) / len(rs),
            mte2=sum(float(r["aic_mte2_ratio"]) for r in rs) / len(rs))
    return out


@pytest.fixture(scope="module")
def qwen3(samples):
    path = samples / KERNELS
    if not path.is_file():
        pytest.skip(f"{path} not found")
    doc = analyze(str(samples / QWEN3), hardware="910B3").to_json()
    return doc, _gemms(path)


def test_the_sample_is_the_case_the_issue_names(qwen3):
    """It can fail: every GEMM is > 2 x ridge, and MTE2 >= 0.8 > mac on several (the old rule's
    memory-bound calls), with HBM at a fifth of its rate."""
    _, truth = qwen3
    assert len(truth) == 11
    assert all(g["ai"] > 2 * RIDGE for g in truth.values())
    old_rule = [s for s, g in truth.items() if g["mte2"] >= 0.8 and g["mte2"] > g["mac"]]
    assert len(old_rule) >= 6, old_rule
    assert all(g["share"] < 0.3 for g in truth.values())


def test_no_gemm_over_twice_the_ridge_is_memory_bound_or_shortlisted(qwen3):
    doc, truth = qwen3
    sigs = {f"{s['type']} {s['input_shapes']}": s for s in doc["signatures"]}
    assert set(sigs) == set(truth)
    for key, s in sigs.items():
        g = truth[key]
        assert s["ai"] == pytest.approx(g["ai"], rel=1e-3) and s["ridge"] == pytest.approx(RIDGE)
        assert s["measured_verdict"] == "compute-bound", (key, s["evidence_why"])
        # the design's deciding evidence: the intensity, with both numbers shown
        assert s["evidence"] == "intensity"
        assert f"AI {s['ai']:.3g} >= 2 x ridge {RIDGE:.3g}" in s["evidence_why"]
        assert f"mte2 {g['mte2']:.2f}" in s["evidence_why"]
        assert s["hbm_share"] == pytest.approx(g["share"], rel=1e-3)
    assert doc["top"] == [] and doc["candidates"] == []


def test_cli_says_which_evidence_decided(samples, tmp_path):
    if not (samples / KERNELS).is_file():
        pytest.skip("qwen3 sample not found")
    from typer.testing import CliRunner

    from cannbot_prefetch.cli import app
    res = CliRunner().invoke(app, ["prefetch", "analyze", str(samples / QWEN3), "--hardware",
                                   "910B3", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "compute-bound by intensity ×11" in res.output
    assert "memory-bound" not in res.output.split("Measured verdicts")[1]


# ---------------------------------------------------------------- issue 31 (d): A1-class layout
A1 = "msinsight-2024-10-a1"
A1_KERNELS = f"{A1}/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"


def test_a1_unprefixed_counters_give_measured_verdicts(samples):
    """The Ascend 910 export names its counters mac_ratio / mte2_ratio (no aic_ prefix) and adds
    memory_bound: every MatMul signature gets a measured verdict from its own rows' means, and
    the part is the A1 profile, said to be an assumption."""
    path = samples / A1_KERNELS
    if not path.is_file():
        pytest.skip(f"{path} not found")
    from cannbot_prefetch import hardware
    from cannbot_prefetch.profiling.load import load_profile
    from cannbot_prefetch.roofline import classify

    prof = load_profile(samples / A1)
    assert prof.info.chip_class == "A1"
    assert {"aic_mac_ratio", "aic_mte2_ratio", "aiv_vec_ratio"} <= set(prof.table.df.columns)
    hw = hardware.resolve(None, prof.info)
    assert hw.name == "910A" and hardware.is_assumed(hw) and "A1-class" in hw.detected_from
    # the test's own means of the CSV's unprefixed counters per (type, input shapes), kept steps
    kept = {str(s) for s in prof.info.steps}
    sums = defaultdict(lambda: [0, 0.0, 0.0])
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r["Step Id"] in kept and "MatMul" in r["Type"] and r["mac_ratio"] not in ("", "N/A"):
                acc = sums[(r["Type"], r["Input Shapes"].strip('"'))]
                acc[0] += 1
                acc[1] += float(r["mac_ratio"])
                acc[2] += float(r["mte2_ratio"])
    roof = classify(prof.table, hw)
    assert len(roof.signatures) == len(sums) >= 5
    for s in roof.signatures:
        n, mac, mte2 = sums[(s.type, s.input_shapes)]
        assert s.mean_mac_ratio == pytest.approx(mac / n) and s.mean_mte2_ratio == pytest.approx(mte2 / n)
        assert s.measured_verdict is not None and s.evidence
