"""Manual mode without a profile (issue 32): the window starts at the output of the MatMul the
forward pass runs last before the target, else (a layer's first MatMul) after the layer's last
one; the design lists the calls the window holds and warns when it holds none.

Fixtures: tests/fixtures/vllm_style/*.py, written for this project in vLLM's style. Expected
placements follow from reading the fixtures' forward methods by hand."""

from __future__ import annotations

import shutil
from pathlib import Path

from cannbot_prefetch import hardware
from cannbot_prefetch.plan.build import PlanOptions, build_plan
from cannbot_prefetch.plan.design import render_design

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "vllm_style"
CFG = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8,
       "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 1000,
       "rms_norm_eps": 1e-5, "num_experts": 4, "num_experts_per_tok": 2,
       "moe_intermediate_size": 128, "torch_dtype": "bfloat16"}


def _plan(tmp_path, name, targets):
    src = tmp_path / name
    shutil.copy(FIX / name, src)
    plan, design, _ = build_plan(None, None, hardware.load("910B3"), src, dict(CFG),
                                 PlanOptions(targets=targets, tp=2))
    return {s.target.attr: s for s in plan.sites}, render_design(design)


def test_default_windows_hold_the_light_calls(tmp_path):
    by, text = _plan(tmp_path, "llama_kw_vllm.py",
                     ("KwMLP.down_proj", "KwMLP.gate_up_proj", "KwAttention.qkv_proj"))
    d = by["down_proj"]      # at gate_up_proj's output; the activation runs in the window
    assert (d.insert.cls, d.insert.anchor_call, d.insert.position, d.dependency) == \
        ("KwMLP", "self.gate_up_proj", "after", "x")
    g = by["gate_up_proj"]   # at the attention block's output in the decoder layer
    assert (g.insert.cls, g.insert.anchor_call, g.insert.position, g.dependency) == \
        ("KwDecoderLayer", "self.self_attn", "after", "hidden_states")
    q = by["qkv_proj"]       # the next layer's qkv at this layer's MLP output
    assert (q.insert.cls, q.insert.anchor_call, q.insert.position) == \
        ("KwDecoderLayer", "self.mlp", "after")
    assert q.target.scope == "next_layer"
    assert "the window holds: KwMLP.act_fn" in text
    assert "the window holds: KwDecoderLayer.post_attention_layernorm" in text
    assert "the window holds: KwDecoderLayer.input_layernorm" in text
    assert "holds no op" not in text


def test_zero_op_window_is_said(tmp_path):
    # qwen2_vllm.py has no model class with a layer loop: the attention's first MatMul has no
    # MatMul before it and no next layer, so only its own input is legal, a window of no op
    by, text = _plan(tmp_path, "qwen2_vllm.py", ("Qwen2Attention.qkv_proj",))
    q = by["qkv_proj"]
    assert (q.insert.anchor_call, q.insert.position) == ("self.qkv_proj", "before")
    assert "warning: Qwen2Attention.qkv_proj: the window holds no op" in text


MLA_CFG = {"qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32,
           "kv_lora_rank": 64}


def test_linears_handed_to_a_library_layer_run_where_it_is_called(tmp_path):
    """vLLM's MLA: the attention hands kv_b_proj / o_proj / ... to `MultiHeadLatentAttention
    Wrapper` and calls only the wrapper. They run where `self.mla_attn(...)` runs (before this,
    "never run by the forward pass"; apply's legality check now knows that a call of a layer
    handed the target runs it): planned before `self.mla_attn(...)`, each window naming the
    projections the wrapper runs before it, in the order the class builds them.
    TP 2: kv_b_proj column-split 8 * (32 + 32) / 2 = 256 by 64; o_proj row-split 256 by
    8 * 32 / 2 = 128. `unused_proj`, handed to nobody, is still never run."""
    src = tmp_path / "mla_wrapper_vllm.py"
    shutil.copy(FIX / src.name, src)
    plan, design, rej = build_plan(None, None, hardware.load("910B3"), src,
                                   {**CFG, **MLA_CFG},
                                   PlanOptions(targets=("LatentAttention.kv_b_proj",
                                                        "LatentAttention.o_proj",
                                                        "LatentAttention.unused_proj"), tp=2))
    by = {s.target.attr: s for s in plan.sites}
    assert set(by) == {"kv_b_proj", "o_proj"}
    for s in by.values():      # at the wrapper's call, the one that runs them
        assert (s.insert.cls, s.insert.method, s.insert.anchor_call, s.insert.position) == \
            ("LatentAttention", "forward", "self.mla_attn", "before")
        assert s.dependency == "hidden_states"     # not positions: they feed only rotary
    held = {a: next(n for n in s.evidence["notes"] if n.startswith("the window holds:"))
            for a, s in by.items()}
    # inside the wrapper, in the order the class builds them: q_proj, kv_a, kv_b, o_proj
    assert held["kv_b_proj"].endswith("LatentAttention.q_proj, "
                                      "LatentAttention.kv_a_proj_with_mqa")
    assert held["o_proj"].endswith("LatentAttention.kv_a_proj_with_mqa, "
                                   "LatentAttention.kv_b_proj")
    assert tuple(by["kv_b_proj"].basis.dims) == (256, 64)
    assert tuple(by["o_proj"].basis.dims) == (256, 128)
    assert "holds no op" not in render_design(design)
    assert any("unused_proj is never run" in r.reason for r in rej)
