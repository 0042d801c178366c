"""Seed table rows 3a / 3b / 3c on GENERATED example profiles (examples/synth: durations from
the stated formula, HCCL all-reduces inserted before ops to reach "no safe window")."""

from __future__ import annotations

from pathlib import Path

import pytest

from cannbot_prefetch import hardware, reasons
from cannbot_prefetch.profiling.load import load_profile
from cannbot_prefetch.roofline.classify import classify, select_top
from cannbot_prefetch.windows import Candidate, find_windows

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
LLAMA_CFG = EXAMPLES / "llama3.2-1b-en" / "config.json"


def _windows(path, **kw):
    prof = load_profile(path)
    roof = classify(prof.table, hardware.load("910B3"))
    res = find_windows(roof.table, select_top(roof, 10), all_signatures=roof.signatures, **kw)
    return roof, res


def _by_shape(res, shapes, cluster=0):
    hits = [x for x in (*res.candidates, *res.rejections)
            if x.target.input_shapes == shapes and x.cluster == cluster]
    assert len(hits) == 1, hits
    return hits[0]


@pytest.fixture(scope="module")
def llama_example():
    return _windows(EXAMPLES / "llama3.2-1b-en" / "profile")


def test_3a_o_proj_output_before_gate_proj(llama_example):
    _, res = llama_example
    gate = _by_shape(res, "1,2048;8192,2048", cluster=0)
    assert isinstance(gate, Candidate)
    # seed 003: o_proj's output is the MLP's window (rule 3a), over the residual Add and RmsNorm
    assert (gate.window.branch, gate.window.start_op.type) == ("3a", "MatMulV3")
    assert gate.window.to_dict()["ops"] == ["Add", "RmsNorm"]       # execution order
    # formula (README): each light op ~3.0 us (the 3 us launch floor), 3 launch gaps of
    # 1.0-1.5 us
    assert 9.0 <= gate.window.time_us <= 10.5
    assert gate.instances == 32 and gate.per_step == 16


def test_3a_matmul_output_before_down_proj(llama_example):
    _, res = llama_example
    down = _by_shape(res, "1,8192;2048,8192")
    assert isinstance(down, Candidate)
    assert (down.window.branch, down.window.start, down.window.start_op.type) == \
        ("3a", "output", "MatMulV3")
    assert [o.type for o in down.window.ops] == ["Mul"]


def test_3c_communication_before_gate_proj(tmp_path):
    from synth.writer import generate
    out = generate(LLAMA_CFG, tmp_path, layers=2, steps=2, comm=["LlamaMLP.gate_proj"],
                   stacks="outer")
    _, res = _windows(out)
    gate = _by_shape(res, "1,2048;8192,2048", cluster=0)
    assert gate.reason_code == reasons.NO_SAFE_WINDOW
    assert "communication" in gate.reason and "hcom_allReduce" in gate.reason
    # the other targets keep their windows
    assert any(c.target.input_shapes == "1,8192;2048,8192" for c in res.candidates)


def test_lookback_one_and_a_long_min_window_reject(llama_example):
    roof, _ = llama_example
    res = find_windows(roof.table, select_top(roof, 10), all_signatures=roof.signatures,
                       lookback=1, min_window_us=50.0)
    assert not res.candidates
    assert {r.reason_code for r in res.rejections} <= {reasons.WINDOW_TOO_SHORT,
                                                       reasons.MEMORY_HEAVY_PREDECESSOR}
