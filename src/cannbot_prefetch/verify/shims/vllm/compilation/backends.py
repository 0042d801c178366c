"""vllm.compilation.backends as a model file imports it; names a TP-1 decode step on the shim never uses are
stand-ins that raise when built or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)


def set_model_tag(tag, is_encoder=False):
    """vLLM names the compile cache of the modules built inside the block; the shim compiles
    nothing, so the block only runs."""
    import contextlib
    return contextlib.nullcontext()
