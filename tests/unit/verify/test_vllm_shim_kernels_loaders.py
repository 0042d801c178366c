"""The vLLM shim's stand-ins for what model files use without Triton (kernels defined at import
time), weight-loader helpers and norms' `forward_native`, on code written here in vLLM's style.
Values worked out by hand from the calls' meaning (a clamped SwiGLU; a loader then a transform)."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

from cannbot_prefetch.verify.shims import vllm_shim


def _fresh(name):
    for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
        del sys.modules[k]
    return importlib.import_module(name)


def test_a_triton_kernel_defines_at_import_and_refuses_to_launch():
    """qwen3_dflash2 defines `@triton.jit` kernels over `tl.constexpr` parameters at import."""
    with vllm_shim():
        tu = _fresh("vllm.triton_utils")
        triton, tl = tu.triton, tu.tl

        @triton.jit
        def kernel(x_ptr, n: tl.constexpr, block: tl.constexpr):
            tl.store(x_ptr, tl.load(x_ptr))

        @triton.autotune(configs=[triton.Config({"BLOCK": 16})], key=["n"])
        @triton.jit
        def tuned(x_ptr):
            pass

        with pytest.raises(NotImplementedError, match="kernel"):
            kernel[(4,)](None, 8, 16)
        with pytest.raises(NotImplementedError):
            tuned(None)
        # Triton's integer helpers: ceil(10 / 4) = 3, next power of two of 5 = 8, of 1 = 1
        assert (triton.cdiv(10, 4), triton.next_power_of_2(5), triton.next_power_of_2(1)) == \
            (3, 8, 1)
        assert tu.HAS_TRITON is False


def test_composed_loader_loads_then_transforms():
    """plamo3's norms: `composed_weight_loader(default_weight_loader, lambda w: w - 1.0)`."""
    with vllm_shim():
        wu = _fresh("vllm.model_executor.model_loader.weight_utils")
        loader = wu.composed_weight_loader(wu.default_weight_loader, lambda w: w - 1.0)
        p = torch.nn.Parameter(torch.zeros(3))
        loader(p, torch.tensor([1.0, 2.5, 4.0]))
        assert torch.equal(p.data, torch.tensor([0.0, 1.5, 3.0]))


def test_rms_norm_forward_native_is_the_norm():
    """x = [3, 4]: mean square 12.5, x / sqrt(12.5) = [0.848528, 1.131371] (weight ones)."""
    with vllm_shim():
        ln = _fresh("vllm.model_executor.layers.layernorm")
        norm = ln.RMSNorm(2, eps=0.0)
        got = norm.forward_native(torch.tensor([[3.0, 4.0]]))
        assert torch.allclose(got, torch.tensor([[0.848528, 1.131371]]), atol=1e-5)


def test_swiglu_step_clamps_gate_and_up():
    """step3p5's activation, limit 1: gate [2, -1] -> silu [1.761594, -0.268941] -> clamped
    above at 1: [1, -0.268941]; up [3, -0.5] -> clamped to [-1, 1]: [1, -0.5]; product."""
    with vllm_shim():
        act = _fresh("vllm.model_executor.layers.activation")
        got = act.SwigluStepAndMul(limit=1.0)(torch.tensor([[2.0, -1.0, 3.0, -0.5]]))
        assert torch.allclose(got, torch.tensor([[1.0, 0.134470]]), atol=1e-5)
        # no limit: silu(2) * 3 = 5.284782
        got = act.SwigluStepAndMul()(torch.tensor([[2.0, 3.0]]))
        assert torch.allclose(got, torch.tensor([[5.284782]]), atol=1e-5)
