"""The vLLM shim's modules for what bailing_moe_v3 (KDA mixer kernels), gemma4_dspark (draft
speculator configs, NVFP4 helpers) and interns2_mobius (`vllm.config.replace`, tokenizer
registry, MRoPE marker) import. Calls are written here in vLLM's style (GENERATED for these
tests, not vLLM's code); values are worked out by hand from the formulas in the docstrings."""

from __future__ import annotations

import importlib
import math
import sys

import pytest
import torch

from cannbot_prefetch.verify.shims import vllm_shim


def _fresh(name):
    for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
        del sys.modules[k]
    return importlib.import_module(name)


def test_kda_gate_softplus_form_by_hand():
    """A_log 0 (rate 1), g [0, 1]: -softplus(0) = -ln 2, -softplus(1) = -ln(1 + e); one head of
    two channels, so [1, 2] -> [1, 1, 2] in float32."""
    with vllm_shim():
        kda = _fresh("vllm.third_party.flash_linear_attention.ops.kda")
        out = kda.fused_kda_gate(torch.tensor([[0.0, 1.0]]), torch.zeros(1), 2)
    assert out.shape == (1, 1, 2) and out.dtype == torch.float32
    want = torch.tensor([[[-math.log(2.0), -math.log(1 + math.e)]]])
    assert torch.allclose(out, want, atol=1e-6)


def test_kda_gate_lower_bound_form_and_bias_by_hand():
    """Two heads of one channel, A_log = ln 2 (rate 2) on both, bias [0, 0.5], g [0, 0]:
    -5 * sigmoid(2 * 0) = -2.5, -5 * sigmoid(2 * 0.5) = -5 / (1 + e^-1) = -3.655293."""
    with vllm_shim():
        kda = _fresh("vllm.third_party.flash_linear_attention.ops.kda")
        out = kda.fused_kda_gate(torch.zeros(3, 2), torch.full((1, 1, 2, 1), math.log(2.0)), 1,
                                 g_bias=torch.tensor([0.0, 0.5]), lower_bound=-5.0)
    assert out.shape == (3, 2, 1)
    assert torch.allclose(out[0, :, 0], torch.tensor([-2.5, -5 / (1 + math.exp(-1))]),
                          atol=1e-6)


def test_gated_rms_norm_by_hand():
    """x [3, 4]: mean square 12.5, x / sqrt(12.5) = [0.848528, 1.131371]; gate 0 under sigmoid
    halves it, under silu zeroes it; prenorm returns the input beside the output."""
    with vllm_shim():
        kda = _fresh("vllm.third_party.flash_linear_attention.ops.kda")
        norm = kda.FusedRMSNormGated(2, eps=0.0, activation="sigmoid")
        x, g = torch.tensor([[3.0, 4.0]]), torch.zeros(1, 2)
        assert torch.allclose(norm(x, g), torch.tensor([[0.424264, 0.565685]]), atol=1e-6)
        out, kept = norm(x, g, prenorm=True)
        assert torch.equal(kept, x) and out.shape == (1, 2)
        silu = kda.FusedRMSNormGated(2, eps=0.0, activation="silu")
        assert torch.equal(silu(x, g), torch.zeros(1, 2))
        assert [n for n, _ in norm.named_parameters()] == ["weight"]
        with pytest.raises(NotImplementedError, match="relu"):
            kda.FusedRMSNormGated(2, activation="relu")


def test_kda_state_kernels_and_causal_conv_are_named_standins():
    """The state update and the conv kernels run only with attention metadata (never on the
    shim): importing works, calling raises naming the kernel."""
    with vllm_shim():
        kda = _fresh("vllm.third_party.flash_linear_attention.ops.kda")
        conv = importlib.import_module("vllm.model_executor.layers.mamba.ops.causal_conv1d")
        for mod, name in ((kda, "chunk_kda"), (kda, "fused_recurrent_kda"),
                          (kda, "fused_recurrent_kda_fwd"), (conv, "causal_conv1d_fn"),
                          (conv, "causal_conv1d_update")):
            with pytest.raises(NotImplementedError, match=name):
                getattr(mod, name)(torch.zeros(1))


def test_a_kda_mixer_in_vllms_style_runs_its_projections_with_kernel_shapes():
    """GENERATED here in vLLM's style (not bailing_moe_v3's code): the projections, the gate
    and the gated norm a KDA mixer runs outside its state update, at hidden 8, 2 heads of 4."""
    with vllm_shim():
        _fresh("vllm")
        from vllm.model_executor.layers.linear import ColumnParallelLinear, RowParallelLinear
        from vllm.third_party.flash_linear_attention.ops.kda import (
            FusedRMSNormGated, fused_kda_gate)

        class Mixer(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.f_proj = ColumnParallelLinear(8, 8, bias=False)
                self.g_proj = ColumnParallelLinear(8, 8, bias=False)
                self.A_log = torch.nn.Parameter(torch.zeros(1, 1, 2, 1))
                self.dt_bias = torch.nn.Parameter(torch.zeros(8))
                self.o_norm = FusedRMSNormGated(4, eps=1e-6, activation="sigmoid")
                self.o_proj = RowParallelLinear(8, 8, bias=False)

            def forward(self, x):
                g1 = fused_kda_gate(self.f_proj(x)[0], self.A_log, 4, g_bias=self.dt_bias,
                                    lower_bound=-5.0).unsqueeze(0)
                g2 = self.g_proj(x)[0].unflatten(-1, (-1, 4))
                core = torch.zeros(1, x.shape[0], 2, 4)        # the state update's output
                return g1, self.o_proj(self.o_norm(core, g2).flatten(-2))[0]

        g1, out = Mixer()(torch.randn(3, 8))
    assert g1.shape == (1, 3, 2, 4) and bool((g1 < 0).all() and (g1 > -5).all())
    assert out.shape == (1, 3, 8)


def test_replace_copies_a_config_with_fields_changed():
    """A draft's config: `replace(vllm_config, model_config=draft)` changes that field only;
    the original is untouched, the rest (and the per-instance compilation config) shared."""
    with vllm_shim():
        cfgmod = _fresh("vllm.config")
        base = cfgmod.VllmConfig()
        base.compilation_config.static_forward_context["a"] = 1
        draft = cfgmod.ModelConfig()
        draft.max_model_len = 64
        out = cfgmod.replace(base, model_config=draft)
        assert out is not base and out.model_config is draft
        assert base.model_config is not draft
        assert out.cache_config is base.cache_config
        assert out.compilation_config.static_forward_context == {"a": 1}
        sched = cfgmod.SchedulerConfig(max_num_seqs=4)
        assert cfgmod.replace(base, scheduler_config=sched).scheduler_config is sched
        assert base.scheduler_config is not sched
        with pytest.raises(TypeError, match="nope"):
            cfgmod.replace(base, nope=1)


def test_draft_and_processor_imports_are_named_standins():
    """Speculator configs (read by vLLM's loader), NVFP4 helpers, FP8 config, the tokenizer
    registry: importable, raising when built or called; an unquantised model's
    `isinstance(None, Fp8Config)` is simply false."""
    with vllm_shim():
        _fresh("vllm")
        g4 = importlib.import_module("vllm.v1.worker.gpu.spec_decode.gemma4.config")
        ds = importlib.import_module("vllm.v1.worker.gpu.spec_decode.dspark.config")
        nv = importlib.import_module(
            "vllm.model_executor.layers.quantization.utils.nvfp4_emulation_utils")
        fp8 = importlib.import_module("vllm.model_executor.layers.quantization.fp8")
        tok = importlib.import_module("vllm.tokenizers.registry")
        gdn = importlib.import_module("vllm.v1.attention.backends.gdn_attn")
        with pytest.raises(NotImplementedError, match="Gemma4MTPSpeculatorConfig"):
            g4.Gemma4MTPSpeculatorConfig()
        with pytest.raises(NotImplementedError, match="DSparkSpeculatorConfig"):
            ds.DSparkSpeculatorConfig()
        with pytest.raises(NotImplementedError, match="dequantize_to_dtype"):
            nv.dequantize_to_dtype(None)
        with pytest.raises(NotImplementedError, match="cached_tokenizer_from_config"):
            tok.cached_tokenizer_from_config(None)
        assert not isinstance(None, fp8.Fp8Config)
        assert not isinstance(object(), gdn.GDNAttentionMetadata)


def test_multimodal_helpers_of_the_interfaces_module():
    """`SupportsMRoPE` is a mixin a class can inherit; `_require_is_multimodal` passes a mask
    through and refuses a missing one."""
    with vllm_shim():
        itf = _fresh("vllm.model_executor.models.interfaces")

        class Model(torch.nn.Module, itf.SupportsMRoPE):
            pass
        Model()
        mask = torch.tensor([True, False])
        assert itf._require_is_multimodal(mask) is mask
        with pytest.raises(ValueError, match="is_multimodal"):
            itf._require_is_multimodal(None)
