"""vllm.third_party: kernels vLLM vendors from other projects (the package path only)."""
