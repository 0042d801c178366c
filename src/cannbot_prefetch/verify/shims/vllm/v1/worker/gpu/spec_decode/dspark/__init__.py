"""vllm.v1.worker.gpu.spec_decode.dspark: the package path draft model files import from."""
