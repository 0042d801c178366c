"""vllm.multimodal.processing as a model file imports it: the bases it subclasses (`_bases.Base`),
other names stand-ins that raise when built or called (`vllm._standin`)."""
from vllm._standin import standins

from ._bases import Base

__getattr__ = standins(__name__)


class BaseProcessingInfo(Base):
    pass


class BaseDummyInputsBuilder(Base):
    pass


class BaseMultiModalProcessor(Base):
    pass
