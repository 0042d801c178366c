"""Bases vLLM's multimodal model files subclass at import time (processors, processing info,
dummy-input builders, possibly subscripted `Base[Info]`): classes with no behaviour, since
verify builds the text decoder and never runs a processor."""


class Base:
    def __init__(self, *_a, **_k):
        pass

    def __class_getitem__(cls, _item):
        return cls
