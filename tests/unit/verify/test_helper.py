"""The generated helper module: off means nothing (no torch_npu import), on means the right call."""

from __future__ import annotations

import sys
import types

import pytest

from cannbot_prefetch.rewrite.helper import helper_source
from cannbot_prefetch.verify.stub import stub_torch_npu

torch = pytest.importorskip("torch")


def _helper(mode="eager", call=None):
    mod = types.ModuleType("_cbp_test_helper")
    exec(compile(helper_source(mode, "custom_params.enable_prefetch", call=call), "helper", "exec"), mod.__dict__)
    mod._STATE.side_streams.clear()  # the process-wide state: start each test from none
    mod._STATE.pending.clear()
    return mod


def test_off_does_not_import_torch_npu():
    h = _helper()
    assert "torch_npu" not in sys.modules
    assert h.npu_prefetch(False, torch.zeros(2), torch.zeros(2), 8) is None
    h.join(False)
    assert "torch_npu" not in sys.modules


@pytest.mark.parametrize("mode, call, stream", [
    ("eager", None, "current"), ("eager", "side_stream", "side"), ("npugraph_ex", None, "side"),
    ("npugraph_ex", "direct", "current"), ("ge_graph", None, "current")])
def test_on_calls_without_offset_and_side_stream(mode, call, stream):
    """The call form (issue 30): eager and ge_graph call npu_prefetch directly on the current
    stream by default (cann-recipes-infer's prefetch principles), npugraph_ex on a side stream."""
    h = _helper(mode, call)
    w, d = torch.zeros(4, 4), torch.zeros(1, 4)
    with stub_torch_npu() as rec:
        h.npu_prefetch(True, w, d, 16)
        h.npu_prefetch(True, w, d, 16, 8)
        h.join(True)
    assert [c.nargs for c in rec.calls] == [3, 4]
    assert rec.calls[0].weight is w and rec.calls[0].dependency is d
    assert rec.calls[0].stream == stream
    assert "torch_npu" not in sys.modules and not hasattr(torch, "npu")


def test_ge_graph_refuses_none_dependency():
    h = _helper("ge_graph")
    with stub_torch_npu(), pytest.raises(ValueError, match="dependency"):
        h.npu_prefetch(True, torch.zeros(2), None, 8)


@pytest.mark.parametrize("batch", [1, 3, 8, 256])
def test_decode_guard_reads_the_query_length_so_decode_fires_at_any_batch(batch):
    """query_states [B, heads, q_len, head_dim]: the old token count (all dims but the last)
    counted heads and batch as tokens and stopped prefetching at batch >= 3."""
    h = _helper()
    w = torch.zeros(4, 4)
    with stub_torch_npu() as rec:
        h.npu_prefetch(True, w, w, 8, guard=(torch.zeros(batch, 32, 1, 8), -2, 4))    # decode
        h.npu_prefetch(True, w, w, 8, guard=(torch.zeros(batch, 32, 100, 8), -2, 4))  # prefill
        h.npu_prefetch(True, w, w, 8, guard=(torch.zeros(batch, 100, 64), 1, 4))      # [B, S, H]
        h.npu_prefetch(True, w, w, 8, guard=(torch.zeros(batch, 1, 64), 1, 4))
    assert len(rec.calls) == 2


def test_decode_guard_without_a_readable_length_does_not_prefetch():
    h = _helper()
    w = torch.zeros(4, 4)
    with stub_torch_npu() as rec:
        h.npu_prefetch(True, w, w, 8, guard=(None, 1, 4))
        h.npu_prefetch(True, w, w, 8, guard=(torch.zeros(2, 1), 2, 4))
        h.npu_prefetch(True, w, w, 8, guard=(torch.zeros(2, 1), -1, 4))
    assert len(rec.calls) == 1


def test_side_stream_created_once_per_device_and_joined():
    h = _helper("npugraph_ex")
    w = torch.zeros(4, 4)
    with stub_torch_npu() as rec:
        made = []
        make = torch.npu.Stream
        torch.npu.Stream = lambda *a, **k: made.append(k) or make(*a, **k)
        for _ in range(3):
            h.npu_prefetch(True, w, w, 8)
        assert h._STATE.pending == {w.device.index}
        h.join(True)
        assert h._STATE.pending == set()
    assert len(made) == 1 and len(rec.calls) == 3


def test_prepare_creates_the_stream_while_the_model_is_built(monkeypatch):
    """read_switch (in __init__) with the switch on makes the current device's side stream, so
    no stream is created inside a compiled or captured forward."""
    h = _helper("npugraph_ex")
    with stub_torch_npu():
        torch.npu.current_device = lambda: 0
        cfg = types.SimpleNamespace(enable_prefetch=True, enable_multi_streams=1)
        assert h.read_switch(cfg, "enable_prefetch") is True
        assert list(h._STATE.side_streams) == [0]
    assert h._STATE.side_streams == {}  # the stub's streams go with the stub
    ge = _helper("ge_graph")
    with stub_torch_npu():
        torch.npu.current_device = lambda: 0
        ge.read_switch(types.SimpleNamespace(enable_prefetch=True), "enable_prefetch")
        assert ge._STATE.side_streams == {}  # ge_graph: GE orders the Cmo node, no side stream


def test_ops_are_registered_once_with_a_side_effect_and_a_fake_kernel():
    from torch._subclasses.fake_tensor import FakeTensorMode

    first, second = _helper(), _helper("ge_graph")
    ops = torch.ops.cannbot_prefetch
    for op in (ops.prefetch.default, ops.join.default):
        assert op in torch.fx.node._side_effectful_functions
    assert first._STATE is second._STATE and first._STATE.lib is not None  # one per process
    with FakeTensorMode() as mode:
        w = mode.from_tensor(torch.zeros(4, 4))
        assert ops.prefetch(w, w, 8, 0) is None  # tracing never runs the real kernel


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


def test_next_layer_links_skip_layers_that_lack_the_module():
    """ergo: a cross-layer site in the MoE block's shared expert, and the first layers hold a
    dense MLP without it. The rewrite links `[_cbp.attr(_m, "mlp.shared_experts") ...]`, so
    those entries are None (was `_m.mlp.shared_experts`: AttributeError while the model was
    built, switch on or off). A None gets nothing; the layer before it sees next_layer None."""
    h = _helper()
    dense = types.SimpleNamespace(mlp=types.SimpleNamespace())
    moe1, moe2 = (types.SimpleNamespace(mlp=types.SimpleNamespace(shared_experts=types.SimpleNamespace()))
                  for _ in range(2))
    got = [h.attr(m, "mlp.shared_experts") for m in (dense, moe1, moe2)]
    assert got[0] is None and got[1] is moe1.mlp.shared_experts
    h.link_next_layers(got)
    assert moe1.mlp.shared_experts.next_layer is moe2.mlp.shared_experts
    assert moe2.mlp.shared_experts.next_layer is None
    h.link_next_layers([moe1.mlp.shared_experts, None, moe2.mlp.shared_experts])
    assert moe1.mlp.shared_experts.next_layer is None   # the next layer lacks it: skipped


def test_the_link_line_walks_each_layer_with_attr(modeling):
    """The rewritten ergo file builds its link list with `_cbp.attr`, never a plain attribute
    chain that a dense layer lacks."""
    from cannbot_prefetch.pysource import parse_view
    from cannbot_prefetch.rewrite.concerns import link_lines

    code = modeling("ergo").read_text()
    lines = [ln for _, _, ln in link_lines(parse_view(code, {"ErgoSharedExpert"}), "ErgoSharedExpert")]
    assert lines and all("_cbp.attr(_m, 'mlp.shared_experts')" in ln for ln in lines), lines
