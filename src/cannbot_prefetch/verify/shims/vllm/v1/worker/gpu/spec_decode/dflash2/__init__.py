"""vllm.v1.worker.gpu.spec_decode.dflash2: the package path draft model files import from."""
