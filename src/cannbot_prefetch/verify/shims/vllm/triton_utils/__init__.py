"""Triton as a model file sees it where Triton is absent (vLLM's own placeholder does the same,
triton_utils/importing.py): `HAS_TRITON` False, `@triton.jit` (and `@triton.autotune(...)`,
`@triton.heuristics(...)`) leave the function as it is, `tl.<name>` reads as None (kernel
annotations such as `tl.constexpr` are evaluated when the kernel is defined). A kernel is
never launched on the shim's CPU platform: model files take their torch path there."""
import types

HAS_TRITON = False


def _decorator(*args, **_kwargs):
    if len(args) == 1 and callable(args[0]) and not _kwargs:
        return args[0]
    return lambda fn: fn


class _Language(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None


class _Triton(types.ModuleType):
    jit = autotune = heuristics = staticmethod(_decorator)
    Config = staticmethod(lambda *a, **k: None)

    @staticmethod
    def cdiv(a: int, b: int) -> int:
        return -(-a // b)

    @staticmethod
    def next_power_of_2(n: int) -> int:
        return 1 << max(int(n) - 1, 0).bit_length()


tl = _Language("triton.language")
triton = _Triton("triton")
triton.language = tl
