"""vLLM's compiled kernels (`import vllm._custom_ops as ops`): none exist in the shim. A model
file imports the module while its classes are defined; a name it then reads is a stand-in that
raises, naming the kernel, only if the decode step calls it (a path the shim's layers avoid)."""


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)

    def kernel(*_a, **_k):
        raise NotImplementedError(f"vLLM kernel {name} is not provided by cannbot-prefetch's "
                                  f"shim")
    kernel.__name__ = name
    return kernel
