"""vllm.transformers_utils.repo_utils as a model file imports it: reading files of a model's
Hub repository, which verify never does; stand-ins that raise when called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)
