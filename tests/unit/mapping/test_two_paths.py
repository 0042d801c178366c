"""A layer class reached by two paths in one decoder layer (issue 37: deepseek_v3, glm_moe_dsa,
mimo_v2_flash): the dense MLP is `self.mlp` in the first `first_k_dense_replace` layers and
`self.mlp.shared_experts` in the MoE layers. A next-layer prefetch of its weight names every
path (`target.alt_weight_exprs`), so it fires in a model whose layers are all dense, all MoE,
or mixed. The model file below is written for this test in transformers' style; what each
layer must prefetch follows from reading its forward by hand: every layer but the last
prefetches the next layer's MLP gate_proj, whichever path holds it."""

from __future__ import annotations

import importlib.util
import json
import sys
import types

import pytest

from cannbot_prefetch import api
from cannbot_prefetch.errors import PlanError
from cannbot_prefetch.plan import load_plan

torch = pytest.importorskip("torch")

MODEL = '''
import torch
from torch import nn


class TwoPathRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * hidden_states * torch.rsqrt(variance + self.variance_epsilon)


class TwoPathMLP(nn.Module):
    def __init__(self, config, intermediate_size=None):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.intermediate_size = (config.intermediate_size if intermediate_size is None
                                  else intermediate_size)
        self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
        return down_proj


class TwoPathMoE(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.gate = nn.Linear(config.hidden_size, config.n_routed_experts, bias=False)
        self.expert = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.shared_experts = TwoPathMLP(config, intermediate_size=config.moe_intermediate_size)

    def forward(self, hidden_states):
        residuals = hidden_states
        router_logits = self.gate(hidden_states)
        weights = router_logits.softmax(dim=-1)[..., :1]
        hidden_states = self.expert(hidden_states) * weights
        hidden_states = hidden_states + self.shared_experts(residuals)
        return hidden_states


class TwoPathAttention(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.q_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.o_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)

    def forward(self, hidden_states):
        attn_output = torch.tanh(self.q_proj(hidden_states))
        attn_output = self.o_proj(attn_output)
        return attn_output


class TwoPathDecoderLayer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.self_attn = TwoPathAttention(config, layer_idx)
        if layer_idx >= config.first_k_dense_replace:
            self.mlp = TwoPathMoE(config)
        else:
            self.mlp = TwoPathMLP(config)
        self.input_layernorm = TwoPathRMSNorm(config.hidden_size)
        self.post_attention_layernorm = TwoPathRMSNorm(config.hidden_size)
        self.post_feedforward_layernorm = TwoPathRMSNorm(config.hidden_size)

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = self.post_feedforward_layernorm(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states


class TwoPathModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            [TwoPathDecoderLayer(config, layer_idx) for layer_idx in range(config.num_hidden_layers)]
        )
        self.norm = TwoPathRMSNorm(config.hidden_size)

    def forward(self, input_ids):
        hidden_states = self.embed_tokens(input_ids)
        for decoder_layer in self.layers:
            hidden_states = decoder_layer(hidden_states)
        return self.norm(hidden_states)


class TwoPathForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.model = TwoPathModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids):
        return self.lm_head(self.model(input_ids))
'''

# first_k_dense_replace 1: layer 0 dense, layers 1.. MoE (the mapper's config)
CONFIG = {"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
          "moe_intermediate_size": 16, "n_routed_experts": 4, "num_hidden_layers": 4,
          "first_k_dense_replace": 1, "torch_dtype": "bfloat16"}


# --window -> (scope, insertion in TwoPathDecoderLayer.forward): a norm after the MLP makes the
# next layer's gate_proj the target (cross-layer); the one before it, this layer's
WINDOWS = {"TwoPathDecoderLayer.post_feedforward_layernorm": ("next_layer", "self.next_layer."),
           "TwoPathDecoderLayer.post_attention_layernorm": ("same", "self.")}


def _planned(tmp_path, window):
    (tmp_path / "modeling_twopath.py").write_text(MODEL)
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    res = api.analyze(None, model_src=str(tmp_path / "modeling_twopath.py"),
                      model_config=str(tmp_path / "config.json"),
                      targets=("TwoPathMLP.gate_proj",), window=(window,),
                      out=str(tmp_path / "out"))
    res.save()
    return load_plan(tmp_path / "out" / "prefetch_plan.yaml")


@pytest.mark.parametrize("window", WINDOWS)
def test_the_plan_names_every_path_of_the_weight(tmp_path, window):
    site, = _planned(tmp_path, window).sites
    scope, head = WINDOWS[window]
    assert (site.target.scope, site.insert.cls) == (scope, "TwoPathDecoderLayer")
    # the flattener's path first (it follows the last branch the file writes: the MoE one)
    assert site.target.weight_expr == f"{head}mlp.shared_experts.gate_proj.weight"
    assert site.target.alt_weight_exprs == (f"{head}mlp.gate_proj.weight",)
    design = (tmp_path / "out" / "prefetch_design.md").read_text()
    assert f"the weight's other paths, tried in order (the first present is prefetched): " \
           f"`{head}mlp.gate_proj.weight`." in design


def _load(path, name):
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(path.parent))
        sys.modules.pop("_cannbot_prefetch", None)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("dense", [0, 1, 2, 4])     # all MoE, mixed, mixed, all dense
def test_the_weight_is_prefetched_whichever_path_holds_it(tmp_path, dense, window):
    from cannbot_prefetch.verify.stub import stub_torch_npu

    _planned(tmp_path, window)
    changes = api.apply(tmp_path / "out" / "prefetch_plan.yaml", root=tmp_path)
    changes.write()
    assert changes.refused == [] and len(changes.applied) == 1
    mod = _load(tmp_path / "modeling_twopath.py", f"twopath_{dense}_{id(tmp_path)}")
    cfg = types.SimpleNamespace(**{**CONFIG, "first_k_dense_replace": dense,
                                   "enable_prefetch": True})
    torch.manual_seed(0)
    model = mod.TwoPathForCausalLM(cfg).eval()
    ids = torch.randint(0, 64, (1, 1))
    with torch.no_grad(), stub_torch_npu() as rec:
        model(ids)
    seen = [id(c.weight) for c in rec.calls]
    layers = list(model.model.layers)
    gates = [(L.mlp.shared_experts if hasattr(L.mlp, "shared_experts") else L.mlp).gate_proj
             for L in layers]
    assert [type(L.mlp).__name__ for L in layers] == \
        ["TwoPathMLP"] * dense + ["TwoPathMoE"] * (4 - dense)
    # same layer: every layer prefetches its own gate_proj once; next layer: every layer but
    # the last prefetches the next one's; nothing else
    want = [1, 1, 1, 1] if WINDOWS[window][0] == "same" else [0, 1, 1, 1]
    assert [seen.count(id(g.weight)) for g in gates] == want
    assert len(seen) == sum(want)


def test_other_paths_must_lie_below_the_same_module(tmp_path):
    plan = tmp_path / "out" / "prefetch_plan.yaml"
    _planned(tmp_path, "TwoPathDecoderLayer.post_attention_layernorm")
    text = plan.read_text()
    assert "- self.mlp.gate_proj.weight" in text
    plan.write_text(text.replace("- self.mlp.gate_proj.weight", "- self.self_attn.q_proj.weight"))
    with pytest.raises(PlanError, match="alt_weight_exprs.*must lie below self.mlp"):
        load_plan(plan)
    plan.write_text(text.replace("- self.mlp.gate_proj.weight",
                                 "- self.mlp.shared_experts.gate_proj.weight"))
    with pytest.raises(PlanError, match="repeats a path"):
        load_plan(plan)


# mimo_v2_flash's shape: the dense MLP only in the dense layers (no shared experts), the MoE
# block's own linears in the other branch of the same `self.mlp = ... if ... else ...` choice
NO_SHARED = MODEL.replace(
    "        self.shared_experts = TwoPathMLP(config, intermediate_size=config.moe_intermediate_size)\n",
    "").replace("        hidden_states = hidden_states + self.shared_experts(residuals)\n", "")


def test_a_matmul_of_the_other_branch_starts_no_window(tmp_path):
    assert "shared_experts" not in NO_SHARED
    (tmp_path / "modeling_twopath.py").write_text(NO_SHARED)
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    res = api.analyze(None, model_src=str(tmp_path / "modeling_twopath.py"),
                      model_config=str(tmp_path / "config.json"),
                      targets=("TwoPathMLP.gate_proj",), out=str(tmp_path / "out"))
    res.save()
    site, = load_plan(tmp_path / "out" / "prefetch_plan.yaml").sites
    # the window starts at the attention's output (the last MatMul that runs with the target,
    # o_proj), not at the MoE expert's, which runs only in the layers without the MLP; before,
    # the next-layer fallback named `self.next_layer.gate_proj` inside the MLP, which no layer
    # after the last dense one holds
    assert (site.target.scope, site.insert.cls, site.insert.anchor_call, site.insert.position,
            site.target.weight_expr) == ("same", "TwoPathDecoderLayer", "self.self_attn",
                                         "after", "self.mlp.gate_proj.weight")
    assert site.target.alt_weight_exprs == ()
