"""vLLM-style and cann-recipes-style patterns (tests/fixtures/vllm_style): parse + compile +
golden diffs, the refusals with their reasons, idempotency and revert by markers."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from cannbot_prefetch.rewrite.engine import rewrite_source
from cannbot_prefetch.rewrite.markers import strip_markers

from .sites import plan, site

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "vllm_style"
GOLDEN = FIX / "golden"

CASES = {
    "qwen2_vllm.py": (plan(
        site("v-qkv", cls="Qwen2Attention", attr="qkv_proj", weight="self.self_attn.qkv_proj.weight",
             icls="Qwen2DecoderLayer", anchor="self.self_attn", dep="hidden_states", size=4 << 20),
        site("v-gate_up", cls="Qwen2MLP", attr="gate_up_proj", weight="self.mlp.gate_up_proj.weight",
             icls="Qwen2DecoderLayer", anchor="self.self_attn", position="after",
             dep="hidden_states", size=18 << 20),
        site("v-down", cls="Qwen2MLP", attr="down_proj", weight="self.down_proj.weight",
             icls="Qwen2MLP", anchor="self.gate_up_proj", position="after", dep="gate_up",
             size=9 << 20)), {}),
    "qwen3_moe_vllm.py": (plan(
        site("v-w13", cls="Qwen3MoeSparseMoeBlock", attr="experts.w13_weight",
             weight="self.experts.w13_weight", icls="Qwen3MoeSparseMoeBlock", anchor="self.gate",
             position="after", dep="router_logits", size=32 << 20),
        site("v-w2-alias", cls="Qwen3MoeMLP", attr="down_proj", weight="self.down_proj.weight",
             icls="Qwen3MoeMLP", anchor="self.down_proj", dep="x"),
        site("v-tp-sub", cls="Qwen3MoeSparseMoeBlockTP", attr="experts.w2_weight",
             weight="self.experts.w2_weight", icls="Qwen3MoeSparseMoeBlockTP", anchor="self.gate",
             position="after", dep="router_logits"),
        site("v-w2-wrong-dep", cls="Qwen3MoeSparseMoeBlock", attr="experts.w2_weight",
             weight="self.experts.w2_weight", icls="Qwen3MoeSparseMoeBlock", anchor="self.gate",
             position="after", dep="orig_shape"),
        mode="ge_graph"),
        {"v-w2-alias": "alias of Qwen2MLP", "v-tp-sub": "inherits Qwen3MoeSparseMoeBlock.forward",
         "v-w2-wrong-dep": "does not flow into"}),
    "longcat_recipes.py": (plan(
        site("lc-q_a", cls="Attention", attr="q_a_proj", weight="self.self_attn.q_a_proj.weight",
             icls="DecoderLayer", method="forward_decode", anchor="self.self_attn",
             dep="hidden_states", size=18 << 20),
        site("lc-gate_up", cls="FFN", attr="gate_up_proj", weight="self.mlp.gate_up_proj.weight",
             icls="DecoderLayer", method="forward_decode", anchor="self.self_attn",
             position="after", dep="attn_out", size=36 << 20, guard=("attn_out", 1, 64)),
        site("lc-router", cls="DecoderLayer", attr="router", weight="self.router.weight",
             icls="DecoderLayer", anchor="self.router", dep="hidden_states", size=1 << 20,
             jmethod="forward_decode"),
        site("lc-next-q", cls="Attention", attr="q_proj", weight="next_layer.self_attn.q_proj.weight",
             icls="DecoderLayer", method="forward_decode", anchor="self.mlp", position="after",
             dep="hidden_states", scope="next_layer", size=7 << 20),
        site("lc-existing-down", cls="FFN", attr="down_proj", weight="self.down_proj.weight",
             icls="FFN", anchor="self.gate_up_proj", dep="x"),
        site("lc-down-in-return", cls="FFN", attr="down_proj", weight="self.down_proj.weight",
             icls="FFN", anchor="self.down_proj", position="after", dep="h"),
        site("lc-join-in-return", cls="DecoderLayer", attr="router", weight="self.router.weight",
             icls="DecoderLayer", method="forward_decode", anchor="self.router",
             dep="hidden_states", jmethod="forward"),
        mode="npugraph_ex", config_path="custom_params.enable_prefetch"),
        {"lc-existing-down": "already prefetched", "lc-down-in-return": "inside `return`",
         "lc-join-in-return": "computes its value inside `return`"}),
}


def _diff(name: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True),
                                        after.splitlines(keepends=True),
                                        fromfile=f"a/{name}", tofile=f"b/{name}"))


@pytest.mark.parametrize("name", list(CASES))
def test_fixture_rewrite_golden(name):
    p, refused = CASES[name]
    src = (FIX / name).read_text()
    out = rewrite_source(src, p.sites, mode=p.mode, switch=p.switch)
    compile(out.code, name, "exec")
    got = {r.site: r.reason for r in out.refused}
    assert set(got) == set(refused), got
    for sid, words in refused.items():
        assert words in got[sid], got[sid]
    assert out.applied == [s.id for s in p.sites if s.id not in refused]
    # idempotent, revertible, nothing else touched
    assert rewrite_source(out.code, p.sites, mode=p.mode, switch=p.switch).code == out.code
    assert strip_markers(out.code) == src
    diff = _diff(name, src, out.code)
    golden = GOLDEN / (name + ".diff")
    if os.environ.get("UPDATE_GOLDEN") or not golden.exists():
        golden.write_text(diff)
    assert diff == golden.read_text()


def test_vllm_constructor_without_config_uses_module_switch():
    p, _ = CASES["qwen2_vllm.py"]
    out = rewrite_source((FIX / "qwen2_vllm.py").read_text(), p.sites, switch=p.switch)
    assert 'self.enable_prefetch = _cbp.read_switch(None, "enable_prefetch")' in out.code
    assert 'self.enable_prefetch = _cbp.read_switch(config, "enable_prefetch")' in out.code


def test_recipes_switch_reused_existing_call_reported_next_layer_guarded():
    p, _ = CASES["longcat_recipes.py"]
    src = (FIX / "longcat_recipes.py").read_text()
    out = rewrite_source(src, p.sites, mode=p.mode, switch=p.switch)
    # FFN already wires self.enable_prefetch: not threaded again
    ffn = out.code[out.code.index("class FFN"):out.code.index("class Attention")]
    assert "read_switch" not in ffn
    assert any("existing npu_prefetch call in FFN.forward" in n for n in out.notes)
    assert 'if self.enable_prefetch and _cbp.attr(next_layer, "self_attn.q_proj") is not None:' in out.code
    assert '_cbp.attr(self, "self_attn.q_a_proj") is not None' in out.code
    assert any("helper method DecoderLayer.forward_decode" in n for n in out.notes)
    assert 'read_switch(config, "custom_params.enable_prefetch")' in out.code
