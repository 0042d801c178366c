"""vLLM's module of that name re-exports Attention beside EncoderOnlyAttention (qwen3 imports
both from it): the shim's attention class for each (verify runs decoders)."""
from . import Attention, EncoderOnlyAttention  # noqa: F401
