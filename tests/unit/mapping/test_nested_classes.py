"""A class defined only inside a module-level block (transformers' xlstm: `if
is_xlstm_available(): <the package's layers> else: class xLSTMLayer ...`): a class directly in
an `if`/`try` branch is mapped like a top-level one, and the plan notes that its prefetch runs
only where that branch is taken; one in another block (`with`) is refused with where it is and
why (not "not defined"). The file below is written for this test in that style."""

from __future__ import annotations

import importlib.util
import json
import sys
import types

import pytest
from typer.testing import CliRunner

from cannbot_prefetch import api
from cannbot_prefetch.cli import app
from cannbot_prefetch.errors import SourceError
from cannbot_prefetch.plan import load_plan

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
            self.act_fn = nn.ReLU()

        def forward(self, x):
            return self.proj_down(self.act_fn(self.proj_up(x)))


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


def test_a_class_in_a_module_level_branch_is_planned_with_a_note(project):
    res = api.analyze(None, model_src=str(project / "modeling_nested.py"),
                      model_config=str(project / "config.json"),
                      targets=("InnerBlock.proj_down",), out=str(project / "out"))
    res.save()
    site, = load_plan(project / "out" / "prefetch_plan.yaml").sites
    # one statement runs proj_up then proj_down (read by hand): the prefetch goes before it,
    # on its input x
    assert (site.target.cls, site.insert.cls, site.insert.anchor_call, site.insert.position,
            site.dependency) == ("InnerBlock", "InnerBlock", "self.proj_down", "before", "x")
    assert site.basis.dims == (16, 32)
    assert any("InnerBlock is defined inside a module-level `if/else` block (line 14): the "
               "prefetch runs only where that branch is the one taken" in n
               for n in site.evidence["notes"])


def test_the_rewritten_branch_class_fires_where_that_branch_runs(project):
    torch = pytest.importorskip("torch")
    from cannbot_prefetch.verify.stub import stub_torch_npu

    api.analyze(None, model_src=str(project / "modeling_nested.py"),
                model_config=str(project / "config.json"),
                targets=("InnerBlock.proj_down",), out=str(project / "out")).save()
    changes = api.apply(project / "out" / "prefetch_plan.yaml", root=project)
    changes.write()
    assert changes.refused == [] and len(changes.applied) == 1
    text = (project / "modeling_nested.py").read_text()
    # written inside the `else:` branch, at the class's own indentation
    assert "\n            _cbp.npu_prefetch(self.enable_prefetch, self.proj_down.weight, x," in text
    sys.path.insert(0, str(project))
    try:
        spec = importlib.util.spec_from_file_location(f"nested_{id(project)}",
                                                      project / "modeling_nested.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(project))
        sys.modules.pop("_cannbot_prefetch", None)
    cfg = types.SimpleNamespace(hidden_size=16, num_hidden_layers=2, enable_prefetch=True)
    model = mod.OuterModel(cfg).eval()
    with torch.no_grad(), stub_torch_npu() as rec:
        model(torch.randn(1, 1, 16))
    seen = [id(c.weight) for c in rec.calls]
    assert [seen.count(id(L.proj_down.weight)) for L in model.layers] == [1, 1]


WITH_BLOCK = MODEL.replace("if is_fast_kernels_available():\n    from fast_kernels import Block "
                           "as InnerBlock\nelse:\n", "with torch.no_grad():\n")


def test_a_class_in_another_kind_of_block_is_refused_truthfully(project):
    assert "with torch.no_grad():" in WITH_BLOCK
    (project / "modeling_nested.py").write_text(WITH_BLOCK)
    with pytest.raises(SourceError) as err:
        api.analyze(None, model_src=str(project / "modeling_nested.py"),
                    model_config=str(project / "config.json"),
                    targets=("InnerBlock.proj_up",), out=str(project / "out"))
    msg = str(err.value)
    assert "class InnerBlock is defined inside a module-level `with` block (line 12) that " \
           "the tool does not map" in msg
    assert "modeling_nested.py" in msg and "not defined in the model source" not in msg
    assert not (project / "out").exists()


def test_a_class_defined_nowhere_is_still_not_defined(project):
    with pytest.raises(SourceError, match="class Missing is not defined in the model source"):
        api.analyze(None, model_src=str(project / "modeling_nested.py"),
                    model_config=str(project / "config.json"),
                    targets=("Missing.proj_up",), out=str(project / "out"))


def test_the_cli_says_it_in_one_line_and_exits_2(project):
    (project / "modeling_nested.py").write_text(WITH_BLOCK)
    res = CliRunner().invoke(app, ["prefetch", "analyze", "--model-src",
                                   str(project / "modeling_nested.py"), "--model-config",
                                   str(project / "config.json"), "--target", "InnerBlock.proj_up",
                                   "--out", str(project / "out"), "--json"])
    assert res.exit_code == 2, res.output
    doc = json.loads(res.stdout)
    assert "module-level `with` block" in json.dumps(doc)
    assert "Traceback" not in res.output and not (project / "out").exists()
