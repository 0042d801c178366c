"""vllm.v1.attention.backends.gdn_attn as a model file imports it: the gated delta-net / KDA
state metadata, present only with a state cache (never on the shim); stand-ins that raise when
built or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
