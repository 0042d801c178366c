"""OCP microscaling (MX) formats as a model file imports them: the block size is the OCP MX
specification's 32 elements per shared scale (vLLM's ocp_mx_utils.py holds the same); other
names are stand-ins that raise when built or called."""
from vllm._standin import standins

OCP_MX_BLOCK_SIZE = 32

__getattr__ = standins(__name__)
