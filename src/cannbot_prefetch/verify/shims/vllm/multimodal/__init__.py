"""vllm.multimodal as a model file imports it; names a TP-1 decode step on the shim never uses are
stand-ins that raise when built or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)


class MultiModalRegistry:
    """vLLM's registry of multimodal processors: `@MULTIMODAL_REGISTRY.register_processor(...)`
    decorates a model class at import time; the shim records nothing and returns the class
    (verify builds the text decoder, never a processor)."""

    def register_processor(self, *_a, **_k):
        return lambda model_cls: model_cls


MULTIMODAL_REGISTRY = MultiModalRegistry()
