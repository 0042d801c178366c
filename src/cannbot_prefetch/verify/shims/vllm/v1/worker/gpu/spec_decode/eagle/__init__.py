"""vllm.v1.worker.gpu.spec_decode.eagle: the package path draft model files import from."""
