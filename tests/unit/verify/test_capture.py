"""verify's torch.compile checks on a small model rewritten by the engine: they pass on the
emitted code in each mode, and each fails on the defect it exists for (an op a compiler may drop,
a guard that reads the batch, a graph break), while a model that never compiles is skipped."""

from __future__ import annotations

from dataclasses import replace

import importlib.util
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from cannbot_prefetch.rewrite.engine import rewrite_source  # noqa: E402
from cannbot_prefetch.rewrite.helper import RUNTIME_STATE, helper_source  # noqa: E402
from cannbot_prefetch.verify.runner import verify_model  # noqa: E402
from cannbot_prefetch.verify.stub import release_library  # noqa: E402

from rewrite.sites import plan, site  # noqa: E402

SRC = textwrap.dedent('''\
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.norm = nn.LayerNorm(16)
            self.up = nn.Linear(16, 32)
            self.down = nn.Linear(32, 16)

        def forward(self, x):
            h = self.norm(x)
            y = self.down(torch.relu(self.up(h)))
            return x + y


    class Toy(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.layers = nn.ModuleList([Block(config) for _ in range(2)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x
    ''')


def _plan(mode):
    return plan(site("toy-up", cls="Block", attr="up", weight="self.up.weight", icls="Block",
                     anchor="self.down", dep="h", size=1024, guard=("h", 1, 4)), mode=mode)


@pytest.fixture
def build(tmp_path):
    """build(mode) -> (model, inputs, plan, helper module): the engine's output, loaded."""
    names = []

    def make(mode, call=None):
        p = replace(_plan(mode), call=call)
        out = rewrite_source(SRC, p.sites, mode=p.mode, switch=p.switch, call=call)
        assert out.applied == ["toy-up"]
        d = tmp_path / f"{mode}-{call}"
        d.mkdir()
        (d / "toy_capture_model.py").write_text(out.code)
        (d / "_cannbot_prefetch.py").write_text(helper_source(mode, p.switch.config_path,
                                                              call=call))
        sys.path.insert(0, str(d))
        try:
            mods = {}
            for name in ("_cannbot_prefetch", "toy_capture_model"):
                spec = importlib.util.spec_from_file_location(name, d / f"{name}.py")
                mods[name] = importlib.util.module_from_spec(spec)
                sys.modules[name] = mods[name]
                names.append(name)
                spec.loader.exec_module(mods[name])
        finally:
            sys.path.remove(str(d))
        torch.manual_seed(0)
        model = mods["toy_capture_model"].Toy(None).eval()
        return model, (torch.randn(1, 1, 16),), p, mods["_cannbot_prefetch"]

    yield make
    for name in names:
        sys.modules.pop(name, None)


def _by(checks):
    return {(c.name, c.site): c for c in checks}


@pytest.mark.parametrize("mode", ["eager", "npugraph_ex", "ge_graph"])
def test_capture_checks_pass_on_the_emitted_code(build, mode):
    model, inputs, p, _ = build(mode)
    checks, _ = verify_model(model, inputs, p, graph=False)
    assert all(c.passed or _inductor_elsewhere(c) for c in checks), \
        [c for c in checks if not c.passed]
    by = _by(checks)
    assert "2/2 prefetch(es)" in by[("compile aot_eager", None)].detail
    assert "prefetches per forward [2, 2, 2]" in by[("recompiles", None)].detail


def test_an_op_without_a_declared_side_effect_is_caught(build, monkeypatch):
    """The issue's finding: AOT drops an op with no outputs and no side effect (zero prefetches
    under aot_eager). Without its side-effect registration the checks must fail."""
    model, inputs, p, _ = build("eager", "side_stream")   # the helper's own op
    ops = torch.ops.cannbot_prefetch
    effects = set(torch.fx.node._side_effectful_functions) - {ops.prefetch.default}
    monkeypatch.setattr(torch.fx.node, "_side_effectful_functions", effects)
    by = _by(verify_model(model, inputs, p, graph=False)[0])
    assert not by[("compile aot_eager", None)].passed
    assert "issued 0/2 prefetch(es)" in by[("compile aot_eager", None)].detail
    assert by[("compile eager", None)].passed  # dynamo alone keeps it
    site_check = by[("captured prefetch", "toy-up")]
    assert not site_check.passed and "aot_eager: 0/2 node(s)" in site_check.detail


def test_a_guard_that_reads_the_batch_is_caught(build, monkeypatch):
    """The old runtime guard multiplied every dim but the last (a total token count): at decode
    batch 8 it stops prefetching. The recompile check calls batches x1, x8, x256."""
    model, inputs, p, helper = build("eager")

    def token_count(guard):
        tensor, _, max_len = guard
        n = 1
        for d in tensor.shape[:-1]:
            n *= d
        return n <= max_len

    monkeypatch.setattr(helper, "_decode", token_count)
    check = _by(verify_model(model, inputs, p, graph=False)[0])[("recompiles", None)]
    assert not check.passed
    assert "prefetches per forward [2, 0, 0]" in check.detail


def test_a_graph_break_with_the_switch_on_is_caught(build, monkeypatch):
    model, inputs, p, helper = build("npugraph_ex")
    original = helper.npu_prefetch

    def breaking(switch_flag, *a, **k):
        if switch_flag:
            torch._dynamo.graph_break()
        return original(switch_flag, *a, **k)

    monkeypatch.setattr(helper, "npu_prefetch", breaking)
    by = _by(verify_model(model, inputs, p, graph=False)[0])
    for name in ("compile eager", "compile aot_eager"):
        assert not by[(name, None)].passed and not by[(name, None)].skipped
        assert "compiles with the switch off, fails with it on" in by[(name, None)].detail


def test_a_model_that_never_compiles_is_skipped_not_failed(build):
    model, inputs, p, _ = build("eager")
    block = type(model.layers[0])
    forward = block.forward

    def unsupported(self, x):
        torch._dynamo.graph_break()  # the model's own problem, switch on or off
        return forward(self, x)

    block.forward = unsupported
    try:
        checks, _ = verify_model(model, inputs, p, graph=False)
    finally:
        block.forward = forward
    by = _by(checks)
    for name in ("compile eager", "compile aot_eager"):
        assert by[(name, None)].skipped and "even with the switch off" in by[(name, None)].detail
    assert by[("captured prefetch", "toy-up")].skipped


# GENERATED for the test below: an installed-torch_npu stand-in written from torch_npu's
# documented facts (the op npu::npu_prefetch with `int offset=0`, a side effect and a Meta
# kernel, bound as torch_npu.npu_prefetch; torch.npu streams). It is not verify's stub.
FAKE_TORCH_NPU = '''
import contextlib, types
import torch

_lib = torch.library.Library("npu", "FRAGMENT")
_lib.define("npu_prefetch(Tensor self, Tensor? dependency, int max_size, int offset=0) -> ()")
_lib.impl("npu_prefetch", lambda *args: None, "CompositeExplicitAutograd")
_lib.impl("npu_prefetch", lambda *args: None, "Meta")
torch.fx.node.has_side_effect(torch.ops.npu.npu_prefetch.default)
npu_prefetch = torch.ops.npu.npu_prefetch


class Stream:
    def __init__(self, device=None):
        self.device = device

    def wait_stream(self, other):
        pass


_current = Stream()
torch.npu = types.SimpleNamespace(Stream=Stream, current_stream=lambda device=None: _current,
                                  stream=lambda s: contextlib.nullcontext(s))
'''


@pytest.mark.parametrize("mode", ["npugraph_ex", "ge_graph"])
def test_with_an_installed_torch_npu_compiled_prefetches_are_counted(build, tmp_path, monkeypatch,
                                                                     mode):
    """On an NPU machine verify wraps torch_npu.npu_prefetch to record eager calls; compiled
    code must see the op itself, so there the profiler counts the op's dispatches."""
    site_dir = tmp_path / "site" / "torch_npu"
    site_dir.mkdir(parents=True)
    (site_dir / "__init__.py").write_text(FAKE_TORCH_NPU)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    model, inputs, p, _ = build(mode)
    try:
        checks, stub = verify_model(model, inputs, p, graph=False)
    finally:
        fake = sys.modules.pop("torch_npu", None)
        if fake is not None:
            release_library(fake._lib)
        if hasattr(torch, "npu"):
            del torch.npu
        state = sys.modules.get(RUNTIME_STATE)  # the fake's side streams go with it
        if state is not None:
            state.side_streams.clear()
            state.pending.clear()
    assert not stub
    assert all(c.passed or _inductor_elsewhere(c) for c in checks), \
        [c for c in checks if not c.passed]
    by = _by(checks)
    assert "fired 2/2" in by[("fires", "toy-up")].detail
    assert "issued 2/2 prefetch(es)" in by[("compile aot_eager", None)].detail
    assert "prefetches per forward [2, 2, 2]" in by[("recompiles", None)].detail


def _inductor_elsewhere(c) -> bool:
    """`compile inductor` runs in eager mode only (torchair modes: skipped, said why)."""
    return c.name == "compile inductor" and c.skipped and "torchair" in c.detail
