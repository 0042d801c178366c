"""Marker mixins vLLM's model classes inherit (capability flags): empty at TP 1."""


class SupportsPP:
    pass


class SupportsLoRA:
    pass


class SupportsQuant:
    pass


class SupportsEagle:
    pass


class SupportsEagle3:
    pass


class EagleModelMixin:
    """No speculative decoding at one rank: no auxiliary hidden states are kept or received."""
    aux_hidden_state_layers: tuple = ()

    def _maybe_add_hidden_state(self, aux, layer_idx, hidden_states, residual):
        return aux

    def pack_local_aux_hidden_states(self, aux):
        return {}

    def collect_remote_aux_hidden_states(self, intermediate_tensors):
        return []


class LocalArgmaxMixin:
    pass


class MixtureOfExperts:
    pass


class HasInnerState:
    pass


class IsHybrid:
    pass


class SupportsMambaPrefixCaching:
    pass


class SupportsReplaySSM:
    pass


class SupportsMRoPE:
    """Multimodal rotary positions: a text decode step's positions are the plain ones."""
    pass


MambaStateShapes = tuple      # the state shapes a hybrid model's classmethod returns (annotation)


import contextlib  # noqa: E402

import torch  # noqa: E402

MultiModalEmbeddings = list        # vLLM: list[Tensor] | Tensor | tuple[Tensor, ...]


class SupportsMultiModal:
    """Multimodal models' interface as vLLM runs a text-only deployment (no item of any
    modality per prompt, `MultiModalConfig.get_limit_per_prompt` 0): the towers a model builds
    inside `_mark_tower_model` are skipped (built on the meta device, so no weights are
    allocated, then replaced by a placeholder, as vLLM's StageMissingLayer), the language model
    is built as usual. The shim's decode step is text only."""
    supports_multimodal = True
    merge_by_field_config = False

    @contextlib.contextmanager
    def _mark_language_model(self, vllm_config=None, *, targets=None):
        yield

    @contextlib.contextmanager
    def _mark_tower_model(self, vllm_config=None, modalities=None, *, targets=None):
        before = set(self._modules)
        with torch.device("meta"):
            yield
        for name in set(self._modules) - before:
            self._modules[name] = _SkippedTower(name)

    def configure_mm_token_handling(self, *_a, **_k):
        pass


class _SkippedTower(torch.nn.Module):
    """A tower not built in a text-only run (vLLM's StageMissingLayer): calling it raises."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def forward(self, *_a, **_k):
        raise RuntimeError(f"tower {self.name} is not built in a text-only run")


def _require_is_multimodal(is_multimodal):
    """The mask of multimodal positions `embed_input_ids` needs (vLLM's runner always passes
    one to a multimodal model); missing, it is an error, as in vLLM."""
    if is_multimodal is None:
        raise ValueError("embed_input_ids needs the is_multimodal mask")
    return is_multimodal
