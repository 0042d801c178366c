"""Weights the mapper finds where transformers' zamba and zamba2 build them (issue 37, the families the
corpus sweep could not build before): a linear handed to a layer's constructor
(`ZambaHybridLayer(shared_transf, linear, mamba)` with `linear = nn.Linear(...)` in the
model's `__init__`), and a per-head projection Parameter built by arithmetic on a factory
(`nn.Parameter((torch.zeros(heads, head_dim, rank) - 0.5) * 2 / rank**0.5)`). REAL source
(transformers' modeling_zamba.py copied at test time, its default config class); the
negative cases on a GENERATED file written by hand in the same style."""

from __future__ import annotations

import math

import pytest

from cannbot_prefetch import api
from cannbot_prefetch.mapping.source import load_model_source
from cannbot_prefetch.plan import load_plan

transformers = pytest.importorskip("transformers")


def _plan(tmp_path, src, cfg, target):
    path = tmp_path / "config.json"
    path.write_text(cfg.to_json_string(use_diff=False))
    res = api.analyze(None, model_src=str(src), model_config=str(path), targets=(target,),
                      out=str(tmp_path / "out"))
    res.save()
    return load_plan(tmp_path / "out" / "prefetch_plan.yaml").sites[0]


@pytest.mark.parametrize("family, config_cls, target", [
    # built in ZambaModel.__init__'s loop
    ("zamba", "ZambaConfig", "ZambaHybridLayer.linear"),
    # built in Zamba2Model.get_layers(), a helper whose list __init__ assigns to self.layers
    ("zamba2", "Zamba2Config", "Zamba2HybridLayer.linear"),
])
def test_a_linear_built_by_the_caller_and_passed_in(modeling, tmp_path, family, config_cls,
                                                   target):
    """[out, in] = [hidden, hidden], as both files write
    `nn.Linear(self.config.hidden_size, self.config.hidden_size, bias=False)` (default configs:
    hidden_size 3712 and 2560)."""
    cfg = getattr(transformers, config_cls)()
    site = _plan(tmp_path, modeling(family), cfg, target)
    assert list(site.basis.dims) == [cfg.hidden_size, cfg.hidden_size]


def test_a_parameter_scaled_after_its_factory(modeling, tmp_path):
    """dt_proj_weight [n_mamba_heads, mamba_head_dim, time_step_rank] worked out from the
    config as the file's __init__ defines them: intermediate = mamba_expand * hidden_size,
    head_dim = intermediate / n_mamba_heads, rank = ceil(hidden_size / 16) (the default
    config's mamba_dt_rank "auto")."""
    cfg = transformers.ZambaConfig()
    heads = cfg.n_mamba_heads
    rank = math.ceil(cfg.hidden_size / 16) if cfg.mamba_dt_rank == "auto" else cfg.mamba_dt_rank
    site = _plan(tmp_path, modeling("zamba"), cfg, "ZambaMambaMixer.dt_proj_weight")
    assert list(site.basis.dims) == [heads, cfg.mamba_expand * cfg.hidden_size // heads, rank]


# GENERATED for this test (transformers' style, not copied): what is not a linear-like weight
_SRC = '''\
import torch
from torch import nn


class Mixer(nn.Module):
    def __init__(self, config, proj, scale=None):
        super().__init__()
        self.rank = config.rank
        self.shifted = nn.Parameter(-(torch.ones(config.heads, 8, self.rank) + 1.5))
        mask = torch.ones(8, self.rank)
        self.broadcast = nn.Parameter(torch.zeros(config.heads, 8, self.rank) * mask)
        self.called = nn.Parameter(torch.log(torch.ones(config.heads, 8, self.rank)))
        self.proj = proj
        self.scale = scale


class Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        proj = nn.Linear(config.hidden, 2 * config.hidden)
        other = nn.Linear(config.hidden, 3)
        other = nn.Linear(config.hidden, 4)
        self.mixers = nn.ModuleList([Mixer(config, proj, other) for _ in range(2)])
'''


def test_what_the_rules_take_and_leave(tmp_path):
    """Taken: a negated, shifted factory ([heads, 8, rank] = [3, 8, 5]) and a linear the caller
    builds once ([2 * hidden, hidden] = [12, 6]). Left: a factory times another tensor (its
    shape is the broadcast's, not read), a factory under a function call, and a local the
    caller assigns twice (which one is passed is not decided statically)."""
    (tmp_path / "m.py").write_text(_SRC)
    ms = load_model_source(tmp_path / "m.py", {"rank": 5, "heads": 3, "hidden": 6})
    got = {attr: lin.dims for (cls, attr), lin in ms.linears.items() if cls == "Mixer"}
    assert got.get("shifted") == (3, 8, 5)
    assert got.get("proj") == (12, 6)
    for attr in ("broadcast", "called", "scale"):
        assert got.get(attr) is None, (attr, got)
