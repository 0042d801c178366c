"""The vLLM shim's model-building helpers (verify/shims): what a vLLM 0.34 model file calls while
its classes are defined and built, at one rank and one pipeline stage. Values worked out from the
calls' meaning in vLLM (make_layers: (start, end, layers) on the one stage; a gated activation:
act(first half) * second half)."""

from __future__ import annotations

import importlib
import sys

import torch
from torch import nn

from cannbot_prefetch.verify.shims import vllm_shim


def _fresh(name):
    for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
        del sys.modules[k]
    return importlib.import_module(name)


def test_compile_decorator_is_the_identity_with_or_without_arguments():
    with vllm_shim():
        dec = _fresh("vllm.compilation.decorators")

        class A(nn.Module):
            pass

        assert dec.support_torch_compile(A) is A
        assert dec.support_torch_compile(dynamic_arg_dims={"x": 0})(A) is A


def test_one_stage_builds_every_layer():
    with vllm_shim():
        utils = _fresh("vllm.model_executor.models.utils")
        dist = _fresh("vllm.distributed")
        start, end, layers = utils.make_layers(3, lambda prefix: nn.Linear(2, 2),
                                               prefix="model.layers")
        assert (start, end, len(layers)) == (0, 3, 3)
        pp = dist.get_pp_group()
        assert pp.is_first_rank and pp.is_last_rank and pp.world_size == 1
        assert utils.maybe_prefix("model", "layers") == "model.layers"
        assert utils.maybe_prefix("", "layers") == "layers"
        assert utils.extract_layer_index("model.layers.7.mlp") == 7


def test_gated_activations_split_the_last_dim():
    with vllm_shim():
        act = _fresh("vllm.model_executor.layers.activation")
        x = torch.tensor([[1.0, -2.0, 3.0, 4.0]])
        # gelu(1) * 3, gelu(-2) * 4 (erf gelu: 0.841345, -0.045500)
        got = act.GeluAndMul()(x)
        assert torch.allclose(got, torch.tensor([[0.841345 * 3, -0.045500 * 4]]), atol=1e-5)
        # relu: max(1, 0) * 3, max(-2, 0) * 4
        assert torch.equal(act.get_act_and_mul_fn("relu")(x), torch.tensor([[3.0, 0.0]]))
