"""vllm.compilation.breakable_cudagraph as a model file imports it; names a TP-1 decode step on the shim never uses are
stand-ins that raise when built or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)


def eager_break_during_capture(fn):
    """No CUDA graph is captured on the shim: the function itself (a decorator run at import)."""
    return fn
