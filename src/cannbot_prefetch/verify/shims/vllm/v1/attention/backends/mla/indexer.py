"""DeepSeek V3.2's indexer backend: imported by model files, never run by the shim's decode step."""
from vllm._standin import standins

__getattr__ = standins(__name__)
