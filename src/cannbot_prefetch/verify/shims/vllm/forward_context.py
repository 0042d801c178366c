"""vllm.forward_context as a model file imports it; names a TP-1 decode step on the shim never uses are
stand-ins that raise when built or called (`vllm._standin`)."""
import contextlib
import contextvars

from vllm._standin import standins

__getattr__ = standins(__name__)


class ForwardContext:
    """What a model file reads of vLLM's per-step context on the shim: no attention metadata
    (a profile-like step: no state cache), no padding, and the layers registered by prefix in
    the current config (`no_compile_layers`, vLLM's `static_forward_context`)."""
    attn_metadata = None
    is_padding = False

    @property
    def no_compile_layers(self) -> dict:
        from vllm.config import get_current_vllm_config
        config = _STEP_CONFIG.get() or get_current_vllm_config()
        return config.compilation_config.static_forward_context


def get_forward_context() -> ForwardContext:
    return ForwardContext()


# the config of the step being run (vLLM's runner runs each step inside
# `set_forward_context(attn_metadata, vllm_config)`), so a layer registered by prefix while the
# model was built under `set_current_vllm_config` (zaya's `static_forward_context`) is found
_STEP_CONFIG = contextvars.ContextVar("vllm_step_config", default=None)


@contextlib.contextmanager
def set_forward_context(attn_metadata, vllm_config, *_a, **_k):
    token = _STEP_CONFIG.set(vllm_config)
    try:
        yield
    finally:
        _STEP_CONFIG.reset(token)
