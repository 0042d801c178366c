"""vLLM's torch.compile decorator as the identity: `@support_torch_compile` or
`@support_torch_compile(dynamic_arg_dims=...)` returns the class itself (eager at TP 1), marked
`do_not_compile` as vLLM marks each instance when compilation is off (CompilationMode.NONE;
radio.py reads `layer.do_not_compile` while it builds)."""


def _eager(cls):
    cls.do_not_compile = True
    return cls


def support_torch_compile(cls=None, **_):
    if cls is None:
        return _eager
    return _eager(cls)


def should_torch_compile_mm_encoder(*_a, **_k) -> bool:
    """Compile a multimodal encoder: never on the shim (eager)."""
    return False
