"""vllm.third_party.flash_linear_attention.ops (the package path only)."""
