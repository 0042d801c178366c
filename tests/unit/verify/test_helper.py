"""The generated helper module: off means nothing (no torch_npu import), on means the right call."""

from __future__ import annotations

import sys
import types

import pytest

from cannbot_prefetch.rewrite.helper import helper_source
from cannbot_prefetch.verify.stub import stub_torch_npu

torch = pytest.importorskip("torch")


def _helper(mode="eager"):
    mod = types.ModuleType("_cbp_test_helper")
    exec(compile(helper_source(mode, "custom_params.enable_prefetch"), "helper", "exec"), mod.__dict__)
    return mod


def test_off_does_not_import_torch_npu():
    h = _helper()
    assert "torch_npu" not in sys.modules
    assert h.npu_prefetch(False, torch.zeros(2), torch.zeros(2), 8) is None
    h.join(False)
    assert "torch_npu" not in sys.modules


@pytest.mark.parametrize("mode", ["eager", "npugraph_ex", "ge_graph"])
def test_on_calls_without_offset_and_side_stream(mode):
    h = _helper(mode)
    w, d = torch.zeros(4, 4), torch.zeros(1, 4)
    with stub_torch_npu() as rec:
        h.npu_prefetch(True, w, d, 16)
        h.npu_prefetch(True, w, d, 16, 8)
        h.join(True)
    assert [c.nargs for c in rec.calls] == [3, 4]
    assert rec.calls[0].weight is w and rec.calls[0].dependency is d
    assert rec.calls[0].stream == ("current" if mode == "ge_graph" else "side")
    assert "torch_npu" not in sys.modules and not hasattr(torch, "npu")


def test_ge_graph_refuses_none_dependency():
    h = _helper("ge_graph")
    with stub_torch_npu(), pytest.raises(ValueError, match="dependency"):
        h.npu_prefetch(True, torch.zeros(2), None, 8)


def test_token_guard_skips_prefill():
    h = _helper()
    with stub_torch_npu() as rec:
        h.npu_prefetch(True, torch.zeros(2), torch.zeros(1, 100, 8), 8, max_tokens=64)
        h.npu_prefetch(True, torch.zeros(2), torch.zeros(1, 4, 8), 8, max_tokens=64)
    assert len(rec.calls) == 1


def test_switch_from_config_path_and_multi_stream_validation():
    h = _helper("npugraph_ex")
    cfg = types.SimpleNamespace(custom_params=types.SimpleNamespace(enable_prefetch=True,
                                                                    enable_multi_streams=0))
    with pytest.raises(ValueError, match="enable_multi_streams > 0"):
        h.read_switch(cfg, "custom_params.enable_prefetch")
    cfg.custom_params.enable_multi_streams = 2
    assert h.read_switch(cfg, "custom_params.enable_prefetch") is True
    assert h.read_switch(types.SimpleNamespace(), "custom_params.enable_prefetch") is False
    missing = types.SimpleNamespace(custom_params=types.SimpleNamespace(enable_prefetch=True))
    with pytest.raises(ValueError, match="captures the side stream"):
        h.read_switch(missing, "custom_params.enable_prefetch")
    assert _helper("eager").read_switch(missing, "custom_params.enable_prefetch") is True
    assert h.read_switch({"custom_params": {"enable_prefetch": False}}, "custom_params.enable_prefetch") is False
    h.ENABLED = True  # the module-level switch for constructors without a config
    assert h.read_switch(None, "custom_params.enable_prefetch") is True


def test_attr_and_link_next_layers():
    h = _helper()
    layers = [torch.nn.Linear(2, 2) for _ in range(3)]
    h.link_next_layers(layers)
    assert layers[0].next_layer is layers[1] and layers[2].next_layer is None
    assert "next_layer" not in dict(layers[0].named_children())
    assert h.attr(layers[0], "next_layer.weight") is layers[1].weight
    assert h.attr(layers[2], "next_layer.weight") is None


def test_verify_without_torch_gives_install_hint(monkeypatch):
    from cannbot_prefetch.errors import InputError
    from cannbot_prefetch.verify.runner import require_torch

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(InputError, match=r"cannbot-prefetch\[torch\]"):
        require_torch()
