"""Attribute helpers a model file calls on its parameters."""


def set_weight_attrs(weight, weight_attrs) -> None:
    for k, v in (weight_attrs or {}).items():
        setattr(weight, k, v)


def refill_derived(obj, name, new):
    """Hold `new` (a tensor derived from weights, or None) as `obj.name`: a held tensor of the
    same shape, dtype and device is refilled in place (vLLM keeps captured graphs' addresses
    so); returns what is held."""
    old = getattr(obj, name, None)
    if new is not None and hasattr(old, "copy_") and \
            (old.shape, old.dtype, old.device) == (new.shape, new.dtype, new.device):
        return old.copy_(new)
    setattr(obj, name, new)
    return new
