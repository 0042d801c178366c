"""The helper's switch and run-time sizes (docs/rewrite.md "The switch"): the environment wins,
else the nearest config that sets the key (the layer's own, then those of the model
constructors running), else ENABLED; sizes from the config key beside the switch or the
environment, a fraction of the weight's bytes or whole bytes. Values below are worked out by
hand from the tensors' shapes (a float32 [8, 16] weight is 512 bytes)."""

from __future__ import annotations

import sys
import types

import pytest

from cannbot_prefetch.contract.plan import ENV_SIZE, ENV_SWITCH, Switch
from cannbot_prefetch.rewrite.helper import helper_source
from cannbot_prefetch.verify.stub import stub_torch_npu

torch = pytest.importorskip("torch")
nn = torch.nn


def _helper(path="enable_prefetch"):
    mod = types.ModuleType("_cbp_switch_helper")
    exec(compile(helper_source("ge_graph", path), "helper", "exec"), mod.__dict__)
    return mod


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    monkeypatch.delenv(ENV_SIZE, raising=False)


class Cfg:
    """A config object as transformers builds one: attributes, a sub-config."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _model_classes(h):
    """Three module kinds as transformers writes them: a layer built from a sub-config, a layer
    built with no config, and the model the user builds from the top-level config."""
    class FromSub(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.on = h.read_switch(config, "enable_prefetch")

    class NoConfig(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.on = h.read_switch(None, "enable_prefetch")

    class Model(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.a = FromSub(config.text_config)
            self.b = NoConfig(4)

    return FromSub, NoConfig, Model


def test_top_level_config_reaches_sub_config_and_no_config_layers():
    h = _helper()
    FromSub, NoConfig, Model = _model_classes(h)
    on = Model(Cfg(enable_prefetch=True, text_config=Cfg()))
    assert (on.a.on, on.b.on) == (True, True)
    off = Model(Cfg(text_config=Cfg()))
    assert (off.a.on, off.b.on) == (False, False)
    # the nearest config that sets it wins: a sub-config's own False over the top's True
    mixed = Model(Cfg(enable_prefetch=True, text_config=Cfg(enable_prefetch=False)))
    assert (mixed.a.on, mixed.b.on) == (False, True)
    # built on their own, outside any model: only their own config (none here) counts
    assert NoConfig(4).on is False and FromSub(Cfg(enable_prefetch=True)).on is True


def test_environment_switch_wins_both_ways(monkeypatch):
    h = _helper()
    _, _, Model = _model_classes(h)
    monkeypatch.setenv(ENV_SWITCH, "1")
    m = Model(Cfg(text_config=Cfg()))
    assert (m.a.on, m.b.on) == (True, True) and h.enabled() is True
    monkeypatch.setenv(ENV_SWITCH, "0")
    m = Model(Cfg(enable_prefetch=True, text_config=Cfg()))
    assert (m.a.on, m.b.on) == (False, False) and h.enabled() is False
    monkeypatch.setenv(ENV_SWITCH, "maybe")
    with pytest.raises(ValueError, match=f"{ENV_SWITCH}='maybe': use 1"):
        Model(Cfg(text_config=Cfg()))


def test_dotted_switch_path_in_a_runner_dict():
    h = _helper("custom_params.enable_prefetch")
    assert h.read_switch({"custom_params": {"enable_prefetch": True}},
                         "custom_params.enable_prefetch") is True
    assert Switch(config_path="custom_params.enable_prefetch").size_path == \
        "custom_params.prefetch_size"


def _sizes_seen(h, weight, *sites):
    with stub_torch_npu() as rec:
        for site in sites:
            h.npu_prefetch(True, weight, weight, 100, site=site)
    return [c.max_size for c in rec.calls]


def test_run_time_sizes_from_config_then_environment(monkeypatch):
    h = _helper()
    w = torch.zeros(8, 16)                    # 8 * 16 * 4 B = 512 B
    assert h.read_switch(Cfg(enable_prefetch=True), "enable_prefetch")
    assert _sizes_seen(h, w, "a", "b") == [100, 100]          # nothing given: the planned size
    h.read_switch(Cfg(enable_prefetch=True, prefetch_size={"a": 0.5, "b": 64}), "enable_prefetch")
    assert _sizes_seen(h, w, "a", "b", "c") == [256, 64, 100]  # 0.5 x 512; bytes; planned
    h.read_switch(Cfg(enable_prefetch=True, prefetch_size=0.7), "enable_prefetch")
    assert _sizes_seen(h, w, "a", None) == [358, 100]          # int(0.7 x 512) = 358
    monkeypatch.setenv(ENV_SIZE, "0.1, b=1.0")
    h.read_switch(Cfg(enable_prefetch=True, prefetch_size=0.7), "enable_prefetch")
    assert _sizes_seen(h, w, "a", "b") == [51, 512]            # env wins: int(0.1 x 512) = 51


@pytest.mark.parametrize("value, message", [(0.0, r"in \(0, 1\]"), (1.5, r"in \(0, 1\]"),
                                            (0, "at least 1"), ("big", "not a number"),
                                            (True, "not a number")])
def test_bad_sizes_name_the_key(value, message):
    h = _helper()
    with pytest.raises(ValueError, match=f"prefetch_size.a: .*{message}"):
        h.read_switch(Cfg(enable_prefetch=True, prefetch_size={"a": value}), "enable_prefetch")


def test_size_is_a_constant_under_torch_compile(monkeypatch):
    """The run-time size is plain Python on the weight's static shape: the compiled graph holds
    the prefetch with the size as a constant, no graph break."""
    h = _helper()
    monkeypatch.setitem(sys.modules, h.__name__, h)     # dynamo imports what it traces into
    h.read_switch(Cfg(enable_prefetch=True, prefetch_size={"s": 0.5}), "enable_prefetch")
    w = torch.zeros(8, 16)

    def f(x):
        h.npu_prefetch(True, w, x, 100, site="s")
        return x + 1

    with stub_torch_npu() as rec:
        out = torch.compile(f, backend="eager", fullgraph=True)(torch.ones(2))
    assert torch.equal(out, torch.full((2,), 2.0))
    assert [c.max_size for c in rec.calls] == [256]
