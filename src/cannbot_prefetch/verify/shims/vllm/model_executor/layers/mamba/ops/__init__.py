"""vllm.model_executor.layers.mamba.ops: vLLM's Triton / CUDA kernels of the state-space and
linear-attention mixers, as a model file imports them (the package path only)."""
