"""ROCm's AITER kernels: never enabled on the shim's CPU platform."""


class _Off:
    def __getattr__(self, name):
        return lambda *a, **k: False


rocm_aiter_ops = _Off()
