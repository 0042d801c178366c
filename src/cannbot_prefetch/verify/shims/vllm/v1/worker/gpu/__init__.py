"""vllm.v1.worker.gpu: the package path draft model files import from."""
