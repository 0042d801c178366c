"""vLLM's Kimi K3 package (vllm/models/kimi_k3)."""
