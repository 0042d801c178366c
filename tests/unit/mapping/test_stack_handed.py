"""Decoder stacks a serving engine's file builds with make_layers and runs in ways the walk must
follow: slices handed to sub-decoders through their constructors (vLLM 0.34's gemma3n: its
`Gemma3nSelfDecoder(decoder_layers=self.layers[:k])`), a loop over `islice(enumerate(...))`
(cohere_compass), and a stack whose owner a wrapper reaches by a path the walk does not follow
(its owner is then a root after the others, so the layers are still placed where they run).
Fixture: tests/fixtures/vllm_style/stack_handed_vllm.py, GENERATED for these tests in vLLM's
style. Each of the three failed before the change that it pins ("never run" / no list)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cannbot_prefetch.mapping.flatten import flatten, roots
from cannbot_prefetch.mapping.manual import parse_target
from cannbot_prefetch.mapping.source import load_model_source

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "vllm_style" / "stack_handed_vllm.py"
CFG = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2}


@pytest.fixture
def ms():
    return load_model_source(FIX, CFG, "config.json", tp=2)


def _linears(ms, root):
    return [(e.owner, e.attr) for e in flatten(ms, root) if e.kind == "linear"]


def test_a_slice_of_the_stack_handed_to_a_constructor_is_that_stack(ms):
    assert ms.children[("HalfDecoder", "decoder_layers")] == "HandedLayer"
    assert ("HalfDecoder", "decoder_layers") in ms.list_children
    # both halves run the layer's MLP: gate_up then down, once per half
    assert _linears(ms, "HandedModel") == [("HandedMLP", "gate_up_proj"),
                                           ("HandedMLP", "down_proj")] * 2


def test_islice_over_enumerate_binds_the_layer(ms):
    events = [e for e in flatten(ms, "SliceEnumModel") if e.kind == "linear"]
    assert [(e.owner, e.attr) for e in events] == [("HandedMLP", "gate_up_proj"),
                                                   ("HandedMLP", "down_proj")]
    assert all([h.cls for h in e.path][:2] == ["SliceEnumModel", "SliceLayer"] for e in events)


def test_a_stack_owner_no_root_reaches_is_a_late_root(ms):
    found = roots(ms)
    # the wrapper's `getattr(self.holder, "model")(...)` is not followed: LateTextModel, the
    # owner of a make_layers stack, comes after the model classes no other class builds
    assert found[-1] == "LateTextModel" and "LateWrapper" in found
    assert "LateTextModel" not in found[:-1]
    t = parse_target("LateLayer.mlp.down_proj", ms, found)      # the calls through LateLayer
    assert (t.cls, t.attr) == ("HandedMLP", "down_proj")
    assert [h.cls for h in t.events[t.t_idx].path][:2] == ["LateTextModel", "LateLayer"]
