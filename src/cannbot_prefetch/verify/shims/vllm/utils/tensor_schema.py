"""vLLM's typed input schemas (multimodal inputs): `TensorShape(...)` is evaluated in class
bodies at import time, so both exist; the schema only keeps its fields (verify never builds
multimodal inputs)."""


class TensorShape:
    def __init__(self, *dims, dynamic_dims=None):
        self.dims, self.dynamic_dims = dims, set(dynamic_dims or ())


class TensorSchema:
    def __init__(self, *, validate=True, resolve_bindings=None, **kwargs):
        self.__dict__.update(kwargs)

    def __getitem__(self, key):
        return getattr(self, key)

    def get(self, key, default=None):
        return getattr(self, key, default)
