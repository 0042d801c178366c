"""Stage 3: dependency windows on the timeline (seed 003, decision table rows 3a / 3b / 3c).

For every instance of a memory-bound MatMul-family target (rows carrying its `sig_id`), walk back
`lookback` predecessors on the same stream within the same step: framework ops where the trace
groups kernels (consecutive kernels with the same `launch_op` and `stack`), else kernels. Each
predecessor is classed with `configs/op_classes.yaml` `window_classes` plus sizes: "large" comes
from bytes moved and duration (policy `windows.large_op_bytes` / `large_op_us`), never the name
alone.

Walk, nearest predecessor first (the seed's window-selection flow):
  light          -> the window may start at its input (3b); the nearest such start whose span
                    to the target's start reaches `min_window_us` is kept, and the walk goes on;
  memory-heavy   -> its *output* starts the window (3a: the op is done, bandwidth is free); the
                    walk stops there (going further back would overlap it). Past the nearest
                    light start only a MatMul's output is taken, when longer (row 3a: o_proj's
                    output for the MLP), the nearest start riding along as `Candidate.nearer`;
  communication  -> stop: the nearest light start, else "no safe window" (3c);
  nothing usable -> 3c with the reason.
The usable time is the span from the start point to the target's start, minus communication or
memory-heavy work on other streams (HCCL rows have no stream) that overlaps it.

Instances are clustered per signature by their rank within the decoder layer (and call-site
frame when stacks exist; clusters.py), so q_proj and o_proj of one shape become two candidates
and every instance belongs to exactly one. A cluster takes its majority decision; the usable
time is the median over the instances that agree, with the minimum alongside. Only frozen
values leave this module, never a DataFrame.
"""

from .classes import WindowRules, default_rules, rules_from
from .clusters import call_sites
from .find import find_windows, timeline
from .types import (COMM, HEAVY, LIGHT, Candidate, PredOp, Rejection, TargetSig, Window,
                    WindowResult)

__all__ = ["call_sites", "timeline", "COMM", "HEAVY", "LIGHT", "Candidate", "PredOp", "Rejection", "TargetSig", "Window",
           "WindowResult", "WindowRules", "default_rules", "find_windows", "rules_from"]
