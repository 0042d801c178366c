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
