"""vLLM's parameter offloading as a model file reads it (vllm/model_executor/offloader): the
shim never offloads, so the offloader in place is the no-op one (vLLM's default,
`offloader/base.py` `_instance = NoopOffloader()`), the two real kinds exist for `isinstance`
checks only and raise when built; other names are stand-ins (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)


class BaseOffloader:
    """What every offloader is."""

    def wrap_modules(self, modules_generator):
        return list(modules_generator)


class NoopOffloader(BaseOffloader):
    """Returns the modules as they are (vLLM: no offloading)."""


class _Offloading(BaseOffloader):
    def __init__(self, *_a, **_k):
        raise NotImplementedError(f"{type(self).__name__} is not provided by cannbot-prefetch's "
                                  f"vLLM shim (it never offloads)")


class PrefetchOffloader(_Offloading):
    """vLLM's prefetching offloader: never the one in place on the shim."""


class UVAOffloader(_Offloading):
    """vLLM's unified-memory offloader: never the one in place on the shim."""


def get_offloader() -> BaseOffloader:
    """The offloader in place: the no-op one."""
    return NoopOffloader()
