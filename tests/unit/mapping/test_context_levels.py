"""A draft model file whose decoder layer's __init__ and forward are a sibling's (vLLM 0.34's
gemma4_dspark.py: its layer subclasses gemma4_mtp.py's, whose MLP is sized through gemma4.py's
`_get_text_config`, a helper with a guard clause). The two files below are GENERATED for this
test in vLLM's style (not vLLM's code); the dims are worked out by hand in the comments."""

from __future__ import annotations

import json

import pytest

from cannbot_prefetch import api
from cannbot_prefetch.errors import SourceError
from cannbot_prefetch.mapping.source import load_model_source
from cannbot_prefetch.plan import load_plan

BASE = '''
import torch
from torch import nn

from vllm.model_executor.layers.linear import MergedColumnParallelLinear, RowParallelLinear


def _width(config):
    """The MLP width: a draft's own key when its config has one."""
    if hasattr(config, "draft_intermediate_size"):
        return config.draft_intermediate_size
    return config.intermediate_size


def _halved(n):
    while n > 1000:
        n = n // 2
    return n


class BaseMLP(nn.Module):
    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.gate_up_proj = MergedColumnParallelLinear(hidden_size, [intermediate_size] * 2,
                                                       bias=False)
        self.down_proj = RowParallelLinear(intermediate_size, hidden_size, bias=False)
        self.odd_proj = RowParallelLinear(_halved(hidden_size), hidden_size, bias=False)

    def forward(self, x):
        h, _ = self.gate_up_proj(x)
        h = h[..., : h.shape[-1] // 2] * h[..., h.shape[-1] // 2:]
        out, _ = self.down_proj(h)
        return out


class BaseLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.mlp = BaseMLP(config.hidden_size, _width(config))

    def forward(self, x):
        x = torch.tanh(x)
        return self.mlp(x)
'''

DRAFT = '''
from torch import nn

from .base import BaseLayer


class DraftLayer(BaseLayer):
    def __init__(self, config):
        super().__init__(config)
        self.scale = 1.0


class DraftForCausalLM(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        config = vllm_config.model_config.hf_config
        self.layers = nn.ModuleList([DraftLayer(config)
                                     for _ in range(config.num_hidden_layers)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
'''

CONFIG = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2}


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("# GENERATED: the project root\n")
    models = tmp_path / "models"
    models.mkdir()
    (models / "base.py").write_text(BASE)
    (models / "draft.py").write_text(DRAFT)
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    return tmp_path


def _dims(project, cfg):
    ms = load_model_source(project / "models" / "draft.py", cfg, "config.json")
    return {k[1]: v for k, v in ms.linears.items() if k[0] == "BaseMLP"}


def test_a_guard_clause_helper_takes_the_branch_the_config_decides(project):
    # no draft key: hasattr is false, the width is intermediate_size 96 -> gate_up [2*96, 64]
    lin = _dims(project, CONFIG)
    assert lin["gate_up_proj"].dims == (192, 64) and lin["down_proj"].dims == (64, 96)
    # the draft's own key 40: the guard holds -> [80, 64], down [64, 40]
    lin = _dims(project, dict(CONFIG, draft_intermediate_size=40))
    assert lin["gate_up_proj"].dims == (80, 64) and lin["down_proj"].dims == (64, 40)


def test_a_helper_with_a_loop_before_its_return_is_still_refused(project):
    # straight-line helpers are evaluated (test_straight_line_helpers.py); a loop is not
    lin = _dims(project, CONFIG)
    assert lin["odd_proj"].dims is None
    assert "_halved: a `while` statement" in lin["odd_proj"].error


def _analyze(project, src, out):
    return api.analyze(None, model_src=str(src), model_config=str(project / "config.json"),
                       tp=2, targets=("DraftLayer.mlp.down_proj",), out=str(out))


def test_a_path_through_context_files_advises_the_folder_then_plans_from_it(project):
    # the file alone: the layer's forward (where the window lies) is base.py's, not editable
    with pytest.raises(SourceError) as err:
        _analyze(project, project / "models" / "draft.py", project / "out1")
    assert "the levels in base.py are read as context and not edited: give --model-src a " \
           "folder that holds it" in str(err.value)
    # the folder, as advised: planned in base.py, down_proj [64, 96 / 2] at TP 2
    res = _analyze(project, project / "models", project / "out2")
    res.save()
    site, = load_plan(project / "out2" / "prefetch_plan.yaml").sites
    assert (site.target.cls, site.target.attr, site.basis.dims) == ("BaseMLP", "down_proj",
                                                                    (64, 48))
