"""Config helpers a model file calls while building (the rope default)."""


def set_default_rope_theta(config, default_theta):
    if getattr(config, "rope_theta", None) is None:
        config.rope_theta = default_theta
