"""vllm.v1.worker.gpu.spec_decode.dflash: the package path draft model files import from."""
