"""vLLM's Gemma 4 MTP speculator config (a draft file's `speculator_config_class`, read by vLLM's
loader, not by a build or a step): stand-ins that raise when built (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
