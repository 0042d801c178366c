"""Fused-MoE helpers a model file calls while it builds."""


def resolve_layer_fused_shared_expert(*_a, **_k) -> bool:
    """Shared experts fused into the routed experts' kernel: never at TP 1 on the shim (the
    shared expert stays its own MLP)."""
    return False


from vllm._standin import standins  # noqa: E402

__getattr__ = standins(__name__)     # quantising helpers (moe_kernel_quantize_input, ...)
