"""vLLM's model helpers a model file imports relatively (`from .utils import ...`)."""
