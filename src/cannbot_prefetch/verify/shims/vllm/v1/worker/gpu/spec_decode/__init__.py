"""vllm.v1.worker.gpu.spec_decode: the package path draft model files import from."""
