"""Issue 30 part 1: a dependency must be a tensor. On the REAL transformers modeling_llama.py
(copied at test time) the LM head's site after `outputs = self.model(...)` named `outputs`, a
BaseModelOutputWithPast, and eager decode raised with the switch on. Small hand-written
sources hold one pattern each."""

from __future__ import annotations

import json
import textwrap

import pytest

from cannbot_prefetch import api
from cannbot_prefetch.legality.kinds import annotation_kind
from cannbot_prefetch.plan import load_plan

from .sites import legal, site


def _lm_head(dep: str, anchor="self.model", position="after"):
    return site("lm", cls="LlamaForCausalLM", attr="lm_head", weight="self.lm_head.weight",
                icls="LlamaForCausalLM", anchor=anchor, position=position, dep=dep)


def test_model_output_object_is_refused_and_its_field_named(modeling):
    code = modeling("llama").read_text()
    why = legal(code, _lm_head("outputs"))
    assert why is not None and "not a tensor" in why and "BaseModelOutputWithPast" in why
    assert "outputs.last_hidden_state" in why           # what the method reads from it
    assert legal(code, _lm_head("outputs.last_hidden_state")) is None
    assert legal(code, _lm_head("hidden_states", "self.lm_head", "before")) is None


def test_unannotated_output_is_known_by_the_callee_forward(modeling):
    """Without the caller's annotation, LlamaModel.forward's `-> BaseModelOutputWithPast` says it."""
    code = modeling("llama").read_text()
    bare = code.replace("outputs: BaseModelOutputWithPast = self.model(", "outputs = self.model(")
    assert bare != code
    why = legal(bare, _lm_head("outputs"))
    assert why is not None and "LlamaModel.forward -> BaseModelOutputWithPast" in why


SRC = textwrap.dedent('''\
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.up = nn.Linear(4, 8)
            self.down = nn.Linear(8, 4)

        def forward(self, x, cache: Cache, y: torch.Tensor, z: "Optional[torch.FloatTensor]"):
            pair = (x, y)
            box = Output(x)
            h = self.up(x)
            h = h + y + z + pair[0] + box.a + cache.k
            return self.down(h)
''')


@pytest.mark.parametrize("dep, why", [
    ("pair", "a tuple literal"), ("box", "an object built by Output(...)"),
    ("cache", "parameter 'cache' is annotated Cache"),
    ("y", None), ("z", None), ("x", None)])
def test_kinds_on_small_patterns(dep, why):
    s = site("d", cls="Block", attr="down", weight="self.down.weight", icls="Block",
             anchor="self.up", position="before", dep=dep)
    got = legal(SRC, s)
    if why is None:
        assert got is None
    else:
        assert got is not None and why in got and "not a tensor" in got


@pytest.mark.parametrize("text, kind", [
    ("torch.Tensor", "tensor"), ("torch.Tensor | None", "tensor"),
    ("Optional[torch.FloatTensor]", "tensor"), ("tuple[torch.Tensor, torch.Tensor]", "other"),
    ("BaseModelOutputWithPast", "other"), ("Cache | None", "other"), ("int", "other")])
def test_annotation_kind(text, kind):
    assert annotation_kind(text) == kind


def test_analyze_depends_on_the_tensor_field(modeling, tmp_path):
    """Manual mode, window = the final norm (inside self.model): the site goes after
    `self.model(...)` and depends on `outputs.last_hidden_state`, not on `outputs`."""
    src = modeling("llama")
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"vocab_size": 128, "hidden_size": 64, "intermediate_size": 128,
                               "num_hidden_layers": 2, "num_attention_heads": 4,
                               "num_key_value_heads": 2, "head_dim": 16}))
    res = api.analyze(None, model_src=str(src), model_config=str(cfg),
                      targets=("LlamaForCausalLM.lm_head",), window=("LlamaModel.norm",),
                      out=str(tmp_path / "out"))
    res.save()
    plan = load_plan(tmp_path / "out" / "prefetch_plan.yaml")
    (s,) = plan.sites
    assert (s.insert.anchor_call, s.insert.position) == ("self.model", "after")
    assert s.dependency == "outputs.last_hidden_state"


def test_unannotated_forward_returning_a_tuple_is_not_a_tensor(modeling):
    """REAL modeling_roformer.py: `self_outputs = self.self(...)`, whose forward has no return
    annotation and `return context_layer, attention_probs`; the sweep planned `self_outputs` as
    RoFormerSelfOutput.dense's dependency and the switch-on decode raised ("found type 'tuple'")."""
    code = modeling("roformer").read_text()
    s = site("r", cls="RoFormerSelfOutput", attr="dense", weight="self.output.dense.weight",
             icls="RoFormerAttention", anchor="self.self", position="after", dep="self_outputs")
    why = legal(code, s)
    assert why is not None and "not a tensor" in why and "RoFormerSelfAttention.forward -> tuple" in why
