"""NVFP4 emulation helpers as a model file imports them (qwen3_dspark's gathered NVFP4 weights):
the shim's layers hold no quantised weights, so a TP-1 decode step never calls them; every name
is a stand-in that raises when called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
