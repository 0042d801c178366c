"""vllm.v1.attention.backends.utils as a model file imports it (gemma3n's, gemma4's fast-prefill
metadata type, read only when `kv_sharing_fast_prefill` is on, never on the shim); names are
stand-ins that raise when built or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
