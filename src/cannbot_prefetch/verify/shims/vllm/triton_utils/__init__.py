"""vllm.triton_utils where Triton is not installed (a CPU machine): model files define Triton
kernels at import time (`@triton.jit` over parameters annotated `tl.constexpr`), so `triton`
and `tl` must exist for the file to import; a kernel defined this way raises, naming itself,
when launched (`kernel[grid](...)`) or called, so a path that needs one fails loudly.
`triton.cdiv` and `triton.next_power_of_2` are the plain integer helpers they are in Triton."""

HAS_TRITON = False


class _Kernel:
    """A function decorated with `triton.jit` (or autotune / heuristics): not runnable here."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "kernel")

    def _refuse(self, *_a, **_k):
        raise NotImplementedError(f"Triton kernel {self.__name__} cannot run: vllm.triton_utils "
                                  "is cannbot-prefetch's shim (no Triton installed)")

    __call__ = _refuse

    def __getitem__(self, _grid):
        return self._refuse


def _decorator(*args, **_kwargs):
    """`@triton.jit` and `@triton.jit(...)` (likewise autotune, heuristics): wraps the function."""
    if len(args) == 1 and callable(args[0]) and not _kwargs:
        return _Kernel(args[0])
    return lambda fn: fn if isinstance(fn, _Kernel) else _Kernel(fn)


class _Triton:
    jit = staticmethod(_decorator)
    autotune = staticmethod(_decorator)
    heuristics = staticmethod(_decorator)

    @staticmethod
    def cdiv(a, b):
        return -(-a // b)

    @staticmethod
    def next_power_of_2(n):
        return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()

    class Config:
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs


class _Language:
    """`tl`: names read at definition time (`tl.constexpr` in annotations, dtypes) resolve to
    inert markers; nothing here computes."""

    class constexpr:  # noqa: N801 - Triton's spelling
        def __init__(self, value=None):
            self.value = value

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Marker(f"tl.{name}")


class _Marker:
    def __init__(self, name):
        self.name = name

    def __call__(self, *_a, **_k):
        raise NotImplementedError(f"{self.name} is Triton's (not installed: cannbot-prefetch's "
                                  "vllm.triton_utils shim)")

    def __repr__(self):
        return self.name


triton = _Triton()
tl = _Language()
tldevice = _Language()
triton.language = tl
