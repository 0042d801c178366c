"""Fused-MoE helpers a model file calls while it builds or in its own expert path."""
from vllm._standin import standins


def resolve_layer_fused_shared_expert(*_a, **_k) -> bool:
    """Shared experts fused into the routed experts' kernel: never at TP 1 on the shim (the
    shared expert stays its own MLP)."""
    return False


def moe_kernel_quantize_input(A, A_scale, quant_dtype, per_act_token_quant=False,
                              block_shape=None, **_):
    """(A, A_scale) as given when no quantisation is asked (`quant_dtype` None: vLLM returns the
    input untouched); quantised activations are not in the shim and raise."""
    if quant_dtype is not None:
        raise NotImplementedError(f"moe_kernel_quantize_input to {quant_dtype} is not provided "
                                  "by cannbot-prefetch's vLLM shim (unquantised only)")
    return A, A_scale


__getattr__ = standins(__name__)     # the other quantising helpers
