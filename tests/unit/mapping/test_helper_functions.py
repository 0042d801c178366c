"""Plain helper functions in a shape (transformers' xlstm: `self.up_proj_dim =
round_up_to_next_multiple_of(config.hidden_size * config.ffn_proj_factor, ...)`, the helper
imported from `.configuration_xlstm` inside a module-level `else:`). The two files below are
GENERATED for this test in transformers' style (a modeling file and its configuration sibling);
the expected dims are worked out by hand in the comments. The last test reads the REAL installed
xlstm file and compares with the layer torch builds from it."""

from __future__ import annotations

import json
import math

import pytest

from cannbot_prefetch import api
from cannbot_prefetch.mapping.source import load_model_source
from cannbot_prefetch.plan import load_plan

CONFIGURATION = '''
def is_fast_kernels_available():
    return False


if is_fast_kernels_available():
    from fast_kernels.utils import round_up
else:
    from typing import Literal

    KernelType = Literal["native"]

    def round_up(x: int, multiple_of: int = 64) -> int:
        """Rounds x up to the next multiple of multiple_of."""
        return int(((x + multiple_of - 1) // multiple_of) * multiple_of)


class TinyConfig:
    model_type = "tiny"
'''

MODELING = '''
import math

import torch
from torch import nn

from .configuration_tiny import TinyConfig


def is_fast_kernels_available():
    return False


if is_fast_kernels_available():
    from fast_kernels.utils import round_up
else:
    from .configuration_tiny import round_up


def ffn_width(config, factor=2):
    return round_up(config.hidden_size * factor, multiple_of=config.ffn_multiple_of)


def head_width(config):
    """A loop: not straight-line code."""
    width = 0
    for _ in range(config.num_attention_heads):
        width = width + config.hidden_size // config.num_attention_heads
    return width


def forever(n):
    return forever(n)


class TinyMLP(nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        self.up_dim = ffn_width(config, config.ffn_proj_factor)
        self.gate_dim = ffn_width(config)
        self.up_proj = nn.Linear(config.hidden_size, self.up_dim, bias=False)
        self.gate_proj = nn.Linear(config.hidden_size, self.gate_dim, bias=False)
        self.down_proj = nn.Linear(self.up_dim, config.hidden_size, bias=False)
        self.loop_proj = nn.Linear(forever(config.hidden_size), config.hidden_size, bias=False)
        self.side_proj = nn.Linear(round_up(math.ceil(config.hidden_size / 3), 8),
                                   config.hidden_size, bias=False)

    def forward(self, x):
        h = self.up_proj(x) * self.gate_proj(x)[..., : self.up_dim]
        return self.down_proj(h)


class TinyAttention(nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        self.o_proj = nn.Linear(head_width(config), config.hidden_size, bias=False)

    def forward(self, x):
        return self.o_proj(x)


class TinyLayer(nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        self.self_attn = TinyAttention(config)
        self.mlp = TinyMLP(config)

    def forward(self, x):
        return self.mlp(self.self_attn(x))


class TinyForCausalLM(nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        self.layers = nn.ModuleList([TinyLayer(config) for _ in range(config.num_hidden_layers)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
'''

# hidden 40, factor 2.667 (xlstm's default ffn_proj_factor), multiple 64
CONFIG = {"model_type": "tiny", "hidden_size": 40, "num_attention_heads": 4,
          "ffn_proj_factor": 2.667, "ffn_multiple_of": 64, "num_hidden_layers": 2}


@pytest.fixture
def project(tmp_path):
    (tmp_path / "configuration_tiny.py").write_text(CONFIGURATION)
    (tmp_path / "modeling_tiny.py").write_text(MODELING)
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    return tmp_path


def _linears(project, cfg=CONFIG):
    ms = load_model_source(project / "modeling_tiny.py", cfg, "config.json")
    return {k[1]: v for k, v in ms.linears.items() if k[0] in ("TinyMLP", "TinyAttention")}


def test_a_sibling_helper_through_a_local_one_with_defaults_and_keywords(project):
    lin = _linears(project)
    # up: 40 * 2.667 = 106.68 -> next multiple of 64 = 128; gate: factor 2 (default) -> 80 -> 128
    assert lin["up_proj"].dims == (128, 40)
    assert lin["gate_proj"].dims == (128, 40)
    assert lin["down_proj"].dims == (40, 128)
    # multiple_of passed by position: ceil(40 / 3) = 14 -> multiple of 8 = 16 (in_features)
    assert lin["side_proj"].dims == (40, 16)


def test_other_sizes_follow_the_config(project):
    cfg = dict(CONFIG, hidden_size=64, ffn_multiple_of=96)
    lin = _linears(project, cfg)
    # 64 * 2.667 = 170.688 -> multiple of 96 = 192; factor 2: 128 -> 192
    assert lin["up_proj"].dims == (192, 64) and lin["gate_proj"].dims == (192, 64)
    # ceil(64 / 3) = 22 -> multiple of 8 = 24
    assert lin["side_proj"].dims == (64, 24)


def test_a_helper_that_is_not_straight_line_is_refused_with_its_name(project):
    lin = _linears(project)
    assert lin["o_proj"].dims is None
    assert "head_width: a `for` statement" in lin["o_proj"].error


def test_a_recursive_helper_stops_at_the_depth_bound(project):
    lin = _linears(project)
    assert lin["loop_proj"].dims is None
    assert "(forever: helpers nested deeper than 4)" in lin["loop_proj"].error


def test_a_sibling_that_is_not_there_is_refused_not_guessed(project):
    (project / "configuration_tiny.py").unlink()
    lin = _linears(project)
    assert lin["up_proj"].dims is None and lin["down_proj"].dims is None
    assert "round_up: from .configuration_tiny (not read)" in lin["up_proj"].error


def test_analyze_plans_the_helper_shape_and_names_the_refusal(project):
    res = api.analyze(None, model_src=str(project / "modeling_tiny.py"),
                      model_config=str(project / "config.json"),
                      targets=("TinyMLP.down_proj", "TinyAttention.o_proj"),
                      out=str(project / "out"))
    res.save()
    doc = res.to_json()
    sites = load_plan(project / "out" / "prefetch_plan.yaml").sites
    assert [(s.target.attr, s.basis.dims) for s in sites] == [("down_proj", (40, 128))]
    rej, = doc["rejections"]
    assert rej["reason_code"] == "shape_unknown" and "head_width" in rej["reason"]


def test_the_real_xlstm_feed_forward_matches_what_torch_builds():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.models.xlstm import modeling_xlstm
    from transformers import xLSTMConfig

    cfg = xLSTMConfig(hidden_size=64, num_heads=4, num_hidden_layers=2, vocab_size=100,
                      ffn_proj_factor=2.667, ffn_round_up_to_multiple_of=64)
    built = modeling_xlstm.xLSTMFeedForward(cfg)
    ms = load_model_source(modeling_xlstm.__file__, cfg.to_dict(), "config.json")
    for attr in ("proj_up_gate", "proj_up", "proj_down"):
        assert ms.linears[("xLSTMFeedForward", attr)].dims == \
            tuple(getattr(built, attr).weight.shape), attr
    # and by hand: 64 * 2.667 = 170.688 -> 192
    assert math.ceil(64 * 2.667 / 64) * 64 == 192 == built.proj_down.weight.shape[1]
