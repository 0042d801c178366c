"""A layer stack built by a serving engine's list builder and run through a method other than
`forward` (vLLM 0.34's alice_ai.py: `self.start_layer, self.end_layer, self.layers =
make_layers(...)`, then `for layer in islice(self.layers, ...): ... = layer.forward_attn_res(...)`),
and a decoder layer whose base class lies in a sibling file that imports its MLP from a third
(qwen3_dflash2.py -> qwen3_dflash.py -> qwen2.py).

Fixture: tests/fixtures/vllm_style/stack_loop_vllm.py and the three files below, GENERATED for
these tests in vLLM's style (not copied). Expected dims are worked out by hand: hidden 64,
intermediate 128, TP 2 (row: input / 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cannbot_prefetch import api
from cannbot_prefetch.errors import SourceError
from cannbot_prefetch.mapping.flatten import flatten
from cannbot_prefetch.mapping.manual import parse_target
from cannbot_prefetch.mapping.source import load_model_source
from cannbot_prefetch.plan import load_plan

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "vllm_style" / "stack_loop_vllm.py"
CFG = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2}


@pytest.fixture
def ms():
    return load_model_source(FIX, CFG, "config.json", tp=2)


def test_make_layers_builds_a_list_of_the_factory_class(ms):
    # a function defined in __init__ (positional) and a lambda (keyword `layer_fn=`)
    for model in ("StackModel", "LambdaStackModel"):
        assert ms.children[(model, "layers")] == "StackBlock"
        assert (model, "layers") in ms.list_children


@pytest.mark.parametrize("root", ["StackModel", "LambdaStackModel"])
def test_the_loop_over_islice_runs_the_layer_method_and_what_it_calls(ms, root):
    linears = [(e.owner, e.attr) for e in flatten(ms, root) if e.kind == "linear"]
    # forward_with_state -> self._mix -> mix_proj, then self.mlp -> gate_up, down; spare_proj
    # lives only in debug_dump, which nothing calls
    assert linears == [("StackBlock", "mix_proj"), ("StackMLP", "gate_up_proj"),
                       ("StackMLP", "down_proj")]


def test_a_method_nothing_calls_stays_never_run(ms):
    from cannbot_prefetch.mapping.manual import Unplaceable

    with pytest.raises(Unplaceable, match="StackBlock.spare_proj is never run"):
        parse_target("StackBlock.spare_proj", ms, ["LambdaStackModel", "StackModel"])


def test_analyze_places_the_site_where_the_layer_method_runs_it(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CFG))
    res = api.analyze(None, model_src=str(FIX), model_config=str(tmp_path / "config.json"),
                      targets=("StackMLP.down_proj", "StackBlock.mix_proj",
                               "StackBlock.spare_proj"), tp=2, out=str(tmp_path / "out"))
    res.save()
    sites = {s.target.attr: s for s in load_plan(tmp_path / "out" / "prefetch_plan.yaml").sites}
    assert sites["down_proj"].basis.dims == (64, 64)         # row: 128 / 2 in, 64 out
    assert (sites["down_proj"].insert.cls, sites["down_proj"].insert.method) == \
        ("StackMLP", "forward")
    # mix_proj runs in `_mix`, which only forward_with_state calls: the site goes there
    assert sites["mix_proj"].basis.dims == (64, 32)
    assert (sites["mix_proj"].insert.cls, sites["mix_proj"].insert.method) == \
        ("StackBlock", "_mix")
    rej, = res.to_json()["rejections"]
    assert rej["site"] == "StackBlock.spare_proj" and "never run" in rej["reason"]


# ----------------------------------------------------------- a base class in a sibling file

MLP_FAMILY = '''
# GENERATED for tests/unit/mapping/test_layer_stack_calls.py in vLLM's style
import torch
from torch import nn

from vllm.model_executor.layers.linear import MergedColumnParallelLinear, RowParallelLinear


class FamMLP(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, prefix: str = "") -> None:
        super().__init__()
        self.gate_up_proj = MergedColumnParallelLinear(
            input_size=hidden_size, output_sizes=[intermediate_size] * 2, bias=False)
        self.down_proj = RowParallelLinear(
            input_size=intermediate_size, output_size=hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_up, _ = self.gate_up_proj(x)
        out, _ = self.down_proj(torch.sigmoid(gate_up[..., : gate_up.shape[-1] // 2]))
        return out
'''

BASE = '''
# GENERATED for tests/unit/mapping/test_layer_stack_calls.py in vLLM's style
import torch
from torch import nn

from vllm.config import VllmConfig
from vllm.model_executor.layers.linear import RowParallelLinear

from .fam_mlp import FamMLP as BaseMLP


class BaseLayer(nn.Module):
    def __init__(self, vllm_config: VllmConfig, prefix: str = "") -> None:
        super().__init__()
        config = vllm_config.model_config.hf_config
        self.o_proj = RowParallelLinear(
            input_size=config.hidden_size, output_size=config.hidden_size, bias=False)
        self.mlp = BaseMLP(config.hidden_size, config.intermediate_size, prefix=f"{prefix}.mlp")

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        out, _ = self.o_proj(hidden_states)
        return hidden_states + self.mlp(out)
'''

SUB = '''
# GENERATED for tests/unit/mapping/test_layer_stack_calls.py in vLLM's style
import torch
from torch import nn

from vllm.config import VllmConfig

from .base_layer import BaseLayer


class SubLayer(BaseLayer):
    def __init__(self, vllm_config: VllmConfig, prefix: str = "") -> None:
        super().__init__(vllm_config, prefix=prefix)
        self.scale = 2.0

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        out, _ = self.o_proj(hidden_states * self.scale)
        return hidden_states + self.mlp(out)


class SubModel(nn.Module):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = "") -> None:
        super().__init__()
        config = vllm_config.model_config.hf_config
        self.layers = nn.ModuleList(
            [SubLayer(vllm_config, prefix=f"layers.{i}") for i in range(config.num_hidden_layers)])

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            hidden_states = layer(hidden_states)
        return hidden_states
'''


@pytest.fixture
def family(tmp_path):
    (tmp_path / "fam_mlp.py").write_text(MLP_FAMILY)
    (tmp_path / "base_layer.py").write_text(BASE)
    (tmp_path / "sub_layer.py").write_text(SUB)
    (tmp_path / "config.json").write_text(json.dumps(CFG))
    return tmp_path


def test_an_mlp_built_by_a_sibling_base_from_a_third_file_is_planned(family):
    res = api.analyze(None, model_src=str(family / "sub_layer.py"),
                      model_config=str(family / "config.json"), tp=2,
                      targets=("SubLayer.mlp.down_proj",), out=str(family / "out"))
    res.save()
    site, = load_plan(family / "out" / "prefetch_plan.yaml").sites
    assert (site.target.cls, site.target.attr, site.basis.dims) == \
        ("SubLayer", "mlp.down_proj", (64, 64))               # row: 128 / 2 in, 64 out
    # the subclass's own forward runs the inherited MLP: the prefetch follows its o_proj there
    assert (site.insert.cls, site.insert.method, site.insert.anchor_call,
            site.insert.position) == ("SubLayer", "forward", "self.o_proj", "after")


def test_without_the_third_file_the_refusal_names_the_class_and_its_import(family):
    (family / "fam_mlp.py").unlink()
    ms = load_model_source(family / "sub_layer.py", CFG, "config.json", tp=2)
    with pytest.raises(SourceError) as err:
        parse_target("SubLayer.mlp.down_proj", ms, ["SubModel"])
    assert "SubLayer has no submodule 'mlp'" in str(err.value)
    assert "BaseLayer builds it as BaseMLP, a class no file read defines (imported from " \
        ".fam_mlp in base_layer.py: that file was not found)" in str(err.value)
