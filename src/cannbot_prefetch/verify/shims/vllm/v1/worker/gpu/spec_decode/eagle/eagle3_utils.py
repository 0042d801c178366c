"""vLLM's EAGLE-3 helper a draft file calls while building: which target layers' hidden states
the draft reads (their count sizes the draft's `fc` input)."""


def get_eagle3_aux_layers_from_config(spec_config):
    """The target layer ids from the draft's config, or None (the draft then reads as many as it
    has layers): `eagle_aux_hidden_state_layer_ids`, else DFlash's `dflash_config
    ["target_layer_ids"]` or `target_layer_ids`, each shifted by one (a layer's output is the
    next layer's input), as vLLM reads them."""
    if not (spec_config and getattr(spec_config, "draft_model_config", None)):
        return None
    hf = spec_config.draft_model_config.hf_config
    ids = getattr(hf, "eagle_aux_hidden_state_layer_ids", None)
    if not ids:
        dflash = getattr(hf, "dflash_config", None)
        if isinstance(dflash, dict):
            ids = [i + 1 for i in (dflash.get("target_layer_ids") or [])]
    if not ids:
        target = getattr(hf, "target_layer_ids", None)
        ids = [i + 1 for i in target] if target else None
    return tuple(ids) if ids else None
