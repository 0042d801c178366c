"""The base vLLM's attention layers share (a marker here)."""


class AttentionLayerBase:
    pass
