"""vllm.model_executor.layers.fused_moe.config as a model file imports it: the name of the
weights' quantisation scheme a tuned kernel config is looked up by (`_get_config_dtype_str`,
k2_horizon calls it while it builds); names a TP-1 decode step on the shim never uses are
stand-ins that raise when built or called (`vllm._standin`)."""
import torch

from vllm._standin import standins


def _get_config_dtype_str(dtype, use_fp8_w8a8=False, use_fp8_w8a16=False, use_int8_w8a16=False,
                          use_int4_w4a16=False, ocp_mx_scheme=None):
    """The scheme's name, "float32" for unquantised float32 weights, else None (vLLM 0.34
    fused_moe/config.py: the first flag set names it; the shim's configs are not looked up by
    it, `try_get_optimal_moe_config`)."""
    for flag, name in ((use_fp8_w8a8, "fp8_w8a8"), (use_fp8_w8a16, "fp8_w8a16"),
                       (use_int8_w8a16, "int8_w8a16"), (use_int4_w4a16, "int4_w4a16")):
        if flag:
            return name
    if ocp_mx_scheme is None and dtype == torch.float32:
        return "float32"
    return None


__getattr__ = standins(__name__)
