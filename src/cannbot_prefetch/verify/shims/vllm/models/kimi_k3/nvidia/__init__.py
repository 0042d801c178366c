"""vLLM's Kimi K3 NVIDIA kernels package (vllm/models/kimi_k3/nvidia)."""
