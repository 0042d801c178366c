"""A file that defines a class of the same name as the one it subclasses (vLLM 0.34's
llama_eagle.py: `from .llama import LlamaDecoderLayer as BaseLlamaDecoderLayer` then
`class LlamaDecoderLayer(BaseLlamaDecoderLayer)`): the source is read by class name, so the
refusal must say why the base's submodule is not seen and what to do, not only "no submodule".
The two files are GENERATED here in vLLM's style."""

from __future__ import annotations

import json
import textwrap

import pytest

from cannbot_prefetch import api
from cannbot_prefetch.errors import SourceError

BASE = textwrap.dedent('''
    # GENERATED for tests/unit/mapping/test_shadowed_class.py (vLLM style)
    from torch import nn


    class MLP(nn.Module):
        def __init__(self, hidden_size, intermediate_size):
            super().__init__()
            self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
            self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

        def forward(self, x):
            h = self.up_proj(x)
            h = h * 2
            out = self.down_proj(h)
            return out


    class DecoderLayer(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.mlp = MLP(config.hidden_size, config.intermediate_size)

        def forward(self, x):
            h = self.mlp(x)
            return x + h
''')

DRAFT = textwrap.dedent('''
    # GENERATED for tests/unit/mapping/test_shadowed_class.py (vLLM style)
    from torch import nn

    from .base import DecoderLayer as BaseDecoderLayer


    class {name}(BaseDecoderLayer):
        pass


    class Model(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.layers = nn.ModuleList([{name}(config) for _ in range(2)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x
''')


def _project(tmp_path, name):
    pkg = tmp_path / "models"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text(BASE)
    (pkg / "draft.py").write_text(DRAFT.format(name=name))
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"hidden_size": 64, "intermediate_size": 128,
                               "num_hidden_layers": 2}))
    return pkg, cfg


def test_a_class_named_as_its_base_is_refused_with_the_reason(tmp_path):
    pkg, cfg = _project(tmp_path, "DecoderLayer")
    with pytest.raises(SourceError) as err:      # the draft's file named, as a user would
        api.analyze(None, model_src=str(pkg / "draft.py"), model_config=str(cfg),
                    targets=("DecoderLayer.mlp.down_proj",), out=str(tmp_path / "out"))
    msg = str(err.value)
    assert "draft.py defines its own DecoderLayer and imports .base's as BaseDecoderLayer" in msg
    assert "rename one of them in a copy" in msg


def test_renamed_as_advised_it_plans(tmp_path):
    pkg, cfg = _project(tmp_path, "DraftDecoderLayer")
    res = api.analyze(None, model_src=str(pkg), model_config=str(cfg),
                      targets=("DraftDecoderLayer.mlp.down_proj",), out=str(tmp_path / "out"))
    assert [(s.target.cls, s.target.attr) for s in res.plan.sites] == [("MLP", "down_proj")]
