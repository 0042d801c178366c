"""vllm.third_party.flash_linear_attention: vLLM's vendored FLA kernels (package path only)."""
