"""vLLM's small utilities a model file imports (math, torch, sync guard)."""
