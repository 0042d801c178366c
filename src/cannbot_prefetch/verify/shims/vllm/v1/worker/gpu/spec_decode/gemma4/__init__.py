"""vllm.v1.worker.gpu.spec_decode.gemma4: the package path draft model files import from."""
