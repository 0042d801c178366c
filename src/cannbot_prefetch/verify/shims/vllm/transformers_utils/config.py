"""Config helpers a model file calls while building (the rope default)."""


def set_default_rope_theta(config, default_theta):
    if getattr(config, "rope_theta", None) is None:
        config.rope_theta = default_theta


def patch_rope_parameters(config) -> None:
    """RoPE settings under their standard names, as vLLM's config loading leaves them
    (transformers_utils/config.py): `rope_theta` / `rotary_emb_base` and the partial factor's
    old names copied to the standard keys, then transformers' own `standardize_rope_params`
    builds `rope_parameters` (a family transformers does not know has only `rope_theta`)."""
    theta = next((getattr(config, n) for n in ("rope_theta", "rotary_emb_base")
                  if getattr(config, n, None) is not None), None)
    partial = next((getattr(config, n) for n in ("partial_rotary_factor", "rotary_pct",
                                                 "rotary_emb_fraction")
                    if getattr(config, n, None) is not None), None)
    if theta is None and not getattr(config, "rope_parameters", None):
        return
    if theta is not None:
        config.rope_theta = theta
    if partial is not None:
        config.partial_rotary_factor = partial
    if hasattr(config, "standardize_rope_params"):
        config.standardize_rope_params()
