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
    pass


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
