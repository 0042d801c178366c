"""Issue 14's failure classes on the REAL transformers files (copied to tmp at test time): each
test fails on the code before the fix (a target refused, "never run", a shape not evaluable)."""

from __future__ import annotations

import json

import pytest

from cannbot_prefetch.mapping import Mapper
from cannbot_prefetch.mapping.flatten import flatten
from cannbot_prefetch.mapping.manual import parse_target
from cannbot_prefetch.mapping.source import load_model_source
from cannbot_prefetch import api
from cannbot_prefetch.plan import load_plan
from cannbot_prefetch.rewrite.engine import rewrite_source
from cannbot_prefetch.policy import Policy
POLICY = Policy.load()   # the shipped thresholds, as an analysis passes them down

SMALL = {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
         "max_position_embeddings": 64}


def _plan(src, cfg: dict, targets, tmp_path, window=None):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    res = api.analyze(None, model_src=str(src), model_config=str(path), targets=tuple(targets),
                      window=window, out=str(tmp_path / "out"))
    res.save()
    return res.to_json(), load_plan(tmp_path / "out" / "prefetch_plan.yaml")


def _linears_run(src, cfg: dict) -> set[str]:
    ms = load_model_source(src, cfg, "config.json")
    m = Mapper(ms, policy=POLICY)
    return {f"{e.owner}.{e.attr}" for r in m.roots[:1] for e in m.events_of(r) if e.kind == "linear"}


# ------------------------------------------------------------------ 1. target inside `return`

def test_target_inside_return_is_planned_and_applied(modeling, tmp_path):
    """glm's MLP: `return self.down_proj(...)`: the site goes before the return and the side
    stream rejoins in the caller, after the MLP call (was: planned, then refused by apply)."""
    src = modeling("glm")
    doc, plan = _plan(src, SMALL, ["GlmMLP.down_proj", "GlmMLP.gate_up_proj"], tmp_path)
    assert doc["rejections"] == [] and len(plan.sites) == 2
    # the site in the MLP (gate_up_proj's default window now starts at the attention's output,
    # in the decoder layer: issue 32)
    in_mlp = [s for s in plan.sites if s.insert.cls == "GlmMLP"]
    assert [s.target.attr for s in in_mlp] == ["down_proj"]
    for s in in_mlp:
        assert (s.join.cls, s.join.method, s.join.position) == \
            ("GlmDecoderLayer", "forward", "after:self.mlp")
    out = rewrite_source(src.read_text(), plan.sites, mode=plan.mode, switch=plan.switch)
    assert out.refused == [] and sorted(out.applied) == sorted(s.id for s in plan.sites)


# ------------------------------------------------------------------ 2. "never run"

@pytest.mark.parametrize("family, linear", [
    ("opt", "OPTAttention.out_proj"),                 # self.model.decoder(...): a chain
    ("opt", "OPTDecoderLayer.fc2"),
    ("electra", "ElectraIntermediate.dense"),         # apply_chunking_to_forward(self.ff_chunk)
    ("qwen3_moe", "Qwen3MoeMLP.down_proj"),           # the dense branch of `if ...: self.mlp =`
    ("gpt_bigcode", "GPTBigCodeAttention.c_attn"),
])
def test_linears_the_forward_runs_are_found(modeling, family, linear):
    cfg = dict(SMALL, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
               decoder_sparse_step=2, mlp_only_layers=[0], n_embd=64, n_head=4, n_layer=2,
               model_type=family)
    assert linear in _linears_run(modeling(family), cfg)


def test_encoder_decoder_causal_lm_runs_the_decoder(modeling):
    cfg = dict(SMALL, d_model=64, decoder_attention_heads=4, encoder_attention_heads=4,
               decoder_ffn_dim=128, encoder_ffn_dim=128, decoder_layers=2, encoder_layers=2,
               model_type="whisper")
    ran = _linears_run(modeling("whisper"), cfg)
    assert {"WhisperAttention.out_proj", "WhisperDecoderLayer.fc1"} <= ran


# ------------------------------------------------------------------ 3. shapes

def test_config_alias_from_attribute_map(modeling):
    """gpt_bigcode reads config.hidden_size; its config.json stores n_embd (attribute_map)."""
    cfg = {"n_embd": 64, "n_head": 4, "n_layer": 2, "n_inner": None, "vocab_size": 128,
           "model_type": "gpt_bigcode", "multi_query": True}
    ms = load_model_source(modeling("gpt_bigcode"), cfg, "config.json")
    assert ms.linears[("GPTBigCodeMLP", "c_fc")].dims == (4 * 64, 64)
    assert ms.linears[("GPTBigCodeAttention", "c_attn")].dims is not None


def test_constructor_argument_from_a_local_of_the_parent(modeling):
    """gpt_neo: `inner_dim = config.intermediate_size if ... else 4 * hidden_size` in the
    block's __init__, passed as GPTNeoMLP(inner_dim, config)."""
    cfg = {"hidden_size": 64, "num_heads": 4, "num_layers": 2, "intermediate_size": None,
           "attention_types": [[["global", "local"], 1]], "vocab_size": 128, "window_size": 8,
           "max_position_embeddings": 64}
    ms = load_model_source(modeling("gpt_neo"), cfg, "config.json")
    assert ms.linears[("GPTNeoMLP", "c_fc")].dims == (256, 64)


def test_conditional_linear_and_linear_subclass(modeling):
    cfg = dict(SMALL, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8,
               v_head_dim=8, n_routed_experts=4, moe_intermediate_size=32)
    ms = load_model_source(modeling("deepseek_v3"), cfg, "config.json")
    assert ms.linears[("DeepseekV3Attention", "q_a_proj")].dims == (16, 64)   # `X if rank else None`
    ms = load_model_source(modeling("falcon"), dict(SMALL, num_kv_heads=4), "config.json")
    assert ms.linears[("FalconMLP", "dense_4h_to_h")].ctor == "Linear"       # class FalconLinear(nn.Linear)


def test_missing_key_is_named_and_only_that_target_is_rejected(modeling, tmp_path):
    cfg = dict(SMALL)
    del cfg["intermediate_size"]
    doc, plan = _plan(modeling("llama"), cfg, ["LlamaMLP.down_proj", "LlamaAttention.o_proj"],
                      tmp_path)
    assert [s.target.attr for s in plan.sites] == ["o_proj"]
    (rej,) = doc["rejections"]
    assert rej["reason_code"] == "shape_unknown" and "'intermediate_size'" in rej["reason"]


def test_declared_fp32_and_dtype_flag(modeling, tmp_path):
    src = modeling("llama")
    _, plan = _plan(src, SMALL, ["LlamaAttention.o_proj"], tmp_path)
    assert plan.sites[0].basis.dtype_bytes == 2          # the config names no dtype: bf16
    res = api.analyze(None, model_src=str(src), model_config=str(tmp_path / "config.json"),
                      targets=("LlamaAttention.o_proj",), dtype="fp32",
                      out=str(tmp_path / "o2"))
    res.save()
    assert res.to_json()["candidates"][0]["max_size"] == 64 * 64 * 4 // 2


# ------------------------------------------------------------------ cross-layer

def test_cross_layer_manual_window_after_the_target(modeling, tmp_path):
    """--window naming a module that runs after the target in the layer: the next layer's
    weight, after this layer's module, skipped on the last layer (guarded)."""
    src = modeling("llama")
    _, plan = _plan(src, SMALL, ["LlamaAttention.q_proj"], tmp_path, window="LlamaMLP.down_proj")
    (s,) = plan.sites
    assert (s.target.scope, s.target.weight_expr) == ("next_layer",
                                                      "self.next_layer.self_attn.q_proj.weight")
    assert (s.insert.cls, s.insert.anchor_call, s.insert.position) == \
        ("LlamaDecoderLayer", "self.mlp", "after")
    out = rewrite_source(src.read_text(), plan.sites, mode=plan.mode, switch=plan.switch)
    assert "_cbp.link_next_layers(self.layers)" in out.code
    assert '_cbp.attr(self, "next_layer.self_attn.q_proj") is not None' in out.code


def test_next_layer_link_reaches_every_stack_of_the_layer_class(modeling, tmp_path):
    """moshi builds `MoshiDecoderLayer` in two stacks (the depth decoder's, flexible linears,
    and the main model's, which `MoshiForCausalLM` runs): a next-layer prefetch must be linked
    in both, else it never fires in the model the user builds (was: only the first stack the
    file builds was linked)."""
    src = modeling("moshi")
    cfg = dict(SMALL, num_codebooks=2, audio_vocab_size=32, ffn_dim=128, depth_hidden_size=64,
               depth_num_hidden_layers=2, depth_num_attention_heads=4, depth_ffn_dim=128,
               depth_num_key_value_heads=2, model_type="moshi")
    _, plan = _plan(src, cfg, ["MoshiLinear.linear"], tmp_path)
    (s,) = plan.sites
    assert s.target.scope == "next_layer" and s.insert.cls == "MoshiDecoderLayer"
    out = rewrite_source(src.read_text(), plan.sites, mode=plan.mode, switch=plan.switch)
    lines = out.code.splitlines()
    links = [i for i, ln in enumerate(lines) if "_cbp.link_next_layers(self.layers)" in ln]
    assert len(links) == 2
    owners = []
    for i in links:      # the class each link sits in: the nearest `class` line above it
        owners.append(next(ln.split()[1].split("(")[0] for ln in reversed(lines[:i])
                           if ln.startswith("class ")))
    assert owners == ["MoshiDepthDecoder", "MoshiModel"]


def test_a_module_chosen_by_a_conditional_expression_guards_the_path(modeling, tmp_path):
    """inkling2's `self.sconv = Inkling2DynamicShortConvolution(...) if dynamic else
    Inkling2ShortConvolution(...)`: `weight_proj` exists in one branch only, so the prefetch
    placed in the caller is guarded on the path (was: unguarded, AttributeError in every layer
    built with the static convolution)."""
    src = modeling("inkling2")
    cfg = dict(SMALL, swa_num_attention_heads=4, swa_num_key_value_heads=2, swa_head_dim=16,
               conv_kernel_size=4, d_rel=16, rel_extent=64, sliding_window_size=64,
               n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
               layer_types=["hybrid_sliding", "hybrid"], model_type="inkling2_text")
    _, plan = _plan(src, cfg, ["Inkling2DynamicShortConvolution.weight_proj"], tmp_path)
    (s,) = plan.sites
    assert s.target.weight_expr == "self.sconv.weight_proj.weight"
    out = rewrite_source(src.read_text(), plan.sites, mode=plan.mode, switch=plan.switch)
    assert out.applied == [s.id]
    line = next(ln for ln in out.code.splitlines() if f"site=\"{s.id}\"" in ln)
    assert line.strip().startswith('if self.enable_prefetch and _cbp.attr(self, "sconv.weight_proj")'
                                   ' is not None: _cbp.npu_prefetch(')


def test_a_tower_built_by_a_factory_is_sized_from_its_sub_config(modeling, tmp_path):
    """phi4_multimodal: `self.encoder = Phi4MultimodalAudioModel._from_config(config.audio_config)`
    hands the audio tower `audio_config`; `ext_pw_out_channel` lives only there (was: refused,
    "config key 'ext_pw_out_channel' is missing", true of the top level only). b1 is
    (1, ext_pw_out_channel, 1): 40 x 4 bytes in fp32, all of it within the default cap."""
    src = modeling("phi4_multimodal")
    cfg = dict(SMALL, model_type="phi4_multimodal",
               audio_config={"hidden_size": 48, "ext_pw_out_channel": 40, "num_blocks": 2,
                             "num_attention_heads": 4, "intermediate_size": 96,
                             "model_type": "phi4_multimodal_audio"})
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    res = api.analyze(None, model_src=str(src), model_config=str(tmp_path / "config.json"),
                      targets=("Phi4MultimodalAudioGluPointWiseConv.b1",), dtype="fp32",
                      out=str(tmp_path / "out"))
    doc = res.to_json()
    assert doc["rejections"] == []
    assert [c["max_size"] for c in doc["candidates"]] == [40 * 4]


def test_flatten_follows_module_list_indexing(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(
        "import torch\nfrom torch import nn\n\n"
        "class MLP(nn.Module):\n"
        "    def __init__(self, config):\n        super().__init__()\n"
        "        self.up = nn.Linear(config.hidden_size, 4 * config.hidden_size)\n\n"
        "    def forward(self, x):\n        return self.up(x)\n\n"
        "class Layer(nn.Module):\n"
        "    def __init__(self, config):\n        super().__init__()\n        mlps = []\n"
        "        for i in range(2):\n            mlps.append(MLP(config))\n"
        "        self.mlps = nn.ModuleList(mlps)\n"
        "        self.experts = nn.ModuleDict({str(k): MLP(config) for k in range(2)})\n\n"
        "    def forward(self, x):\n        x = self.mlps[0](x)\n        y = self.mlps[1](x)\n"
        "        return self.experts['0'](y)\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, config):\n        super().__init__()\n"
        "        self.layers = nn.ModuleList([Layer(config) for _ in range(config.n)])\n\n"
        "    def forward(self, x):\n        for i in range(len(self.layers)):\n"
        "            x = self.layers[i](x)\n        return x\n")
    ms = load_model_source(src, {"hidden_size": 8, "n": 2}, "c.json")
    ev = [e for e in flatten(ms, "Model") if e.kind == "linear"]
    # a ModuleDict element by string key runs its class, but is no fixed path a weight can name
    assert [e.path[-2].access for e in ev] == ["self.mlps[0]", "self.mlps[1]", None]
    assert ev[0].path[0].via_list                           # self.layers[i]: one layer for all
    t = parse_target("MLP.up", ms, ["Model"])
    assert t.lin.dims == (32, 8)


def test_dependency_is_the_receiver_of_a_method_chain(modeling, tmp_path):
    """falcon_mamba: `self.out_proj(scan_output.transpose(1, 2).to(dtype))`: the value that
    flows into the target is `scan_output`, not the dtype handed to `.to` (was: the dtype, and
    the switched-on model failed in npu_prefetch)."""
    cfg = {"hidden_size": 64, "state_size": 8, "expand": 2, "conv_kernel": 4,
           "time_step_rank": 8, "intermediate_size": 128, "num_hidden_layers": 2,
           "vocab_size": 128, "model_type": "falcon_mamba"}
    # the value named as the window (the default now starts after the scan: issue 32)
    _, plan = _plan(modeling("falcon_mamba"), cfg, ["FalconMambaMixer.out_proj"], tmp_path,
                    "scan_output")
    (s,) = plan.sites
    assert (s.insert.anchor_call, s.dependency) == ("self.out_proj", "scan_output")


def test_linear_subclass_with_its_own_init(modeling):
    """llama4: `class Llama4Router(nn.Linear)` builds itself with
    `super().__init__(config.hidden_size, config.num_local_experts)`; `self.router =
    Llama4Router(config)` has the base's shape (was: not evaluable, a crash in the evaluator)."""
    cfg = dict(SMALL, num_local_experts=4, num_experts_per_tok=1, intermediate_size_mlp=128)
    ms = load_model_source(modeling("llama4"), cfg, "config.json")
    assert ms.linears[("Llama4TextMoe", "router")].dims == (4, 64)


def test_per_layer_shape_is_sized_by_its_smallest_layer(modeling):
    """mimo_v2_flash: `num_key_value_heads = config.num_key_value_heads * 2 if
    config.layer_types[layer_idx] == "sliding_attention" else ...`: read for every layer index,
    and the smallest instance sizes the site (one max_size that fits every layer's weight)."""
    cfg = dict(SMALL, num_hidden_layers=3, v_head_dim=16,
               layer_types=["full_attention", "sliding_attention", "full_attention"])
    ms = load_model_source(modeling("mimo_v2_flash"), cfg, "config.json")
    assert ms.linears[("MiMoV2FlashAttention", "k_proj")].dims == (2 * 16, 64)
    cfg["layer_types"] = ["sliding_attention"] * 3
    ms = load_model_source(modeling("mimo_v2_flash"), cfg, "config.json")
    assert ms.linears[("MiMoV2FlashAttention", "k_proj")].dims == (4 * 16, 64)


def test_per_layer_override_map(modeling):
    """gemma4: `layer_config = config.per_layer_config[layer_idx]; self.head_dim =
    layer_config.head_dim`, config.json holding only the layers that differ
    ({"05": {"head_dim": 512}}): other layers read the model's key; the smallest sizes the site."""
    transformers = pytest.importorskip("transformers")
    c = transformers.Gemma4TextConfig()
    cfg = json.loads(c.to_json_string(use_diff=False))
    hd, heads, hidden = cfg["head_dim"], cfg["num_attention_heads"], cfg["hidden_size"]
    assert any(v.get("head_dim", hd) != hd for v in cfg["per_layer_config"].values())
    ms = load_model_source(modeling("gemma4"), cfg, "config.json")
    assert ms.linears[("Gemma4TextAttention", "q_proj")].dims == (heads * hd, hidden)
