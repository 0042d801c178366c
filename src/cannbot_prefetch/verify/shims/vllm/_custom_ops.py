"""vLLM's compiled kernels (`import vllm._custom_ops as ops`). Two a model file calls directly in
its own decode path are plain torch here (k2_horizon's grouped norm calls `ops.rms_norm` per
group and sums its value experts with `ops.moe_sum`); every other name a model file reads is a
stand-in that raises, naming the kernel, only if the decode step calls it (a path the shim's
layers avoid)."""
import torch


def rms_norm(out, input, weight, epsilon):  # noqa: A002 - vLLM's parameter name
    """`out` = input / rms(input) * weight over the last dimension, the mean square taken in
    float32 and the normalised value cast back before the weight (vLLM's csrc layernorm kernel,
    in place into `out`)."""
    x = input.float()
    normed = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + epsilon)).to(input.dtype)
    out.copy_(normed * weight)


def moe_sum(input, output):  # noqa: A002 - vLLM's parameter name
    """`output` [M, N] = `input` [M, top_k, N] summed over the top-k choices (in place)."""
    output.copy_(input.sum(dim=1))


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)

    def kernel(*_a, **_k):
        raise NotImplementedError(f"vLLM kernel {name} is not provided by cannbot-prefetch's "
                                  f"shim")
    kernel.__name__ = name
    return kernel
