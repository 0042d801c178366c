"""vLLM's per-model packages (vllm/models) a model file imports from."""
