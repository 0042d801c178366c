"""An attribute `__init__` sets twice, an unconditional default and then an override under a
condition (vLLM 0.34's step3p5.py: `self.use_moe = False`, then `self.use_moe = True` only where
`_is_moe_layer(config, layer_idx)`), has the value of the last assignment on the path the config
takes: the override's condition decided by the config (for every layer when it reads the layer
index), and undecided (both branches live) when the evaluator cannot tell, never "always the
override". The model file below is GENERATED for this test in vLLM's style (written for this
project, not copied from vLLM); each expected value is worked out by hand beside it."""

from __future__ import annotations

import libcst as cst
import pytest

from cannbot_prefetch.mapping.config import config_aliases
from cannbot_prefetch.mapping.flatten import flatten
from cannbot_prefetch.mapping.evaluate import static_truth
from cannbot_prefetch.mapping.source import load_model_source

MODEL = '''
# GENERATED for tests/unit/mapping/test_default_then_override.py in vLLM 0.34's style
import torch
from torch import nn

from vllm import envs
from vllm.config import VllmConfig
from vllm.model_executor.layers.linear import (
    MergedColumnParallelLinear,
    QKVParallelLinear,
    RowParallelLinear,
)
from vllm.model_executor.models.utils import extract_layer_index


def _is_sparse(config, layer_idx: int) -> bool:
    """Whether a layer's MLP is the routed one: the config's per-layer list, else none."""
    if (kinds := getattr(config, "ffn_kinds", None)) is not None:
        extra = getattr(config, "extra_ffn_kinds", None) or []
        kinds = [*kinds, *extra]
        return layer_idx < len(kinds) and kinds[layer_idx] == "sparse"
    return False


class ToyMLP(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, prefix: str = ""):
        super().__init__()
        self.gate_up_proj = MergedColumnParallelLinear(
            hidden_size, [intermediate_size] * 2, bias=False, prefix=f"{prefix}.gate_up_proj")
        self.down_proj = RowParallelLinear(
            intermediate_size, hidden_size, bias=False, prefix=f"{prefix}.down_proj")

    def forward(self, x):
        gate_up, _ = self.gate_up_proj(x)
        x, _ = self.down_proj(gate_up[..., : gate_up.shape[-1] // 2])
        return x


class ToyAttention(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int, num_kv_heads: int, prefix: str = ""):
        super().__init__()
        self.head_dim = hidden_size // num_heads
        self.qkv_proj = QKVParallelLinear(hidden_size, self.head_dim, num_heads, num_kv_heads,
                                          bias=False, prefix=f"{prefix}.qkv_proj")

    def forward(self, hidden_states):
        qkv, _ = self.qkv_proj(hidden_states)
        return qkv


class OptionalKvAttention(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int, num_kv_heads: int | None = None,
                 prefix: str = ""):
        super().__init__()
        self.qkv_proj = QKVParallelLinear(hidden_size=embed_dim,
                                          head_size=embed_dim // num_heads,
                                          total_num_heads=num_heads,
                                          total_num_kv_heads=num_kv_heads,
                                          bias=True, prefix=f"{prefix}.qkv_proj")

    def forward(self, hidden_states):
        qkv, _ = self.qkv_proj(hidden_states)
        return qkv


class ToySubLayer(nn.Module):
    def __init__(self, config, prefix: str = ""):
        super().__init__()
        self.qkv_proj = QKVParallelLinear(config.d_model, config.d_model // config.heads,
                                          config.heads, getattr(config, "kv_heads", None),
                                          bias=False, prefix=f"{prefix}.qkv_proj")

    def forward(self, hidden_states):
        qkv, _ = self.qkv_proj(hidden_states)
        return qkv


class ToyWrapper(nn.Module):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
        super().__init__()
        config = vllm_config.model_config.hf_config
        self.sub = ToySubLayer(config.decoder, prefix=f"{prefix}.sub")

    def forward(self, hidden_states):
        return self.sub(hidden_states)


class ToyDecoderLayer(nn.Module):
    def __init__(self, vllm_config: VllmConfig, prefix: str = ""):
        super().__init__()
        config = vllm_config.model_config.hf_config
        layer_idx = extract_layer_index(prefix)
        self.self_attn = ToyAttention(config.hidden_size, config.num_attention_heads,
                                      config.num_attention_groups, prefix=f"{prefix}.self_attn")
        self.cross = OptionalKvAttention(config.hidden_size, config.num_attention_heads,
                                         num_kv_heads=getattr(config, "cross_kv_heads", None),
                                         prefix=f"{prefix}.cross")
        self.mlp = ToyMLP(config.hidden_size, config.intermediate_size, prefix=f"{prefix}.mlp")
        self.moe = ToyMLP(config.hidden_size, config.moe_intermediate_size,
                          prefix=f"{prefix}.moe")
        self.routed = False                       # by a config key
        if config.num_experts > 0:
            self.routed = True
        self.per_layer = False                    # by the layer's own index
        if _is_sparse(config, layer_idx):
            self.per_layer = True
        self.by_env = False                       # by the environment: not decided
        if envs.TOY_USE_ROUTED:
            self.by_env = True
        self.kept = False                         # decided false: the default stands
        if config.num_experts > 10 ** 6:
            self.kept = True

    def forward(self, hidden_states):
        hidden_states = self.self_attn(hidden_states)
        if self.per_layer:
            out = self.moe(hidden_states)
        else:
            out = self.mlp(hidden_states)
        return out + hidden_states
'''

CFG = {"hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
       "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 3,
       "num_experts": 8, "vocab_size": 100}


def _source(tmp_path, **over):
    f = tmp_path / "toy_vllm.py"
    f.write_text(MODEL)
    return load_model_source(f, {**CFG, **over}, "config.json")


def _truth(ms, expr: str):
    return static_truth(ms, "ToyDecoderLayer", None, cst.parse_expression(expr))


def test_an_override_the_config_decides_true_is_the_value(tmp_path):
    assert _truth(_source(tmp_path), "self.routed") is True              # 8 experts > 0


def test_an_override_the_config_decides_false_leaves_the_default(tmp_path):
    assert _truth(_source(tmp_path, num_experts=0), "self.routed") is False     # 0 > 0 false
    assert _truth(_source(tmp_path), "self.kept") is False             # 8 > 10**6 false


@pytest.mark.parametrize("kinds, extra, truth", [
    (["sparse", "sparse", "sparse"], None, True),       # every layer routed: True
    (["dense", "dense", "dense"], None, False),         # none: False
    (["dense", "sparse", "sparse"], None, None),        # layer 0 dense, 1-2 routed: both run
    (["sparse", "sparse"], ["dense"], None),            # layer 2 from the extra list: dense
    (["sparse", "sparse"], ["sparse"], True),           # ... routed: every layer
])
def test_an_override_read_per_layer_is_decided_only_when_every_layer_agrees(
        tmp_path, kinds, extra, truth):
    ms = _source(tmp_path, ffn_kinds=kinds, extra_ffn_kinds=extra)
    assert _truth(ms, "self.per_layer") is truth


def test_an_override_nothing_decides_is_undecided_never_the_override(tmp_path):
    assert _truth(_source(tmp_path), "self.by_env") is None      # envs.TOY_USE_ROUTED
    assert _truth(_source(tmp_path), "not self.by_env") is None


@pytest.mark.parametrize("kinds, reached", [
    (["dense", "sparse", "sparse"], {"mlp", "moe"}),    # mixed: both MLPs run on some layer
    (["sparse", "sparse", "sparse"], {"moe"}),          # all routed: the dense MLP never runs
    (["dense", "dense", "dense"], {"mlp"}),
])
def test_the_forward_pass_follows_the_branches_the_layers_take(tmp_path, kinds, reached):
    ms = _source(tmp_path, ffn_kinds=kinds)
    ran = {e.attr for e in flatten(ms, "ToyDecoderLayer")
           if e.owner == "ToyDecoderLayer" and e.attr in ("mlp", "moe")}
    assert ran == reached


def test_a_key_read_by_its_alias_in_the_types_transformers_module(tmp_path):
    """transformers 5 keeps model type step3p5's config in models/step3p7
    (SPECIAL_MODEL_TYPE_TO_MODULE_NAME), whose attribute_map reads num_attention_groups as
    num_key_value_heads: 2 kv heads, head_dim 64 / 4 = 16, (4 + 2 * 2) x 16 = 128 outputs."""
    assert config_aliases(tmp_path, "step3p5")["num_attention_groups"] == "num_key_value_heads"
    ms = _source(tmp_path, model_type="step3p5")
    assert ms.linears[("ToyAttention", "qkv_proj")].dims == (128, 64)


def test_a_missing_key_passed_as_an_argument_is_named(tmp_path):
    ms = _source(tmp_path, model_type="llama")       # llama maps no num_attention_groups
    lin = ms.linears[("ToyAttention", "qkv_proj")]
    assert lin.dims is None and "num_attention_groups" in lin.error, lin.error


@pytest.mark.parametrize("over, out", [
    ({}, (4 + 4 + 4) * 16),                 # None: vLLM's QKVParallelLinear uses the 4 heads
    ({"cross_kv_heads": 1}, (4 + 1 + 1) * 16),
])
def test_kv_heads_passed_as_none_are_the_heads(tmp_path, over, out):
    ms = _source(tmp_path, **over)
    lin = ms.linears[("OptionalKvAttention", "qkv_proj")]
    assert lin.dims == (out, 64), lin.error


@pytest.mark.parametrize("decoder, out", [
    ({"d_model": 32, "heads": 4}, (4 + 4 + 4) * 8),      # no kv_heads in the sub-config: 4
    ({"d_model": 32, "heads": 4, "kv_heads": 1}, (4 + 1 + 1) * 8),
])
def test_getattr_on_a_sub_config_with_a_none_default(tmp_path, decoder, out):
    """`getattr(config, "kv_heads", None)` where `config` is the sub-config `config.decoder`
    (vLLM's nemotron_parse3_5 MBart decoder); head_dim 32 / 4 = 8."""
    lin = _source(tmp_path, decoder=decoder).linears[("ToySubLayer", "qkv_proj")]
    assert lin.dims == (out, 32), lin.error
