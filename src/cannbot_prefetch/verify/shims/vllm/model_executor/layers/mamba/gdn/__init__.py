"""vLLM's gated delta-net mixers (shape-faithful stand-ins on the shim)."""
