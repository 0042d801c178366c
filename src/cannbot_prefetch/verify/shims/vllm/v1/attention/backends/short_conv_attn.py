"""vllm.v1.attention.backends.short_conv_attn as a model file imports it: the short-conv state
metadata, present only with a state cache (never on the shim); stand-ins that raise when built
or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
