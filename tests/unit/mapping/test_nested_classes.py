"""A class defined only inside a module-level block (transformers' xlstm: `if
is_xlstm_available(): <the package's layers> else: class xLSTMLayer ...`): the mapper reads
top-level classes, so `--target` on it is refused, and the refusal says where the class is and
why (not "not defined"). The file below is written for this test in that style."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cannbot_prefetch import api
from cannbot_prefetch.cli import app
from cannbot_prefetch.errors import SourceError

MODEL = '''
import torch
from torch import nn


def is_fast_kernels_available():
    return False


if is_fast_kernels_available():
    from fast_kernels import Block as InnerBlock
else:

    class InnerBlock(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.proj_up = nn.Linear(config.hidden_size, 2 * config.hidden_size, bias=False)
            self.proj_down = nn.Linear(2 * config.hidden_size, config.hidden_size, bias=False)

        def forward(self, x):
            return self.proj_down(torch.relu(self.proj_up(x)))


class OuterModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList([InnerBlock(config) for _ in range(config.num_hidden_layers)])
        self.head = nn.Linear(config.hidden_size, config.hidden_size, bias=False)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)
'''


@pytest.fixture
def project(tmp_path):
    (tmp_path / "modeling_nested.py").write_text(MODEL)
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 16, "num_hidden_layers": 2}))
    return tmp_path


def test_a_class_inside_a_module_level_block_is_refused_truthfully(project):
    with pytest.raises(SourceError) as err:
        api.analyze(None, model_src=str(project / "modeling_nested.py"),
                    model_config=str(project / "config.json"),
                    targets=("InnerBlock.proj_up",), out=str(project / "out"))
    msg = str(err.value)
    assert "class InnerBlock is defined inside a module-level `if/else` block (line 14)" in msg
    assert "modeling_nested.py" in msg and "not defined in the model source" not in msg
    assert not (project / "out").exists()


def test_a_class_defined_nowhere_is_still_not_defined(project):
    with pytest.raises(SourceError, match="class Missing is not defined in the model source"):
        api.analyze(None, model_src=str(project / "modeling_nested.py"),
                    model_config=str(project / "config.json"),
                    targets=("Missing.proj_up",), out=str(project / "out"))


def test_the_cli_says_it_in_one_line_and_exits_2(project):
    res = CliRunner().invoke(app, ["prefetch", "analyze", "--model-src",
                                   str(project / "modeling_nested.py"), "--model-config",
                                   str(project / "config.json"), "--target", "InnerBlock.proj_up",
                                   "--out", str(project / "out"), "--json"])
    assert res.exit_code == 2, res.output
    doc = json.loads(res.stdout)
    assert "module-level `if/else` block" in json.dumps(doc)
    assert "Traceback" not in res.output and not (project / "out").exists()
