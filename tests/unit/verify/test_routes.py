"""verify's switch routes (verify/routes.py) on a small GENERATED model file, rewritten by the
tool: a site in a class with its own `__init__` follows the config and the environment; a site
in a class with none (`Tail`, built as `Tail()` and handed its MLP by the parent) follows the
environment only, so the config route fails, naming that site and how many modules missed it."""

from __future__ import annotations

import sys
import textwrap
import types

import pytest

from cannbot_prefetch.contract.plan import ENV_SWITCH
from cannbot_prefetch.rewrite.engine import rewrite_source
from cannbot_prefetch.rewrite.helper import helper_source
from cannbot_prefetch.verify.routes import route_checks
from cannbot_prefetch.verify.stub import stub_torch_npu

from rewrite.sites import plan, site  # noqa: E402 (tests/unit on sys.path, as test_capture.py)

torch = pytest.importorskip("torch")

# GENERATED for this test (not a real model): two MLPs, one called by a class with no __init__
SRC = textwrap.dedent('''\
    import torch
    from torch import nn


    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.gate_proj = nn.Linear(4, 8)
            self.down_proj = nn.Linear(8, 4)

        def forward(self, x):
            h = torch.relu(self.gate_proj(x))
            return self.down_proj(h)


    class Tail(nn.Module):
        def forward(self, x):
            return self.mlp(x)


    class Model(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.mlp = MLP(config)
            self.tail = Tail()
            self.tail.mlp = MLP(config)

        def forward(self, x):
            return self.tail(self.mlp(x))
    ''')

SITES = (site("down", file="gen_model.py", cls="MLP", attr="down_proj",
              weight="self.down_proj.weight", icls="MLP", anchor="self.down_proj", dep="h"),
         site("tail", file="gen_model.py", cls="MLP", attr="gate_proj",
              weight="self.mlp.gate_proj.weight", icls="Tail", anchor="self.mlp", dep="x"))


class Cfg:
    def __init__(self, **kw):
        self.__dict__.update(kw)


@pytest.fixture()
def model_module(monkeypatch):
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    helper = types.ModuleType("_cannbot_prefetch")
    exec(compile(helper_source("ge_graph", "enable_prefetch"), "helper", "exec"), helper.__dict__)
    monkeypatch.setitem(sys.modules, "_cannbot_prefetch", helper)
    out = rewrite_source(SRC, list(SITES), mode="ge_graph")
    assert sorted(out.applied) == ["down", "tail"]
    mod = types.ModuleType("gen_model")
    exec(compile(out.code, "gen_model.py", "exec"), mod.__dict__)
    return mod


def _checks(mod, with_config: bool):
    def build(**kw):
        return mod.Model(Cfg(**kw)), (torch.ones(1, 4),)

    p = plan(*SITES, mode="ge_graph")
    with stub_torch_npu() as rec:
        return route_checks(p, build, (lambda: build(enable_prefetch=True)) if with_config
                            else None, rec)


def test_environment_reaches_both_sites_the_config_only_one(model_module):
    env, config = _checks(model_module, True)
    assert env.passed and "all 2 site(s) fire" in env.detail
    assert not config.passed
    # MLP is built twice (in Model and handed to Tail); `down` fires in both, `tail` in none
    assert "does not reach: tail (0 of 1)" in config.detail and "down" not in config.detail


def test_user_factory_skips_the_config_route_saying_what_to_set(model_module):
    env, config = _checks(model_module, False)
    assert env.passed and config.skipped and "`enable_prefetch: true`" in config.detail


def test_analyze_notes_the_site_the_config_cannot_reach(tmp_path):
    from cannbot_prefetch.mapping.source import load_model_source
    from cannbot_prefetch.contract.plan import Switch
    from cannbot_prefetch.plan.switch_reach import unreachable_notes

    (tmp_path / "gen_model.py").write_text(SRC)
    ms = load_model_source(tmp_path / "gen_model.py", {})
    notes = unreachable_notes(ms, SITES, Switch())
    assert len(notes) == 1 and notes[0].startswith("site tail: Tail has no __init__ of its own")
    assert f"{ENV_SWITCH}=1" in notes[0]
