"""Stacks built from several layer classes, and a layer class also used outside the stack
(issue 37: mllama, olmo_hybrid, inkling2_loop, kosmos2, kosmos2_5 planned sites that never
fired). The model files are GENERATED here in transformers' style (small, written for these
tests): each test plans a manual target, applies it, runs the rewritten model with the switch
set at the top of the config and checks which layers' weights reach the recording stub."""

from __future__ import annotations

import importlib.util
import json
import sys
import types

import pytest

from cannbot_prefetch import api
from cannbot_prefetch.mapping import Mapper
from cannbot_prefetch.mapping.manual import parse_target
from cannbot_prefetch.mapping.source import load_model_source
from cannbot_prefetch.plan import load_plan
from cannbot_prefetch.policy import Policy

POLICY = Policy.load()   # the shipped thresholds, as an analysis passes them down

HEAD = '''# GENERATED for cannbot-prefetch tests (transformers style, not a transformers file)
import torch
from torch import nn


class TinyMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class TinyAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.q_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.o_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)

    def forward(self, hidden_states, key_states=None):
        key_states = hidden_states if key_states is None else key_states
        q = self.q_proj(hidden_states)
        k = self.k_proj(key_states)
        v = self.v_proj(key_states)
        w = torch.softmax(q @ k.transpose(-1, -2), dim=-1)
        return self.o_proj(w @ v)


class TinyRMSNorm(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
'''

# Mllama's shape: self-attention layers and cross-attention layers in one stack, the cross
# ones listed first in __init__ and skipped by a text-only forward; both hold the same MLP.
# Kosmos-2's shape: the attention class also runs once outside the stack, in a projector that
# runs before the layers when image features are given.
MIXED = HEAD + '''

class TinyCrossLayer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.input_layernorm = TinyRMSNorm(config.hidden_size)
        self.cross_attn = TinyAttention(config)
        self.post_attention_layernorm = TinyRMSNorm(config.hidden_size)
        self.mlp = TinyMLP(config)

    def forward(self, hidden_states, cross_states=None):
        residual = hidden_states
        hidden_states = self.cross_attn(self.input_layernorm(hidden_states), cross_states)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.mlp(self.post_attention_layernorm(hidden_states))
        return residual + hidden_states


class TinySelfLayer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.input_layernorm = TinyRMSNorm(config.hidden_size)
        self.self_attn = TinyAttention(config)
        self.post_attention_layernorm = TinyRMSNorm(config.hidden_size)
        self.mlp = TinyMLP(config)

    def forward(self, hidden_states, cross_states=None):
        residual = hidden_states
        hidden_states = self.self_attn(self.input_layernorm(hidden_states))
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.mlp(self.post_attention_layernorm(hidden_states))
        return residual + hidden_states


class TinyProjector(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.x_attn = TinyAttention(config)

    def forward(self, features):
        hidden_states = self.dense(features)
        return self.x_attn(hidden_states)


class TinyModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.projector = TinyProjector(config)
        self.cross_attention_layers = config.cross_attention_layers
        layers = []
        for layer_idx in range(config.num_hidden_layers):
            if layer_idx in config.cross_attention_layers:
                layers.append(TinyCrossLayer(config, layer_idx))
            else:
                layers.append(TinySelfLayer(config, layer_idx))
        self.layers = nn.ModuleList(layers)
        self.norm = TinyRMSNorm(config.hidden_size)

    def forward(self, input_ids, image_features=None):
        hidden_states = self.embed_tokens(input_ids)
        cross_states = None
        if image_features is not None:
            cross_states = self.projector(image_features)
        for idx, decoder_layer in enumerate(self.layers):
            if idx in self.cross_attention_layers and cross_states is None:
                continue
            hidden_states = decoder_layer(hidden_states, cross_states)
        return self.norm(hidden_states)


class TinyForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.model = TinyModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids, image_features=None):
        return self.lm_head(self.model(input_ids, image_features))
'''

# A hybrid's shape (OLMo-Hybrid): attention layers and linear-attention layers, picked from a
# dict of classes (Inkling2-Loop's `layer_classes[...]`), three linear to one attention.
HYBRID = HEAD + '''

class TinyLinearAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.in_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.out_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)

    def forward(self, hidden_states):
        return self.out_proj(torch.cumsum(self.in_proj(hidden_states), dim=1))


class TinyAttentionLayer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.input_layernorm = TinyRMSNorm(config.hidden_size)
        self.self_attn = TinyAttention(config)
        self.post_attention_layernorm = TinyRMSNorm(config.hidden_size)
        self.mlp = TinyMLP(config)

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.self_attn(self.input_layernorm(hidden_states))
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.mlp(self.post_attention_layernorm(hidden_states))
        hidden_states = residual + hidden_states
        return hidden_states


class TinyLinearLayer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.input_layernorm = TinyRMSNorm(config.hidden_size)
        self.linear_attn = TinyLinearAttention(config)
        self.post_attention_layernorm = TinyRMSNorm(config.hidden_size)
        self.mlp = TinyMLP(config)

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.linear_attn(self.input_layernorm(hidden_states))
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.mlp(self.post_attention_layernorm(hidden_states))
        hidden_states = residual + hidden_states
        return hidden_states


class TinyHybridModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        layer_classes = {"full_attention": TinyAttentionLayer, "linear_attention": TinyLinearLayer}
        self.layers = nn.ModuleList()
        for layer_idx in range(config.num_hidden_layers):
            layer_class = layer_classes[config.layer_types[layer_idx]]
            self.layers.append(layer_class(config, layer_idx))
        self.norm = TinyRMSNorm(config.hidden_size)

    def forward(self, input_ids):
        hidden_states = self.embed_tokens(input_ids)
        for decoder_layer in self.layers:
            hidden_states = decoder_layer(hidden_states)
        return self.norm(hidden_states)


class TinyHybridForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.model = TinyHybridModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids):
        return self.lm_head(self.model(input_ids))
'''

# the same stack built by if/else (OLMo-Hybrid's own form)
HYBRID_IF = HYBRID.replace(
    '''            layer_class = layer_classes[config.layer_types[layer_idx]]
            self.layers.append(layer_class(config, layer_idx))''',
    '''            if config.layer_types[layer_idx] == "linear_attention":
                self.layers.append(TinyLinearLayer(config, layer_idx))
            else:
                self.layers.append(TinyAttentionLayer(config, layer_idx))''')
assert HYBRID_IF != HYBRID

CONFIG = {"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 4,
          "cross_attention_layers": [1], "model_type": "tiny",
          "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                          "full_attention"] * 2}


def _write(tmp_path, text: str):
    src = tmp_path / "pkg" / "modeling_tiny.py"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(text)
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    return src


def _plan(tmp_path, src, targets):
    res = api.analyze(None, model_src=str(src), model_config=str(tmp_path / "config.json"),
                      targets=tuple(targets), out=str(tmp_path / "out"))
    res.save()
    return res.to_json(), load_plan(tmp_path / "out" / "prefetch_plan.yaml")


def _apply_and_load(tmp_path, plan):
    changes = api.apply(tmp_path / "out" / "prefetch_plan.yaml", root=tmp_path)
    changes.write()
    assert changes.refused == [] and sorted(changes.applied) == sorted(s.id for s in plan.sites)
    name = f"tinykinds_{abs(hash(str(tmp_path)))}"
    pkg = types.ModuleType(name)
    pkg.__path__ = [str(tmp_path / "pkg")]
    sys.modules[name] = pkg
    mods = []
    for sub in ("_cannbot_prefetch", "modeling_tiny"):
        spec = importlib.util.spec_from_file_location(f"{name}.{sub}",
                                                      tmp_path / "pkg" / f"{sub}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        mods.append(mod)
    return mods[1]


def _fired(mod, cls_name, config, weights_of, **inputs):
    """How many times each layer's weight reached npu_prefetch, the switch on at the top of
    the config only (as a user sets it), in one forward pass."""
    torch = pytest.importorskip("torch")
    from cannbot_prefetch.verify.stub import stub_torch_npu

    cfg = types.SimpleNamespace(**config, enable_prefetch=True)
    torch.manual_seed(0)
    model = getattr(mod, cls_name)(cfg).eval()
    ids = torch.randint(0, config["vocab_size"], (1, 3))
    with stub_torch_npu() as rec, torch.no_grad():
        model(ids, **inputs)
    seen = [id(c.weight) for c in rec.calls]
    return [seen.count(id(w)) for w in weights_of(model)]


def test_a_target_inside_the_stack_is_preferred_to_one_outside(tmp_path):
    """TinyAttention runs first in the projector (once per image), then in every self-attention
    layer: the target is the stack's instance (was: the projector's, `self.x_attn.q_proj`,
    which a text-only forward never runs)."""
    src = _write(tmp_path, MIXED)
    ms = load_model_source(src, CONFIG, "config.json")
    mapper = Mapper(ms, policy=POLICY)
    t = parse_target("TinyAttention.q_proj", ms, mapper.roots, mapper.events_of)
    hops = t.events[t.t_idx].path
    assert [h.cls for h in hops if h.via_list] == ["TinyModel"]
    assert "TinyProjector" not in {h.cls for h in hops}
    pytest.importorskip("torch")
    _, plan = _plan(tmp_path, src, ["TinyAttention.q_proj"])
    assert plan.sites[0].insert.cls != "TinyProjector"
    mod = _apply_and_load(tmp_path, plan)
    got = _fired(mod, "TinyForCausalLM", CONFIG,
                 lambda m: [L.self_attn.q_proj.weight for L in m.model.layers
                            if hasattr(L, "self_attn")])
    assert got == [1, 1, 1]          # layers 0, 2, 3 (layer 1 is the cross layer, skipped)


def test_a_class_in_two_layer_classes_is_prefetched_in_both(tmp_path):
    """TinyMLP sits in the cross and the self layers. Its first linear's window (the attention's
    output) lies in the layer class, so a prefetch there would run in one kind of layer only (was:
    in TinyCrossLayer, listed first, which a text-only forward skips: it never fired). The site
    goes where every layer that runs the MLP runs it."""
    pytest.importorskip("torch")
    src = _write(tmp_path, MIXED)
    doc, plan = _plan(tmp_path, src, ["TinyMLP.gate_proj"])
    (s,) = plan.sites
    assert s.insert.cls not in ("TinyCrossLayer", "TinySelfLayer")
    mod = _apply_and_load(tmp_path, plan)
    got = _fired(mod, "TinyForCausalLM", CONFIG,
                 lambda m: [L.mlp.gate_proj.weight for L in m.model.layers])
    assert got == [1, 0, 1, 1]       # the cross layer (index 1) does not run without images
    got = _fired(mod, "TinyForCausalLM", CONFIG,
                 lambda m: [L.mlp.gate_proj.weight for L in m.model.layers],
                 image_features=__import__("torch").randn(1, 2, CONFIG["hidden_size"]))
    assert got == [1, 1, 1, 1]


def test_classes_picked_from_a_dict_are_call_paths(tmp_path):
    """`layer_class = layer_classes[config.layer_types[i]]` with `layer_classes` a dict of
    classes: both layer classes run under the model (was: no path, each layer class its own
    root)."""
    src = _write(tmp_path, HYBRID)
    ms = load_model_source(src, CONFIG, "config.json")
    mapper = Mapper(ms, policy=POLICY)
    assert "TinyAttentionLayer" not in mapper.roots and "TinyLinearLayer" not in mapper.roots
    assert mapper.roots[0] == "TinyHybridForCausalLM"
    t = parse_target("TinyAttention.q_proj", ms, mapper.roots, mapper.events_of)
    assert t.events[t.t_idx].path[0].cls == "TinyHybridForCausalLM"


def test_no_next_layer_prefetch_across_layer_classes(tmp_path):
    """The attention's q_proj is its layer's first MatMul, so the default window is the previous
    layer's MLP (a next-layer prefetch). Placed in TinyAttentionLayer it would prefetch
    `next_layer.self_attn` only after an attention layer, and with three linear layers to each
    attention layer no attention layer follows one (was: planned there, never fired). It is
    placed inside the attention layer itself, and fires in every attention layer."""
    pytest.importorskip("torch")
    src = _write(tmp_path, HYBRID_IF)
    doc, plan = _plan(tmp_path, src, ["TinyAttention.q_proj"])
    (s,) = plan.sites
    assert s.target.scope == "same"
    mod = _apply_and_load(tmp_path, plan)
    cfg = dict(CONFIG, num_hidden_layers=8)
    got = _fired(mod, "TinyHybridForCausalLM", cfg,
                 lambda m: [L.self_attn.q_proj.weight for L in m.model.layers
                            if hasattr(L, "self_attn")])
    assert got == [1, 1]             # layers 3 and 7
