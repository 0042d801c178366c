"""Serving engines' layers (configs/serving_layers.yaml) as linears: dims from keyword or
positional arguments through constructor chains, split per rank by the layer's kind.

Fixture: tests/fixtures/vllm_style/llama_kw_vllm.py (written for this project in vLLM 0.34's
style). The expected dims are worked out by hand from the config below and vLLM's split rules
(column: out / tp; row: in / tp; QKV: heads / tp, kv heads replicated when fewer than tp; MoE:
2*I / moe_tp and I / moe_tp)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cannbot_prefetch.mapping.source import load_model_source

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "vllm_style" / "llama_kw_vllm.py"
# hidden 256, 8 heads of 32, 2 kv heads, intermediate 512; MoE 4 experts of 128
CFG = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8,
       "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 1000,
       "rms_norm_eps": 1e-5, "num_experts": 4, "num_experts_per_tok": 2,
       "moe_intermediate_size": 128}


def _dims(tp, moe_tp=1, **over):
    ms = load_model_source(FIX, {**CFG, **over}, "config.json", tp=tp, moe_tp=moe_tp)
    return {f"{c}.{a}": lin.dims for (c, a), lin in ms.linears.items()}


def test_tp1_full_weights():
    d = _dims(1)
    assert d["KwMLP.gate_up_proj"] == (1024, 256)          # 2 x 512 out, 256 in
    assert d["KwMLP.down_proj"] == (256, 512)
    assert d["KwAttention.qkv_proj"] == ((8 + 2 + 2) * 32, 256)
    assert d["KwAttention.o_proj"] == (256, 256)
    assert d["KwSparseMoeBlock.gate"] == (4, 256)           # GateLinear: replicated
    assert d["KwSparseMoeBlock.experts.w13_weight"] == (4, 256, 256)
    assert d["KwSparseMoeBlock.experts.w2_weight"] == (4, 256, 128)
    assert d["KwForCausalLM.lm_head"] == (1000, 256)


def test_tp2_shards_by_kind():
    d = _dims(2, moe_tp=2)
    assert d["KwMLP.gate_up_proj"] == (512, 256)            # column: 1024 / 2
    assert d["KwMLP.down_proj"] == (256, 256)               # row: 512 / 2 in
    assert d["KwAttention.qkv_proj"] == ((4 + 1 + 1) * 32, 256)   # 8/2 q heads, 2/2 kv heads
    assert d["KwAttention.o_proj"] == (256, 128)
    assert d["KwSparseMoeBlock.gate"] == (4, 256)           # replicated at any tp
    assert d["KwSparseMoeBlock.shared_proj"] == (256, 256)  # disable_tp=True: full weight
    assert d["KwSparseMoeBlock.experts.w13_weight"] == (4, 128, 256)   # 2*128 / 2
    assert d["KwSparseMoeBlock.experts.w2_weight"] == (4, 256, 64)
    assert d["KwForCausalLM.lm_head"] == (500, 256)         # vocab / 2


def test_kv_heads_replicated_when_fewer_than_tp():
    d = _dims(4)     # 2 kv heads on 4 ranks: each rank holds one kv head (a replica)
    assert d["KwAttention.qkv_proj"] == ((2 + 1 + 1) * 32, 256)


@pytest.mark.parametrize("head_dim", [64])
def test_head_dim_from_config_through_getattr(head_dim):
    d = _dims(1, head_dim=head_dim)
    assert d["KwAttention.qkv_proj"] == ((8 + 2 + 2) * 64, 256)
    assert d["KwAttention.o_proj"] == (256, 8 * 64)


BRANCH = FIX.parent / "branch_attn_vllm.py"


def test_class_picked_in_branches_and_imported_under_another_name():
    """`attn_cls = BrLatent` / `= BrMHA` then `attn_cls(...)`: both classes are built with the
    call's arguments; `from .qwen2_vllm import Qwen2MLP as BrMLP` is known as BrMLP."""
    cfg = {**CFG, "hidden_act": "silu"}
    ms = load_model_source(BRANCH, cfg, "config.json", tp=2)
    d = {f"{c}.{a}": lin.dims for (c, a), lin in ms.linears.items()}
    assert d["BrMHA.qkv_proj"] == ((4 + 4 + 4) * 32, 256)        # 8 heads of 32, kv = heads
    assert d["BrMHA.o_proj"] == (256, 128)
    assert d["BrLatent.q_a_proj"] == (64, 256)                   # replicated: 256 // 4
    assert ms.children[("BrDecoderLayer", "mlp")] == "BrMLP"
    assert d["BrMLP.gate_up_proj"] == (512, 256)                 # 2 x 512 / 2


def test_a_layer_without_a_size_argument_says_so(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("from torch import nn\n"
                   "from vllm.model_executor.layers.linear import RowParallelLinear\n\n\n"
                   "class M(nn.Module):\n"
                   "    def __init__(self, config):\n"
                   "        super().__init__()\n"
                   "        self.o_proj = RowParallelLinear(config.hidden_size)\n\n"
                   "    def forward(self, x):\n"
                   "        return self.o_proj(x)[0]\n")
    lin = load_model_source(src, CFG, "config.json").linears[("M", "o_proj")]
    assert lin.dims is None
    assert "RowParallelLinear(...) without one of its size arguments" in lin.error


def test_a_zero_size_is_not_a_shape():
    # intermediate 0 (a config that turns the MLP off): never planned as [0, ...]
    d = _dims(1, intermediate_size=0)
    assert d["KwMLP.gate_up_proj"] is None and d["KwMLP.down_proj"] is None


OPTIONAL = FIX.parent / "optional_size_vllm.py"


@pytest.mark.parametrize(("kind", "kv"), [("mqa", 1), ("gqa", 2), ("mha", 8)])
def test_if_else_branch_the_config_takes(kind, kv):
    """`if intermediate_size is None: self.I = config.intermediate_size else: self.I =
    intermediate_size` with the argument not passed sizes by the config key (running both
    branches left the argument's None); an `if/elif/else` on a config key picks one head count.
    TP 1: gate_up 2 x 512 by 256, down 256 by 512; qkv (8 + 2 kv) heads of 256 // 8 = 32."""
    ms = load_model_source(OPTIONAL, {**CFG, "attention_kind": kind}, "config.json", tp=1)
    d = {f"{c}.{a}": lin.dims for (c, a), lin in ms.linears.items()}
    assert d["OptMLP.gate_up_proj"] == (1024, 256)
    assert d["OptMLP.down_proj"] == (256, 512)
    assert d["OptAttention.qkv_proj"] == ((8 + 2 * kv) * 32, 256)


def test_blocks_built_in_helper_methods():
    """`self._init_attn_block()` / `self._init_ffn_block()` called from `__init__`: the
    submodules they build get the arguments passed there (vLLM's minicpm style). TP 2: o_proj
    row-split 256 in / 2; the MLP handed intermediate 512 // 2 = 256: gate_up 2 x 256 / 2 out,
    down 256 / 2 in."""
    ms = load_model_source(OPTIONAL, {**CFG, "attention_kind": "gqa"}, "config.json", tp=2)
    d = {f"{c}.{a}": lin.dims for (c, a), lin in ms.linears.items()}
    assert d["HelperAttention.o_proj"] == (256, 128)
    assert ms.children[("HelperDecoderLayer", "mlp")] == "OptMLP"
    assert ms.ctor_sites[("HelperDecoderLayer", "mlp", "OptMLP")][1] == "HelperDecoderLayer"


PER_LAYER = FIX.parent / "per_layer_vllm.py"


def test_layer_index_from_prefix_and_sparse_per_layer_config():
    """`layer_idx = extract_layer_index(prefix)` and `config.per_layer_config[layer_idx].head_dim`
    (vLLM's gemma4 / domyn_edge): read per layer. Without `per_layer_config` every layer keeps
    the model's keys: TP 2, qkv (8/2 + 2 * 2/2) heads of 32 = 192 by 256, o_proj 256 by 8*32/2.
    With layer 1 overriding head_dim 64 and kv heads 4, each layer's weight is read and the
    smallest sized (layer 0's, the one max_size fits in every layer)."""
    cfg = {**CFG, "head_dim": 32}
    ms = load_model_source(PER_LAYER, cfg, "config.json", tp=2)
    d = {f"{c}.{a}": lin.dims for (c, a), lin in ms.linears.items()}
    assert d["PerLayerAttention.qkv_proj"] == ((4 + 2 * 1) * 32, 256)
    assert d["PerLayerAttention.o_proj"] == (256, 128)
    over = {**cfg, "per_layer_config": {"1": {"head_dim": 64, "num_key_value_heads": 4}}}
    ms = load_model_source(PER_LAYER, over, "config.json", tp=2)
    d = {f"{c}.{a}": lin.dims for (c, a), lin in ms.linears.items()}
    # layer 0: (4 + 2*1) * 32 = 192; layer 1: (4 + 2*2) * 64 = 512; the smaller planned
    assert d["PerLayerAttention.qkv_proj"] == (192, 256)
    assert d["PerLayerAttention.o_proj"] == (256, 128)     # layer 1: 256 x 8*64/2 = 256 x 256


def test_layer_index_call_without_per_layer_pass_is_not_guessed():
    """Only the per-layer pass gives `extract_layer_index(prefix)` a value: a config with no
    layer count leaves the attention unsized (never a guessed layer)."""
    cfg = {k: v for k, v in CFG.items() if k != "num_hidden_layers"} | {"head_dim": 32}
    ms = load_model_source(PER_LAYER, cfg, "config.json", tp=2)
    d = {f"{c}.{a}": lin.dims for (c, a), lin in ms.linears.items()}
    assert d["PerLayerAttention.qkv_proj"] is None


PREFIX_INDEX = FIX.parent / "prefix_index_vllm.py"
# GENERATED config: 8 heads of 256/8 = 32; per layer kv heads 2 / 4 and MLP width 512 / 384
PREFIX_CFG = {"hidden_size": 256, "num_attention_heads": 8, "num_hidden_layers": 2,
              "vocab_size": 1000, "kv_heads": [2, 4], "ffn_sizes": [512, 384]}


def test_layer_index_parsed_from_the_prefix_is_read_per_layer():
    """`int(prefix.split(sep=".")[-1])` in the decoder layer and `int(prefix.split("layers.")[1]
    .split(".")[0])` in its attention are the layer's index, as `extract_layer_index(prefix)`:
    each layer's weight is read and the smallest sized. TP 2 by hand: qkv layer 0
    (8/2 + 2 * 2/2) * 32 = 192, layer 1 (8/2 + 2 * 4/2) * 32 = 256 -> 192 by 256; MLP layer 0
    512, layer 1 384 -> gate_up 2 * 384 / 2 = 384 by 256, down 256 by 384 / 2 = 192."""
    ms = load_model_source(PREFIX_INDEX, PREFIX_CFG, "config.json", tp=2)
    d = {f"{c}.{a}": lin.dims for (c, a), lin in ms.linears.items()}
    assert d["PrefixAttention.qkv_proj"] == (192, 256)
    assert d["PrefixAttention.o_proj"] == (256, 128)
    assert d["PrefixMLP.gate_up_proj"] == (384, 256)
    assert d["PrefixMLP.down_proj"] == (256, 192)


def test_prefix_parsed_index_without_layer_count_is_not_guessed():
    """No layer count in the config: no per-layer pass, the prefix-parsed index has no value
    and the per-layer weights stay unsized, naming what is missing."""
    cfg = {k: v for k, v in PREFIX_CFG.items() if k != "num_hidden_layers"}
    ms = load_model_source(PREFIX_INDEX, cfg, "config.json", tp=2)
    lin = ms.linears[("PrefixMLP", "gate_up_proj")]
    assert lin.dims is None and "intermediate_size" in lin.error


@pytest.mark.parametrize("code, index", [
    ('int(prefix.split(".")[-1])', True),
    ('int(prefix.split(sep=".")[-1])', True),
    ('int(prefix.rsplit(".", 1)[1])', True),
    ('int(prefix.split("layers.")[1].split(".")[0])', True),
    ("extract_layer_index(prefix)", True),
    ("utils.extract_layer_index(prefix)", True),
    ('int(prefix)', False),                         # no split: not a parsed segment
    ('int(name.split(".")[-1])', False),            # not the module prefix parameter
    ('float(prefix.split(".")[-1])', False),
    ('int(prefix.strip(".")[-1])', False),
    ('int(prefix.split(".")[-1], 16)', False),
])
def test_which_calls_are_the_layer_index(code, index):
    import libcst as cst

    from cannbot_prefetch.policy import Policy
    from cannbot_prefetch.mapping.evaluate.serving import ServingLayers
    serving = ServingLayers.of(Policy.load().serving_layers)
    assert serving.is_layer_index(cst.parse_expression(code)) is index
