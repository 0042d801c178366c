"""Issue 10 item 4: the window the plan costs is the span between where the code issues the
prefetch and the target call. HAND-BUILT tables (tests/unit/windows/conftest.py), the GENERATED
llama3.2-1b-en example and the REAL transformers source (copied at test time)."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
import pytest

from cannbot_prefetch import hardware, reasons
from cannbot_prefetch.profiling.table import KernelTable
from cannbot_prefetch.windows import HEAVY, Candidate, TargetSig, find_windows
from cannbot_prefetch.windows.placed import measured_first, placed_window

DOWN = TargetSig(sig_id=0, type="MatMulV2", input_shapes="1,8192;2048,8192", n=2048, k=8192, m=1)
GATE = TargetSig(sig_id=1, type="MatMulV2", input_shapes="1,2048;8192,2048", n=8192, k=2048, m=1)


def _mlp(table):
    """RmsNorm -> gate (heavy) -> Silu -> up (heavy) -> Mul -> down, 3 layers, 1 us gaps."""
    layer = [dict(type="Add", dur=1.5), dict(type="RmsNorm", dur=3.0),
             dict(type="MatMulV2", dur=33.0, sig=1), dict(type="Silu", dur=3.0),
             dict(type="MatMulV2", dur=33.0, sig=1), dict(type="Mul", dur=3.0),
             dict(type="MatMulV2", dur=33.0, sig=0)]
    res = find_windows(table(layer * 3, gap_us=1.0), [DOWN], all_signatures=[GATE],
                       lookback=3, min_window_us=2.0)
    (down,) = res.candidates
    return down


def test_measured_window_stands_when_the_call_precedes_its_first_op(table):
    down = _mlp(table)
    assert (down.window.branch, [o.type for o in down.window.ops]) == ("3a", ["Mul"])
    assert measured_first(down) == 0
    assert placed_window(down, 0, 2.0, "here") is down.window


def test_an_insertion_before_the_whole_line_overlaps_the_matmuls(table):
    down = _mlp(table)
    assert [(lo.op.type, lo.matmul) for lo in down.lead[:5]] == [
        ("Mul", False), ("MatMulV2", True), ("Silu", False), ("MatMulV2", True), ("RmsNorm", False)]
    code, why = placed_window(down, 3, 2.0, "before `self.down_proj` in LlamaMLP.forward")
    assert code == reasons.NO_SAFE_WINDOW
    assert "also overlaps MatMulV2" in why and "before `self.down_proj`" in why


def test_a_later_insertion_shrinks_the_window(table):
    down = _mlp(table)
    code, why = placed_window(down, -1, 2.0, "right before the target")
    assert code == reasons.WINDOW_TOO_SHORT and "1.0 µs" in why


def test_a_later_insertion_over_fewer_light_ops_is_recosted(table):
    """The measured window starts at gate_proj's output (3a over Cast and RmsNorm); an insertion
    that precedes only RmsNorm starts at its input, when Cast ends (3b), and loses Cast and a
    gap."""
    layer = [dict(type="MatMulV2", dur=33.0, sig=1), dict(type="Cast", dur=4.0),
             dict(type="RmsNorm", dur=3.0), dict(type="MatMulV2", dur=33.0, sig=0)]
    res = find_windows(table(layer * 3, gap_us=1.0), [DOWN], all_signatures=[GATE], lookback=3,
                       min_window_us=2.0)
    (c,) = res.candidates
    assert (c.window.branch, c.window.start_op.type, c.window.start_op.cls) == (
        "3a", "MatMulV2", HEAVY)
    assert c.window.to_dict()["ops"] == ["Cast", "RmsNorm"]       # execution order in the plan
    assert c.window.time_us == pytest.approx(10.0, abs=0.01)      # Cast + RmsNorm + 3 gaps
    assert placed_window(c, 1, 2.0, "after `self.gate`") is c.window
    w = placed_window(c, 0, 2.0, "before `self.norm`")
    assert [o.type for o in w.ops] == ["RmsNorm"]
    assert (w.branch, w.start, w.start_op.type) == ("3b", "input", "RmsNorm")
    assert w.time_us == pytest.approx(5.0, abs=0.01)              # RmsNorm + 2 gaps


def test_further_back_than_recorded_is_no_safe_window(table):
    down = _mlp(table)
    code, _ = placed_window(down, None, 2.0, "far away")
    assert code == reasons.NO_SAFE_WINDOW


# ------------------------------------------------------------------ mapping says which op

@pytest.fixture(scope="module")
def llama(examples_dir):
    from cannbot_prefetch.profiling.load import load_profile
    from cannbot_prefetch.roofline.classify import classify
    prof = load_profile(examples_dir / "llama3.2-1b-en" / "profile")
    hw = hardware.load("910B3")
    return prof, hw, classify(prof.table, hw)


@pytest.mark.parametrize("stacks", [True, False])
def test_one_line_mlp_is_no_safe_window_and_o_proj_keeps_its_window(llama, copy_src, tmp_path,
                                                                     examples_dir, stacks):
    """down_proj(act_fn(gate_proj(x)) * up_proj(x)): the call lands before the whole line, so
    up_proj / down_proj have no safe window; o_proj's placement before attention_interface is
    its measured window. With stacks the statement of each op decides, without them the calls
    between insertion and target are counted back on the timeline."""
    from cannbot_prefetch.plan.build import PlanOptions, build_plan
    from cannbot_prefetch.roofline.classify import classify
    prof, hw, roof = llama
    if not stacks:
        df = prof.table.df.with_columns(pl.lit(None, dtype=pl.Utf8).alias("stack"))
        roof = classify(KernelTable(df), hw)
    src = copy_src("llama", tmp_path / "m")
    plan, design, rej = build_plan(roof, prof.info, hw, src,
                                   examples_dir / "llama3.2-1b-en" / "config.json",
                                   PlanOptions(max_sites=6))
    by = {r.site: r for r in rej if r.site}
    for attr in ("up_proj", "down_proj"):
        assert by[f"LlamaMLP.{attr}"].reason_code == reasons.NO_SAFE_WINDOW
    o = next(v for v in design.sites if v.site.target.attr == "o_proj")
    w = o.site.evidence["window"]
    assert w["ops"] == ["FusedInferAttentionScore"] and w["placed_by"] == (
        "stack" if stacks else "calls")
    assert o.site.insert.anchor_call == "attention_interface"


def test_a_fallback_insertion_is_costed_where_it_lands(llama, copy_src, tmp_path, examples_dir,
                                                       monkeypatch):
    """o_proj when the rewriter refuses its window's insertion: the nearest legal one is right
    before `self.o_proj` on its input, which leaves no window (it was costed 7 us before)."""
    from cannbot_prefetch.mapping import mapper
    from cannbot_prefetch.plan.build import PlanOptions, build_plan
    prof, hw, roof = llama
    real = mapper.checker

    def refusing(ms, *mode):
        accept = real(ms, *mode)
        return lambda p, lin: ("refused for the test" if p.insert.anchor_call ==
                               "attention_interface" else accept(p, lin))
    monkeypatch.setattr(mapper, "checker", refusing)
    src = copy_src("llama", tmp_path / "m")
    plan, design, rej = build_plan(roof, prof.info, hw, src,
                                   examples_dir / "llama3.2-1b-en" / "config.json",
                                   PlanOptions(max_sites=6))
    assert "LlamaAttention.o_proj" not in {f"{s.target.cls}.{s.target.attr}" for s in plan.sites}
    o = next(r for r in rej if r.site == "LlamaAttention.o_proj")
    assert o.reason_code == reasons.WINDOW_TOO_SHORT
    assert "before `self.o_proj` in LlamaAttention.forward" in o.reason


def test_lead_times_are_medians_worked_out_when_first_read(table):
    down = _mlp(table)
    mul, up = down.lead[0], down.lead[1]
    assert "_times" not in mul.__dict__ and "_times" not in up.__dict__   # nothing asked yet
    # each layer: ... up (33 us) | 1 us | Mul (3 us) | 1 us | down
    assert (mul.start_us, mul.end_us, mul.overlap_us, mul.min_free_us) == (4.0, 1.0, 0.0, 1.0)
    assert (up.start_us, up.end_us) == (38.0, 5.0)
    assert "_times" in mul.__dict__ and "_times" not in down.lead[2].__dict__
