"""vllm.model_executor.layers.hpc as a model file imports it; names a TP-1 decode step on the shim never uses are
stand-ins that raise when built or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)


from enum import IntEnum  # noqa: E402


class QkNormPolicy(IntEnum):
    """Where QK-norm sits around RoPE in vLLM's fused HPC kernel (hpc/rope_norm.py): read while
    a model file builds, the kernel itself never runs on the shim."""
    NONE = 0
    ROPE_THEN_NORM = 1
    NORM_THEN_ROPE = 2


class HpcRopeNorm:
    """vLLM's fused RoPE + QK-norm kernel (CUDA only): never supported on the shim's CPU, so a
    model file takes its plain rotary and norm path; building one raises."""

    @staticmethod
    def support(*_a, **_k) -> bool:
        return False

    def __init__(self, *_a, **_k):
        raise NotImplementedError("vllm.model_executor.layers.hpc.HpcRopeNorm is not provided "
                                  "by cannbot-prefetch's vLLM shim")
