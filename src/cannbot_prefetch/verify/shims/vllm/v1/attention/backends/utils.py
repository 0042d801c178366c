"""vllm.v1.attention.backends.utils as a model file imports it: block-table helpers of vLLM's
attention backends; stand-ins that raise when built or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)

NULL_BLOCK_ID = 0           # vLLM 0.34 v1/attention/backends/utils.py: the padding block's id
