"""vllm.compilation.backends as a model file imports it; names a TP-1 decode step on the shim never uses are
stand-ins that raise when built or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)


def set_model_tag(tag, is_encoder=False):
    """The tag vLLM's compiler files a sub-model's graphs under: nothing is compiled on the
    shim, so a context that does nothing."""
    import contextlib

    return contextlib.nullcontext()
