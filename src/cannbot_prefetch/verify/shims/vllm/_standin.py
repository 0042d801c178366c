"""Named stand-ins for the parts of vLLM a model file imports but a decode step at TP 1 on the
shim's layers never runs (fp8 quantisation helpers, DeepSeek V3.2's sparse indexer, kernels):
importing succeeds; building or calling one raises, naming it, so a path that does need it fails
loudly instead of computing something else."""


def standins(module: str):
    """A module `__getattr__`: a class for a capitalised name, else a function; both raise."""
    def getattr_(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        what = f"{module}.{name} is not provided by cannbot-prefetch's vLLM shim"
        if name[:1].isupper():
            class StandIn:
                def __init__(self, *_a, **_k):
                    raise NotImplementedError(what)
            StandIn.__name__ = StandIn.__qualname__ = name
            return StandIn

        def fn(*_a, **_k):
            raise NotImplementedError(what)
        fn.__name__ = name
        return fn
    return getattr_
