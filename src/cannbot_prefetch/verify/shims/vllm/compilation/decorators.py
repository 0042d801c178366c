"""vLLM's torch.compile decorator as the identity: `@support_torch_compile` or
`@support_torch_compile(dynamic_arg_dims=...)` returns the class unchanged (eager at TP 1)."""


def support_torch_compile(cls=None, **_):
    if cls is None:
        return lambda c: c
    return cls


def should_torch_compile_mm_encoder(*_a, **_k) -> bool:
    """Compile a multimodal encoder: never on the shim (eager)."""
    return False
