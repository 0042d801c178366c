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


MultiModalEmbeddings = list        # vLLM: list[Tensor] | Tensor | tuple[Tensor, ...]


class SupportsMultiModal:
    """Multimodal models' marker (vLLM's interface); the shim's decode step is text only."""
    supports_multimodal = True
    merge_by_field_config = False
