"""vLLM's linear-attention mixers (shape-faithful stand-ins on the shim)."""
