"""KV-cache specs (annotations and the sparse indexer cache only): never built by the shim's decode step."""
from vllm._standin import standins

__getattr__ = standins(__name__)
