"""vllm.triton_utils: no Triton on the shim's CPU platform (`HAS_TRITON` False); `tl`, `triton`
and other names are stand-ins that raise when called (`vllm._standin`): kernels a TP-1 decode
step on the shim's layers never launches."""
from vllm._standin import standins

HAS_TRITON = False

__getattr__ = standins(__name__)
