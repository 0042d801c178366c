"""Attention types a model file names."""


class AttentionType:
    DECODER = "decoder"
    ENCODER = "encoder"
    ENCODER_ONLY = "encoder_only"
    ENCODER_DECODER = "encoder_decoder"


class AttentionBackend:
    """The base of vLLM's attention backends (annotations and subclassing only here)."""


class AttentionMetadata:
    """The per-step metadata vLLM's backends read (annotations only here: the shim's attention
    computes over the step's tokens)."""
