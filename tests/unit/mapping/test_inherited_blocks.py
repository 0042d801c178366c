"""A decoder layer with no `__init__` of its own (vLLM's minicpm3 over minicpm.py): it runs its
base family's `__init__`, which calls helper methods the subclass overrides, so its submodules
and their sizes are the base's statements with the subclass's helper in place; a target whose
whole call path (forward passes included) lies in the base family's file, read as context, is
refused with that reason, and planned when the folder holding both files is the model source.

Fixtures: tests/fixtures/vllm_style/inherited/{base_family,sub_family}.py, written for this
project in vLLM's style. Expected dims worked out by hand from CFG and vLLM's split rules
(column: out / tp; row: in / tp)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cannbot_prefetch import hardware
from cannbot_prefetch.errors import InputError
from cannbot_prefetch.mapping.source import load_model_source
from cannbot_prefetch.plan.build import PlanOptions, build_plan

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "vllm_style" / "inherited"
# hidden 256, 8 heads of 16 (SubAttention's head_dim key), intermediate 512
CFG = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8,
       "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 2,
       "torch_dtype": "bfloat16"}


def _copy(tmp_path):
    for f in ("base_family.py", "sub_family.py"):
        shutil.copy(FIX / f, tmp_path / f)
    return tmp_path / "sub_family.py"


def test_subclass_helper_override_sizes_its_attention(tmp_path):
    ms = load_model_source(_copy(tmp_path), dict(CFG), "config.json", tp=2)
    d = {f"{c}.{a}": lin.dims for (c, a), lin in ms.linears.items()}
    # hidden_size from the base's __init__ (self.hidden_size = config.hidden_size), heads and
    # head_dim from the subclass's _init_attn_block: q 8*16 = 128 out, split over 2 ranks
    assert d["SubAttention.q_proj"] == (64, 256)
    assert d["SubAttention.o_proj"] == (256, 64)
    # the subclass holds the attention its own helper builds, the MLP the base's helper builds
    assert ms.children[("SubDecoderLayer", "self_attn")] == "SubAttention"
    assert ms.children[("SubDecoderLayer", "mlp")] == "BaseMLP"


def test_call_path_wholly_in_a_context_file_is_refused_with_why(tmp_path):
    src = _copy(tmp_path)
    with pytest.raises(InputError) as exc:
        build_plan(None, None, hardware.load("910B3"), src, dict(CFG),
                   PlanOptions(targets=("SubDecoderLayer.mlp.down_proj",), tp=2))
    msg = str(exc.value)
    assert "every level of the call path is in base_family.py" in msg
    assert "give --model-src a folder that holds it" in msg


def test_planned_when_the_folder_is_the_model_source(tmp_path):
    _copy(tmp_path)
    plan, _, _ = build_plan(None, None, hardware.load("910B3"), tmp_path, dict(CFG),
                            PlanOptions(targets=("SubDecoderLayer.mlp.down_proj",
                                                 "SubAttention.o_proj"), tp=2))
    by = {s.target.attr: s for s in plan.sites}
    d = by["down_proj"]       # in the base family's MLP, after its gate_up_proj
    assert (d.insert.cls, d.insert.anchor_call, d.insert.position) == \
        ("BaseMLP", "self.gate_up_proj", "after")
    o = by["o_proj"]          # in the subclass's own attention, after q_proj
    assert (o.insert.cls, o.insert.anchor_call, o.insert.position) == \
        ("SubAttention", "self.q_proj", "after")


# GENERATED for this test in vLLM's style (llama_eagle.py's pattern): the subclass takes its
# base's name, the base imported under an alias, so one name stands for both classes.
_SAME_NAME_BASE = '''
import torch
from torch import nn
from vllm.model_executor.layers.linear import MergedColumnParallelLinear, RowParallelLinear


class TinyLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.up = MergedColumnParallelLinear(config.hidden_size, [config.intermediate_size] * 2)
        self.down = RowParallelLinear(config.intermediate_size, config.hidden_size)

    def forward(self, x):
        return self.down(self.up(x))
'''
_SAME_NAME_SUB = '''
import torch
from torch import nn
from .base_layer import TinyLayer as BaseTinyLayer


class TinyLayer(BaseTinyLayer):
    def __init__(self, config, flag: bool = False):
        super().__init__(config)
        self.flag = flag


class TinyDraft(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList([TinyLayer(config) for _ in range(2)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
'''


def test_a_subclass_named_like_its_base_does_not_loop(tmp_path):
    """vLLM 0.34's llama_eagle.py analyzed as a user would ran for 13 minutes of CPU without an
    answer: `class LlamaDecoderLayer(BaseLlamaDecoderLayer)` with the base imported from
    llama.py under an alias made the base walk of ModelSource.method return to the class it
    started from. The walk now visits each class once: a method no class in the chain defines
    is None, at once (an alarm fails the test instead of hanging it)."""
    import signal
    (tmp_path / "base_layer.py").write_text(_SAME_NAME_BASE)
    (tmp_path / "draft.py").write_text(_SAME_NAME_SUB)

    def _hung(*_):
        raise TimeoutError("the base-class walk did not end")
    old = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(20)
    try:
        ms = load_model_source(tmp_path / "draft.py", dict(CFG), "config.json", tp=2)
        owner = ms.method_owner("TinyLayer", "no_such_method")
        assert ms.method("TinyLayer", "no_such_method") is None
        assert owner == "TinyLayer"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
