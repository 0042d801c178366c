"""vllm.v1.worker: the package path draft model files import from."""
