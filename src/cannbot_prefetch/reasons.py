"""Stable reason codes for rejections and notes. Reports and JSON carry the code and a sentence."""

from __future__ import annotations

# Codes are part of the JSON contract: add, never rename.
NOT_MEMORY_BOUND = "not_memory_bound"
LATENCY_BOUND = "latency_bound"        # the deciding (measured where counters exist) verdict
COMPUTE_BOUND = "compute_bound"
BORDERLINE = "borderline"            # the evidence is within a margin of a threshold (verdict.py)
NO_SHAPES = "no_shapes"
NO_SAFE_WINDOW = "no_safe_window"
COMM_IN_WINDOW = "communication_in_window"
MEMORY_HEAVY_PREDECESSOR = "memory_heavy_predecessor"
WINDOW_TOO_SHORT = "window_too_short"
PREFILL = "prefill_not_planned"
UNMAPPED = "unmapped"
SHAPE_UNKNOWN = "shape_unknown"
MC2_COMMUNICATION = "mc2_contains_communication"
BELOW_TOP_N = "below_top_n"
MAX_SITES = "max_sites"
NOT_WORTH_IT = "not_worth_it"
NOT_MEMORY_BOUND_ON_RANK = "not_memory_bound_on_rank"   # --rank all: a pace-setting rank says no
NO_SAFE_WINDOW_ON_RANK = "no_safe_window_on_rank"       # --rank all: one rank has no window
