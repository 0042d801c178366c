"""The stub's `npu::npu_prefetch` must stay the op torch.fx knows as side-effecting while the stub
is installed, whatever an earlier library of the same op does when the cyclic GC collects it.

Failure it guards (seen in the full suite, depending on GC timing): a library destroyed with
`Library._destroy()` keeps its finalizer armed; collected later, it cleared `torch.ops.npu`'s
cached op while the next stub was active, and the compiled graph under aot_eager then dropped
every `npu::npu_prefetch` node (0/2 issued).
"""

from __future__ import annotations

import gc

import pytest

torch = pytest.importorskip("torch")

from cannbot_prefetch.verify.stub import release_library, stub_torch_npu  # noqa: E402

# GENERATED: another package's `npu` library, held in a reference cycle the way a module's
# `_lib` global is (the module's functions keep its globals alive until the cyclic GC runs).
FOREIGN = '''
import torch
_lib = torch.library.Library("npu", "FRAGMENT")
_lib.define("npu_prefetch(Tensor self, Tensor? dependency, int max_size, int offset=0) -> ()")
_lib.impl("npu_prefetch", lambda *args: None, "CompositeExplicitAutograd")
def _keeps_globals():
    return _lib
'''


def _foreign_library_released_late(release) -> None:
    ns: dict = {}
    exec(FOREIGN, ns)
    release(ns["_lib"])
    del ns                      # now cyclic garbage: collected at the next gc.collect()
    with stub_torch_npu():
        op = torch.ops.npu.npu_prefetch.default
        gc.collect()            # the foreign library's finalizer runs here, if still armed
        after = torch.ops.npu.npu_prefetch.default
        assert after is op and after in torch.fx.node._side_effectful_functions


def test_a_released_library_cannot_unregister_the_stub_later():
    _foreign_library_released_late(release_library)


def test_destroy_alone_leaves_the_finalizer_armed():
    """The reason release_library exists: with `_destroy()` the late collection does clear
    the stub's op (if this starts passing, torch fixed it and release_library is a no-op)."""
    with pytest.raises(AssertionError):
        _foreign_library_released_late(lambda lib: lib._destroy())


def test_stub_is_gone_after_the_block():
    with stub_torch_npu() as rec:
        torch.ops.npu.npu_prefetch(torch.zeros(2), None, 8)
    assert len(rec.calls) == 1
    import sys
    assert "torch_npu" not in sys.modules
    assert not hasattr(torch.ops.npu, "npu_prefetch") or \
        "npu_prefetch" not in vars(torch.ops.npu)
