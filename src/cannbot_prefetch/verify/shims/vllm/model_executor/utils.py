"""Attribute helpers a model file calls on its parameters."""


def set_weight_attrs(weight, weight_attrs) -> None:
    for k, v in (weight_attrs or {}).items():
        setattr(weight, k, v)
