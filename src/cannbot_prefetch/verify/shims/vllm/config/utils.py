"""vllm.config.utils as a model file imports it; names a TP-1 decode step on the shim never uses are
stand-ins that raise when built or called (`vllm._standin`)."""
from vllm._standin import standins

__getattr__ = standins(__name__)


def getattr_iter(obj, names, default=None, default_factory=None, warn=False):
    """The first attribute of `obj` among `names` (a config key known by several names), else
    the default (or what `default_factory` makes)."""
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    return default_factory() if default_factory is not None else default
