"""Kernel instances -> linears: each candidate (one call site, one rank within the layer) must
run as often per step as the model calls its linear: once per decoder layer
(`num_hidden_layers` from config.json) inside the layers loop, once outside it. When the counts
differ the plan says so (issue 10: "calls per step match the model, or a warning says why not"),
and two candidates never name one linear."""

from __future__ import annotations

from typing import Any, Sequence

from ..i18n import said

LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers")


def num_layers(cfg: dict[str, Any]) -> int | None:
    """Decoder layers per forward pass from config.json (text_config for multimodal ones)."""
    for c in (cfg, cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else None):
        for key in LAYER_KEYS:
            v = (c or {}).get(key)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
    return None


def expected_calls(mapped: Any, layers: int | None) -> int | None:
    """Calls per step the model makes of this call site (None: the layer count is unknown)."""
    if not mapped.in_layers:
        return 1
    return layers


def check(views: Sequence[tuple[Any, Any, Any]], cfg: dict[str, Any]) -> list[str]:
    """One warning per mapped candidate whose calls per step differ from the model's, and per
    linear that two candidates were mapped to."""
    layers = num_layers(cfg)
    out: list[str] = []
    owners: dict[str, list[str]] = {}
    off: dict[tuple[float, int, bool], list[str]] = {}
    for cand, m, _ in views:
        if cand is None:
            continue
        q = m.target.qualname
        owners.setdefault(q, []).append(f"{cand.target.label} (rank {cand.site_rank})")
        want = expected_calls(m, layers)
        if want is not None and abs(cand.per_step - want) >= 0.5:
            off.setdefault((round(cand.per_step, 3), want, m.in_layers), []).append(q)
    for (got, want, in_layers), qs in off.items():
        basis = (said("said.per_layer", layers=layers) if in_layers else said("said.per_forward"))
        out.append(said("said.calls_off", who=", ".join(qs), got=got, want=want, basis=basis))
    for q, who in owners.items():
        if len(who) > 1:
            out.append(f"{q}: {len(who)} kernel call sites map to this one linear "
                       f"({'; '.join(who)}); only the best is planned")
    return out
