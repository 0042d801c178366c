"""vllm.multimodal.inputs as a model file imports it: `NestedTensors`, the type of multimodal
embeddings in annotations (a real alias: files name it where they are defined); other names
are stand-ins that raise when built or called (`vllm._standin`)."""
from typing import Union

import torch

from vllm._standin import standins

from ._bases import Base  # noqa: F401  (subclassed by model files)

NestedTensors = Union[list["NestedTensors"], list[torch.Tensor], torch.Tensor,
                      tuple[torch.Tensor, ...]]

__getattr__ = standins(__name__)
