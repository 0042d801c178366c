"""vllm.multimodal.inputs as a model file imports it: the bases it subclasses (`_bases.Base`),
other names stand-ins that raise when built or called (`vllm._standin`)."""
from vllm._standin import standins

from ._bases import Base

__getattr__ = standins(__name__)
