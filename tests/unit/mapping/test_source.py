"""The mapping's view of model source: linear-like attributes with shapes from config.json."""

from __future__ import annotations

import json

import pytest

from cannbot_prefetch.errors import InputError, SourceError
from cannbot_prefetch.mapping.config import load_config
from cannbot_prefetch.mapping.flatten import flatten, roots
from cannbot_prefetch.mapping.source import load_model_source


def test_llama_linears_from_config(modeling, example_config):
    cfg, path = load_config(example_config("llama3.2-1b-en"))
    ms = load_model_source(modeling("llama"), cfg, path)
    dims = {f"{c}.{a}": lin.dims for (c, a), lin in ms.linears.items()}
    assert dims == {
        "LlamaMLP.gate_proj": (8192, 2048), "LlamaMLP.up_proj": (8192, 2048),
        "LlamaMLP.down_proj": (2048, 8192),
        "LlamaAttention.q_proj": (2048, 2048),      # num_attention_heads * self.head_dim
        "LlamaAttention.k_proj": (512, 2048), "LlamaAttention.v_proj": (512, 2048),
        "LlamaAttention.o_proj": (2048, 2048), "LlamaForCausalLM.lm_head": (128256, 2048),
    }
    assert roots(ms)[0] == "LlamaForCausalLM"


def test_flatten_runs_the_layer_in_evaluation_order(modeling, example_config):
    cfg, path = load_config(example_config("llama3.2-1b-en"))
    ms = load_model_source(modeling("llama"), cfg, path)
    seq = [f"{e.owner}.{e.attr}" for e in flatten(ms, "LlamaForCausalLM")
           if e.kind in ("linear", "norm", "act")]
    assert seq == ["LlamaDecoderLayer.input_layernorm", "LlamaAttention.q_proj",
                   "LlamaAttention.k_proj", "LlamaAttention.v_proj", "LlamaAttention.o_proj",
                   "LlamaDecoderLayer.post_attention_layernorm", "LlamaMLP.gate_proj",
                   "LlamaMLP.act_fn", "LlamaMLP.up_proj", "LlamaMLP.down_proj", "LlamaModel.norm",
                   "LlamaForCausalLM.lm_head"]


def test_qwen2_and_qwen3_moe_fused_experts(modeling, example_config):
    cfg, path = load_config(example_config("qwen2.5-3b-zh"))
    ms = load_model_source(modeling("qwen2"), cfg, path)
    assert ms.linears[("Qwen2MLP", "down_proj")].dims == (2048, 11008)
    assert ms.linears[("Qwen2ForCausalLM", "lm_head")].dims == (151936, 2048)
    cfg, path = load_config(example_config("qwen3-moe"))
    ms = load_model_source(modeling("qwen3_moe"), cfg, path)
    gu = ms.linears[("Qwen3MoeExperts", "gate_up_proj")]
    assert gu.is_param and gu.dims == (128, 1536, 2048)       # nn.Parameter(torch.empty(E, 2I, H))
    assert ms.linears[("Qwen3MoeExperts", "down_proj")].dims == (128, 2048, 768)


VLLM_STYLE = '''
import torch
from torch import nn
from vllm.model_executor.layers.linear import (MergedColumnParallelLinear, QKVParallelLinear,
                                               RowParallelLinear)


class FakeMLP(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, prefix: str = ""):
        super().__init__()
        self.gate_up_proj = MergedColumnParallelLinear(hidden_size, [intermediate_size] * 2,
                                                       bias=False)
        self.down_proj = RowParallelLinear(intermediate_size, hidden_size, bias=False)

    def forward(self, x):
        gate_up, _ = self.gate_up_proj(x)
        x = self.act_fn(gate_up)
        x, _ = self.down_proj(x)
        return x


class FakeAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.qkv_proj = QKVParallelLinear(config.hidden_size, self.head_dim,
                                          config.num_attention_heads, config.num_key_value_heads)
        self.o_proj = RowParallelLinear(config.num_attention_heads * self.head_dim,
                                        config.hidden_size)


class FakeLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self_attn = FakeAttention(config)
        self.mlp = FakeMLP(hidden_size=config.hidden_size,
                           intermediate_size=config.intermediate_size)
        self.experts_w13 = nn.Parameter(torch.empty(config.n_experts // 2, 2 * config.intermediate_size,
                                                    config.hidden_size))
'''


def test_vllm_style_parallel_linears_with_tp(tmp_path):
    src = tmp_path / "fake.py"
    src.write_text(VLLM_STYLE)
    cfg = {"hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
           "num_key_value_heads": 8, "n_experts": 16}
    ms = load_model_source(src, cfg, "config.json", tp=2)
    d = {f"{c}.{a}": lin.dims for (c, a), lin in ms.linears.items()}
    assert d["FakeMLP.gate_up_proj"] == (2 * 11008 // 2, 4096)       # column parallel: out / tp
    assert d["FakeMLP.down_proj"] == (4096, 11008 // 2)              # row parallel: in / tp
    assert d["FakeAttention.qkv_proj"] == ((32 // 2 + 2 * (8 // 2)) * 128, 4096)
    assert d["FakeAttention.o_proj"] == (4096, 4096 // 2)
    assert d["FakeLayer.experts_w13"] == (8, 2 * 11008, 4096)


def test_missing_config_key_is_named(modeling, example_config, tmp_path):
    cfg = json.loads(example_config("llama3.2-1b-en").read_text())
    del cfg["intermediate_size"]
    ms = load_model_source(modeling("llama"), cfg, "cfg.json")
    lin = ms.linears[("LlamaMLP", "gate_proj")]
    assert lin.dims is None and lin.missing_key == "intermediate_size"


def test_bad_sources_and_configs(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("class A(nn.Module):\n    def forward(self:\n        pass\n")
    with pytest.raises(SourceError, match="does not parse") as exc:
        load_model_source(bad, {}, "")
    assert str(bad) in str(exc.value)
    cfg = tmp_path / "config.json"
    cfg.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        load_config(cfg)
    with pytest.raises(InputError, match="not found"):
        load_model_source(tmp_path / "nope", {}, "")


# S4: model source and config are untrusted input; the shape evaluator bounds what it computes
BOMBS = '''
import torch
from torch import nn


class Bomb(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.power = nn.Linear(2 ** 2 ** 36, 8)
        self.text = nn.Linear(len("a" * 10 ** 10), 8)
        self.items = nn.Linear(len([0] * 10 ** 10), 8)
        self.fmt = nn.Linear(len("%0999999999d" % 1), 8)
        self.cfgpow = nn.Linear(config.base ** config.exp, 8)
        self.inf = nn.Linear(int(1e308 * 10), 8)
        self.big = nn.Linear(int("9" * 4000), 8)
        self.ok = nn.Linear(config.base ** 10, 8)

    def forward(self, x):
        return self.ok(x)
'''


def test_s4_evaluator_bounds_integers_powers_and_repetition(tmp_path):
    src = tmp_path / "bomb.py"
    src.write_text(BOMBS)
    ms = load_model_source(src, {"base": 2, "exp": 10 ** 10}, "config.json")
    lins = {a: lin for (c, a), lin in ms.linears.items()}
    assert lins["ok"].dims == (8, 1024)          # ordinary arithmetic still evaluates
    for attr in ("power", "text", "items", "fmt", "cfgpow", "inf", "big"):
        assert lins[attr].dims is None, attr
        assert "not evaluable" in lins[attr].error, (attr, lins[attr].error)
    assert "too large" in lins["power"].error and "too large" in lins["cfgpow"].error
    assert "items" in lins["text"].error and "items" in lins["items"].error


# ------------------------------------------------------------- --tp / --moe-tp on HF sources

def _dims(ms):
    return {f"{c}.{a}": lin.dims for (c, a), lin in ms.linears.items()}


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_tp_shards_a_hf_source_by_role(modeling, example_config, tp):
    # issue 10 item 12: Megatron-style TP of transformers' real Llama file (Llama-3.2-1B config:
    # hidden 2048, 32 heads, 8 KV heads of 64, intermediate 8192, vocab 128256)
    cfg = json.loads(example_config("llama3.2-1b-en").read_text())
    d = _dims(load_model_source(modeling("llama"), cfg, "cfg.json", tp=tp))
    assert d["LlamaAttention.q_proj"] == (2048 // tp, 2048)          # column: out / tp
    assert d["LlamaAttention.k_proj"] == (512 // tp, 2048)
    assert d["LlamaAttention.v_proj"] == (512 // tp, 2048)
    assert d["LlamaAttention.o_proj"] == (2048, 2048 // tp)          # row: in / tp
    assert d["LlamaMLP.gate_proj"] == d["LlamaMLP.up_proj"] == (8192 // tp, 2048)
    assert d["LlamaMLP.down_proj"] == (2048, 8192 // tp)
    assert d["LlamaForCausalLM.lm_head"] == (128256 // tp, 2048)    # vocab-parallel


def test_tp_above_the_kv_heads_keeps_one_kv_head_per_rank(modeling, example_config):
    cfg = json.loads(example_config("llama3.2-1b-en").read_text())   # 8 KV heads of 64
    d = _dims(load_model_source(modeling("llama"), cfg, "cfg.json", tp=16))
    assert d["LlamaAttention.k_proj"] == d["LlamaAttention.v_proj"] == (64, 2048)
    assert d["LlamaAttention.q_proj"] == (128, 2048)


def test_moe_tp_shards_fused_hf_experts(modeling, example_config):
    # Qwen3-MoE (transformers 5.x fused experts): gate_up [E, 2I, H] splits 2I, down [E, H, I] I
    cfg = json.loads(example_config("qwen3-moe").read_text())       # E 128, I 768, H 2048
    one = _dims(load_model_source(modeling("qwen3_moe"), cfg, "cfg.json"))
    two = _dims(load_model_source(modeling("qwen3_moe"), cfg, "cfg.json", moe_tp=2))
    gu = next(k for k in one if k.endswith(".gate_up_proj") and len(one[k]) == 3)
    dn = next(k for k in one if k.endswith(".down_proj") and len(one[k]) == 3)
    assert one[gu] == (128, 1536, 2048) and two[gu] == (128, 768, 2048)
    assert one[dn] == (128, 2048, 768) and two[dn] == (128, 2048, 384)


def test_parallel_linears_split_once_full_size_experts_by_moe_tp(tmp_path):
    src = tmp_path / "fake.py"
    src.write_text(VLLM_STYLE)
    cfg = {"hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
           "num_key_value_heads": 8, "n_experts": 16}
    d = _dims(load_model_source(src, cfg, "config.json", tp=2, moe_tp=2))
    assert d["FakeMLP.gate_up_proj"] == (2 * 11008 // 2, 4096)       # its own ctor, not twice
    assert d["FakeLayer.experts_w13"] == (8, 11008, 4096)              # 2I equals the full size


# `self.X` assigned from the config in the same __init__, through `isinstance` (a key that holds
# one value for every layer or a per-layer list: hunyuan_v1_moe's gate), written for this test
PER_LAYER_GATE = '''
import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self, config, layer_idx=None):
        super().__init__()
        self.num_experts = (config.num_experts if isinstance(config.num_experts, int)
                            else config.num_experts[layer_idx])
        self.width = config.hidden_size if isinstance(config.hidden_size, (int, float)) else 0
        self.wg = nn.Linear(self.width, self.num_experts, bias=False)
        self.count = self.opaque_count(config)
        self.odd = nn.Linear(config.hidden_size, self.count, bias=False)
        self.later = nn.Linear(config.hidden_size, self.unknown, bias=False)

    def forward(self, x):
        return self.wg(x)


class Layer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.gate = Gate(config, layer_idx)

    def forward(self, x):
        return self.gate(x)


class Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList([Layer(config, i) for i in range(config.num_hidden_layers)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
'''


@pytest.mark.parametrize("experts, expected", [(8, 8), ([6, 6], 6), ([4, 4, 4], 4)])
def test_isinstance_on_a_config_value_picks_its_branch(tmp_path, experts, expected):
    src = tmp_path / "gate.py"
    src.write_text(PER_LAYER_GATE)
    cfg = {"num_experts": experts, "hidden_size": 32, "num_hidden_layers": 2}
    ms = load_model_source(src, cfg, "config.json")
    assert ms.linears[("Gate", "wg")].dims == (expected, 32)


def test_an_unevaluable_self_attribute_names_why_when_used(tmp_path):
    src = tmp_path / "gate.py"
    src.write_text(PER_LAYER_GATE)
    ms = load_model_source(src, {"num_experts": 8, "hidden_size": 32, "num_hidden_layers": 2},
                           "config.json")
    odd = ms.linears[("Gate", "odd")]
    # the attribute used, and why its value was not evaluable
    assert odd.dims is None and "self.count: self.opaque_count" in odd.error, odd.error
    later = ms.linears[("Gate", "later")]
    assert later.dims is None and later.error == "shape not evaluable (self.unknown)", later.error
