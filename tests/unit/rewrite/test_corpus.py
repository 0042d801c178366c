"""The real corpus: transformers' modeling files (copied at test time, never committed),
rewritten from plans built here, loaded under the package's own module name, and run as tiny
random-weight models.

- switch off: outputs bit-identical to the original file's model with the same weights;
- switch on, under the recording torch_npu stub: every site fires with the planned weight tensor
  (by identity), a dependency, the planned size, in one order per layer; the graph-order check passes.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from cannbot_prefetch.rewrite.markers import strip_markers  # noqa: E402
from cannbot_prefetch.verify.runner import verify_model  # noqa: E402

from .corpus import MODELS, loaded, rewrite_family  # noqa: E402
from .sites import plan, site  # noqa: E402

TINY = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, attn_implementation="eager")


def _llama():
    cfg = transformers.LlamaConfig(**TINY)
    return cfg, "LlamaForCausalLM", plan(
        site("llama-gate", cls="LlamaMLP", attr="gate_proj", weight="self.mlp.gate_proj.weight",
             icls="LlamaDecoderLayer", anchor="self.mlp", dep="hidden_states",
             guard=("hidden_states", -2, 64), size=4096),
        # nested one-line MLP: down_proj on the gate/up input (seed: down_proj after x)
        site("llama-down", cls="LlamaMLP", attr="down_proj", weight="self.down_proj.weight",
             icls="LlamaMLP", anchor="self.down_proj", dep="x", size=2048),
        # cross-layer: next layer's q_proj after this layer's MLP output
        site("llama-next-q", cls="LlamaAttention", attr="q_proj",
             weight="self.next_layer.self_attn.q_proj.weight", icls="LlamaDecoderLayer",
             anchor="self.mlp", position="after", dep="hidden_states", scope="next_layer",
             size=1024))


def _qwen2():
    cfg = transformers.Qwen2Config(**TINY)
    return cfg, "Qwen2ForCausalLM", plan(
        site("qwen2-o", cls="Qwen2Attention", attr="o_proj", weight="self.o_proj.weight",
             icls="Qwen2Attention", anchor="self.o_proj", dep="attn_output", size=4096),
        # tuple return `hidden_states, _ = self.self_attn(...)`: MLP weight after attention
        site("qwen2-up", cls="Qwen2MLP", attr="up_proj", weight="self.mlp.up_proj.weight",
             icls="Qwen2DecoderLayer", anchor="self.self_attn", position="after",
             dep="hidden_states", size=8192),
        mode="ge_graph")


def _qwen3():
    cfg = transformers.Qwen3Config(**TINY, head_dim=16)
    return cfg, "Qwen3ForCausalLM", plan(
        # the call wrapped in another call: self.k_norm(self.k_proj(h).view(..))
        site("qwen3-k", cls="Qwen3Attention", attr="k_proj", weight="self.k_proj.weight",
             icls="Qwen3Attention", anchor="self.k_proj", dep="hidden_states", size=2048),
        site("qwen3-down", cls="Qwen3MLP", attr="down_proj", weight="self.down_proj.weight",
             icls="Qwen3MLP", anchor="self.down_proj", dep="x", size=2048, guard=("x", -2, 16)),
        mode="npugraph_ex", config_path="custom_params.enable_prefetch")


MOE = dict(num_local_experts=4, num_experts_per_tok=2)


def _mixtral():
    cfg = transformers.MixtralConfig(**TINY, **MOE)
    return cfg, "MixtralForCausalLM", plan(
        # fused expert Parameter (no .weight) after the router; the dependency is the expert
        # index, which selects the weights the matmul reads (the routing weights are applied
        # after the matmul: the graph check refuses them as a dependency)
        site("mixtral-w13", cls="MixtralExperts", attr="gate_up_proj",
             weight="self.experts.gate_up_proj", icls="MixtralSparseMoeBlock", anchor="self.gate",
             position="after", dep="top_k_index", size=16384))


def _qwen3_moe():
    cfg = transformers.Qwen3MoeConfig(**TINY, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                      moe_intermediate_size=32, decoder_sparse_step=2)
    return cfg, "Qwen3MoeForCausalLM", plan(
        # router weight of a layer whose mlp is conditional (dense in layer 0, MoE in layer 1)
        site("qwen3moe-router", cls="Qwen3MoeTopKRouter", attr="weight", weight="self.mlp.gate.weight",
             icls="Qwen3MoeDecoderLayer", anchor="self.mlp", dep="hidden_states", size=512),
        site("qwen3moe-w2", cls="Qwen3MoeExperts", attr="down_proj", weight="self.experts.down_proj",
             icls="Qwen3MoeSparseMoeBlock", anchor="self.gate", position="after",
             dep="selected_experts", size=8192))


def _deepseek_v3():
    cfg = transformers.DeepseekV3Config(
        vocab_size=128, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4,
        num_experts_per_tok=2, n_group=1, topk_group=1, n_shared_experts=1, q_lora_rank=16,
        kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8,
        first_k_dense_replace=1, attn_implementation="eager")
    return cfg, "DeepseekV3ForCausalLM", plan(
        # conditional module (q_b_proj exists only with q_lora_rank), nested call
        site("ds-q_b", cls="DeepseekV3Attention", attr="q_b_proj", weight="self.q_b_proj.weight",
             icls="DeepseekV3Attention", anchor="self.q_b_proj", dep="hidden_states", size=1024),
        site("ds-w13", cls="DeepseekV3Experts", attr="gate_up_proj", weight="self.experts.gate_up_proj",
             icls="DeepseekV3MoE", anchor="self.gate", position="after", dep="topk_indices",
             size=8192),
        site("ds-shared-down", cls="DeepseekV3MLP", attr="down_proj",
             weight="self.shared_experts.down_proj.weight", icls="DeepseekV3MoE",
             anchor="self.shared_experts", dep="residuals", size=2048))


FAMILIES = {"llama": _llama, "qwen2": _qwen2, "qwen3": _qwen3, "mixtral": _mixtral,
            "qwen3_moe": _qwen3_moe, "deepseek_v3": _deepseek_v3}


@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES))
def test_real_model_switch_off_identical_and_on_fires(family, tmp_path):
    if not (MODELS / family / f"modeling_{family}.py").is_file():
        pytest.skip(f"transformers {transformers.__version__} has no {family}")
    cfg, cls_name, p = FAMILIES[family]()
    path, helper, out = rewrite_family(family, tmp_path, p)
    assert out.refused == [], out.refused
    assert out.applied == [s.id for s in p.sites]
    code = path.read_text()
    compile(code, str(path), "exec")
    assert strip_markers(code) == (MODELS / family / path.name).read_text()

    original = __import__(f"transformers.models.{family}.modeling_{family}", fromlist=["x"])
    torch.manual_seed(0)
    base = getattr(original, cls_name)(cfg).eval()
    ids = torch.randint(0, 128, (1, 4))
    with torch.no_grad():
        ref = base(input_ids=ids, use_cache=False).logits
    with loaded(family, path, helper) as mod:
        model = getattr(mod, cls_name)(cfg).eval()
        model.load_state_dict(base.state_dict())
        with torch.no_grad():
            new = model(input_ids=ids, use_cache=False).logits
        assert torch.equal(ref, new), "switch off: outputs differ from the original file"
        if hasattr(cfg, "_experts_implementation"):
            cfg._experts_implementation = "batched_mm"  # traceable experts for the graph check
        checks, stub = verify_model(model, {"input_ids": ids, "use_cache": False}, p,
                                    capture=False)  # torch.compile: verify/test_capture_models
    assert stub
    failed = [c for c in checks if not (c.passed or c.skipped)]
    assert not failed, failed
    graph = [c for c in checks if c.name == "graph order"]
    assert graph and all(c.passed for c in graph), graph
    fires = {c.site: c for c in checks if c.name == "fires"}
    assert set(fires) == {s.id for s in p.sites}


def test_llama_single_mlp_site_diff_is_small(tmp_path):
    """Golden: one MLP site on modeling_llama.py is a handful of lines."""
    import difflib

    from cannbot_prefetch.rewrite.engine import rewrite_source

    src = (MODELS / "llama" / "modeling_llama.py").read_text()
    p = plan(site("llama-mlp-gate_proj", cls="LlamaMLP", attr="gate_proj",
                  weight="self.mlp.gate_proj.weight", icls="LlamaDecoderLayer", anchor="self.mlp",
                  dep="hidden_states", size=16777216, guard=("hidden_states", -2, 64)))
    out = rewrite_source(src, p.sites, mode=p.mode, switch=p.switch)
    added = [ln[1:] for ln in difflib.unified_diff(src.splitlines(), out.code.splitlines(), lineterm="")
             if ln.startswith("+") and not ln.startswith("+++")]
    removed = [ln for ln in difflib.unified_diff(src.splitlines(), out.code.splitlines(), lineterm="")
               if ln.startswith("-") and not ln.startswith("---")]
    assert removed == []
    assert [a.strip() for a in added] == [
        "try: from . import _cannbot_prefetch as _cbp  # cannbot-prefetch: import",
        "except ImportError: import _cannbot_prefetch as _cbp  # cannbot-prefetch: import",
        'self.enable_prefetch = _cbp.read_switch(config, "enable_prefetch")  # cannbot-prefetch: switch',
        "_cbp.npu_prefetch(self.enable_prefetch, self.mlp.gate_proj.weight, hidden_states, 16777216, "
        'guard=(hidden_states, -2, 64), site="llama-mlp-gate_proj")  '
        "# cannbot-prefetch: llama-mlp-gate_proj",
    ]   # eager's default call form is direct: no join (issue 30)


@pytest.mark.slow
def test_graph_check_refuses_routing_weights_as_moe_dependency(tmp_path):
    """The static check accepts top_k_weights (they flow into the experts call), but the routing
    weights are applied after the expert matmul: the graph check catches it."""
    cfg, cls_name, _ = _mixtral()
    p = plan(site("mixtral-w13", cls="MixtralExperts", attr="gate_up_proj",
                  weight="self.experts.gate_up_proj", icls="MixtralSparseMoeBlock", anchor="self.gate",
                  position="after", dep="top_k_weights", size=16384))
    path, helper, out = rewrite_family("mixtral", tmp_path, p)
    assert out.applied == ["mixtral-w13"]
    with loaded("mixtral", path, helper) as mod:
        torch.manual_seed(0)
        model = getattr(mod, cls_name)(cfg).eval()
        cfg._experts_implementation = "batched_mm"
        checks, _ = verify_model(model, {"input_ids": torch.randint(0, 128, (1, 4)),
                                         "use_cache": False}, p, capture=False)
    graph = [c for c in checks if c.name == "graph order"]
    assert graph and not graph[0].passed
    assert "does not flow into the target" in graph[0].detail
