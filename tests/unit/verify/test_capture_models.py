"""The inserted prefetch survives torch.compile on real transformers models, in every mode.

transformers' own modeling files (copied to tmp at test time, never committed) for Llama, Qwen3
and Qwen3-MoE, rewritten by `apply`'s engine with decode guards, loaded, and checked by verify's
capture checks with the recording stub: `torch.compile(fullgraph=True)` with backends eager and
aot_eager, one prefetch node per planned module in order in both captured graphs, outputs
bit-identical to eager with the switch off, the side stream joined, and decode batches 1, 8 and
256 with no recompilation at 256 and every prefetch issued at each batch. Tiny one-layer configs
keep each compile to seconds.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from cannbot_prefetch.verify.runner import verify_model  # noqa: E402

from rewrite.corpus import MODELS, loaded, rewrite_family  # noqa: E402
from rewrite.sites import plan, site  # noqa: E402

TINY = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
            num_attention_heads=4, num_key_value_heads=2, attn_implementation="eager")
DECODE = 4  # max query length the guards call decode


def _llama(mode):
    cfg = transformers.LlamaConfig(**TINY)
    return cfg, "LlamaForCausalLM", plan(
        # attention output -> o_proj; query_states is [B, heads, q_len, head_dim]: the guard reads
        # q_len (the old token count read B * heads and stopped at batch 1 here: 4 heads > 4)
        site("llama-o", cls="LlamaAttention", attr="o_proj", weight="self.o_proj.weight",
             icls="LlamaAttention", anchor="self.o_proj", dep="attn_output", size=2048,
             guard=("query_states", -2, DECODE)),
        site("llama-gate", cls="LlamaMLP", attr="gate_proj", weight="self.mlp.gate_proj.weight",
             icls="LlamaDecoderLayer", anchor="self.mlp", dep="hidden_states", size=4096,
             guard=("hidden_states", 1, DECODE)),
        mode=mode, config_path="custom_params.enable_prefetch")


def _qwen3(mode):
    cfg = transformers.Qwen3Config(**TINY, head_dim=16)
    return cfg, "Qwen3ForCausalLM", plan(
        # the call wrapped in another call: self.k_norm(self.k_proj(h).view(..))
        site("qwen3-k", cls="Qwen3Attention", attr="k_proj", weight="self.k_proj.weight",
             icls="Qwen3Attention", anchor="self.k_proj", dep="hidden_states", size=1024,
             guard=("hidden_states", -2, DECODE)),
        # the nested one-line MLP: down_proj on its input
        site("qwen3-down", cls="Qwen3MLP", attr="down_proj", weight="self.down_proj.weight",
             icls="Qwen3MLP", anchor="self.down_proj", dep="x", size=2048,
             guard=("x", -2, DECODE)),
        mode=mode, config_path="custom_params.enable_prefetch")


def _qwen3_moe(mode):
    cfg = transformers.Qwen3MoeConfig(**TINY, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                      moe_intermediate_size=32, decoder_sparse_step=1)
    return cfg, "Qwen3MoeForCausalLM", plan(
        site("qwen3moe-router", cls="Qwen3MoeTopKRouter", attr="weight",
             weight="self.mlp.gate.weight", icls="Qwen3MoeDecoderLayer", anchor="self.mlp",
             dep="hidden_states", size=512, guard=("hidden_states", 1, DECODE)),
        # fused expert Parameter after the router: the expert index selects what the GEMM reads
        site("qwen3moe-w2", cls="Qwen3MoeExperts", attr="down_proj",
             weight="self.experts.down_proj", icls="Qwen3MoeSparseMoeBlock", anchor="self.gate", position="after",
             dep="selected_experts", size=8192, guard=("hidden_states", 1, DECODE)),
        mode=mode, config_path="custom_params.enable_prefetch")


FAMILIES = {"llama": _llama, "qwen3": _qwen3, "qwen3_moe": _qwen3_moe}
MODES = ("eager", "npugraph_ex", "ge_graph")


def _build(family, mode, tmp_path):
    if not (MODELS / family / f"modeling_{family}.py").is_file():
        pytest.skip(f"transformers {transformers.__version__} has no {family}")
    cfg, cls_name, p = FAMILIES[family](mode)
    cfg.custom_params = {"enable_prefetch": False, "enable_multi_streams": 1}
    path, helper, out = rewrite_family(family, tmp_path, p)
    assert out.refused == [] and out.applied == [s.id for s in p.sites], out.refused
    return cfg, cls_name, p, path, helper


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_prefetch_survives_torch_compile(family, mode, tmp_path):
    cfg, cls_name, p, path, helper = _build(family, mode, tmp_path)
    with loaded(family, path, helper) as mod:
        torch.manual_seed(0)
        model = getattr(mod, cls_name)(cfg).eval()
        if hasattr(cfg, "_experts_implementation"):
            cfg._experts_implementation = "batched_mm"  # the traceable experts (no nonzero loop)
        ids = torch.randint(0, 128, (1, 1))  # decode: one new token per sequence
        checks, stub = verify_model(model, {"input_ids": ids, "use_cache": False}, p,
                                    graph=False)  # the per-layer make_fx check: test_corpus
    assert stub
    by = {(c.name, c.site): c for c in checks}
    inductor = by[("compile inductor", None)]
    # Inductor: eager mode only, where a C++ compiler exists (issue 30); else skipped, said why
    assert inductor.passed or (inductor.skipped and (mode != "eager" or "C++" in inductor.detail)
                               or "even with the switch off" in inductor.detail), inductor
    failed = [c for c in checks if not c.passed and c is not inductor]
    assert not failed, failed  # nothing skipped either: every check ran on these models
    for name in ("compile eager", "compile aot_eager", "recompiles"):
        assert (name, None) in by
    # the call form (issue 30): npugraph_ex joins a side stream; eager and ge_graph call
    # torch_npu's own op directly (torchair converts it to a Cmo node with a control edge)
    side = mode == "npugraph_ex"
    assert (("side stream joined", None) in by) == side
    op = "cannbot_prefetch::prefetch" if side else "npu::npu_prefetch"
    for s in p.sites:
        detail = by[("captured prefetch", s.id)].detail
        for backend in ("eager", "aot_eager"):
            assert f"{backend}: 1/1 node(s) of {op}, after the dependency, before the target" in \
                detail, detail
    assert "prefetches per forward [2, 2, 2]" in by[("recompiles", None)].detail
    assert "compiled graphs after each [1, 2, 2]" in by[("recompiles", None)].detail
